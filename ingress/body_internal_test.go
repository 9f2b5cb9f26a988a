package ingress

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// A body is charged for its buffer, which grows only as bytes arrive: never
// more than twice what arrived (or one read's worth), never past the
// declared length or the limit.
func TestBodyChargeGrowsWithTheBytesThatArrived(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		size, declared int64
		limit          int64
		want           error
		wantCharge     int64 // at the end; 0: check the bounds only
	}{
		{"a declared small body is charged exactly its length", 3000, 3000, MaxBody, nil, 3000},
		{"a declared 1 MiB body is charged exactly its length", MaxBody, MaxBody, MaxBody, nil, MaxBody},
		{"a body of unknown length is charged at most twice what arrived", 100 << 10, -1, MaxBody, nil, 0},
		{"a body of unknown length over the limit stops at the limit", MaxBody + 1, -1, MaxBody, errBodyTooLarge, 0},
		{"an empty body is charged nothing", 0, 0, MaxBody, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBodyBudget(4 * MaxBody)
			c := &bodyCharge{b: b, declared: tc.declared}
			var r io.Reader = io.LimitReader(bytes.NewReader(bytes.Repeat([]byte("x"), int(tc.size))), tc.size)
			// Dribbled: 1 byte per read, then the rest in small pieces.
			r = io.MultiReader(iotest.OneByteReader(io.LimitReader(r, 3)), iotest.HalfReader(r))
			body, err := c.read(r, tc.limit)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err == nil && int64(len(body)) != tc.size {
				t.Fatalf("read %d bytes, want %d", len(body), tc.size)
			}
			if c.total != int64(cap(body)) {
				t.Errorf("charged %d for a buffer of %d", c.total, cap(body))
			}
			if tc.wantCharge > 0 && c.total != tc.wantCharge {
				t.Errorf("charged %d, want %d", c.total, tc.wantCharge)
			}
			if lim := max(2*int64(len(body)), readChunk); c.total > lim || c.total > tc.limit {
				t.Errorf("charged %d for %d bytes arrived (limit %d)", c.total, len(body), tc.limit)
			}
			if b.held.Load() != c.total {
				t.Errorf("budget holds %d, the body %d", b.held.Load(), c.total)
			}
			c.release()
			if b.held.Load() != 0 {
				t.Errorf("budget holds %d after release", b.held.Load())
			}
		})
	}

	t.Run("a full budget refuses the next growth, not the declared length", func(t *testing.T) {
		b := newBodyBudget(2 * MaxBody) // halves of 1 MiB
		hog := &bodyCharge{b: b, declared: MaxBody}
		if !hog.take(MaxBody) {
			t.Fatal("the large half did not take 1 MiB")
		}
		c := &bodyCharge{b: b, declared: MaxBody}
		if _, err := c.read(bytes.NewReader([]byte("x")), MaxBody); !errors.Is(err, errBudgetFull) {
			t.Fatalf("err %v, want the budget full", err)
		}
		small := &bodyCharge{b: b, declared: 10}
		if body, err := small.read(bytes.NewReader([]byte("0123456789")), MaxBody); err != nil || len(body) != 10 {
			t.Fatalf("a small body beside a full large half: %q %v", body, err)
		}
	})
}
