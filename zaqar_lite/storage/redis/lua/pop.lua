-- pop.lua: delete and return up to `limit` visible messages, FIFO (pop_messages).
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"    ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now    ARGV[4] limit
-- Returns: the popped messages, FIFO, each {id, field, value, ...} as stored.
-- Like claim.lua: matured delayed and lapsed claimed messages go back to
-- ready, then ready is taken from its head; an expired head only leaves ready
-- (the sweep owns it). Work: O((k + promoted) log n).
-- Keys written: the queue's indexes, zl:{P}:m:<id> (deleted), zl:{P}:q:Q:cm:<claim>.
local Q = queue_keys(1)
local ns, qp, now_s, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = tonumber(now_s)
promote(ns, Q, Q.delayed, now_s)
promote(ns, Q, Q.claimed, now_s)
local popped, ids = {}, {}
while #popped < limit do
  local heads = redis.call('ZRANGE', Q.ready, 0, limit - #popped - 1)
  if #heads == 0 then break end
  for _, id in ipairs(heads) do
    redis.call('ZREM', Q.ready, id)
    if after(redis.call('HGET', message_key(ns, id), 'expires'), now) then
      popped[#popped + 1] = dump(ns, id)
      ids[#ids + 1] = id
    end
  end
end
-- deleted once all are taken: a group's next message becomes ready only then,
-- so one pop takes at most one message of a group (claims/groups.py)
for _, id in ipairs(ids) do drop(ns, qp, Q, id) end
return popped
