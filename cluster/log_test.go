package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")
	l.Debug("hidden")
	l.Warn("heartbeat failed", "peer", "n2")
	l.Named("net").With("node", "n1").Error("dial", "err", "refused")
	l.Log(hclog.Off, "never")
	out := buf.String()
	for _, want := range []string{
		`level=WARN msg="heartbeat failed" component=raft peer=n2`,
		`level=ERROR msg=dial component=raft.net node=n1 err=refused`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") || strings.Contains(out, "never") {
		t.Errorf("logged below the handler's level:\n%s", out)
	}
	if l.IsDebug() || !l.IsInfo() || l.GetLevel() != hclog.Info {
		t.Errorf("IsDebug %v, IsInfo %v, GetLevel %v", l.IsDebug(), l.IsInfo(), l.GetLevel())
	}
	if got := l.Named("net").Name(); got != "raft.net" {
		t.Errorf("Named: %q", got)
	}
}
