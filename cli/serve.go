package cli

import (
	"os/signal"
	"syscall"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/spf13/cobra"
)

func serveCmd(g *globals) *cobra.Command {
	var cpuProfile string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: Slack ingress, sweep ticker, pruner, /healthz, /metrics",
		Long: "Run the daemon: Slack ingress (/slack/events, /slack/commands, /slack/interactivity),\n" +
			"the sweep ticker and immediate trigger, the pruner, /healthz and /metrics.\n\n" +
			"Environment (each secret may instead be given as a file named by …_FILE, e.g. a\n" +
			"systemd credential; never on the command line; an empty file means not set, and is\n" +
			"refused, naming the feature, only where the config uses that secret):\n" +
			"  SLACK_SIGNING_SECRET   the app's signing secret. Required over HTTP (serve refuses to start\n" +
			"                         without it); optional with [socket_mode] enabled, where without it\n" +
			"                         the HTTP Slack routes are not served. Also signs redeliver requests\n" +
			"  SLACK_APP_TOKEN        the app-level token (xapp-…): required with [socket_mode] enabled,\n" +
			"                         unused otherwise\n" +
			"  SLACK_BOT_TOKEN        bot token for post, react, update (without it their rows stay pending);\n" +
			"                         not used with [oauth]\n" +
			"  SLACK_CLIENT_SECRET    with [oauth], required: the app's client secret\n" +
			"  ACKD_TOKEN_KEY         with [oauth] or step routes, required: the key sealing installation\n" +
			"                         tokens and workflow steps' execution tokens\n" +
			"  ACKD_TOKEN_KEY_OLD     with [oauth]: the previous key, still accepted for tokens it sealed\n" +
			"  ACKD_FORWARD_SECRET    signs forward, step and stream requests (X-Ackd-Signature); without it\n" +
			"                         they go unsigned\n" +
			"  ACKD_CONSOLE_PASSWORD  with [console] listen, required: the console's password (user ackd)\n" +
			"  ACKD_REDELIVER_SECRET  signs redeliver requests instead of SLACK_SIGNING_SECRET (an app that\n" +
			"                         verifies another secret); required by redeliver routes without one\n" +
			"  SLACK_API_URL          Web API base URL (tests, proxies); overrides [slack] api_url\n" +
			"  ACKD_CONFIG            as --config\n" +
			"  ACKD_DB                as --db; refused when the config file's db names another database.\n" +
			"                         Or ACKD_DB_FILE, a file that holds it (a postgres:// URL with a\n" +
			"                         password, as a systemd credential), which wins over both\n" +
			"  ACKD_LISTEN            as --listen\n" +
			"  ACKD_LOG_LEVEL         debug, info (default), warn, error\n" +
			"  ACKD_SLACK_CHECK       off: skip the auth.test that checks SLACK_BOT_TOKEN at start\n" +
			"  NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID  set by systemd (Type=notify, WatchdogSec=)\n" +
			"  CREDENTIALS_DIRECTORY  set by systemd (LoadCredential=): an empty credential is named\n" +
			"                         by its LoadCredential= source",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			sec, err := secrets(true)
			if err != nil {
				return err
			}
			srv, err := daemon.New(cfg, daemon.Options{Schema: schema, Secrets: sec, Logger: g.logger(),
				Notifier: daemon.NewNotifier(), ShutdownTimeout: 20 * time.Second})
			if err != nil {
				return err
			}
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if err := srv.Open(ctx); err != nil {
				return err
			}
			// Once, off the ack path: a wrong bot token is said at start,
			// not when the first post parks with invalid_auth.
			go func() {
				c, ok := slackCheck(ctx, cfg, sec)
				switch {
				case !ok:
				case c.Status == config.CheckFail:
					g.logger().Error("slack: "+c.Detail, "component", "daemon")
				case c.Status == config.CheckWarn:
					g.logger().Warn("slack: "+c.Detail, "component", "daemon")
				default:
					g.logger().Info("slack: "+c.Detail, "component", "daemon")
				}
			}()
			<-ctx.Done()
			stop() // a second signal now kills the process instead of waiting
			return srv.Close()
		},
	}
	c.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile to this file until shutdown")
	_ = c.Flags().MarkHidden("cpuprofile")
	return c
}
