package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/spf13/cobra"
)

func configCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Check the configuration"}
	var asJSON bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Run every startup check of serve without serving; exit 0 when serve would start",
		Long: "Loads the configuration exactly as serve does (--config / ACKD_CONFIG, the environment,\n" +
			"--db and --listen) and runs the checks serve runs before it serves: routes and keys,\n" +
			"every template executed over sample data, the secrets serve requires, the credentials\n" +
			"the routes' effects need, and the database (reachable; its schema against this binary's).\n" +
			"It creates, migrates and writes nothing. Exit status 0: serve would start (warnings\n" +
			"included); 1: it would not. For deploy pipelines: run it before restarting the unit.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var checks []config.Check
			cfg, err := g.loadConfig()
			if err != nil {
				checks = append(checks, config.Check{Name: "config", Status: config.CheckFail, Detail: err.Error()})
			} else {
				// Every problem in one run: the secrets that cannot be read,
				// then serve's checks over those that could.
				sec, err := secrets(true)
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					for _, e := range j.Unwrap() {
						checks = append(checks, config.Check{Name: "secrets", Status: config.CheckFail, Detail: e.Error()})
					}
				}
				checks = append(checks, daemon.CheckConfig(cmd.Context(), cfg, sec, schema)...)
				if c, ok := slackCheck(cmd.Context(), cfg, sec); ok {
					checks = append(checks, c)
				}
			}
			failed, warned, keyOnly, slackOnly := 0, 0, true, true
			for _, c := range checks {
				switch c.Status {
				case config.CheckFail:
					failed++
					keyOnly = keyOnly && c.Name == daemon.CheckTokenKey
					slackOnly = slackOnly && c.Name == "slack"
				case config.CheckWarn:
					warned++
				}
			}
			if asJSON {
				if err := json.NewEncoder(g.stdout).Encode(map[string]any{"ok": failed == 0, "checks": checks}); err != nil {
					return err
				}
			} else {
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				for _, c := range checks {
					fmt.Fprintf(w, "%-4s\t%s\t%s\n", c.Status, c.Name, c.Detail)
				}
				w.Flush()
			}
			if failed > 0 && slackOnly {
				return fmt.Errorf("config check: %d failed: serve would start, but its Web API rows would park (invalid_auth) until the bot token is right", failed)
			}
			if failed > 0 && keyOnly {
				return fmt.Errorf("config check: %d failed: serve would start, but the rows of those teams would wait", failed)
			}
			if failed > 0 {
				return fmt.Errorf("config check: %d failed: serve would not start", failed)
			}
			if !asJSON {
				fmt.Fprintf(g.stdout, "config check: serve would start (%d warnings)\n", warned)
			}
			return nil
		},
	}
	check.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.AddCommand(check)
	return c
}

// slackCheck is daemon.CheckBotToken unless ACKD_SLACK_CHECK=off (a host
// that cannot reach Slack, or a test that must not try).
func slackCheck(ctx context.Context, cfg config.Config, sec config.Secrets) (config.Check, bool) {
	if os.Getenv("ACKD_SLACK_CHECK") == "off" {
		return config.Check{}, false
	}
	return daemon.CheckBotToken(ctx, cfg, sec, nil)
}
