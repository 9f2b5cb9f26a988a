package daemon_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/store"
)

// Issue 29.11: which heartbeats found in a SQLite file are daemons serving
// that file, and which were copied with it.
func TestElsewhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func(path string) store.Store {
		st, err := daemon.OpenStore(context.Background(), path, store.Options{Schema: readSchema(t), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	live := open(filepath.Join(dir, "ackd.db"))
	other := open(filepath.Join(dir, "copy.db"))
	host, _ := os.Hostname()
	state := func(f *daemon.DBFile) string {
		b, _ := json.Marshal(daemon.InstanceState{DB: f})
		return string(b)
	}
	now := time.Now()
	for _, tc := range []struct {
		name string
		in   store.Instance
		want string // "" or a part of the reason
	}{
		{"a heartbeat naming this file", store.Instance{Host: host, State: state(daemon.DBFileOf(live))}, ""},
		{"a heartbeat naming another file", store.Instance{Host: host, State: state(daemon.DBFileOf(other))}, "copy.db"},
		{"an older ackd's heartbeat on this host", store.Instance{Host: host}, ""},
		{"an older ackd's heartbeat from another host", store.Instance{Host: "elsewhere.example"}, "host elsewhere.example"},
	} {
		tc.in.PID, tc.in.StartedAt = 1, now
		got := daemon.Elsewhere(tc.in, live)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: Elsewhere = %q, want %q", tc.name, got, tc.want)
		}
	}
}
