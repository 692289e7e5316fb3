# Sourced by the bench scripts that build a benchmark into a scratch directory:
#
#   . scripts/bench-scratch.sh NAME "$@"   # sets $work (mktemp, plinth-NAME.XXXXXX)
#   bench_run "$work/bin/NAME" FLAGS...    # runs it in the background and waits
#
# $work is removed on exit unless the benchmark's flags ask it to -keep its scratch
# directory (which lives in $work). bench_run's wait lets Ctrl-C reach the traps; the
# benchmark kills its own processes on exit or interrupt, and the trap covers the case
# where it was itself killed (its children die with it through Pdeathsig).

work=$(mktemp -d "${TMPDIR:-/tmp}/plinth-$1.XXXXXX")
shift
bench_pid=
bench_keep=
case " $* " in *" -keep "* | *" --keep "* | *" -keep=true "* | *" --keep=true "*) bench_keep=1 ;; esac

bench_cleanup() {
  if [ -n "$bench_pid" ] && kill -0 "$bench_pid" 2>/dev/null; then
    kill -TERM "$bench_pid" 2>/dev/null || true
    wait "$bench_pid" 2>/dev/null || true
  fi
  if [ -n "$bench_keep" ]; then
    echo "$(basename "$0"): kept $work" >&2
  else
    rm -rf "$work"
  fi
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

bench_run() {
  "$@" &
  bench_pid=$!
  wait "$bench_pid"
}
