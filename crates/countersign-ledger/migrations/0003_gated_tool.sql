-- What the upstream's tools/list said about the tool when an agent's call was recorded (title,
-- description, annotations: untrusted hints, bounded), so the person deciding sees what the tool
-- claims to do, and the record keeps what they were shown. JSON; NULL when the gateway had no
-- listing of that tool.
ALTER TABLE gated_calls ADD COLUMN tool_info TEXT;

-- A gated call's timeline: its `gated_call_changed` events, found by Countersign's task id
-- without scanning every event.
CREATE INDEX events_gated_task ON events(json_extract(data, '$.task_id'))
    WHERE kind = 'gated_call_changed';
