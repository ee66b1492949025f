-- sweep.lua: apply policy.plan_sweep to one queue and drop its lapsed claims (sweep_queue).
--
-- KEYS[1..9]   the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- KEYS[10]     zl:{P}:queues
-- KEYS[11..19] the dead-letter queue's keys, same order (the queue's own when it has none)
-- ARGV[1] "zl:{P}:"    ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now
-- ARGV[4] max claim count, '' when claims are not counted
-- ARGV[5] dead-letter queue name ('' for none)
-- ARGV[6] expiry of a moved message: now + DLQ messages ttl, or '' (an expired one then
--         gets its own ttl again from now, an exhausted one keeps its expiry)
-- ARGV[7] '1' to dead-letter expired messages (_dead_letter_on_expiry), else '0'
-- ARGV[8] provenance JSON head for reason "expired", ARGV[9] for reason "max_claims"
--         ('{"source_queue":Q,"reason":R,"dead_lettered_at":now')
-- ARGV[10] at most this many expired messages per call
-- Returns: {moved, discarded, more}: more = 1 when expired messages are left
-- for another call.
-- Steps: expired messages (expires <= now; by marker) are moved to the DLQ
-- when ARGV[7] is '1', there is a DLQ and they are dlq_eligible, else deleted;
-- then unexpired, unclaimed messages with claim_count >= max (read from the
-- counted index, by marker) are moved, or deleted when not dlq_eligible;
-- finally claims with expiry <= now lose their keys.
-- Work: O((expired + exhausted + lapsed claims) log n).
-- Keys written: both queues' indexes, zl:{P}:m:<id>, zl:{P}:q:Q:c:<claim>,
-- zl:{P}:q:Q:cm:<claim>, and the DLQ's meta/marker and zl:{P}:queues if it was missing.
-- Also zl:{P}:due, the project's due set (_lib.lua: due_by, record_next_due).
local Q, D = queue_keys(1), queue_keys(11)
local ns, qp, now_s, max_count = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local dlq, dlq_expires, on_expiry = ARGV[5], ARGV[6], ARGV[7]
local now = tonumber(now_s)
local moved, discarded = 0, 0

-- ids with the fields wanted, sorted by marker; ids without a message are unindexed.
local function by_marker(ids, ...)
  local found = {}
  for _, id in ipairs(ids) do
    local f = redis.call('HMGET', message_key(ns, id), 'marker', ...)
    if f[1] then
      f.id = id
      found[#found + 1] = f
    else
      unindex(qp, Q, id, false)
    end
  end
  table.sort(found, function(a, b) return tonumber(a[1]) < tonumber(b[1]) end)
  return found
end

local function move_or_drop(id, eligible, record_head, expired)
  if eligible and dlq ~= '' then
    dead_letter(ns, qp, Q, D, KEYS[10], dlq, id, dlq_expires, record_head, now, expired)
    moved = moved + 1
  else
    drop(ns, qp, Q, id)
    discarded = discarded + 1
  end
end

local batch = tonumber(ARGV[10])
local expired = redis.call('ZRANGEBYSCORE', Q.expires, '-inf', now_s, 'LIMIT', 0, batch)
for _, f in ipairs(by_marker(expired, 'dlq_eligible')) do
  move_or_drop(f.id, on_expiry == '1' and f[2] == '1', ARGV[8], true)
end

if max_count ~= '' then
  local exhausted = {}
  for _, f in ipairs(by_marker(redis.call('ZRANGEBYSCORE', Q.counted, max_count, '+inf'),
                               'expires', 'claim_id', 'claim_expires', 'dlq_eligible')) do
    if after(f[2], now) and not (f[3] and after(f[4], now)) then
      exhausted[#exhausted + 1] = f
    end
  end
  for _, f in ipairs(exhausted) do
    move_or_drop(f.id, f[5] == '1', ARGV[9], false)
  end
end

for _, claim_id in ipairs(redis.call('ZRANGEBYSCORE', Q.claims, '-inf', now_s)) do
  redis.call('DEL', qp .. 'c:' .. claim_id, qp .. 'cm:' .. claim_id)
end
redis.call('ZREMRANGEBYSCORE', Q.claims, '-inf', now_s)
record_next_due(Q)

local more = 0
if #expired == batch then more = 1 end
return {moved, discarded, more}
