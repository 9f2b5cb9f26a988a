package sweep

import (
	"context"
	"log/slog"
)

// LogEffect is the dry run: it writes the effect to the log and succeeds.
func LogEffect(log *slog.Logger) Performer {
	return PerformerFunc(func(ctx context.Context, job Job) (Outcome, error) {
		p := job.Payload
		log.Info("dry run: effect logged, nothing sent",
			"effect", "log", "key", job.Row.Key, "route", p.Route, "source", p.Source,
			"event_id", p.Facts.EventID, "channel", p.Facts.Channel, "user", p.Facts.User,
			"text", p.Facts.Text, "attempt", job.Attempt)
		return Outcome{}, nil
	})
}
