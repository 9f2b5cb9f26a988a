package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ackd/ackd/manifest"
)

func manifestCmd(g *globals) *cobra.Command {
	var o manifest.Options
	var asJSON bool
	c := &cobra.Command{
		Use:   "manifest --url https://HOST [--json]",
		Short: "Print the Slack app manifest this configuration needs (YAML; --json for JSON)",
		Long: "Prints the app manifest to create or update the Slack app from (api.slack.com/apps →\n" +
			"Create New App → From a manifest): the request URLs under --url (/slack/events,\n" +
			"/slack/commands, /slack/interactivity; none with [socket_mode] enabled), every\n" +
			"event the routes take (message as message.channels/.groups/.im/.mpim, narrowed by\n" +
			"--channel-types), their slash commands (a route's description key describes one),\n" +
			"interactivity, the bot scopes the effects, post confirmation and catch-up use, and\n" +
			"with [oauth] its redirect URL, scopes and the app_uninstalled/tokens_revoked events.\n" +
			"What the manifest cannot say (event = \"*\", command = \"*\", an app behind redeliver)\n" +
			"is printed on stderr, and as comments in the YAML. Nothing is sent anywhere.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("url") {
				if _, err := manifest.CheckURL(o.URL); err != nil {
					return err
				}
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			// What config check would warn about (an unknown event type
			// with its did-you-mean, a REPLACEME placeholder) is said
			// here too: the manifest is built from the config as it is.
			for _, w := range cfg.Warnings {
				fmt.Fprintln(g.stderr, "ackd manifest: warning:", w)
			}
			o.AgentView = cfg.Stream.View               // "" means agent_view
			o.AgentDescription = cfg.Stream.Description // "" means manifest.DefaultAgentDescription
			res, err := manifest.Build(&cfg, o)
			if err != nil {
				return err
			}
			out, err := res.YAML()
			if asJSON {
				out, err = res.JSON()
			}
			if err != nil {
				return err
			}
			for _, n := range res.Notes {
				fmt.Fprintln(g.stderr, "ackd manifest: note:", n)
			}
			_, err = g.stdout.Write(out)
			return err
		},
	}
	c.Flags().StringVar(&o.URL, "url", "", "the public https:// base Slack reaches ackd at (required unless [socket_mode] enabled)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of YAML")
	c.Flags().StringVar(&o.Name, "name", "ackd", "the app's name (at most 35 characters) and its bot's display name")
	c.Flags().StringSliceVar(&o.ChannelTypes, "channel-types", manifest.ChannelTypes,
		"conversation types the app works in: public, private, im, mpim (which message.* events and *:history scopes)")
	return c
}
