-- The local MCP gateway: agents that connect through Countersign, the policy that decides which
-- of their tool calls need a person, and every gated call with its decision and outcome.

-- An agent's bearer token is shown once and never stored: only its SHA-256 digest is (the token
-- is 256 random bits, so a plain digest cannot be reversed by guessing). A removed agent is
-- revoked, not deleted, so its gated calls keep naming it; a new agent may reuse the name.
CREATE TABLE agents (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT    NOT NULL,
    token_digest  TEXT    NOT NULL UNIQUE,  -- hex SHA-256 of the token
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER
);
CREATE UNIQUE INDEX agents_active_name ON agents(name) WHERE revoked_at IS NULL;

-- One rule: for this agent (NULL: every agent), this server and tool, when every field of the
-- condition equals the call's argument (NULL: any arguments), do this. No rule means `ask`.
CREATE TABLE gateway_rules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id    INTEGER REFERENCES agents(id) ON DELETE CASCADE,
    server_id   INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    tool        TEXT    NOT NULL,
    action      TEXT    NOT NULL CHECK (action IN ('allow','ask','deny')),
    condition   TEXT,                       -- JSON object, canonical (keys sorted)
    created_at  INTEGER NOT NULL
);
CREATE UNIQUE INDEX gateway_rules_key
    ON gateway_rules(COALESCE(agent_id, 0), server_id, tool, COALESCE(condition, ''));

-- Per-server gateway settings. `allow_read_only`: tools the server marks readOnlyHint pass
-- without a rule. Annotations are the server's hints, so this is never on by default.
CREATE TABLE gateway_servers (
    server_id        INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
    allow_read_only  INTEGER NOT NULL DEFAULT 0
);

-- A tool call that policy held for a person (or denied). Written BEFORE the agent hears
-- anything; `running` is claimed (one UPDATE ... WHERE state = 'approved') before the call is
-- sent upstream, so a crash after the claim is `outcome_unknown`, never a second send.
CREATE TABLE gated_calls (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id        TEXT    NOT NULL UNIQUE,   -- the id of Countersign's own task, as the agent holds it
    agent_id       INTEGER NOT NULL REFERENCES agents(id),
    server_id      INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
    tool           TEXT    NOT NULL,
    arguments      TEXT    NOT NULL,          -- JSON object, exactly as the agent sent it
    args_digest    TEXT    NOT NULL,          -- hex SHA-256 of the canonical arguments
    mode           TEXT    NOT NULL CHECK (mode IN ('task','held')),
    state          TEXT    NOT NULL CHECK (state IN ('pending','approved','declined','expired','denied','cancelled','running','done','outcome_unknown')),
    reason         TEXT,                      -- why declined/denied, in the decider's words
    decided_by     TEXT,
    result         TEXT,                      -- JSON CallToolResult, once known
    upstream_task  INTEGER REFERENCES tasks(id) ON DELETE SET NULL,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    decided_at     INTEGER,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX gated_calls_binding ON gated_calls(agent_id, server_id, tool, args_digest, state);
CREATE INDEX gated_calls_state ON gated_calls(state);
