-- Countersign ledger, version 1. Times are Unix milliseconds (local clock) unless named *_text
-- (then: the server's ISO 8601 string, verbatim). JSON columns hold server data verbatim.
-- Ids are AUTOINCREMENT: readers follow tasks, events and outbox rows by id as cursors, so an id
-- must never come back after a deletion (e.g. removing a server and its tasks).

CREATE TABLE servers (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    name           TEXT    NOT NULL UNIQUE,
    url            TEXT    NOT NULL,
    capabilities   TEXT,                 -- JSON from server/discover
    server_info    TEXT,                 -- JSON serverInfo from server/discover
    discovered_at  INTEGER,
    poll_floor_ms  INTEGER NOT NULL DEFAULT 0,
    has_token      INTEGER NOT NULL DEFAULT 0, -- the token itself lives only in the OS keyring
    created_at     INTEGER NOT NULL
);

-- Written BEFORE tools/call is sent: a crash between the two leaves an intent whose outcome is
-- unknown, rather than a call that silently vanished.
CREATE TABLE call_intents (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    server_id   INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    tool        TEXT    NOT NULL,
    arguments   TEXT,                     -- JSON object
    state       TEXT    NOT NULL CHECK (state IN ('sending','input_required','task','completed','failed','unknown')),
    task        INTEGER REFERENCES tasks(id) ON DELETE SET NULL,
    outcome     TEXT,                     -- JSON: the result, questions or error
    owner_pid   INTEGER,                  -- the process that sends it: alive = still in flight
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE tasks (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    server_id         INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    task_id           TEXT    NOT NULL,
    tool              TEXT,               -- NULL when adopted by id
    arguments         TEXT,               -- JSON object
    origin            TEXT    NOT NULL CHECK (origin IN ('call','adopted')),
    status            TEXT    NOT NULL CHECK (status IN ('working','input_required','completed','failed','cancelled','expired','lost')),
    status_message    TEXT,
    state             TEXT    NOT NULL,   -- JSON: the latest task as tasks/get returned it
    poll_interval_ms  INTEGER,
    ttl_ms            INTEGER,
    created_text      TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    poll_error        TEXT,               -- the current error streak's first message, NULL when healthy
    UNIQUE (server_id, task_id)
);
CREATE INDEX tasks_unfinished ON tasks(id) WHERE finished_at IS NULL;
CREATE INDEX tasks_by_status ON tasks(status, updated_at);

-- Append-only timeline; the id is the cursor every reader follows.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task       INTEGER REFERENCES tasks(id) ON DELETE CASCADE,
    server_id  INTEGER REFERENCES servers(id) ON DELETE CASCADE,
    at         INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    via        TEXT,                      -- poll | push | call | user | engine
    data       TEXT    NOT NULL           -- JSON payload of the event
);
CREATE INDEX events_by_task ON events(task, id);

-- One row per input-request key, ever: the dedup that keeps a question from being shown twice.
CREATE TABLE inputs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    task          INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    key           TEXT    NOT NULL,
    request       TEXT    NOT NULL,       -- JSON {method, params}
    state         TEXT    NOT NULL CHECK (state IN ('pending','answered','delivered','superseded')),
    requested_at  INTEGER NOT NULL,
    answer        TEXT,                   -- JSON: the exact response sent
    answered_at   INTEGER,
    answered_by   TEXT,
    delivered_at  INTEGER,
    notified_at   INTEGER,
    UNIQUE (task, key)
);
CREATE INDEX inputs_pending ON inputs(state, requested_at);

-- Answers and cancels not yet acknowledged by the server; re-sent after a crash.
CREATE TABLE outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    task             INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    kind             TEXT    NOT NULL CHECK (kind IN ('update','cancel')),
    payload          TEXT,                -- JSON inputResponses for 'update'
    created_at       INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    acknowledged_at  INTEGER,
    abandoned_at     INTEGER
);
CREATE INDEX outbox_open ON outbox(id) WHERE acknowledged_at IS NULL AND abandoned_at IS NULL;

-- Every human decision.
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    actor       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    server      TEXT,
    task_id     TEXT,
    input_key   TEXT,
    detail      TEXT    NOT NULL          -- JSON: question, exact answer, waited_ms, ...
);
