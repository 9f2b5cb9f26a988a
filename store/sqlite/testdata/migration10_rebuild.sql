-- SQLite migration 10 as main had it before issue 29 (commit 9fcc37f):
-- the outbox rebuilt to widen its status CHECK. Databases a main build
-- migrated carry this end state; TestDiscardedMigrationMatchesTheRebuild
-- holds today's in-place migration 10 to the same schema.

-- migrate: 10

-- What each running daemon says about itself at its heartbeat (JSON: its
-- Socket Mode connections, last hello, reconnects), for `ackd status`.
ALTER TABLE ackd_instances ADD COLUMN state TEXT;

-- A fourth status, 'discarded': an operator gave up on a parked row (`ackd
-- outbox discard`). It is never performed again, stays for the audit trail
-- with completed_at the time of the discard, and is pruned on the done rows'
-- retention. SQLite cannot alter a CHECK constraint, so the table is rebuilt
-- (https://sqlite.org/lang_altertable.html#otheralter): a new table with the
-- wider CHECK, every row copied with its id, the AUTOINCREMENT counter
-- carried over (ids are never reused), the indexes and views made again.
-- The copy below names the 18 columns the outbox has before this migration.
-- A column added by an earlier migration that the copy does not name would
-- be lost: this guard stops the migration instead (nothing is changed), and
-- the rebuild must then name that column too.
CREATE TEMP TABLE outbox_rebuild_knows_every_column (
  columns INTEGER CONSTRAINT outbox_rebuild_knows_every_column CHECK (columns = 18)
);
INSERT INTO outbox_rebuild_knows_every_column SELECT count(*) FROM pragma_table_info('outbox');
DROP TABLE outbox_rebuild_knows_every_column;
DROP VIEW outbox_readable;
DROP VIEW queue_summary;
DROP VIEW parked;
CREATE TABLE outbox_new (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  idempotency_key  TEXT    NOT NULL UNIQUE,
  effect           TEXT    NOT NULL CHECK (effect <> ''),
  payload          TEXT    NOT NULL,
  status           TEXT    NOT NULL DEFAULT 'pending'
                           CHECK (status IN ('pending', 'done', 'parked', 'discarded')),
  attempts         INTEGER NOT NULL DEFAULT 0,
  claim_token      TEXT,
  claim_expires_at INTEGER,
  next_attempt_at  INTEGER NOT NULL,
  last_error       TEXT,
  result           TEXT,
  created_at       INTEGER NOT NULL,
  completed_at     INTEGER,              -- done: the success; discarded: the discard
  request_id       TEXT,
  claim_lease_ms   INTEGER,
  outcome_unknown  INTEGER NOT NULL DEFAULT 0,
  first_claimed_at INTEGER,
  note             TEXT
);
INSERT INTO outbox_new (id, idempotency_key, effect, payload, status, attempts, claim_token,
                        claim_expires_at, next_attempt_at, last_error, result, created_at,
                        completed_at, request_id, claim_lease_ms, outcome_unknown, first_claimed_at, note)
SELECT id, idempotency_key, effect, payload, status, attempts, claim_token,
       claim_expires_at, next_attempt_at, last_error, result, created_at,
       completed_at, request_id, claim_lease_ms, outcome_unknown, first_claimed_at, note
  FROM outbox;
DELETE FROM sqlite_sequence WHERE name = 'outbox_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'outbox_new', seq FROM sqlite_sequence WHERE name = 'outbox';
DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;
CREATE INDEX outbox_done ON outbox (completed_at) WHERE status = 'done';
CREATE INDEX outbox_request_id ON outbox (request_id) WHERE request_id IS NOT NULL;
CREATE INDEX outbox_pending ON outbox (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX outbox_leased ON outbox (claim_token) WHERE claim_token IS NOT NULL AND status = 'pending';
CREATE INDEX outbox_parked ON outbox (id) WHERE status = 'parked';
-- Serves pruning (and counting) of discarded rows.
CREATE INDEX outbox_discarded ON outbox (completed_at) WHERE status = 'discarded';

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
       CASE WHEN json_valid(payload) THEN json_extract(payload, '$.route') END AS route,
       attempts,
       strftime('%Y-%m-%d %H:%M:%S', created_at / 1000.0, 'unixepoch') AS created,
       last_error
  FROM outbox
 WHERE status = 'parked'
 ORDER BY id;
