package sweep

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/ackd/ackd/store"
)

// Credentials an effect may need, named by the environment variable that
// gives them (each also as …_FILE).
const (
	CredBotToken      = "SLACK_BOT_TOKEN"
	CredForwardSecret = "ACKD_FORWARD_SECRET"
	// CredSigningSecret signs redeliver requests; ACKD_REDELIVER_SECRET
	// overrides it for an app that verifies with another secret.
	CredSigningSecret = "SLACK_SIGNING_SECRET"
)

// CapForwardSigned is the capability of performing a forward row recorded
// by a daemon that signs forwards (Params.Signed): having
// ACKD_FORWARD_SECRET. Instances record it beside the effects they claim.
const CapForwardSigned = "forward.signed"

// Performs lists what this sweeper can perform, for its ackd_instances row
// (store.Instance.Performs): the effects it claims and, when it claims
// forward and cfg has the forward secret, CapForwardSigned. Another
// process's sweep that must give a row back reads it to decide whether the
// row still has a performer (see HandBackLimit).
func (s *Sweeper) Performs(cfg EffectConfig) []string {
	out := append([]string{}, s.claim.Effects...)
	if cfg.ForwardSecret != "" && slices.Contains(out, "forward") {
		out = append(out, CapForwardSigned)
	}
	if cfg.Sealer != nil {
		out = append(out, CapTokenKey)
	}
	slices.Sort(out)
	return out
}

// webAPIEffects call the Slack Web API and need a bot token.
var webAPIEffects = []string{"post", "react", "update", "stream"}

// Unavailable names the effects this configuration cannot perform at all,
// each with the reason: a process without SLACK_BOT_TOKEN cannot perform the
// Web API effects, nor one without a signing secret (SLACK_SIGNING_SECRET or
// ACKD_REDELIVER_SECRET) redeliver, nor one without ACKD_TOKEN_KEY a
// workflow step (step, step_deadline). A sweep must not claim such rows (it
// would only park them); it leaves them to a process that has the credential.
//
// forward is never unavailable as a whole: a row recorded by a daemon that
// signs forwards (Params.Signed) needs ACKD_FORWARD_SECRET, and a sweep
// without it gives that row back untouched (Unavailable failure class), while
// rows recorded unsigned go out as before.
func (cfg EffectConfig) Unavailable() map[string]string {
	out := map[string]string{}
	if cfg.BotToken == "" && cfg.Tokens == nil {
		for _, e := range webAPIEffects {
			out[e] = CredBotToken + " is not set"
		}
	}
	if cfg.RedeliverSecret == "" {
		out["redeliver"] = "neither " + CredSigningSecret + " nor ACKD_REDELIVER_SECRET is set"
	}
	if cfg.Sealer == nil {
		// A step's execution token is sealed in its stored request.
		out[EffectStep] = CredTokenKey + " is not set"
		out[EffectStepDeadline] = CredTokenKey + " is not set"
	}
	return out
}

// claimable lists the effects of reg that are not in skip, sorted. A
// sweep claims only those: a row whose effect this ackd does not know (a
// newer replica's, or one written before a downgrade) is left to a process
// that knows it instead of being parked as unknown_effect.
func claimable(reg Registry, skip map[string]string) []string {
	out := []string{} // empty: claim nothing, not everything
	for e := range reg {
		if _, no := skip[e]; !no {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// SkipSummary says in one line which effects a sweep leaves alone and why,
// grouping effects that share a reason: "post, react, update (SLACK_BOT_TOKEN
// is not set)". Empty when nothing is skipped.
func SkipSummary(skip map[string]string) string {
	byReason := map[string][]string{}
	for e, why := range skip {
		byReason[why] = append(byReason[why], e)
	}
	var parts []string
	for _, why := range slices.Sorted(maps.Keys(byReason)) {
		es := byReason[why]
		slices.Sort(es)
		parts = append(parts, strings.Join(es, ", ")+" ("+why+")")
	}
	return strings.Join(parts, "; ")
}

// EffectNames lists the effects ackd performs (the keys of Effects), sorted.
func EffectNames() []string { return slices.Sorted(maps.Keys(Effects(EffectConfig{}))) }

// Needs says what a process must have to perform row: the capability an
// instance records for it (Sweeper.Performs: the effect, or
// CapForwardSigned for a forward a signing daemon recorded), and the
// credential that gives it, "" when it needs none. An effect this ackd
// does not know (a newer ackd's) needs an ackd that knows it.
func Needs(row store.Row) (capability, credential string) {
	switch {
	case slices.Contains(webAPIEffects, row.Effect):
		return row.Effect, CredBotToken + " (or [oauth] installations)"
	case row.Effect == "redeliver":
		return row.Effect, CredSigningSecret + " or ACKD_REDELIVER_SECRET"
	case row.Effect == EffectStep || row.Effect == EffectStepDeadline:
		return row.Effect, CredTokenKey
	case row.Effect == "forward":
		var p struct {
			Params struct {
				Signed bool `json:"signed"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(row.Payload), &p) == nil && p.Params.Signed {
			return CapForwardSigned, CredForwardSecret
		}
	}
	return row.Effect, ""
}
