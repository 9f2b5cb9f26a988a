package ingress

import (
	"cmp"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Workflow steps: the routes that take function_executed (and interactions
// inside a step) and the rows they make. The effect itself is sweep's
// (sweep/step.go); this file is only the config and the matching.

// stepRows are the rows of a function_executed route for one event. A
// route of another effect (a forward, say) keys by event as usual; a step
// route makes the step row keyed by the execution (so every delivery of it, Slack's retry
// an hour later and a Socket Mode re-send included, is one row) and its
// deadline row, due [steps] deadline later; both are performed from the
// stored event.
func stepRows(c *config.Config, r *config.Route, env Envelope, facts sweep.Facts) ([]store.NewRow, error) {
	if r.Effect != sweep.EffectStep {
		row, err := r.RowFor(env.EventID+":"+r.Name, sweep.SourceEvent, facts)
		return []store.NewRow{row}, err
	}
	key := cmp.Or(env.Inner.ExecutionID, env.EventID) + ":" + r.Name
	d := c.Steps.Deadline.Duration
	p := r.PayloadFor(sweep.SourceEvent, facts)
	p.Params.DeadlineMS = d.Milliseconds()
	row, err := r.RowOf(key, p)
	if err != nil {
		return nil, err
	}
	p = sweep.Payload{Route: r.Name, Source: sweep.SourceEvent, TimeoutMS: r.Timeout.Milliseconds(),
		Params: sweep.Params{DeadlineMS: d.Milliseconds(), StepKey: key}, Facts: facts}
	enc, err := p.Encode()
	if err != nil {
		return nil, err
	}
	deadline := store.NewRow{Key: sweep.DeadlineKey(key), Effect: sweep.EffectStepDeadline, Payload: enc,
		RequestID: row.RequestID, Delay: d}
	return []store.NewRow{row, deadline}, nil
}

// sealRequest seals the execution tokens in an intent's stored request
// (sweep.SealTokens): a workflow step's token never reaches the database in
// clear when the key is set. Without it the request is stored as it is,
// and the first one with a token is logged.
func (s *Server) sealRequest(in store.Intent) (store.Intent, error) {
	if in.Request == nil {
		return in, nil
	}
	body, n, err := sweep.SealTokens(s.sealer, in.EventID, in.Request.ContentType, in.Request.Body)
	if err != nil {
		return in, err
	}
	if n > 0 && s.sealer == nil && s.clearTokens.CompareAndSwap(false, true) {
		s.log.Warn("a stored Slack request carries a workflow step's execution token (bot_access_token) in clear: set ACKD_TOKEN_KEY to seal it (logged once)",
			"event_id", in.EventID)
	}
	r := *in.Request
	r.Body = body
	in.Request = &r
	return in, nil
}
