package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints off the writer. SQLite's default auto-checkpoint runs inside
// the COMMIT that crosses 1000 WAL pages: the group committer would copy
// ~4 MB of pages into the database file and fsync it while every ack waits
// behind it (a sixth of the writer's time at saturation, measured). So the
// writer connection has wal_autocheckpoint=0, and:
//
//   - a checkpointer goroutine on its own connection runs a PASSIVE
//     checkpoint after commits (at most one at a time, at most every
//     checkpointEvery): it copies the committed pages while the writer goes
//     on appending, never taking or waiting for the write lock;
//   - once the WAL holds walRestartPages or more, the committer itself runs a
//     PASSIVE checkpoint between two batches. The background one has already
//     copied nearly everything, so this one copies the last few pages; with
//     every frame copied and no write in between, the next commit starts the
//     WAL over from its beginning. Without it a WAL under constant writes
//     would only grow (a background checkpoint never catches up with a writer
//     that keeps appending).
//
// Both take ckptMu, so the committer never queues behind a long background
// checkpoint: it tries again after its next batch.
const (
	checkpointEvery = 50 * time.Millisecond
	walRestartPages = 1000 // SQLite's default auto-checkpoint size
)

type checkpointer struct {
	db     *sql.DB // one connection of its own
	kick   chan struct{}
	mu     sync.Mutex // one checkpoint at a time, in this process
	frames atomic.Int64
	stop   chan struct{}
	done   chan struct{}
}

func newCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// committed is called by the committer after each commit.
func (c *checkpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		if c.mu.TryLock() {
			c.frames.Store(checkpoint(context.Background(), c.db))
			c.mu.Unlock()
		}
		select {
		case <-c.stop:
			return
		case <-time.After(checkpointEvery):
		}
	}
}

// restart runs on the writer between batches: when the WAL has grown to
// walRestartPages, one PASSIVE checkpoint on the writer connection itself
// lets the next commit start the WAL over.
func (c *checkpointer) restart(w *sql.DB) {
	if c.frames.Load() < walRestartPages || !c.mu.TryLock() {
		return
	}
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if checkpoint(ctx, w) >= 0 {
		c.frames.Store(0)
	}
}

func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}

// checkpoint runs PRAGMA wal_checkpoint(PASSIVE) and returns the WAL's size
// in frames as it found it (-1 on an error: a full disk, an I/O error; the
// next commit tries again, and the writer's own errors are what callers see).
func checkpoint(ctx context.Context, db *sql.DB) int64 {
	var busy, log, done int64
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &done); err != nil {
		return -1
	}
	return log
}
