-- pop.lua: delete and return up to `limit` visible messages, FIFO (pop_messages).
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"    ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now    ARGV[4] limit
-- Returns: the popped messages, FIFO, each {id, values...} (dump in _lib.lua) as stored.
-- Like claim.lua: matured delayed and lapsed claimed messages go back to
-- ready, then ready is taken from its head, a grouped head with its group's
-- next visible messages (a head whose group has a claimed message is passed);
-- an expired head only leaves ready (the sweep owns it). Work: O((k + promoted) log n),
-- plus the size of each grouped head's group.
-- Keys written: the queue's indexes, zl:{P}:m:<id> (deleted), zl:{P}:q:Q:cm:<claim>.
local Q = queue_keys(1)
local ns, qp, now_s, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = tonumber(now_s)
promote(ns, Q, Q.delayed, now_s)
promote(ns, Q, Q.claimed, now_s)
local popped, ids = {}, {}

-- After a group's head (rank 0), take its next messages while each is visible
-- (claims/groups.py), up to the limit.
local function pop_run(group)
  local members, rank = qp .. 'g:' .. group, 1
  while #popped < limit do
    local id = redis.call('ZRANGE', members, rank, rank)[1]
    if not id then return end
    local f = redis.call('HMGET', message_key(ns, id), 'expires', 'claim_expires', 'delay_until')
    if not after(f[1], now) or after(f[2], now) or after(f[3], now) then return end
    redis.call('ZREM', Q.ready, id)
    redis.call('ZREM', Q.delayed, id)
    popped[#popped + 1] = dump(ns, id)
    ids[#ids + 1] = id
    rank = rank + 1
  end
end

local skipped = {}  -- heads of held groups, back to ready at the end
while #popped < limit do
  local heads = redis.call('ZPOPMIN', Q.ready, limit - #popped)
  if #heads == 0 then break end
  for i = 1, #heads, 2 do
    local id = heads[i]
    if #popped >= limit then
      redis.call('ZADD', Q.ready, heads[i + 1], id)  -- a group's run filled the pop
    else
      local f = redis.call('HMGET', message_key(ns, id), 'expires', 'group', 'claim_count')
      if f[2] and tonumber(f[3] or '0') == 0 and group_is_held(qp, Q, f[2]) then
        skipped[#skipped + 1] = heads[i + 1]
        skipped[#skipped + 1] = id
      elseif after(f[1], now) then
        popped[#popped + 1] = dump(ns, id)
        ids[#ids + 1] = id
        if f[2] then pop_run(f[2]) end
      end
    end
  end
end
if #skipped > 0 then redis.call('ZADD', Q.ready, unpack(skipped)) end
-- deleted once all are taken: a group's next message becomes ready only then
for _, id in ipairs(ids) do drop(ns, qp, Q, id) end
return popped
