package agent

// The journal lines that bracket a step's run. Every run that logs LogRunStarted
// logs exactly one of the other three as it ends, whatever becomes of its report,
// so operators and tests can tell a run still going from one that changed the
// host and stopped.
const (
	LogRunStarted     = "step started"
	LogRunSucceeded   = "step succeeded"
	LogRunFailed      = "step failed"
	LogRunInterrupted = "step interrupted by shutdown; it will run again"
)
