package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ackd/ackd/store"
)

// instanceRetention is how long a crashed daemon's row is kept (shown as
// not running) before Heartbeat deletes it.
const instanceRetention = 24 * time.Hour

// Heartbeat inserts or refreshes in's row and deletes rows whose heartbeat
// is older than a day.
func (s *Store) Heartbeat(ctx context.Context, in Instance) error {
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO ackd_instances (instance_id, pid, host, listen, started_at, heartbeat_at, effects, state)
			 VALUES (?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''))
			 ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, effects = excluded.effects, state = excluded.state`,
			in.ID, in.PID, in.Host, in.Listen, ms(in.StartedAt), now, store.JoinPerforms(in.Performs), in.State); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM ackd_instances WHERE heartbeat_at < ?`,
			now-instanceRetention.Milliseconds())
		return err
	})
	if err != nil {
		return fmt.Errorf("instance heartbeat: %w", classify(err))
	}
	return nil
}

// Instances returns the instances whose heartbeat is at most fresh old.
func (s *Store) Instances(ctx context.Context, fresh time.Duration) ([]Instance, error) {
	// A read-only store may have opened a schema from before the effects
	// column (Options.MinSchema): it reads NULL in its place.
	effects := "effects"
	if !s.instanceEffects {
		effects = "NULL"
	}
	// Likewise the state column (ackd status on a schema before it).
	state := "coalesce(state, '')"
	if !s.instanceState {
		state = "''"
	}
	res, err := s.r.QueryContext(ctx,
		`SELECT instance_id, pid, host, listen, started_at, heartbeat_at, `+effects+`, `+state+` FROM ackd_instances
		  WHERE heartbeat_at >= ? ORDER BY started_at, instance_id`, ms(s.opts.Now().Add(-fresh)))
	if err != nil {
		return nil, fmt.Errorf("instances: %w", err)
	}
	defer res.Close()
	var out []Instance
	for res.Next() {
		var in Instance
		var started, beat int64
		var performs sql.NullString
		if err := res.Scan(&in.ID, &in.PID, &in.Host, &in.Listen, &started, &beat, &performs, &in.State); err != nil {
			return nil, fmt.Errorf("instances: %w", err)
		}
		in.StartedAt, in.HeartbeatAt = time.UnixMilli(started), time.UnixMilli(beat)
		in.Performs = store.SplitPerforms(performs.String, performs.Valid)
		out = append(out, in)
	}
	return out, res.Err()
}

// Retire deletes instance id's row.
func (s *Store) Retire(ctx context.Context, id string) error {
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM ackd_instances WHERE instance_id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("retire instance: %w", classify(err))
	}
	return nil
}
