-- ackd schema. The binary embeds this file and applies it at startup
-- (`ackd migrate` does the same by hand). Times are integer milliseconds since
-- the Unix epoch; the views show them as UTC text for the sqlite3 CLI.
--
-- Migration model: PRAGMA user_version holds the applied version. Each
-- "-- migrate: N" section below runs once, in order, in one transaction.
-- Never edit a released section: add a new one.
--
-- A migration may run while an older daemon serves the file (`ackd
-- migrate` before the restart), and holds the write lock while it runs: its
-- acks wait for it. So a section never copies or reads a large table in
-- full (no table rebuild, no CREATE INDEX on the outbox or the receipts,
-- no UPDATE that no index narrows); each section since the last release
-- says what it costs in a "-- cost:" line, which `ackd migrate --dry-run`
-- prints, with the count of the rows it would touch from a "-- rows:" query
-- where it touches any. `ackd migrate` logs each section's duration.

-- migrate: 1

-- One row per accepted Slack request: an Events API event_id, or an operation
-- id ("cmd:"/"ix:" + trigger_id) for slash commands and interactions. The
-- primary key is what decides which of N concurrent deliveries is "first".
CREATE TABLE slack_event_receipts (
  event_id    TEXT    PRIMARY KEY,
  event_type  TEXT    NOT NULL,
  received_at INTEGER NOT NULL
);
CREATE INDEX slack_event_receipts_received_at ON slack_event_receipts (received_at);

-- One row per side effect. idempotency_key is "{event_id}:{route}" or, for
-- message-keyed routes, "{channel}:{ts}:{route}"; a redelivery inserts nothing.
CREATE TABLE outbox (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  idempotency_key  TEXT    NOT NULL UNIQUE,
  effect           TEXT    NOT NULL CHECK (effect <> ''),
  payload          TEXT    NOT NULL,  -- JSON (sweep.Payload): everything needed to perform the effect
  status           TEXT    NOT NULL DEFAULT 'pending'
                           CHECK (status IN ('pending', 'done', 'parked')),
  attempts         INTEGER NOT NULL DEFAULT 0,
  claim_token      TEXT,              -- set by the sweep that holds the lease
  claim_expires_at INTEGER,           -- lease end; rows are released only by expiry
  next_attempt_at  INTEGER NOT NULL,  -- not claimable before this (backoff)
  last_error       TEXT,
  result           TEXT,              -- JSON from the effect, e.g. {"channel":…,"ts":…}
  created_at       INTEGER NOT NULL,
  completed_at     INTEGER
);
-- Serves the claim query (pending rows in due order, read without a sort)
-- and the pending-age stat.
CREATE INDEX outbox_claimable ON outbox (status, next_attempt_at, id);
-- Serves a claimer finding the rows its token already holds.
CREATE INDEX outbox_claim_token ON outbox (claim_token) WHERE status = 'pending';
-- Serves pruning of done rows.
CREATE INDEX outbox_done ON outbox (completed_at) WHERE status = 'done';

-- One row: when the health check (GET /healthz, the systemd watchdog) last
-- committed a write. A check that wrote nothing would not notice a disk
-- that refuses writes.
CREATE TABLE ackd_health (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  checked_at INTEGER NOT NULL
);

-- Views for operators: `sqlite3 /var/lib/ackd/ackd.db 'SELECT * FROM queue_summary'`.
CREATE VIEW outbox_readable AS
SELECT id,
       idempotency_key,
       effect,
       status,
       attempts,
       strftime('%Y-%m-%d %H:%M:%f', created_at / 1000.0, 'unixepoch')      AS created,
       strftime('%Y-%m-%d %H:%M:%f', next_attempt_at / 1000.0, 'unixepoch') AS next_attempt,
       CASE WHEN claim_expires_at IS NOT NULL
            THEN strftime('%Y-%m-%d %H:%M:%f', claim_expires_at / 1000.0, 'unixepoch') END AS lease_until,
       CASE WHEN completed_at IS NOT NULL
            THEN strftime('%Y-%m-%d %H:%M:%f', completed_at / 1000.0, 'unixepoch') END AS completed,
       last_error,
       result
  FROM outbox;

CREATE VIEW queue_summary AS
SELECT status,
       count(*) AS rows,
       strftime('%Y-%m-%d %H:%M:%S', min(created_at) / 1000.0, 'unixepoch') AS oldest_created,
       max(attempts) AS max_attempts
  FROM outbox
 GROUP BY status;

CREATE VIEW parked AS
SELECT id,
       idempotency_key,
       effect,
       attempts,
       strftime('%Y-%m-%d %H:%M:%S', created_at / 1000.0, 'unixepoch') AS created,
       last_error
  FROM outbox
 WHERE status = 'parked'
 ORDER BY id;

CREATE VIEW receipts_readable AS
SELECT event_id,
       event_type,
       strftime('%Y-%m-%d %H:%M:%f', received_at / 1000.0, 'unixepoch') AS received
  FROM slack_event_receipts;

-- migrate: 2

-- One row per running `ackd serve` on this database, refreshed by its
-- heartbeat and deleted at a clean shutdown. A second daemon on the same
-- database is safe (claims are disjoint) but almost always a mistake: the
-- newcomer warns naming the others, and `ackd status` lists the ones whose
-- heartbeat is fresh (a crashed daemon's row goes stale, then is deleted).
CREATE TABLE ackd_instances (
  instance_id  TEXT    PRIMARY KEY,  -- random, per process start
  pid          INTEGER NOT NULL,
  host         TEXT    NOT NULL,
  listen       TEXT    NOT NULL,     -- the address it serves Slack on
  started_at   INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL
);

-- migrate: 3

-- Slack's exact request, kept once per accepted request (keyed like its
-- receipt) for effects that need the bytes Slack sent: `redeliver` POSTs them,
-- re-signed, to the team's unmodified app. A BLOB, so the bytes survive
-- exactly (no re-encoding, no charset). Written in the intent's transaction;
-- pruned only when no pending or parked outbox row names it and it is older
-- than receipt retention.
CREATE TABLE slack_requests (
  event_id     TEXT    PRIMARY KEY,     -- the receipt's event_id or operation id
  content_type TEXT    NOT NULL,        -- as Slack sent it: application/json or application/x-www-form-urlencoded
  body         BLOB    NOT NULL,
  received_at  INTEGER NOT NULL
);
CREATE INDEX slack_requests_received_at ON slack_requests (received_at);

-- The stored request an outbox row is performed from (slack_requests.event_id),
-- or NULL for rows that need only their payload.
ALTER TABLE outbox ADD COLUMN request_id TEXT;
-- Serves pruning: does any pending or parked row still need a request?
CREATE INDEX outbox_request_id ON outbox (request_id) WHERE request_id IS NOT NULL;

-- migrate: 4

-- Leaner indexes on the hot path: every intent inserts into each index of
-- the outbox, and every claim and completion moves rows between them.
--
-- The claim index holds pending rows only (claims take nothing else): a
-- completion removes the row's entry instead of moving it under 'done', and
-- done rows, most of the table, are not in it at all.
DROP INDEX outbox_claimable;
CREATE INDEX outbox_pending ON outbox (next_attempt_at, id) WHERE status = 'pending';
-- A new row has no claim token: the token index holds leased rows only, so
-- an intent inserts into one index fewer. (A claim's "claim_token = ?"
-- implies "claim_token IS NOT NULL", so SQLite uses it there.)
DROP INDEX outbox_claim_token;
CREATE INDEX outbox_leased ON outbox (claim_token) WHERE claim_token IS NOT NULL AND status = 'pending';
-- Counts parked rows (metrics, status) without reading the table.
CREATE INDEX outbox_parked ON outbox (id) WHERE status = 'parked';

-- migrate: 5
-- cost: in place: adds a column, reads no row

-- The length of the lease a row's claim stamped (claim_expires_at minus the
-- claim's now). A lease ending more than twice its own length from now
-- cannot have been stamped with a right clock, so the claim treats it as
-- expired; judging by the row's own length, not the claimer's, keeps a
-- process with a shorter [sweep] lease from taking a live longer lease.
ALTER TABLE outbox ADD COLUMN claim_lease_ms INTEGER;

-- migrate: 6
-- cost: in place: adds a column, reads no row

-- What each running daemon can perform, space-separated: the effects it
-- claims, and "forward.signed" when it has the forward secret. A sweep that
-- must give a row back for a credential it lacks parks the row after
-- sweep.HandBackLimit only when no live daemon can perform it; NULL (a
-- daemon from before this column) counts as "may".
ALTER TABLE ackd_instances ADD COLUMN effects TEXT;

-- migrate: 7
-- cost: new tables, reads no row

-- Many workspaces ([oauth]): one row per installation of the app, keyed by
-- team id, or by enterprise id for an org-wide install. The tokens (bot
-- token, refresh token, expiry) are in secret only, sealed with AES-256-GCM
-- under ACKD_TOKEN_KEY: a copy of this file (a backup, a Litestream replica)
-- holds no usable token. version counts writes of secret, so that a token
-- refresh replaces exactly the pair it read.
CREATE TABLE ackd_installations (
  install_key         TEXT    PRIMARY KEY,  -- team_id, or enterprise_id for an org-wide install
  team_id             TEXT    NOT NULL DEFAULT '',
  enterprise_id       TEXT    NOT NULL DEFAULT '',
  is_enterprise_install INTEGER NOT NULL DEFAULT 0,
  app_id              TEXT    NOT NULL DEFAULT '',
  bot_user_id         TEXT    NOT NULL DEFAULT '',
  bot_id              TEXT    NOT NULL DEFAULT '',
  scopes              TEXT    NOT NULL DEFAULT '',
  user_scopes         TEXT    NOT NULL DEFAULT '',
  installer_user_id   TEXT    NOT NULL DEFAULT '',
  installed_at        INTEGER NOT NULL,
  updated_at          INTEGER NOT NULL,
  secret              BLOB    NOT NULL,     -- sealed: never a token in clear
  version             INTEGER NOT NULL DEFAULT 1,
  error               TEXT    NOT NULL DEFAULT ''  -- why the tokens cannot be used (a refused refresh)
);

-- The install flow's states that were used (their hash), kept while they
-- are valid (10 minutes): a state is signed, so the install page writes
-- nothing, and it is accepted once, decided by this table's key.
CREATE TABLE ackd_oauth_states (
  state_hash  TEXT    PRIMARY KEY,
  expires_at  INTEGER NOT NULL
);

-- Named leases between processes: one token refresher per installation
-- ("refresh:{install_key}") across the daemon and hand-run commands.
CREATE TABLE ackd_leases (
  name        TEXT    PRIMARY KEY,
  holder      TEXT    NOT NULL,
  expires_at  INTEGER NOT NULL
);

-- migrate: 8
-- cost: in place: adds three columns; updates the pending and parked rows an older ackd attempted, found through their indexes
-- rows: SELECT (SELECT count(*) FROM outbox WHERE status = 'pending' AND (attempts > 0 OR claim_token IS NOT NULL)) + (SELECT count(*) FROM outbox WHERE status = 'parked' AND (attempts > 0 OR claim_token IS NOT NULL))

-- A post is confirmed before it is repeated (chat.postMessage has no
-- idempotency key). outcome_unknown is 1 once an attempt may have taken
-- effect without ackd learning it: it failed after its request was sent
-- with no definite answer (a timeout, a reset connection, a 5xx,
-- internal_error), or a claim found the row still stamped with another
-- claimer's expired lease (that process died mid-call). It is never
-- cleared. first_claimed_at is when the row was first claimed: the post's
-- lookup reads the conversation from a little before it. note is what the
-- successful attempt said about how it succeeded (found by the lookup, or
-- posted because the lookup was impossible); result keeps {"channel","ts"}.
ALTER TABLE outbox ADD COLUMN outcome_unknown INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN first_claimed_at INTEGER;
ALTER TABLE outbox ADD COLUMN note TEXT;
-- Rows an older ackd already attempted: a pending or parked row with a failed
-- attempt may have posted (that version did not record the difference), and
-- its first attempt was no earlier than its creation. One statement per
-- status, so that each reads only its status's partial index
-- (outbox_pending, outbox_parked) and never the done rows, most of the
-- table ("status IN (…)" matches neither index).
UPDATE outbox
   SET first_claimed_at = created_at, outcome_unknown = (attempts > 0)
 WHERE status = 'pending' AND (attempts > 0 OR claim_token IS NOT NULL);
UPDATE outbox
   SET first_claimed_at = created_at, outcome_unknown = (attempts > 0)
 WHERE status = 'parked' AND (attempts > 0 OR claim_token IS NOT NULL);

-- migrate: 9
-- cost: a new table and views, reads no row

-- Catch-up's position per channel (package catchup): the newest message ts
-- known to be recorded, moved forward by live message events and by
-- catch-up, never back. Slack's ts ("1700000000.000100") is kept as text,
-- which orders it by time. resume_from is set while a catch-up from the mark
-- is under way: every message up to it is recorded, so a catch-up cut short
-- resumes there. Slack's cursors are not kept (they expire).
CREATE TABLE catchup_marks (
  channel     TEXT    PRIMARY KEY,
  ts          TEXT    NOT NULL,
  resume_from TEXT,
  updated_at  INTEGER NOT NULL
);

-- `sqlite3 /var/lib/ackd/ackd.db 'SELECT * FROM catchup_marks_readable'`:
-- each mark as UTC text and how far it is behind now.
CREATE VIEW catchup_marks_readable AS
SELECT channel,
       ts,
       strftime('%Y-%m-%d %H:%M:%S', CAST(substr(ts, 1, 10) AS INTEGER), 'unixepoch') AS mark_time,
       CAST(strftime('%s', 'now') AS INTEGER) - CAST(substr(ts, 1, 10) AS INTEGER)    AS lag_seconds,
       resume_from,
       strftime('%Y-%m-%d %H:%M:%f', updated_at / 1000.0, 'unixepoch')               AS updated
  FROM catchup_marks;

-- Intents catch-up recorded (messages the live path had not), by kind:
-- msg (the message's routes) and mention (its app_mention's).
CREATE VIEW recovered_summary AS
SELECT substr(event_id, 1, instr(event_id, ':') - 1) AS kind,
       count(*) AS receipts,
       strftime('%Y-%m-%d %H:%M:%S', max(received_at) / 1000.0, 'unixepoch') AS newest
  FROM slack_event_receipts
 WHERE (event_id >= 'msg:' AND event_id < 'msg;') OR (event_id >= 'mention:' AND event_id < 'mention;')
 GROUP BY kind;

-- migrate: 10
-- cost: in place: adds a column, widens the outbox's status CHECK and attaches an empty index by editing the schema text; copies and reads no row

-- A fourth outbox status, 'discarded' (`ackd outbox discard`), and what
-- each daemon says about itself at its heartbeat (`ackd status`).

-- What each running daemon says about itself at its heartbeat (JSON: its
-- Socket Mode connections, last hello, reconnects).
ALTER TABLE ackd_instances ADD COLUMN state TEXT;

-- 'discarded': an operator gave up on a row. It is never performed again,
-- stays for the audit trail with completed_at the time of the discard, can
-- be put back (`ackd outbox retry ID`), and is pruned on the done rows'
-- retention.
--
-- The status CHECK is widened in place. SQLite cannot ALTER an unnamed
-- CHECK, and the usual way, a rebuild of the table, copied every row under
-- the write lock: 16 s for 300k done rows, during which a daemon running
-- beside `ackd migrate` answered a quarter of Slack's events with 500, and
-- the file doubled. SQLite documents editing a table's text in
-- sqlite_schema for a change that leaves every stored row valid, a CHECK
-- loosened among them (https://sqlite.org/lang_altertable.html#otheralter:
-- writable_schema, the edit, a new schema cookie). Every row was valid
-- under the old CHECK, so it is valid under the wider one.
--
-- The index of discarded rows is attached the same way: CREATE INDEX on
-- the outbox would read every row under the lock, but no row can be
-- discarded yet (the old CHECK forbade it), so the index's content is
-- empty. It is built empty on a scratch table and then named the outbox's.
--
-- Nothing here depends on luck: the checks below stop the migration (and
-- roll all of it back) unless both edits took and this connection reads
-- them, and the scratch table is dropped only after that, so that its
-- drop cannot take the index along. The tests run integrity_check on the
-- result and compare it with the rebuild's.
CREATE TABLE outbox_discarded_build (status TEXT, completed_at INTEGER);
-- Serves pruning (and counting) of discarded rows.
CREATE INDEX outbox_discarded ON outbox_discarded_build (completed_at) WHERE status = 'discarded';
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, 'CHECK (status IN (''pending'', ''done'', ''parked''))',
                          'CHECK (status IN (''pending'', ''done'', ''parked'', ''discarded''))')
 WHERE type = 'table' AND name = 'outbox';
UPDATE sqlite_schema
   SET tbl_name = 'outbox', sql = replace(sql, ' ON outbox_discarded_build ', ' ON outbox ')
 WHERE type = 'index' AND name = 'outbox_discarded';
-- Off again, and this connection reloads the schema it edited.
PRAGMA writable_schema = RESET;
CREATE TEMP TABLE outbox_edited_in_place (
  ok INTEGER CONSTRAINT outbox_edited_in_place CHECK (ok = 1)
);
INSERT INTO outbox_edited_in_place
SELECT (SELECT count(*) FROM sqlite_schema
         WHERE type = 'table' AND name = 'outbox'
           AND instr(sql, 'CHECK (status IN (''pending'', ''done'', ''parked'', ''discarded''))') > 0) = 1
   AND (SELECT count(*) FROM pragma_index_list('outbox') WHERE name = 'outbox_discarded') = 1
   AND (SELECT count(*) FROM pragma_index_list('outbox_discarded_build')) = 0;
DROP TABLE outbox_edited_in_place;
-- Like every schema change, this moves the schema cookie on: every other
-- connection (a daemon running beside `ackd migrate`, this process's read
-- pool) reloads the schema before its next statement.
DROP TABLE outbox_discarded_build;

-- A row that is not pending has no next attempt: the view shows none.
DROP VIEW outbox_readable;
CREATE VIEW outbox_readable AS
SELECT id,
       idempotency_key,
       effect,
       status,
       attempts,
       strftime('%Y-%m-%d %H:%M:%f', created_at / 1000.0, 'unixepoch')      AS created,
       CASE WHEN status = 'pending'
            THEN strftime('%Y-%m-%d %H:%M:%f', next_attempt_at / 1000.0, 'unixepoch') END AS next_attempt,
       CASE WHEN claim_expires_at IS NOT NULL
            THEN strftime('%Y-%m-%d %H:%M:%f', claim_expires_at / 1000.0, 'unixepoch') END AS lease_until,
       CASE WHEN completed_at IS NOT NULL
            THEN strftime('%Y-%m-%d %H:%M:%f', completed_at / 1000.0, 'unixepoch') END AS completed,
       last_error,
       result
  FROM outbox;

-- The parked rows with the route that made each (NULL when the payload is
-- not JSON: a row parked because it could not be decoded).
DROP VIEW parked;
CREATE VIEW parked AS
SELECT id,
       idempotency_key,
       effect,
       CASE WHEN json_valid(payload) THEN json_extract(payload, '$.route') END AS route,
       attempts,
       strftime('%Y-%m-%d %H:%M:%S', created_at / 1000.0, 'unixepoch') AS created,
       last_error
  FROM outbox
 WHERE status = 'parked'
 ORDER BY id;

-- migrate: 11
-- cost: in place: adds a column with a default, reads no row

-- Slack's clock when an installation's code was exchanged (the Date of
-- oauth.v2.access's answer, ms; 0: unknown, an installation stored before
-- this column). An app_uninstalled or tokens_revoked whose event_time (also
-- Slack's clock) is older changes nothing: it is a retry, or a late first
-- delivery, of an uninstall that came before this installation.
ALTER TABLE ackd_installations ADD COLUMN slack_installed_at INTEGER NOT NULL DEFAULT 0;

-- migrate: 12
-- cost: in place: adds a nullable column, reads no row

-- What a stream row (an agent's answer streamed into Slack) has done so
-- far: the text received and the messages it is shown in (JSON written by
-- sweep/stream.go), saved as it goes under the row's claim token, so that
-- the attempt after a crash or a lost lease finishes the same messages
-- instead of posting the answer again. NULL for every other effect.
ALTER TABLE outbox ADD COLUMN progress TEXT;

-- migrate: 13
-- cost: a new table and a trigger, reads no row

-- Attempts are history, not a counter (`ackd outbox show ID`, the
-- console): one row per performance of an outbox row, keyed by the claim
-- that made it (a sweep's claim token: one claim, one attempt). n numbers a
-- row's attempts from 1 in the order they were recorded. outcome is done,
-- retry, parked, fenced (the claim had lost its lease: nothing of it was
-- written to the row) or unknown (the claimer said nothing before its
-- lease ran out: it died or stalled, and the effect may have happened);
-- status is the handler's HTTP status or Slack's error, result what the
-- attempt produced (a message ts, the handler's status). Times are ms.
--
-- The sweep writes a row's attempt in the transaction that completes or
-- fails it, one statement for a whole batch (store/sqlite/attempts.go); the
-- ack path never writes here. Deleted with their outbox row (ON DELETE
-- CASCADE: pruning, by any binary, since every ackd connection turns
-- foreign_keys on).
CREATE TABLE outbox_attempts (
  row_id      INTEGER NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
  claim_token TEXT    NOT NULL,
  n           INTEGER NOT NULL,
  started_at  INTEGER NOT NULL,
  ended_at    INTEGER,
  outcome     TEXT    NOT NULL
              CHECK (outcome IN ('done', 'retry', 'parked', 'fenced', 'unknown')),
  error       TEXT,
  status      TEXT,
  result      TEXT,
  PRIMARY KEY (row_id, claim_token)
) WITHOUT ROWID;

-- An attempt nobody ended: a claim takes a row from another token whose
-- lease ran out (or an operator discards such a row), so that claimer
-- neither completed nor failed it. Its attempt is recorded here, inside
-- that claim's (or discard's) own statement, while the old lease is still
-- known: it started at the old claim's time (lease end minus lease length).
-- Only such takeovers fire it; a claim of a free row, a completion and a
-- failure do not. A late Complete or Fail of that claimer turns it into
-- "fenced" (the same key).
CREATE TRIGGER outbox_attempt_unknown
AFTER UPDATE OF claim_token ON outbox
WHEN old.claim_token IS NOT NULL AND old.status = 'pending'
 AND new.claim_token IS NOT old.claim_token
 AND (new.claim_token IS NOT NULL OR new.status = 'discarded')
BEGIN
  INSERT INTO outbox_attempts (row_id, claim_token, n, started_at, outcome)
  SELECT old.id, old.claim_token, coalesce(max(a.n), 0) + 1,
         coalesce(old.claim_expires_at - old.claim_lease_ms, old.first_claimed_at, old.created_at),
         'unknown'
    FROM outbox_attempts AS a
   WHERE a.row_id = old.id
  ON CONFLICT (row_id, claim_token) DO NOTHING;
END;

-- `sqlite3 /var/lib/ackd/ackd.db 'SELECT * FROM outbox_attempts_readable WHERE row_id = 42'`
CREATE VIEW outbox_attempts_readable AS
SELECT row_id,
       n,
       strftime('%Y-%m-%d %H:%M:%f', started_at / 1000.0, 'unixepoch') AS started,
       CASE WHEN ended_at IS NOT NULL THEN (ended_at - started_at) / 1000.0 END AS seconds,
       outcome,
       status,
       error,
       result
  FROM outbox_attempts;

-- migrate: 14
-- cost: a new table, reads no row

-- Paused routes (`ackd route pause NAME`, issue 31): a claim takes no
-- pending row whose payload's route is here, in every process on this
-- database (daemons, a hand-run `ackd sweep --once`); the route's requests
-- are still recorded and acked. Resuming deletes the row: the route's rows
-- are due as they were. paused_at is the store's clock (ms), paused_by the
-- operator (user@host, or the console's remote address).
CREATE TABLE ackd_route_pauses (
  route     TEXT    PRIMARY KEY CHECK (route <> ''),
  paused_at INTEGER NOT NULL,
  paused_by TEXT    NOT NULL
);

-- migrate: 15
-- cost: in place: adds a column with a default and replaces a trigger, reads no row

-- Attempts count across crashes (issue 38). deliveries is the number of
-- the row's latest request to its handler or agent, the X-Ackd-Attempt it
-- carried: every claim that takes the row counts one more, 429 waits and
-- requeues included, so a handler never sees one number twice for a row.
-- attempts, the budget max_attempts spends, now also counts an attempt
-- whose process died: the claim that takes its expired lease counts it,
-- and once that spends the budget parks the row (last_error says why)
-- instead of performing it again, so a row that kills its process each
-- time ends. A row from before this column (0) is numbered on from its
-- attempts and its history at its next claim.
ALTER TABLE outbox ADD COLUMN deliveries INTEGER NOT NULL DEFAULT 0;

-- The dead attempt is recorded as unknown also when the claim that takes
-- its lease parks the row.
DROP TRIGGER outbox_attempt_unknown;
CREATE TRIGGER outbox_attempt_unknown
AFTER UPDATE OF claim_token ON outbox
WHEN old.claim_token IS NOT NULL AND old.status = 'pending'
 AND new.claim_token IS NOT old.claim_token
 AND (new.claim_token IS NOT NULL OR new.status IN ('discarded', 'parked'))
BEGIN
  INSERT INTO outbox_attempts (row_id, claim_token, n, started_at, outcome)
  SELECT old.id, old.claim_token, coalesce(max(a.n), 0) + 1,
         coalesce(old.claim_expires_at - old.claim_lease_ms, old.first_claimed_at, old.created_at),
         'unknown'
    FROM outbox_attempts AS a
   WHERE a.row_id = old.id
  ON CONFLICT (row_id, claim_token) DO NOTHING;
END;

-- migrate: 16
-- cost: a new table, reads no row

-- Replay numbers (issue 38): the highest N handed out for each original
-- key's replays (<key>#r<N>). Pruning never deletes a row here, so no
-- number is handed out twice on this database, even after the replay rows
-- that bore it were pruned: a handler that remembers keys longer than ackd
-- keeps rows would drop a replay under a reused key. One small row per key
-- ever replayed.
CREATE TABLE ackd_replay_numbers (
  base_key TEXT    PRIMARY KEY,
  last_n   INTEGER NOT NULL CHECK (last_n > 0)
);

-- migrate: 17
-- cost: a new table, reads no row

-- Users' stops of agents' answers (Slack's agent_session_stopped, DESIGN
-- §12 "Agent sessions"): one row per thread, the newest stop. A stream row
-- of that channel and thread whose own event is older than stop_us (the
-- stop's event_ts in microseconds, Slack's clock) ends done, "stopped by
-- the user", in whichever process holds it: its sweep reads this row (by
-- primary key) before it asks the agent and every few seconds while it
-- streams. A question asked after the stop is newer and is not cancelled.
-- Written by the sweep (the stop's own outbox row), never on the ack path.
-- recorded_at is the store's clock (ms).
CREATE TABLE ackd_stream_stops (
  channel     TEXT    NOT NULL,
  thread_ts   TEXT    NOT NULL,
  stop_ts     TEXT    NOT NULL,
  stop_us     INTEGER NOT NULL,
  event_id    TEXT    NOT NULL,
  recorded_at INTEGER NOT NULL,
  PRIMARY KEY (channel, thread_ts)
);
