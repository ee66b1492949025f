-- release_message.lua: release one claimed message with an optional failure (release_message).
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"     ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now    ARGV[4] the queue name
-- ARGV[5] message id    ARGV[6] claim id
-- ARGV[7] '1' when a failure is recorded, else '0'
-- ARGV[8..10] the failure's "at", "error_type" and "error" values, each as JSON
-- ARGV[11] history limit (policy.released keeps the last N entries; 0 keeps all)
-- ARGV[12] the explicit delay in seconds, '' for none (the wait the claim fixed applies)
-- ARGV[13] the project: the wake-up payload ("project\nqueue") is published on success while a claim
--          waits on the queue (_lib.lua: wake_waiting)
-- ARGV[14] the outcome: 'retry', or 'postpone' (the claim does not count: claim_count
--          one less, its score in counted or out of it at 0; an entry is always
--          recorded; the delay is ARGV[12], never the claim's wait)
-- Returns: 'ok', 'no_message' (absent, expired or in another queue), or the
-- claim rule broken: 'invalid_claim', 'not_claimed', 'claimed_by' (nothing changed).
-- On success claim_expires = now, delay_until as policy.released says, and
-- the message moves from claimed to ready at its marker (to delayed while
-- delay_until > now) and leaves the claim's cm set; the failure entry
-- {"at","claim_count","error_type","error"} (with "outcome" and "postponed" as
-- policy.failure_entry says) is appended to `failures` (JSON objects, one a
-- line) and the oldest lines beyond the limit dropped (_lib.lua: append_failure).
-- Keys written: zl:{P}:m:<id>, zl:{P}:q:Q:{claimed,ready,delayed,counted}, zl:{P}:q:Q:cm:<claim>.
-- Also zl:{P}:due, the project's due set (_lib.lua: due_by, record_next_due).
local Q = queue_keys(1)
local ns, qp, now_s, name, id, claim_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local now = tonumber(now_s)
local key = message_key(ns, id)
local f = redis.call('HMGET', key, 'q', 'expires', 'claim_id', 'claim_expires', 'claim_count',
                     'failures', 'marker', 'delay_until', 'group')
if f[1] ~= name or not after(f[2], now) then return 'no_message' end
local broken = claim_rule_violation(qp, f[3], f[4], '1', claim_id, now)
if broken then return broken end
local outcome, count = ARGV[14], f[5]
if outcome == 'postpone' then
  count = math.max(0, (tonumber(f[5]) or 0) - 1)
  if count > 0 then redis.call('ZADD', Q.counted, count, id) else redis.call('ZREM', Q.counted, id) end
  redis.call('HSET', key, 'claim_count', count)
end
local delay_until = released_delay_until(f[8], f[4], now, ARGV[12])
redis.call('HSET', key, 'claim_expires', now_s, 'delay_until', delay_until)
due_by(Q.meta, now_s)  -- a released message whose claims are used up is the sweep's now
if ARGV[7] == '1' or outcome ~= 'retry' then
  append_failure(key, f[6], ARGV[8], count, ARGV[9], ARGV[10], outcome, ARGV[11])
end
redis.call('ZREM', Q.claimed, id)
reindex(Q, id, f[7], delay_until, now, f[9])
redis.call('SREM', qp .. 'cm:' .. claim_id, id)
wake_waiting(qp, ARGV[13], name)
return 'ok'
