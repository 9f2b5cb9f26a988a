package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ackd/ackd/store"
)

// RecordStop keeps st as its thread's stop unless a newer one is there: one
// upsert in the next group commit.
func (s *Store) RecordStop(ctx context.Context, st store.StreamStop) (bool, error) {
	us, ok := store.SlackTSMicros(st.StopTS)
	if !ok || st.Channel == "" || st.ThreadTS == "" {
		return false, fmt.Errorf("record stop: channel %q, thread %q, ts %q: %w", st.Channel, st.ThreadTS, st.StopTS, store.ErrFilter)
	}
	var newer bool
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO ackd_stream_stops (channel, thread_ts, stop_ts, stop_us, event_id, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (channel, thread_ts) DO UPDATE SET stop_ts = excluded.stop_ts, stop_us = excluded.stop_us,
			    event_id = excluded.event_id, recorded_at = excluded.recorded_at
			WHERE excluded.stop_us > ackd_stream_stops.stop_us`,
			st.Channel, st.ThreadTS, st.StopTS, us, st.EventID, ms(s.opts.Now()))
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		newer = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record stop of %s/%s: %w", st.Channel, st.ThreadTS, classify(err))
	}
	return newer, nil
}

// StreamStopped reads the thread's stop on the read pool.
func (s *Store) StreamStopped(ctx context.Context, channel, threadTS string) (string, error) {
	var ts string
	err := s.r.QueryRowContext(ctx, `SELECT stop_ts FROM ackd_stream_stops WHERE channel = ? AND thread_ts = ?`,
		channel, threadTS).Scan(&ts)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the stop of %s/%s: %w", channel, threadTS, err)
	}
	return ts, nil
}
