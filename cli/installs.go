package cli

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/oauth"
	"github.com/ackd/ackd/store"
)

// installsCmd is `ackd installs list|show|remove|rekey`: the installations
// of [oauth]. No command prints a token.
func installsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "installs", Short: "Inspect and remove the app's installations ([oauth]); never prints a token"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List installations: team (or enterprise for org-wide installs), bot, scopes, installed at",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.readStore(cmd.Context(), func(st store.Store, _ config.Config) error {
				list, err := st.ListInstallations(cmd.Context())
				if err != nil {
					return noInstallTable(err)
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "TEAM\tKIND\tENTERPRISE\tBOT USER\tINSTALLED\tSCOPES\tSTATE")
				for _, in := range list {
					kind := "workspace"
					if in.EnterpriseInstall {
						kind = "org-wide"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Key, kind, dash(in.EnterpriseID), dash(in.BotUserID),
						in.InstalledAt.UTC().Format(time.DateTime), oneLine(in.Scopes, 60), state(in))
				}
				return w.Flush()
			})
		},
	}
	show := &cobra.Command{
		Use:   "show TEAM",
		Short: "Show one installation (its token's expiry, never the token)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.readStore(cmd.Context(), func(st store.Store, _ config.Config) error {
				in, err := st.GetInstallation(cmd.Context(), args[0])
				if err != nil {
					return noInstallTable(err)
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintf(w, "team\t%s\nteam id\t%s\nenterprise id\t%s\norg-wide\t%t\napp id\t%s\nbot user\t%s\nbot id\t%s\n",
					in.Key, dash(in.TeamID), dash(in.EnterpriseID), in.EnterpriseInstall, dash(in.AppID), dash(in.BotUserID), dash(in.BotID))
				fmt.Fprintf(w, "scopes\t%s\nuser scopes\t%s\ninstaller\t%s\ninstalled\t%s\nupdated\t%s\nstate\t%s\n",
					dash(in.Scopes), dash(in.UserScopes), dash(in.InstallerUserID),
					in.InstalledAt.UTC().Format(time.RFC3339), in.UpdatedAt.UTC().Format(time.RFC3339), state(in))
				// The expiry is sealed with the tokens: shown only with the key.
				switch keys, kerr := tokenKeys(); {
				case kerr != nil:
					fmt.Fprintf(w, "token expiry\t(sealed: %v)\n", kerr)
				default:
					svc := oauth.New(oauth.Config{}, st, keys, oauth.Options{})
					exp, old, err := svc.Expiry(in)
					switch {
					case err != nil:
						fmt.Fprintf(w, "token expiry\t(%v)\n", err)
					case exp.IsZero():
						fmt.Fprintf(w, "token expiry\tnone (no token rotation)\n")
					default:
						fmt.Fprintf(w, "token expiry\t%s\n", exp.UTC().Format(time.RFC3339))
					}
					if old {
						fmt.Fprintf(w, "sealed with\tACKD_TOKEN_KEY_OLD (run ackd installs rekey)\n")
					}
				}
				return w.Flush()
			})
		},
	}
	remove := &cobra.Command{
		Use:   "remove TEAM",
		Short: "Remove an installation and park its pending rows (its token is no longer used)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(cmd.Context(), false, func(st store.Store, _ config.Config) error {
				ok, err := st.DeleteInstallation(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("installs remove: there is no installation %s (ackd installs list)", args[0])
				}
				n, err := st.ParkInstallRows(cmd.Context(), args[0], "uninstalled: removed by ackd installs remove")
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "removed installation %s; parked %d pending rows\n", args[0], n)
				return nil
			})
		},
	}
	rekey := &cobra.Command{
		Use:   "rekey",
		Short: "Re-seal every installation's tokens with ACKD_TOKEN_KEY (the old key in ACKD_TOKEN_KEY_OLD)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := tokenKeys()
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), false, func(st store.Store, _ config.Config) error {
				n, err := oauth.New(oauth.Config{}, st, keys, oauth.Options{}).Rekey(cmd.Context())
				fmt.Fprintf(g.stdout, "re-sealed %d installations with ACKD_TOKEN_KEY\n", n)
				return err
			})
		},
	}
	c.AddCommand(list, show, remove, rekey)
	return c
}

func tokenKeys() (*oauth.Keys, error) {
	sec, err := secrets(false)
	if err != nil {
		return nil, err
	}
	keys, err := daemon.TokenKeys(sec)
	if err != nil {
		return nil, errors.New("installs: " + err.Error())
	}
	return keys, nil
}

func state(in store.Installation) string {
	if in.Error != "" {
		return "unusable: " + in.Error
	}
	return "ok"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// noInstallTable says so when the database predates installations (an
// older schema, opened read-only as it is).
func noInstallTable(err error) error {
	if m := err.Error(); strings.Contains(m, "no such table: ackd_installations") || strings.Contains(m, `"ackd_installations" does not exist`) {
		return errors.New("installs: this database has no installations table yet (an older schema: ackd migrate, or ackd serve, with this ackd creates it)")
	}
	return err
}
