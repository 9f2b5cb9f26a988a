// Package diskfull gives tests a real filesystem that runs out of space: a
// small tmpfs mounted for the test (root only; CI runs as root), and a
// filler that takes all of its free space and gives it back a little at a
// time, so a test can cross the "disk full" boundary as often as it likes.
package diskfull

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ackd/ackd/internal/testreq"
)

// Mount mounts a tmpfs of size bytes on a fresh directory and returns it.
// It is unmounted at cleanup, after every cleanup registered later (close
// the database first by registering that cleanup after Mount). Without root
// the test is skipped (failed under ACKD_REQUIRE_REAL=1).
func Mount(tb testing.TB, size int64) string {
	tb.Helper()
	testreq.Need(tb, os.Geteuid() == 0, "needs root to mount a tmpfs (a real full filesystem)")
	dir := filepath.Join(tb.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "ackd-test", dir).CombinedOutput()
	testreq.Need(tb, err == nil, fmt.Sprintf("mount -t tmpfs failed (%v: %s)", err, strings.TrimSpace(string(out))))
	tb.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			tb.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Filler holds a filesystem's free space in chunk files.
type Filler struct {
	dir    string
	chunk  int
	chunks []string // newest last
}

// Fill writes chunk-sized files into dir until the filesystem is full (the
// last one partial) and returns the filler holding them.
func Fill(tb testing.TB, dir string, chunk int) *Filler {
	tb.Helper()
	f := &Filler{dir: dir, chunk: chunk}
	f.Top(tb)
	return f
}

// Top takes whatever space is free again (space a database gave back, or
// that Free released and nobody used).
func (f *Filler) Top(tb testing.TB) {
	tb.Helper()
	buf := make([]byte, f.chunk)
	for i := range buf {
		buf[i] = byte(i)
	}
	for {
		name := filepath.Join(f.dir, fmt.Sprintf("filler-%06d", len(f.chunks)))
		fh, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, syscall.ENOSPC) {
			return // not even an inode or a page left
		}
		if err != nil {
			tb.Fatal(err)
		}
		n, err := fh.Write(buf)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if n > 0 || err == nil {
			f.chunks = append(f.chunks, name)
		} else {
			os.Remove(name)
		}
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// Free deletes n chunk files (fewer if it holds fewer), giving their space
// back, and returns how many it deleted.
func (f *Filler) Free(tb testing.TB, n int) int {
	tb.Helper()
	freed := 0
	for ; freed < n && len(f.chunks) > 0; freed++ {
		last := f.chunks[len(f.chunks)-1]
		if err := os.Remove(last); err != nil {
			tb.Fatal(err)
		}
		f.chunks = f.chunks[:len(f.chunks)-1]
	}
	return freed
}

// Chunks is how many chunk files the filler holds.
func (f *Filler) Chunks() int { return len(f.chunks) }

// FreeForWAL frees 8 MiB plus as much as the database's -wal file holds:
// SQLite must be able to checkpoint the WAL into the database file before
// it can write again after a full disk, so "space is back" means at least
// that much (docs/design.md gives operators the same rule).
func (f *Filler) FreeForWAL(tb testing.TB, db string) int {
	tb.Helper()
	n := (8 << 20) / f.chunk
	if st, err := os.Stat(db + "-wal"); err == nil {
		n += int(st.Size())/f.chunk + 1
	}
	return f.Free(tb, n)
}
