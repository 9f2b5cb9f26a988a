package config

import (
	"errors"
	"strings"
)

// checkSocketSecrets refuses Socket Mode without an app-level token. The
// token itself is never printed.
func checkSocketSecrets(cfg Config, sec Secrets) error {
	if !cfg.Socket.Enabled {
		return nil
	}
	switch {
	case sec.AppToken == "":
		return sec.Needs("SLACK_APP_TOKEN",
			errors.New("socket_mode.enabled needs an app-level token: set SLACK_APP_TOKEN or SLACK_APP_TOKEN_FILE (xapp-…, with connections:write)"),
			"[socket_mode] enabled = true connects to Slack with it", "the app-level token (xapp-…, with connections:write)",
			"turn Socket Mode off ([socket_mode] enabled = false) in "+cfg.file())
	case !strings.HasPrefix(sec.AppToken, "xapp-"):
		return errors.New("SLACK_APP_TOKEN is not an app-level token: it must start with xapp- (create one under Basic Information → App-Level Tokens with connections:write)")
	}
	return nil
}
