package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/store"
	"github.com/spf13/cobra"
)

func statusCmd(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Outbox rows by status, receipts, the oldest pending row's age, and the daemons running on the database",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.readStore(cmd.Context(), func(st store.Store, cfg config.Config) error {
				s, err := st.Stats(cmd.Context())
				if err != nil {
					return err
				}
				daemons, copied, copiedWhy, err := instancesOn(cmd.Context(), st)
				if err != nil {
					return err
				}
				waiting := waitingRows(s.Due, daemons)
				pausedJSON, pausedLines, err := pausedStatus(cmd.Context(), st) // routecmd.go
				if err != nil {
					return err
				}
				marks, err := st.Marks(cmd.Context())
				if err != nil {
					return err
				}
				now := st.Now()
				lag := func(m store.Mark) time.Duration { return max(0, now.Sub(store.TSTime(m.TS))).Round(time.Second) }
				if asJSON {
					running := []map[string]any{}
					for _, in := range daemons {
						d := map[string]any{"pid": in.PID, "host": in.Host, "listen": in.Listen,
							"started_at":            in.StartedAt.UTC().Format(time.RFC3339),
							"heartbeat_age_seconds": int64(max(0, now.Sub(in.HeartbeatAt)).Seconds())}
						if sm := daemon.ParseInstanceState(in).SocketMode; sm != nil {
							d["socket_mode"] = sm // as of its last heartbeat
						}
						running = append(running, d)
					}
					copiedJSON := []map[string]any{}
					for i, in := range copied {
						copiedJSON = append(copiedJSON, map[string]any{"pid": in.PID, "host": in.Host, "listen": in.Listen,
							"heartbeat_age_seconds": int64(max(0, now.Sub(in.HeartbeatAt)).Seconds()), "why": copiedWhy[i]})
					}
					markJSON := []map[string]any{}
					for _, m := range marks {
						markJSON = append(markJSON, map[string]any{"channel": m.Channel, "ts": m.TS,
							"lag_seconds": int64(lag(m).Seconds()), "resume_from": m.ResumeFrom})
					}
					return json.NewEncoder(g.stdout).Encode(map[string]any{
						"db": st.Location(), "engine": st.Engine(), "schema_version": s.SchemaVersion, "receipts": s.Receipts,
						"pending": s.Pending, "leased": s.Leased, "done": s.Done, "parked": s.Parked, "discarded": s.Discarded,
						"oldest_pending_seconds": int64(s.OldestPending.Seconds()),
						"daemons":                running,
						"copied_heartbeats":      copiedJSON,
						"recovered":              s.Recovered,
						"marks":                  markJSON,
						"waiting":                waiting,
						"paused_routes":          pausedJSON,
					})
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintf(w, "database\t%s (%s, schema %d)\n", st.Location(), st.Engine(), s.SchemaVersion)
				fmt.Fprintf(w, "receipts\t%d\n", s.Receipts)
				fmt.Fprintf(w, "pending\t%d (%d leased)\n", s.Pending, s.Leased)
				fmt.Fprintf(w, "done\t%d\n", s.Done)
				fmt.Fprintf(w, "parked\t%d\n", s.Parked)
				fmt.Fprintf(w, "discarded\t%d\n", s.Discarded)
				fmt.Fprintf(w, "oldest pending\t%s\n", s.OldestPending.Round(time.Second))
				for i, wr := range waiting {
					label := ""
					if i == 0 {
						label = "waiting"
					}
					fmt.Fprintf(w, "%s\t%d %s %s due, for %s\n", label, wr.Rows, wr.Effect, plural(wr.Rows, "row", "rows"), wr.For)
				}
				for i, line := range pausedLines {
					label := ""
					if i == 0 {
						label = "paused"
					}
					fmt.Fprintf(w, "%s\t%s\n", label, line)
				}
				fmt.Fprintf(w, "recovered\t%d (intents catch-up recorded that the live path had missed)\n", s.Recovered)
				for i, m := range marks {
					label := ""
					if i == 0 {
						label = "marks"
					}
					line := fmt.Sprintf("%s %s (%s, lag %s)", m.Channel, m.TS, store.TSTime(m.TS).UTC().Format(time.DateTime), lag(m))
					if m.ResumeFrom != "" {
						line += "; catch-up under way, resumes from " + m.ResumeFrom
					}
					fmt.Fprintf(w, "%s\t%s\n", label, line)
				}
				if len(daemons) == 0 {
					fmt.Fprintf(w, "daemons\tnone running (no heartbeat in the last %s)\n", daemon.InstanceStale)
				}
				for i, in := range daemons {
					label := ""
					if i == 0 {
						label = "daemons"
					}
					fmt.Fprintf(w, "%s\t%s\n", label, daemon.DescribeInstance(in, now))
					if sm := daemon.ParseInstanceState(in).SocketMode; sm != nil {
						fmt.Fprintf(w, "\tsocket mode: %s (at its last heartbeat)\n", daemon.DescribeSocket(sm, now))
					}
				}
				for i, in := range copied {
					fmt.Fprintf(w, "copied heartbeat\tpid %d on host %s, seen %s ago: not running here; %s\n", in.PID, in.Host,
						max(0, now.Sub(in.HeartbeatAt)).Round(time.Second), copiedWhy[i])
				}
				return w.Flush()
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
