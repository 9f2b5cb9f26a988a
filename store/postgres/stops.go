package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/store"
)

// RecordStop keeps st as its thread's stop unless a newer one is there: one
// upsert.
func (s *Store) RecordStop(ctx context.Context, st store.StreamStop) (bool, error) {
	us, ok := store.SlackTSMicros(st.StopTS)
	if !ok || st.Channel == "" || st.ThreadTS == "" {
		return false, fmt.Errorf("record stop: channel %q, thread %q, ts %q: %w", st.Channel, st.ThreadTS, st.StopTS, store.ErrFilter)
	}
	var newer bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO ackd_stream_stops (channel, thread_ts, stop_ts, stop_us, event_id, recorded_at)
			VALUES ($2, $3, $4, $5, $6, ackd_now_ms() + $1::bigint)
			ON CONFLICT (channel, thread_ts) DO UPDATE SET stop_ts = excluded.stop_ts, stop_us = excluded.stop_us,
			    event_id = excluded.event_id, recorded_at = excluded.recorded_at
			WHERE excluded.stop_us > ackd_stream_stops.stop_us`,
			s.offset.Load(), st.Channel, st.ThreadTS, st.StopTS, us, st.EventID)
		newer = err == nil && tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record stop of %s/%s: %w", st.Channel, st.ThreadTS, s.classify(ctx, err))
	}
	return newer, nil
}

// StreamStopped reads the thread's stop.
func (s *Store) StreamStopped(ctx context.Context, channel, threadTS string) (string, error) {
	if err := s.check(); err != nil {
		return "", err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var ts string
	err := s.pool.QueryRow(ctx, `SELECT stop_ts FROM ackd_stream_stops WHERE channel = $1 AND thread_ts = $2`,
		channel, threadTS).Scan(&ts)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the stop of %s/%s: %w", channel, threadTS, s.classify(ctx, err))
	}
	return ts, nil
}
