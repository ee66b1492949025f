-- claim.lua: claim up to `limit` visible messages FIFO, applying policy.plan_claim (claim_messages).
--
-- KEYS[1..9]   the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- KEYS[10]     zl:{P}:queues
-- KEYS[11..19] the dead-letter queue's keys, same order (only when claims are counted: ARGV[10])
-- ARGV[1] "zl:{P}:"           ARGV[2] "zl:{P}:q:Q:"
-- ARGV[3] now                 ARGV[4] claim id        ARGV[5] limit
-- ARGV[6] claim expiry (now + ttl)                    ARGV[7] expiry floor (now + ttl + grace)
-- ARGV[8] ttl                 ARGV[9] grace
-- ARGV[10] max claim count, '' when claims are not counted (no DLQ)
-- ARGV[11] dead-letter queue name ('' for none, and when claims are not counted)
-- ARGV[12] expiry of a moved message: now + DLQ messages ttl, or '' to keep its own (and when
--          claims are not counted)
-- ARGV[13] provenance JSON head: '{"source_queue":Q,"reason":"max_claims","dead_lettered_at":now'
--          ('' when claims are not counted: nothing is moved)
-- ARGV[14] '1' to claim only if the metadata is still ARGV[15] ('' = no queue), else '0'
-- ARGV[16..19] the queue's _retry_backoff base, factor, max, jitter (absent for none)
-- ARGV[20..]   random draws: the i-th message claimed uses ARGV[19 + i] (none: 0)
-- Returns: {moved, deleted, claimed}: how many exhausted messages it moved to the DLQ and
--          deleted, and the claimed messages, FIFO, each {id, values...} as dump (_lib.lua) would
--          read it after the claim (made from the one read of its fields before); 'stale' when
--          the metadata is not ARGV[15] (nothing changed).
-- Steps: matured delayed (delay_until <= now) and lapsed claimed (claim_expires
-- <= now) messages go back to ready; then ready is popped from its head (lowest
-- marker, ZPOPMIN). Of the popped messages an expired one is left to the
-- sweep, an exhausted one (claim_count >= max) is moved to the DLQ (deleted
-- when not dlq_eligible), any other is claimed (count + 1, claim_expires,
-- expires >= floor, delay_until = claim_expires + the wait of
-- backoff.retry_wait, or 0 without a policy or when count + 1 exhausts it:
-- backoff.claimed_delay_until) until `limit` are claimed. Only group heads are
-- ever ready (see _lib.lua). A head never claimed whose group has a claimed
-- message is put back (claims/groups.py: the group is held); any other is
-- taken, then its group's next messages while each is visible (take_run), so
-- a claim fills up from one group before the next; of the heads popped at once
-- the grouped ones go in the order since when each is available. Work: O((k + promoted) log n), plus the size
-- of each grouped head's group.
-- Keys written: the queue's and the DLQ's indexes, zl:{P}:q:Q:c:<claim>,
-- zl:{P}:q:Q:cm:<claim> (and the previous claim's cm set), zl:{P}:m:<id>.
-- Also zl:{P}:due, the project's due set (_lib.lua: due_by, record_next_due).
local Q, D = queue_keys(1), nil  -- D, the dead-letter queue's keys, made once a message moves
local ns, qp, now_s, claim_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local limit, claim_expires, floor = tonumber(ARGV[5]), ARGV[6], ARGV[7]
local max_count, dlq, dlq_expires, record_head = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local now, floor_at = tonumber(now_s), tonumber(floor)
local max_at = max_count ~= '' and tonumber(max_count)  -- false when claims are not counted
if not metadata_is(Q.meta, ARGV[14], ARGV[15]) then return 'stale' end
local base = ARGV[16]
-- backoff.claimed_delay_until of the count-th claim of the slot-th message claimed, as the
-- text stored (17 digits, which keep every bit of it); made only for a queue with a
-- _retry_backoff (a function is made on each run that reaches it), so without one the
-- claim stores '0'
local delay_until = false
if base then
  -- backoff.retry_wait, step by step as Python computes it
  local function retry_wait(count, draw)
    local factor, ceiling, exponent = tonumber(ARGV[17]), tonumber(ARGV[18]), count - 1
    local wait = ceiling
    if not (factor > 1 and exponent * math.log(factor) > 700) then
      wait = math.min(ceiling, tonumber(base) * factor ^ exponent)
    end
    return wait * (1 - tonumber(ARGV[19]) * draw)
  end
  delay_until = function(count, slot)
    if max_count ~= '' and count >= tonumber(max_count) then return '0' end
    return string.format('%.17g', tonumber(claim_expires) + retry_wait(count, tonumber(ARGV[19 + slot] or '0')))
  end
end
promote(ns, Q, Q.delayed, now_s)
promote(ns, Q, Q.claimed, now_s)
-- the claimed messages' replies, ids, (claim expiry, id) and (count, id) pairs, and the
-- (expiry, id) pairs of those whose expiry the claim raised: one call per index at the end
local claimed, ids, by_expiry, by_count, raised = {}, {}, {}, {}, {}
local moved, deleted = 0, 0
local freed = false  -- a group's head left: its next message may be in delayed, due

-- Take message id (key its hash, f its message_fields, read once): an expired one is left
-- to the sweep, an exhausted one is moved to the DLQ (or deleted), any other is claimed.
local function take(id, key, f)
  local expires = f[3]
  local expires_at = expires and tonumber(expires)  -- converted once (after() would again)
  if not expires_at or expires_at <= now then return end
  local count = tonumber(f[8])
  if max_at and count >= max_at then
    if f[9] == '1' then
      D = D or queue_keys(11)
      dead_letter(ns, qp, Q, D, KEYS[10], dlq, id, dlq_expires, record_head, now, false)
      moved = moved + 1
    else
      drop_read(ns, qp, Q, id, f[6], f[14])
      deleted = deleted + 1
    end
    freed = true
    return
  end
  if expires_at < floor_at then
    expires = floor
    raised[#raised + 1] = floor
    raised[#raised + 1] = id
  end
  count = count + 1
  local held_until = delay_until and delay_until(count, #claimed + 1) or '0'
  count = tostring(count)
  redis.call('HSET', key, 'claim_id', claim_id, 'claim_expires', claim_expires, 'claim_count', count,
             'expires', expires, 'delay_until', held_until)
  if f[6] and f[6] ~= claim_id then
    redis.call('SREM', qp .. 'cm:' .. f[6], id)
  end
  ids[#ids + 1] = id
  by_expiry[#by_expiry + 1] = claim_expires
  by_expiry[#by_expiry + 1] = id
  by_count[#by_count + 1] = count
  by_count[#by_count + 1] = id
  -- the reply: what it read, with what it wrote, after the id (dump)
  f[3], f[4], f[6], f[7], f[8] = expires, held_until, claim_id, claim_expires, count
  table.insert(f, 1, id)
  claimed[#claimed + 1] = f
end

-- After a group's head, take the group's next messages in marker order while
-- each is visible (claims/groups.py: the rest wait for one that is not), up to
-- the limit; a message this claim took is passed, one it moved or deleted has
-- left the group.
local function take_run(group)
  local members, rank = qp .. 'g:' .. group, 0
  while #claimed < limit do
    local id = redis.call('ZRANGE', members, rank, rank)[1]
    if not id then return end
    local key = message_key(ns, id)
    local f = message_fields(key)
    if f[6] == claim_id and after(f[7], now) then
      rank = rank + 1
    elseif not after(f[3], now) or after(f[7], now) or after(f[4], now) then
      return
    else
      redis.call('ZREM', Q.ready, id)
      redis.call('ZREM', Q.delayed, id)
      local before = #claimed
      take(id, key, f)
      if #claimed > before then rank = rank + 1 end
    end
  end
end

-- since when a head (its message_fields f) is available: posted, due, or back from a claim
local function since(f)
  return math.max(tonumber(f[2]), tonumber(f[4] or '0'), tonumber(f[7] or '0'))
end

-- The order in which to take the heads popped (heads, ZPOPMIN's reply) whose fields are
-- read[j], as positions j: the grouped heads take the grouped places in the order since
-- when each is available (claims/groups.py in_group_order); a head without a group keeps
-- its place.
local function in_group_order(heads, read)
  local order, slots, grouped = {}, {}, {}
  for j, f in ipairs(read) do
    order[j] = j
    if f[14] and f[2] then
      slots[#slots + 1] = j
      grouped[#grouped + 1] = j
    end
  end
  table.sort(grouped, function(a, b)
    local sa, sb = since(read[a]), since(read[b])
    if sa ~= sb then return sa < sb end
    return tonumber(heads[2 * a]) < tonumber(heads[2 * b])
  end)
  for i, slot in ipairs(slots) do order[slot] = grouped[i] end
  return order
end

local skipped = false  -- heads of held groups, back to ready at the end
while #claimed < limit do
  if freed then
    promote(ns, Q, Q.delayed, now_s)
    freed = false
  end
  local heads = redis.call('ZPOPMIN', Q.ready, limit - #claimed)
  if #heads == 0 then break end
  local read, grouped = {}, 0
  for i = 1, #heads, 2 do
    local f = message_fields(ns .. 'm:' .. heads[i])
    read[#read + 1] = f
    if f[14] and f[2] then grouped = grouped + 1 end
  end
  local order = grouped > 1 and in_group_order(heads, read)
  for j = 1, #read do
    local k = order and order[j] or j
    local id, marker, f = heads[2 * k - 1], heads[2 * k], read[k]
    local group = f[14]
    if #claimed >= limit then
      redis.call('ZADD', Q.ready, marker, id)  -- a group's run filled the claim
    elseif group and tonumber(f[8] or '0') == 0 and group_is_held(qp, Q, group) then
      skipped = skipped or {}
      skipped[#skipped + 1] = marker  -- a head back from a claim makes its group available again
      skipped[#skipped + 1] = id
    else
      take(id, ns .. 'm:' .. id, f)
      if group then take_run(group) end
    end
  end
end
if skipped then redis.call('ZADD', Q.ready, unpack(skipped)) end
if #claimed > 0 then
  if #raised > 0 then redis.call('ZADD', Q.expires, unpack(raised)) end
  redis.call('ZADD', Q.claimed, unpack(by_expiry))
  redis.call('ZADD', Q.counted, unpack(by_count))
  redis.call('SADD', qp .. 'cm:' .. claim_id, unpack(ids))
  redis.call('HSET', qp .. 'c:' .. claim_id, 'ttl', ARGV[8], 'grace', ARGV[9], 'created', now_s,
             'expires', claim_expires)
  redis.call('ZADD', Q.claims, claim_expires, claim_id)
  due_by(Q.meta, claim_expires)
end
return {moved, deleted, claimed}
