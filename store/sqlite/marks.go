package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ackd/ackd/store"
)

const (
	// advanceMarkSQL moves a channel's mark forward (?1 channel, ?2 ts, ?3 now).
	advanceMarkSQL = `INSERT INTO catchup_marks (channel, ts, updated_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (channel) DO UPDATE SET ts = excluded.ts, updated_at = excluded.updated_at
		 WHERE excluded.ts > catchup_marks.ts`
	// advanceResumeSQL moves a resume point forward, only while one is set.
	advanceResumeSQL = `UPDATE catchup_marks SET resume_from = ?2, updated_at = ?3
		 WHERE channel = ?1 AND resume_from < ?2`
)

// RecordRecovered commits what catch-up recovered of some messages, in
// order, in one group commit: each intent's rows, the receipt and request
// of each intent that added a row, and each channel's mark (and resume
// point).
func (s *Store) RecordRecovered(ctx context.Context, recs []store.Recovered) ([]int, error) {
	for _, rec := range recs {
		if !store.ValidTS(rec.TS) || rec.Channel == "" {
			return nil, fmt.Errorf("record recovered: channel %q ts %q", rec.Channel, rec.TS)
		}
	}
	var inserted []int
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		inserted = make([]int, len(recs)) // a retried op starts over
		for i, rec := range recs {
			n, err := s.recordRecovered(ctx, tx, rec, now)
			if err != nil {
				return fmt.Errorf("%s %s: %w", rec.Channel, rec.TS, err)
			}
			inserted[i] = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record recovered: %w", classify(err))
	}
	return inserted, nil
}

func (s *Store) recordRecovered(ctx context.Context, tx *sql.Tx, rec store.Recovered, now int64) (int, error) {
	inserted := 0
	for _, in := range rec.Intents {
		n := 0
		for _, r := range in.Rows {
			var reqID any
			if r.RequestID != "" {
				reqID = r.RequestID
			}
			res, err := tx.StmtContext(ctx, s.st.outbox).ExecContext(ctx, r.Key, r.Effect, r.Payload, now, now, reqID, nil, nil, nil)
			if err != nil {
				return 0, fmt.Errorf("insert outbox row %s: %w", r.Key, err)
			}
			c, err := res.RowsAffected()
			if err != nil {
				return 0, err
			}
			n += int(c)
		}
		inserted += n
		if n == 0 {
			continue // found done: no receipt, no request
		}
		if _, err := tx.StmtContext(ctx, s.st.receipt).ExecContext(ctx, in.EventID, in.EventType, now); err != nil {
			return 0, fmt.Errorf("insert receipt: %w", err)
		}
		if r := in.Request; r != nil {
			body := r.Body
			if body == nil {
				body = []byte{} // NOT NULL
			}
			if _, err := tx.StmtContext(ctx, s.st.storeRequest).ExecContext(ctx, in.EventID, r.ContentType, body, now); err != nil {
				return 0, fmt.Errorf("insert request: %w", err)
			}
		}
	}
	if !rec.NoMark {
		if _, err := tx.ExecContext(ctx, advanceMarkSQL, rec.Channel, rec.TS, now); err != nil {
			return 0, fmt.Errorf("advance mark: %w", err)
		}
	}
	if rec.Resume {
		if _, err := tx.ExecContext(ctx, advanceResumeSQL, rec.Channel, rec.TS, now); err != nil {
			return 0, fmt.Errorf("advance resume point: %w", err)
		}
	}
	return inserted, nil
}

// AdvanceMarks moves marks forward in one group commit.
func (s *Store) AdvanceMarks(ctx context.Context, marks []store.Mark) error {
	if len(marks) == 0 {
		return nil
	}
	for _, m := range marks {
		if !store.ValidTS(m.TS) || m.Channel == "" {
			return fmt.Errorf("advance marks: channel %q ts %q", m.Channel, m.TS)
		}
	}
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		for _, m := range marks {
			if _, err := tx.ExecContext(ctx, advanceMarkSQL, m.Channel, m.TS, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("advance marks: %w", classify(err))
	}
	return nil
}

// BeginCatchUp sets the channel's resume point to its mark unless one is
// set, and returns the mark.
func (s *Store) BeginCatchUp(ctx context.Context, channel string) (store.Mark, bool, error) {
	var m store.Mark
	found := false
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		if _, err := tx.ExecContext(ctx, `UPDATE catchup_marks SET resume_from = ts, updated_at = ?2
			 WHERE channel = ?1 AND resume_from IS NULL`, channel, now); err != nil {
			return err
		}
		var err error
		m, err = scanMark(tx.QueryRowContext(ctx, `SELECT channel, ts, resume_from, updated_at FROM catchup_marks WHERE channel = ?`, channel))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		found = true
		return nil
	})
	if err != nil {
		return store.Mark{}, false, fmt.Errorf("begin catch-up %s: %w", channel, classify(err))
	}
	return m, found, nil
}

// EndCatchUp clears the channel's resume point.
func (s *Store) EndCatchUp(ctx context.Context, channel string) error {
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		_, err := tx.ExecContext(ctx, `UPDATE catchup_marks SET resume_from = NULL, updated_at = ?2
			 WHERE channel = ?1 AND resume_from IS NOT NULL`, channel, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("end catch-up %s: %w", channel, classify(err))
	}
	return nil
}

// Marks returns every channel's mark (none on a schema from before catch-up,
// which a read-only store may have opened).
func (s *Store) Marks(ctx context.Context) ([]store.Mark, error) {
	if !s.catchupMarks {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT channel, ts, resume_from, updated_at FROM catchup_marks ORDER BY channel`)
	if err != nil {
		return nil, fmt.Errorf("marks: %w", err)
	}
	defer rows.Close()
	var out []store.Mark
	for rows.Next() {
		m, err := scanMark(rows)
		if err != nil {
			return nil, fmt.Errorf("marks: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func scanMark(r interface{ Scan(...any) error }) (store.Mark, error) {
	var m store.Mark
	var resume sql.NullString
	var updated int64
	if err := r.Scan(&m.Channel, &m.TS, &resume, &updated); err != nil {
		return store.Mark{}, err
	}
	m.ResumeFrom, m.UpdatedAt = resume.String, time.UnixMilli(updated)
	return m, nil
}
