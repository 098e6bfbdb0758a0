-- The person's settings (do-not-disturb schedule, sound, start at login, poll floor, gateway),
-- one row per key with its value as JSON. Keys and values are checked by the console
-- (`console::settings`) before they are written; a key missing here has its default, so a new
-- setting needs no migration.
CREATE TABLE settings (
    key         TEXT    PRIMARY KEY,
    value       TEXT    NOT NULL,   -- JSON
    updated_at  INTEGER NOT NULL
);
