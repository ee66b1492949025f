-- redrive.lua: move messages of a queue (a DLQ) into another queue, each guarded
-- by the state it was read in (move_messages; docs/api.rst, "Redrive (zaqar-lite extension)").
--
-- KEYS[1..9]   the source queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- KEYS[10]     zl:{P}:queues
-- KEYS[11..19] the target queue's keys, same order
-- ARGV[1] "zl:{P}:"    ARGV[2] "zl:{P}:q:Q:" (the source)    ARGV[3] now
-- ARGV[4] the source queue name                              ARGV[5] the target queue name
-- ARGV[6..] 8 values per message, '' where unset:
--           id; as read: claim_id, claim_expires, claim_count, expires;
--           as moved (policy, claims/redrive.py): claim_count, expires, dead_letter JSON
--           ('' removes the provenance record)
-- Returns: the ids moved, in ARGV order.
-- Steps, per message: it is moved only while it is in the source queue,
-- unexpired and unclaimed at now, with the claim_id, claim_expires,
-- claim_count and expires it was read with (times compared as numbers);
-- else it is skipped, unchanged (policy.still_movable). A moved message
-- leaves every source index and its last claim's set, gets a new marker of
-- the target (created if missing), no claim, no delay, and the new count,
-- expiry and provenance; id, body, created, client_id, dlq_eligible and
-- failures stay. Work: O(k log n).
-- Keys written: both queues' indexes, zl:{P}:m:<id>, zl:{P}:q:Q:cm:<claim>,
-- and the target's meta/marker and zl:{P}:queues if it was missing.
-- Also zl:{P}:due, the project's due set (_lib.lua: due_by, record_next_due).
local Q, T = queue_keys(1), queue_keys(11)
local ns, qp, now_s, source, target = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now = tonumber(now_s)

-- Whether a stored value (false when absent) is the value read ('' when unset), as numbers.
local function same_number(stored, read)
  if read == '' then return not stored end
  return stored ~= false and tonumber(stored) == tonumber(read)
end

local moved = {}
for base = 6, #ARGV, 8 do
  local id = ARGV[base]
  local key = message_key(ns, id)
  local f = redis.call('HMGET', key, 'q', 'claim_id', 'claim_expires', 'claim_count', 'expires')
  local claimed = f[2] ~= false and after(f[3], now)
  if f[1] == source and after(f[5], now) and not claimed
      and (f[2] or '') == ARGV[base + 1] and same_number(f[3], ARGV[base + 2])
      and same_number(f[4] or '0', ARGV[base + 3]) and same_number(f[5], ARGV[base + 4]) then
    rehome(ns, qp, Q, T, KEYS[10], target, id, f[2], ARGV[base + 6], ARGV[base + 5])
    if ARGV[base + 7] == '' then
      redis.call('HDEL', key, 'dead_letter')
    else
      redis.call('HSET', key, 'dead_letter', ARGV[base + 7])
    end
    moved[#moved + 1] = id
  end
end
return moved
