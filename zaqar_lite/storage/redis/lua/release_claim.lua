-- release_claim.lua: release a claim; its messages become visible at once (release_claim).
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"    ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now    ARGV[4] claim id
-- ARGV[5] the queue name    ARGV[6] '1' to undo the claim, '' to release it
-- ARGV[7] the project: the wake-up payload ("project\nqueue") is published when messages are released
--         while a claim waits on the queue (_lib.lua: wake_waiting)
-- Returns: the number of messages released (an absent claim releases none).
-- Each message still held (claim_id matches, claim_expires > now) gets
-- claim_expires = now (its claim_id and claim_count stay) and moves from
-- claimed back to ready at its marker, or to delayed when its claim fixed a
-- _retry_backoff wait, which starts now (policy.claim_released); the claim's
-- keys are deleted. Undone (policy.claim_undone): no wait (delay_until 0),
-- and claim_count one less (its score in counted, or out of it at 0).
-- Keys written: zl:{P}:q:Q:c:<claim>, zl:{P}:q:Q:cm:<claim>, zl:{P}:q:Q:{claims,claimed,ready,counted},
-- zl:{P}:m:<id>.
-- Also zl:{P}:due, the project's due set (_lib.lua: due_by, record_next_due).
local Q = queue_keys(1)
local ns, qp, now_s, claim_id, name, undo = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6] == '1'
local now = tonumber(now_s)
local members = qp .. 'cm:' .. claim_id
local released = 0
for _, id in ipairs(redis.call('SMEMBERS', members)) do
  local key = message_key(ns, id)
  local f = redis.call('HMGET', key, 'q', 'claim_id', 'claim_expires', 'marker', 'delay_until', 'group',
                       'claim_count')
  if f[1] == name and f[2] == claim_id and after(f[3], now) then
    local delay_until = 0
    if undo then
      local count = math.max(0, (tonumber(f[7]) or 0) - 1)
      redis.call('HSET', key, 'delay_until', '0', 'claim_count', count)
      if count > 0 then redis.call('ZADD', Q.counted, count, id) else redis.call('ZREM', Q.counted, id) end
    else
      delay_until = released_delay_until(f[5], f[3], now, '')
    end
    redis.call('HSET', key, 'claim_expires', now_s)
    if delay_until ~= 0 then redis.call('HSET', key, 'delay_until', delay_until) end
    redis.call('ZREM', Q.claimed, id)
    reindex(Q, id, f[4], delay_until, now, f[6])
    released = released + 1
  end
end
redis.call('DEL', qp .. 'c:' .. claim_id, members)
redis.call('ZREM', Q.claims, claim_id)
if released > 0 then
  due_by(Q.meta, now_s)  -- its messages' claims may be used up
  wake_waiting(qp, ARGV[7], name)
end
return released
