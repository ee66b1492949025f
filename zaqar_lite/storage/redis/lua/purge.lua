-- purge.lua: delete every message and claim of a queue, and the queue itself when asked
-- (purge_messages, delete_queue).
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- KEYS[10]   zl:{P}:queues
-- ARGV[1] "zl:{P}:"    ARGV[2] "zl:{P}:q:Q:"    ARGV[3] the queue name
-- ARGV[4] '1' to delete the queue too (metadata, marker counter, dedup ids, name in the index)
-- Returns: the number of messages deleted.
-- Keys written: zl:{P}:m:<id> and zl:{P}:q:Q:* (deleted, message groups included), zl:{P}:queues.
-- Also zl:{P}:due, the project's due set (_lib.lua: due_by, record_next_due).
local Q = queue_keys(1)
local ns, qp = ARGV[1], ARGV[2]
local function unlink_all(keys)
  for i = 1, #keys, 1000 do
    redis.call('UNLINK', unpack(keys, i, math.min(i + 999, #keys)))
  end
end
local ids = redis.call('ZRANGE', Q.all, 0, -1)
local doomed = {}
for i, id in ipairs(ids) do doomed[i] = message_key(ns, id) end
for _, claim_id in ipairs(redis.call('ZRANGE', Q.claims, 0, -1)) do
  doomed[#doomed + 1] = qp .. 'c:' .. claim_id
  doomed[#doomed + 1] = qp .. 'cm:' .. claim_id
end
for _, group in ipairs(redis.call('SMEMBERS', qp .. 'groups')) do
  doomed[#doomed + 1] = qp .. 'g:' .. group
end
unlink_all(doomed)
redis.call('DEL', qp .. 'groups')
redis.call('DEL', Q.ready, Q.delayed, Q.claimed, Q.all, Q.expires, Q.counted, Q.claims)
if ARGV[4] == '1' then
  redis.call('DEL', Q.meta, Q.marker, qp .. 'dedup', qp .. 'dedup_expires')
  redis.call('ZREM', KEYS[10], ARGV[3])
  redis.call('ZREM', ns .. 'due', ARGV[3])
end
return #ids
