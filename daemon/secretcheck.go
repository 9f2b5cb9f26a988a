package daemon

import (
	"fmt"
	"strings"
)

// secretProblems is every secret serve requires for this configuration and
// does not have (or cannot use), each as its own error, so that New refuses
// with all of them and `ackd config check` lists all of them in one run.
func (c Config) secretProblems(sec Secrets) []error {
	var errs []error
	if err := checkSocketSecrets(c, sec); err != nil {
		errs = append(errs, err)
	}
	if sec.SigningSecret == "" && !c.Socket.Enabled {
		errs = append(errs, fmt.Errorf("no Slack signing secret: set SLACK_SIGNING_SECRET or SLACK_SIGNING_SECRET_FILE (or enable [socket_mode] with SLACK_APP_TOKEN)"))
	}
	if sec.SigningSecret == "" && sec.RedeliverSecret == "" {
		// The app behind a redeliver route checks Slack's signature, so
		// its rows could never be performed: refuse rather than pile them up.
		var names []string
		for _, r := range c.Routes {
			if r.Effect == "redeliver" {
				names = append(names, fmt.Sprintf("%q", r.Name))
			}
		}
		if len(names) > 0 {
			what := "route " + names[0]
			if len(names) > 1 {
				what = "routes " + strings.Join(names, ", ")
			}
			errs = append(errs, fmt.Errorf("%s: effect redeliver signs each request for the app: set SLACK_SIGNING_SECRET or ACKD_REDELIVER_SECRET (or …_FILE)", what))
		}
	}
	if err := c.stepSecretProblem(sec); err != nil {
		errs = append(errs, err)
	}
	if c.OAuth != nil {
		if _, err := TokenKeys(sec); err != nil {
			errs = append(errs, err)
		}
		if sec.ClientSecret == "" {
			errs = append(errs, errMissing("SLACK_CLIENT_SECRET", "[oauth] exchanges install codes and refreshes tokens with the app's client secret"))
		}
	}
	return errs
}
