-- The generation of MCP a server speaks, found when it is checked: 'modern' (2026-07-28 and
-- later: stateless) or 'legacy' (2025-11-25 and earlier: `initialize` and a session). NULL: not
-- checked yet.
ALTER TABLE servers ADD COLUMN era TEXT CHECK (era IN ('modern', 'legacy'));
-- The protocol version in use with the server.
ALTER TABLE servers ADD COLUMN protocol_version TEXT;
-- A legacy server's session (JSON: its id, the negotiated version, the server's capabilities and
-- serverInfo). A 2025-11-25 server binds tasks to the session that created them, so the session
-- is kept across restarts and taken up again.
ALTER TABLE servers ADD COLUMN legacy_session TEXT;
