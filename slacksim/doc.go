// Package slacksim plays Slack against an ackd: it signs and delivers
// requests the way Slack does, and it load-tests the ack path.
//
// It owns these things:
//
//   - Signing. [Sign] and [SignRequest] implement Slack's v0 request
//     signature (HMAC-SHA256 over "v0:{timestamp}:{body}", hex, "v0="
//     prefix) and set X-Slack-Request-Timestamp and X-Slack-Signature.
//   - Delivery. [Send] POSTs one signed payload (JSON or form-encoded),
//     optionally marked as a retry with X-Slack-Retry-Num. It backs
//     "ackd send".
//   - Load. [Bench] generates unique Events API event_callback envelopes
//     and delivers them at a fixed rate (open loop) or as fast as N workers
//     can (closed loop), optionally delivering a fraction of them twice at
//     once, the way Slack's near-instant retry does. It reports status
//     counts and exact ack-latency percentiles, and returns the event ids
//     that were acknowledged so a caller can look for their receipts. It
//     backs "ackd bench".
//
// [CeilingHandler] is a receiver that only verifies signatures (with the
// daemon's own verifier) and answers 200. Benchmarking it measures the
// ceiling of the HTTP + HMAC path with no database; [RunCompare] runs the
// same load against ackd with synchronous FULL, with NORMAL, and against the
// ceiling, one after the other, and backs "ackd bench compare".
//
// Open-loop latency is measured from each request's scheduled send time,
// not from when it actually left, so a slow receiver (or a stalled client)
// shows up as latency instead of being hidden by coordinated omission.
// In-flight requests are capped; requests that would exceed the cap are
// skipped and counted, never queued.
//
// Limits: slacksim knows the Events API envelope only as far as ackd needs
// it (type "message" events in channel CBENCH); it does not simulate
// Slack's delayed retries, redirects or url_verification handshakes.
package slacksim
