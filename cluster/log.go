package cluster

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogLogger is an hclog.Logger that writes through a slog.Logger, so that
// raft's logs land in kvs's log with kvs's format and level. raft's key-value
// arguments are slog's. Trace goes out at slog's debug level minus 4.
type slogLogger struct {
	base    *slog.Logger // kvs's logger, before name and implied arguments
	l       *slog.Logger // base with component=name and the implied arguments
	name    string
	implied []any
}

const levelTrace = slog.LevelDebug - 4

func newHCLogger(base *slog.Logger, name string) hclog.Logger {
	return newSlogLogger(base, name, nil)
}

func newSlogLogger(base *slog.Logger, name string, implied []any) *slogLogger {
	l := base
	if name != "" {
		l = l.With("component", name)
	}
	return &slogLogger{base: base, l: l.With(implied...), name: name, implied: implied}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (s *slogLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	s.l.Log(context.Background(), slogLevel(level), msg, args...)
}

func (s *slogLogger) Trace(msg string, args ...any) { s.Log(hclog.Trace, msg, args...) }
func (s *slogLogger) Debug(msg string, args ...any) { s.Log(hclog.Debug, msg, args...) }
func (s *slogLogger) Info(msg string, args ...any)  { s.Log(hclog.Info, msg, args...) }
func (s *slogLogger) Warn(msg string, args ...any)  { s.Log(hclog.Warn, msg, args...) }
func (s *slogLogger) Error(msg string, args ...any) { s.Log(hclog.Error, msg, args...) }

func (s *slogLogger) enabled(level slog.Level) bool {
	return s.l.Enabled(context.Background(), level)
}

func (s *slogLogger) IsTrace() bool { return s.enabled(levelTrace) }
func (s *slogLogger) IsDebug() bool { return s.enabled(slog.LevelDebug) }
func (s *slogLogger) IsInfo() bool  { return s.enabled(slog.LevelInfo) }
func (s *slogLogger) IsWarn() bool  { return s.enabled(slog.LevelWarn) }
func (s *slogLogger) IsError() bool { return s.enabled(slog.LevelError) }

func (s *slogLogger) ImpliedArgs() []any { return s.implied }

func (s *slogLogger) With(args ...any) hclog.Logger {
	return newSlogLogger(s.base, s.name, append(s.implied[:len(s.implied):len(s.implied)], args...))
}

func (s *slogLogger) Name() string { return s.name }

func (s *slogLogger) Named(name string) hclog.Logger {
	if s.name != "" {
		name = s.name + "." + name
	}
	return s.ResetNamed(name)
}

func (s *slogLogger) ResetNamed(name string) hclog.Logger {
	return newSlogLogger(s.base, name, s.implied)
}

// SetLevel does nothing: the slog handler decides what is logged.
func (s *slogLogger) SetLevel(hclog.Level) {}

func (s *slogLogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if s.enabled(slogLevel(l)) {
			return l
		}
	}
	return hclog.Error
}

func (s *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	level := slog.LevelInfo
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = slogLevel(opts.ForceLevel)
	}
	return slog.NewLogLogger(s.l.Handler(), level)
}

func (s *slogLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return s.StandardLogger(opts).Writer()
}
