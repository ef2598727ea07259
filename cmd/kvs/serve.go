package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"kvs/fsm"
	"kvs/server"
	"kvs/wal"
)

// serveFlags are the flags of `kvs serve`.
type serveFlags struct {
	addr     string
	dataDir  string
	fsync    string
	repair   bool
	logLevel string
	segment  int64
	compact  int64
}

func parseServeFlags(args []string, stderr io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("kvs serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:6379", "address to serve RESP on")
	fs.StringVar(&f.dataDir, "data-dir", "", "directory for the append log and snapshots (empty: memory mode, nothing survives a restart)")
	fs.StringVar(&f.fsync, "fsync", "always", "when the append log is fsynced: always (before every reply), everysec, or no")
	fs.BoolVar(&f.repair, "repair", false, "truncate the append log at the first corrupt record instead of refusing to start")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Int64Var(&f.segment, "wal-segment-bytes", 0, "size at which the append log starts a new segment file (0: 64 MiB)")
	fs.Int64Var(&f.compact, "wal-compact-bytes", 0, "log bytes written since the last snapshot that trigger a new snapshot (0: 64 MiB)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return f, nil
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func serve(args []string, stderr io.Writer) int {
	f, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	logger, err := newLogger(f.logLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "kvs: %v\n", err)
		return 2
	}
	if err := runServe(f, logger); err != nil {
		logger.Error("kvs stopped", "err", err)
		return 1
	}
	return 0
}

// runServe wires store, log and server, serves until SIGINT or SIGTERM, then
// stops in order: client listener and in-flight commands first, then the log
// (flushed and fsynced), so nothing acknowledged is left in a buffer.
func runServe(f serveFlags, logger *slog.Logger) error {
	store := fsm.NewStore()
	var (
		proposer server.Proposer = server.MemoryProposer{Store: store}
		log      *wal.Log
	)
	if f.dataDir != "" {
		ensureProcs()
		policy, err := wal.ParsePolicy(f.fsync)
		if err != nil {
			return fmt.Errorf("--fsync: %w", err)
		}
		start := time.Now()
		log, err = openLog(f, policy, store, logger)
		if err != nil {
			return err
		}
		defer log.Close()
		st := log.Stats()
		logger.Info("append log recovered", "dir", f.dataDir, "fsync", f.fsync,
			"last_index", st.LastIndex, "snapshot_index", st.SnapshotIndex,
			"keys", store.Stats(time.Now().UnixMilli()).Keys, "took", time.Since(start).Round(time.Millisecond))
		proposer = &durableProposer{log: log}
	}

	srv, err := server.New(server.Config{
		Addr:         f.addr,
		Store:        store,
		Proposer:     proposer,
		Logger:       logger,
		Version:      version,
		Info:         persistenceInfo(f, log),
		ConfigParams: configParams(f),
	})
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	logger.Info("kvs serving", "addr", srv.Addr().String(), "version", version, "mode", mode(f))

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case err := <-serveErr:
		return err
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		logger.Warn("shutdown did not drain every connection", "err", err)
	}
	<-serveErr
	if log != nil {
		if err := log.Close(); err != nil {
			return fmt.Errorf("closing the append log: %w", err)
		}
	}
	logger.Info("kvs stopped")
	return nil
}

func mode(f serveFlags) string {
	if f.dataDir == "" {
		return "memory"
	}
	return "durable"
}

// minProcs is the fewest Ps kvs runs with. A goroutine blocked in fsync
// holds its P until the runtime's monitor takes it back; with one P (kvs
// pinned to one core) that stalls every connection meanwhile. A second P
// lets connections run during the fsync even on one core, where it costs
// nothing while no fsync is running. Measured pinned to one core, durable
// SETs from 50 clients: 31–34k a second with one P, 42–45k with two and
// one fsync at a time (wal.Options.SyncDepth 1).
const minProcs = 2

func ensureProcs() {
	if runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
	}
}
