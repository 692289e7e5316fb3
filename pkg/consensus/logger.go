package consensus

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// levelTrace is the slog level used for hclog's Trace.
const levelTrace = slog.LevelDebug - 4

// hclogAdapter forwards hashicorp's hclog calls (raft's logger) to slog.
// Level filtering is left to the slog handler.
type hclogAdapter struct {
	root    *slog.Logger // without name/implied args
	l       *slog.Logger // root + name + implied args
	name    string
	implied []any
}

func newHCLog(root *slog.Logger, name string) hclog.Logger {
	return newAdapter(root, name, nil)
}

func newAdapter(root *slog.Logger, name string, implied []any) *hclogAdapter {
	l := root
	if name != "" {
		l = l.With("logger", name)
	}
	if len(implied) > 0 {
		l = l.With(implied...)
	}
	return &hclogAdapter{root: root, l: l, name: name, implied: implied}
}

func toSlogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (a *hclogAdapter) enabled(l slog.Level) bool {
	return a.l.Enabled(context.Background(), l)
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	sl := toSlogLevel(level)
	if !a.enabled(sl) {
		return
	}
	a.l.Log(context.Background(), sl, msg, expandFormats(args)...)
}

// expandFormats renders hclog.Fmt values, which slog would print raw. It
// copies args before changing them.
func expandFormats(args []any) []any {
	copied := false
	for i, v := range args {
		f, ok := v.(hclog.Format)
		if !ok || len(f) == 0 {
			continue
		}
		layout, ok := f[0].(string)
		if !ok {
			continue
		}
		if !copied {
			args = append([]any(nil), args...)
			copied = true
		}
		args[i] = fmt.Sprintf(layout, f[1:]...)
	}
	return args
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(levelTrace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(slog.LevelDebug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(slog.LevelInfo) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(slog.LevelWarn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(slog.LevelError) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	implied := append(append([]any(nil), a.implied...), args...)
	return newAdapter(a.root, a.name, implied)
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return newAdapter(a.root, name, a.implied)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return newAdapter(a.root, name, a.implied)
}

// SetLevel is a no-op: the slog handler decides what is logged.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case a.IsTrace():
		return hclog.Trace
	case a.IsDebug():
		return hclog.Debug
	case a.IsInfo():
		return hclog.Info
	case a.IsWarn():
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return &stdWriter{a: a, level: level}
}

// stdWriter adapts log.Logger output lines to the adapter.
type stdWriter struct {
	a     *hclogAdapter
	level hclog.Level
}

func (w *stdWriter) Write(p []byte) (int, error) {
	w.a.Log(w.level, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
