// Package e2e is ackd's fault-injection end-to-end suite. It holds no
// production code: its test builds the real ackd binary, runs it as processes
// on 127.0.0.1 against one SQLite file, plays Slack at it, breaks it on
// purpose, and then checks the guarantees of DESIGN §1 from the outside.
//
// What one run does (TestFaults):
//
//   - Slack. Signed event_callback deliveries (app_mention, unique event_ids)
//     at a steady rate, each delivered the way Slack does: no 2xx within 3 s
//     or a failed connection is retried with X-Slack-Retry-Num 1 almost at
//     once, then 2 and 3 after compressed delays (1 s and 3 s for Slack's
//     1 min and 5 min); a delivery that got a 2xx is never retried. About one
//     event in ten is delivered twice at once.
//   - Effects. A forward route to a flaky handler (random 503, answers slower
//     than the route timeout or than the lease, a permanent 400 for a fixed
//     subset of keys, otherwise 200, sometimes with a {"text"} reply that
//     becomes a chat.postMessage follow-up), and a react route against
//     internal/fakeslack, which answers 429 Retry-After: 1 and internal_error
//     at random.
//   - Faults. `ackd serve` is SIGKILLed several times (during a burst of
//     intents, while effects are in flight, at a random moment) and restarted
//     on the same database; it is also stopped with SIGSTOP for longer than a
//     lease while effects are in flight, so another sweeper takes its rows and
//     the fence decides; and the forward handler has a slow spell during a
//     burst, so that whole batches run into the route timeout and outlast
//     their lease. Meanwhile a second process runs `ackd sweep --once` in a
//     loop against the same file.
//
// At the end the daemon drains the queue and is stopped with SIGTERM; then
// the suite reads the database, the fakes' records and every process's JSON
// log and asserts: every acknowledged event has a receipt and its effects
// were performed at least once (or parked, for the permanent-400 keys only);
// no effect was performed for an event without a receipt; no effect started
// after its row was done, and no two performances of one effect overlapped
// (except around a stall: a stopped holder cannot know its lease ran out);
// no two sweeps completed the same row; every effect performed more than
// once is explained by a crash, a stall, a lost lease or an answer the
// performer never read; PRAGMA integrity_check is ok.
// It prints one summary line:
//
//	events=N acked=N lost=0 duplicate_effects=N parked=N crashes=N
//
// The forward handler models a team's handler that commits its work when it
// answers 200 to a client that is still connected: a request abandoned by
// its client before the answer did nothing. Calls to the fake Slack count as
// performed when the fake answered ok, whether or not ackd read the answer.
//
// Running it: `go test ./e2e/` (skipped with -short). -e2e.duration (env
// ACKD_E2E_DURATION) lengthens the load, -e2e.seed (env ACKD_E2E_SEED) replays
// a schedule; the seed is printed. Under -race the binary is built with -race
// too, and any race report in a process's log fails the run.
//
// socket_test.go runs the same binary in Socket Mode against
// internal/fakeslack's Socket Mode side: SIGKILLs under load (every acked
// envelope has its receipt and row), a write lock held by a sqlite3 process
// (not acked; the re-send is recorded once the lock is free), one payload on
// two connections (acts once), refreshes of the only connection under load
// (no moment without a connection, all acked), a silent connection (replaced)
// and invalid_auth (/healthz 503 and a clear log line).
//
// posts_test.go (TestPostChaos) is the campaign with posts instead of
// logs: a post route, SIGKILLs under load, and a fake Web API that stores
// posts and then holds the answer past the timeout, drops the connection,
// answers 500 or internal_error; run once with [slack] confirm_posts on and
// once off, it reports the duplicate messages of each (0 with it on, an
// assertion) from the messages the fake holds per idempotency key:
//
//	post chaos: confirm_posts=on … duplicate_messages=0 …; confirm_posts=off … duplicate_messages=N …
//
// -e2e.posts (env ACKD_E2E_POSTS_DURATION) lengthens each run.
//
// catchup_test.go runs the binary with catch-up ([backfill]) against the
// fake Slack's channel history: ackd killed while 62 messages arrive in two
// channels (three pages each, a thread, a bot's message, a channel_join, the
// bot's own) and every eligible one acted on exactly once after the restart,
// late live deliveries of the same messages adding nothing; a SIGKILL in the
// middle of catch-up, finished by the next start with no row twice; and
// `ackd backfill --since 1h` twice beside a daemon (the second records
// nothing), --dry-run, status, and missing_scope.
//
// Limits: one machine, one clock; the fake Slack keeps messages but not
// reactions (so a repeated reactions.add succeeds instead of answering
// already_reacted, and is counted as a duplicate); the daemon is never
// killed during migration.
package e2e
