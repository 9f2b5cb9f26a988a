package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/store"
)

const (
	// advanceMark moves a channel's mark forward ($2 channel, $3 ts).
	advanceMark = `WITH ` + clockCTE + `
		INSERT INTO catchup_marks (channel, ts, updated_at) SELECT $2, $3, now FROM clock
		ON CONFLICT (channel) DO UPDATE SET ts = excluded.ts, updated_at = excluded.updated_at
		 WHERE excluded.ts > catchup_marks.ts`
	// advanceResume moves a resume point forward, only while one is set.
	advanceResume = `WITH ` + clockCTE + `
		UPDATE catchup_marks SET resume_from = $3, updated_at = clock.now FROM clock
		 WHERE channel = $2 AND resume_from < $3`
	markColumns = `channel, ts, resume_from, updated_at`
)

// RecordRecovered commits what catch-up recovered of some messages, in
// order, in one transaction: each intent's rows, the receipt and request of
// each intent that added a row, and each channel's mark (and resume point).
func (s *Store) RecordRecovered(ctx context.Context, recs []store.Recovered) ([]int, error) {
	for _, rec := range recs {
		if !store.ValidTS(rec.TS) || rec.Channel == "" {
			return nil, fmt.Errorf("record recovered: channel %q ts %q", rec.Channel, rec.TS)
		}
	}
	var inserted []int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		inserted = make([]int, len(recs))
		off := s.offset.Load()
		for i, rec := range recs {
			n, err := recordRecovered(ctx, tx, off, rec)
			if err != nil {
				return fmt.Errorf("%s %s: %w", rec.Channel, rec.TS, err)
			}
			inserted[i] = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record recovered: %w", err)
	}
	return inserted, nil
}

func recordRecovered(ctx context.Context, tx pgx.Tx, off int64, rec store.Recovered) (int, error) {
	inserted := 0
	for _, in := range rec.Intents {
		n := 0
		for _, r := range in.Rows {
			var reqID *string
			if r.RequestID != "" {
				reqID = &r.RequestID
			}
			tag, err := tx.Exec(ctx, insertRow, off, r.Key, r.Effect, r.Payload, reqID, (*string)(nil), int64(0), max(r.Delay.Milliseconds(), 0))
			if err != nil {
				return 0, fmt.Errorf("insert outbox row %s: %w", r.Key, err)
			}
			n += int(tag.RowsAffected())
		}
		inserted += n
		if n == 0 {
			continue // found done: no receipt, no request
		}
		if _, err := tx.Exec(ctx, insertReceipt, off, in.EventID, in.EventType); err != nil {
			return 0, fmt.Errorf("insert receipt: %w", err)
		}
		if r := in.Request; r != nil {
			body := r.Body
			if body == nil {
				body = []byte{}
			}
			if _, err := tx.Exec(ctx, insertRequest, off, in.EventID, r.ContentType, body); err != nil {
				return 0, fmt.Errorf("insert request: %w", err)
			}
		}
	}
	if !rec.NoMark {
		if _, err := tx.Exec(ctx, advanceMark, off, rec.Channel, rec.TS); err != nil {
			return 0, fmt.Errorf("advance mark: %w", err)
		}
	}
	if rec.Resume {
		if _, err := tx.Exec(ctx, advanceResume, off, rec.Channel, rec.TS); err != nil {
			return 0, fmt.Errorf("advance resume point: %w", err)
		}
	}
	return inserted, nil
}

// AdvanceMarks moves marks forward in one round trip.
func (s *Store) AdvanceMarks(ctx context.Context, marks []store.Mark) error {
	if len(marks) == 0 {
		return nil
	}
	if err := s.check(); err != nil {
		return err
	}
	off := s.offset.Load()
	b := &pgx.Batch{}
	for _, m := range marks {
		if !store.ValidTS(m.TS) || m.Channel == "" {
			return fmt.Errorf("advance marks: channel %q ts %q", m.Channel, m.TS)
		}
		b.Queue(advanceMark, off, m.Channel, m.TS)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("advance marks: %w", s.classify(ctx, err))
	}
	return nil
}

// BeginCatchUp sets the channel's resume point to its mark unless one is
// set, and returns the mark.
func (s *Store) BeginCatchUp(ctx context.Context, channel string) (store.Mark, bool, error) {
	var m store.Mark
	found := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		off := s.offset.Load()
		if _, err := tx.Exec(ctx, `WITH `+clockCTE+`
			UPDATE catchup_marks SET resume_from = ts, updated_at = clock.now FROM clock
			 WHERE channel = $2 AND resume_from IS NULL`, off, channel); err != nil {
			return err
		}
		var err error
		m, err = scanMark(tx.QueryRow(ctx, `SELECT `+markColumns+` FROM catchup_marks WHERE channel = $1`, channel))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		found = true
		return nil
	})
	if err != nil {
		return store.Mark{}, false, fmt.Errorf("begin catch-up %s: %w", channel, err)
	}
	return m, found, nil
}

// EndCatchUp clears the channel's resume point.
func (s *Store) EndCatchUp(ctx context.Context, channel string) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `WITH `+clockCTE+`
		UPDATE catchup_marks SET resume_from = NULL, updated_at = clock.now FROM clock
		 WHERE channel = $2 AND resume_from IS NOT NULL`, s.offset.Load(), channel); err != nil {
		return fmt.Errorf("end catch-up %s: %w", channel, s.classify(ctx, err))
	}
	return nil
}

// Marks returns every channel's mark (none on a schema from before catch-up,
// which a read-only store may have opened).
func (s *Store) Marks(ctx context.Context) ([]store.Mark, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if !s.catchupMarks {
		return nil, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+markColumns+` FROM catchup_marks ORDER BY channel`)
	if err != nil {
		return nil, fmt.Errorf("marks: %w", s.classify(ctx, err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Mark, error) { return scanMark(r) })
	if err != nil {
		return nil, fmt.Errorf("marks: %w", s.classify(ctx, err))
	}
	return out, nil
}

func scanMark(r pgx.Row) (store.Mark, error) {
	var m store.Mark
	var resume *string
	var updated int64
	if err := r.Scan(&m.Channel, &m.TS, &resume, &updated); err != nil {
		return store.Mark{}, err
	}
	if resume != nil {
		m.ResumeFrom = *resume
	}
	m.UpdatedAt = time.UnixMilli(updated)
	return m, nil
}
