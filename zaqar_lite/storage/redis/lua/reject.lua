-- reject.lua: release one claimed message with outcome reject (release_message; policy.rejected).
--
-- KEYS[1..9]   the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- KEYS[10]     zl:{P}:queues
-- KEYS[11..19] the dead-letter queue's keys, same order (the queue's own when it has none)
-- ARGV[1] "zl:{P}:"     ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now    ARGV[4] the queue name
-- ARGV[5] message id    ARGV[6] claim id
-- ARGV[7..9] the failure's "at", "error_type" and "error" values, each as JSON
-- ARGV[10] history limit (0 keeps all)
-- ARGV[11] dead-letter queue name ('' for none: the message is deleted)
-- ARGV[12] expiry of the moved message: now + DLQ messages ttl, or '' to keep its own
-- ARGV[13] provenance JSON head: '{"source_queue":Q,"reason":"rejected","dead_lettered_at":now'
-- ARGV[14] the project: the source queue's wake-up payload ("project\nqueue") is published on
--          success while a claim waits on it (a group's next message may be claimable; _lib.lua: wake_waiting)
-- Returns: 'moved', 'deleted', 'no_message' (absent, expired or in another queue), or
-- the claim rule broken: 'invalid_claim', 'not_claimed', 'claimed_by' (nothing changed).
-- Steps: the claim rules as release_message.lua; then the entry
-- {"at","claim_count","error_type","error","outcome":"reject"} is appended to
-- `failures` (_lib.lua: append_failure); then the message is moved into the
-- DLQ as a claim's dead-letter move (_lib.lua: dead_letter), or deleted when
-- there is no DLQ or it is not dlq_eligible. Its claim count stays.
-- Keys written: both queues' indexes, zl:{P}:m:<id>, zl:{P}:q:Q:cm:<claim>, and the
-- DLQ's meta/marker and zl:{P}:queues if it was missing.
-- Also zl:{P}:due, the project's due set (_lib.lua: due_by, record_next_due).
local Q, D = queue_keys(1), queue_keys(11)
local ns, qp, now_s, name, id, claim_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local dlq = ARGV[11]
local now = tonumber(now_s)
local key = message_key(ns, id)
local f = redis.call('HMGET', key, 'q', 'expires', 'claim_id', 'claim_expires', 'claim_count',
                     'failures', 'dlq_eligible', 'group')
if f[1] ~= name or not after(f[2], now) then return 'no_message' end
local broken = claim_rule_violation(qp, f[3], f[4], '1', claim_id, now)
if broken then return broken end
append_failure(key, f[6], ARGV[7], f[5], ARGV[8], ARGV[9], 'reject', ARGV[10])
if dlq ~= '' and f[7] ~= '0' then
  dead_letter(ns, qp, Q, D, KEYS[10], dlq, id, ARGV[12], ARGV[13], now, false)
  wake_waiting(qp, ARGV[14], name)
  return 'moved'
end
drop_read(ns, qp, Q, id, f[3], f[8])
wake_waiting(qp, ARGV[14], name)
return 'deleted'
