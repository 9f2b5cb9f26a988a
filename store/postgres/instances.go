package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/store"
)

// instanceRetention is how long a crashed daemon's row is kept (shown as
// not running) before Heartbeat deletes it.
const instanceRetention = 24 * time.Hour

// Heartbeat inserts or refreshes in's row (heartbeat_at on the database's
// clock) and deletes rows whose heartbeat is older than a day.
func (s *Store) Heartbeat(ctx context.Context, in store.Instance) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		off := s.offset.Load()
		if _, err := tx.Exec(ctx, `WITH `+clockCTE+`
			INSERT INTO ackd_instances (instance_id, pid, host, listen, started_at, heartbeat_at, effects, state)
			SELECT $2, $3, $4, $5, $6, now, $7, NULLIF($8, '') FROM clock
			ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, effects = excluded.effects, state = excluded.state`,
			off, in.ID, in.PID, in.Host, in.Listen, in.StartedAt.UnixMilli(), store.JoinPerforms(in.Performs), in.State); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH `+clockCTE+`
			DELETE FROM ackd_instances USING clock WHERE heartbeat_at < clock.now - $2::bigint`,
			off, instanceRetention.Milliseconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("instance heartbeat: %w", err)
	}
	return nil
}

// Instances returns the instances whose heartbeat is at most fresh old on
// the database's clock, oldest start first.
func (s *Store) Instances(ctx context.Context, fresh time.Duration) ([]store.Instance, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// A read-only store may have opened a schema from before the effects
	// column (Options.MinSchema): it reads NULL in its place.
	effects := "effects"
	if !s.instanceEffects {
		effects = "NULL::text"
	}
	// Likewise the state column (ackd status on a schema before it).
	state := "coalesce(state, '')"
	if !s.instanceState {
		state = "''::text"
	}
	res, err := s.pool.Query(ctx, `WITH `+clockCTE+`
		SELECT instance_id, pid, host, listen, started_at, heartbeat_at, `+effects+`, `+state+` FROM ackd_instances, clock
		 WHERE heartbeat_at >= clock.now - $2::bigint ORDER BY started_at, instance_id`,
		s.offset.Load(), fresh.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("instances: %w", s.classify(ctx, err))
	}
	defer res.Close()
	var out []store.Instance
	for res.Next() {
		var in store.Instance
		var started, beat int64
		var performs *string
		if err := res.Scan(&in.ID, &in.PID, &in.Host, &in.Listen, &started, &beat, &performs, &in.State); err != nil {
			return nil, fmt.Errorf("instances: %w", err)
		}
		in.StartedAt, in.HeartbeatAt = time.UnixMilli(started), time.UnixMilli(beat)
		if performs != nil {
			in.Performs = store.SplitPerforms(*performs, true)
		}
		out = append(out, in)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("instances: %w", s.classify(ctx, err))
	}
	return out, nil
}

// Retire deletes instance id's row.
func (s *Store) Retire(ctx context.Context, id string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM ackd_instances WHERE instance_id = $1`, id); err != nil {
		return fmt.Errorf("retire instance: %w", s.classify(ctx, err))
	}
	return nil
}
