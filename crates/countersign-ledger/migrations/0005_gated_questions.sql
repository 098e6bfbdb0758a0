-- An approved call whose upstream asked questions before running (MRTR: `input_required` with
-- `inputRequests` and `requestState`): nothing ran, the questions go to the person, and the
-- gateway sends the call again with the answers. `questions` is the round as the upstream sent
-- it plus how many rounds were sent (JSON); `answers` the person's `inputResponses` (JSON), set
-- once, taken (with `questions`) by the one sender of the next round. Both NULL otherwise.
ALTER TABLE gated_calls ADD COLUMN questions TEXT;
ALTER TABLE gated_calls ADD COLUMN answers TEXT;
