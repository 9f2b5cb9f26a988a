package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// A running daemon refreshes its ackd_instances row every InstanceHeartbeat;
// a row whose heartbeat is older than InstanceStale is not running (the
// process died without its clean shutdown).
const (
	InstanceHeartbeat = 10 * time.Second
	InstanceStale     = 3 * InstanceHeartbeat
)

// announce records this daemon in ackd_instances and warns about any other
// daemon running on the same SQLite database: safe (claims are disjoint),
// but almost always a mistake (a forgotten process, two units on one file).
// On PostgreSQL other replicas are expected and only noted.
// Neither step stops startup: a daemon on a database it cannot write still
// serves (answering 500, so Slack retries) and says why in /healthz.
func (s *Server) announce(ctx context.Context) {
	host, _ := os.Hostname()
	s.dbFile = DBFileOf(s.store)
	s.instance = store.Instance{ID: sweep.NewToken(), PID: os.Getpid(), Host: host,
		Listen: s.ln.Addr().String(), StartedAt: s.opts.Now(), Performs: s.performs}
	s.instance.State = s.instanceState()
	others, err := s.store.Instances(ctx, InstanceStale)
	if err != nil {
		s.log.Warn("could not read the other daemons on this database", "err", err)
	}
	if err := s.store.Heartbeat(ctx, s.instance); err != nil {
		s.log.Warn("could not record this daemon in ackd_instances; `ackd status` will not list it", "err", err)
	}
	for _, o := range others {
		if !Alive(o) {
			continue // killed before its row went stale (a crash, then systemd's restart)
		}
		if why := Elsewhere(o, s.store); why != "" {
			continue // a heartbeat copied with the file (a restored backup)
		}
		if s.store.Engine() == "postgres" {
			// Several replicas on one PostgreSQL are the point of it.
			s.log.Info("another replica is running on this database", "other", DescribeInstance(o, s.opts.Now()),
				"other_pid", o.PID, "other_host", o.Host, "db", s.store.Location())
			continue
		}
		s.log.Warn("another ackd serve is running on this database: both will sweep the same queue (safe, claims are disjoint, but usually a mistake)",
			"other", DescribeInstance(o, s.opts.Now()), "other_pid", o.PID, "other_host", o.Host, "db", s.store.Location())
	}
}

// InstanceState is what a daemon reports of itself at its heartbeat
// (store.Instance.State, JSON).
type InstanceState struct {
	SocketMode *ingress.SocketState `json:"socket_mode,omitempty"`
	// DB is the SQLite file the daemon serves (nil on PostgreSQL).
	DB *DBFile `json:"db,omitempty"`
}

// DBFile names the SQLite file a daemon serves: its resolved path, and the
// file's device and inode. Heartbeats carry it so that a copy of the
// database (an `ackd backup` file, a restore beside the live one) does not
// show the daemon that wrote the heartbeat as running on the copy: the
// copy's heartbeat row is fresh for a while, and on the same host that
// daemon's pid is alive.
type DBFile struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// DBFileOf returns the file st serves, or nil (PostgreSQL, or a file that
// cannot be read).
func DBFileOf(st store.Store) *DBFile {
	if st.Engine() != "sqlite" {
		return nil
	}
	path, err := filepath.Abs(st.Location())
	if err != nil {
		return nil
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	f := &DBFile{Path: path}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		f.Dev, f.Ino = uint64(sys.Dev), sys.Ino
	}
	return f
}

// Elsewhere says why instance in, whose heartbeat st holds, is not a
// daemon serving st; "" when it is, or when nothing says otherwise. Only a
// SQLite file can be copied with its heartbeats (a PostgreSQL replica is
// where it says it is): a heartbeat that records another file (path, device
// or inode) was copied with the database, and one without that record (an
// ackd from before it) is judged by its host, as a SQLite file is served on
// one host.
func Elsewhere(in store.Instance, st store.Store) string {
	if st.Engine() != "sqlite" {
		return ""
	}
	if rec := ParseInstanceState(in).DB; rec != nil {
		here := DBFileOf(st)
		switch {
		case here == nil:
			return ""
		case rec.Ino != 0 && here.Ino != 0:
			// The file itself: the same one reached by another path (a
			// bind mount, a symlinked directory) is not a copy.
			if rec.Dev == here.Dev && rec.Ino == here.Ino {
				return ""
			}
		case rec.Path == here.Path:
			return ""
		}
		return fmt.Sprintf("its heartbeat names %s (device %d, inode %d), not this file: the heartbeat was copied with the database (a backup or a restore)",
			rec.Path, rec.Dev, rec.Ino)
	}
	if host, err := os.Hostname(); err == nil && in.Host != "" && in.Host != host {
		return fmt.Sprintf("its heartbeat was written on host %s, not this one: a SQLite file is served on one host, so the heartbeat was copied with the database", in.Host)
	}
	return ""
}

// instanceState is this daemon's InstanceState as JSON, "" when it has
// nothing to report (Socket Mode off, PostgreSQL).
func (s *Server) instanceState() string {
	st := InstanceState{SocketMode: s.in.SocketState(), DB: s.dbFile}
	if st == (InstanceState{}) {
		return ""
	}
	b, _ := json.Marshal(st)
	return string(b)
}

// ParseInstanceState reads what an instance reported; the zero value when
// it reported nothing (or something this ackd cannot read).
func ParseInstanceState(in store.Instance) InstanceState {
	var st InstanceState
	if in.State != "" {
		_ = json.Unmarshal([]byte(in.State), &st)
	}
	return st
}

// DescribeSocket says what a daemon's Socket Mode ingress was doing at its
// last heartbeat: "2/2 connections, last hello 4s ago, 1 reconnect".
func DescribeSocket(st *ingress.SocketState, now time.Time) string {
	if st == nil {
		return ""
	}
	out := fmt.Sprintf("%d/%d connections", st.Connections, st.Configured)
	if st.LastHelloAt.IsZero() {
		out += ", no hello yet"
	} else {
		out += fmt.Sprintf(", last hello %s ago", max(0, now.Sub(st.LastHelloAt)).Round(time.Second))
	}
	out += fmt.Sprintf(", %d reconnects", st.Reconnects)
	if st.Stopped != "" {
		out += "; stopped: " + st.Stopped
	}
	return out
}

// DescribeInstance says who an instance is, for a log line or `ackd status`:
// "pid 4242 on host vm1, listening on 127.0.0.1:3000, started 2026-12-01
// 09:00:00 UTC, seen 3s ago".
func DescribeInstance(in store.Instance, now time.Time) string {
	return fmt.Sprintf("pid %d on host %s, listening on %s, started %s, seen %s ago", in.PID, in.Host, in.Listen,
		in.StartedAt.UTC().Format(time.DateTime+" MST"), max(0, now.Sub(in.HeartbeatAt)).Round(time.Second))
}

// Alive reports whether an instance with a fresh heartbeat may still be
// running: on this host, its process must exist (a daemon killed a moment
// ago, then restarted, is not "another daemon"); on another host it is
// taken at its heartbeat's word.
func Alive(in store.Instance) bool {
	if host, err := os.Hostname(); err != nil || host != in.Host || in.PID <= 0 {
		return true
	}
	// Signal 0 checks for the process without signalling it; EPERM means
	// it exists under another user.
	return !errors.Is(syscall.Kill(in.PID, 0), syscall.ESRCH)
}

func (s *Server) heartbeatLoop() {
	failing := false
	s.every(InstanceHeartbeat, func() {
		ctx, cancel := context.WithTimeout(s.ctx, InstanceHeartbeat/2)
		s.instance.State = s.instanceState()
		err := s.store.Heartbeat(ctx, s.instance)
		cancel()
		switch {
		case err != nil && s.ctx.Err() == nil && !failing:
			s.log.Warn("instance heartbeat failed; `ackd status` may not list this daemon", "err", err)
			failing = true
		case err == nil && failing:
			failing = false
		}
	})
}
