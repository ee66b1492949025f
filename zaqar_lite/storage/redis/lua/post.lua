-- post.lua: store new messages in a queue, creating the queue if missing (post_messages).
--
-- KEYS[1..9]  the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- KEYS[10]    zl:{P}:queues
-- ARGV[1]     "zl:{P}:"        ARGV[2] "zl:{P}:q:Q:"
-- ARGV[3]     the queue name   ARGV[4] now
-- ARGV[5]     '1' to store only if the metadata is still ARGV[6] ('' = no queue), else '0'
-- ARGV[7]     the project, whose wake-up payload ("project\nqueue") is published on
--             zl:{P}:q:Q:wake when a message is stored while a claim waits on the queue
--             (_lib.lua: wake_waiting)
-- ARGV[8..]   per message: id, body (JSON), created ('' when it is now, ARGV[4]), expires,
--             delay_until, claim_count, dlq_eligible ('1'/'0'), which every message stores;
--             claim_expires, dedup_id, dedup_until (when the queue may forget the dedup_id;
--             not stored in the message) and group, '' where unset, each stored when set;
--             then n and n strings: the pairs (field, value) of its other fields set, among
--             client_id, claim_id, failures, dead_letter and trace (JSON) (the driver's _post;
--             layout.optional_pairs). One HSET stores a message; each value is sent once.
-- Returns:    for each message, the id it is acknowledged with: its own (an id already
--             stored is not stored again), or, when zl:{P}:q:Q:dedup_expires holds its
--             dedup_id with a score above now, the id zl:{P}:q:Q:dedup names (nothing
--             stored); or 'stale' when the metadata is not ARGV[6] (nothing stored).
-- Keys written: zl:{P}:q:Q:{meta,marker,ready|delayed|claimed,all,expires,counted},
--             zl:{P}:queues, zl:{P}:m:<id>; markers follow list order;
--             zl:{P}:q:Q:dedup (HASH dedup_id -> message id) and zl:{P}:q:Q:dedup_expires
--             (ZSET dedup_id, score dedup_until), a few lapsed ids dropped per new one;
--             zl:{P}:q:Q:g:<group> and zl:{P}:q:Q:groups for a grouped message, which
--             is held (not ready) unless it is the first of its group.
-- Reads zl:{P}:q:Q:waiting and publishes on zl:{P}:q:Q:wake (one round trip: the post's own).
-- Also zl:{P}:due, the project's due set (_lib.lua: due_by, record_next_due).
local ns, name = ARGV[1], ARGV[3]
local now = false  -- ARGV[4] as a number, made once a message needs it (clock)
local function clock()
  now = tonumber(ARGV[4])
  return now
end
if ARGV[5] == '1' then
  -- the metadata planned with is stored: the queue exists, unless planned without one
  if (redis.call('GET', KEYS[1]) or '') ~= ARGV[6] then return 'stale' end
  if ARGV[6] == '' then ensure_queue(KEYS[1], name, KEYS[10]) end
else
  ensure_queue(KEYS[1], name, KEYS[10])
end

-- The id a live entry of dedup_id names, or false after remembering it for message_id.
local function remembered(dedup_id, message_id, dedup_until)
  local dedup, dedup_expires = ARGV[2] .. 'dedup', ARGV[2] .. 'dedup_expires'
  local lapses = redis.call('ZSCORE', dedup_expires, dedup_id)
  if lapses and tonumber(lapses) > (now or clock()) then return redis.call('HGET', dedup, dedup_id) end
  for _, lapsed in ipairs(redis.call('ZRANGEBYSCORE', dedup_expires, '-inf', ARGV[4], 'LIMIT', 0, 8)) do
    redis.call('HDEL', dedup, lapsed)
    redis.call('ZREM', dedup_expires, lapsed)
  end
  redis.call('HSET', dedup, dedup_id, message_id)
  redis.call('ZADD', dedup_expires, dedup_until, dedup_id)
  return false
end

local answered = {}
local earliest = false  -- the earliest expiry of the messages stored: the queue is due then
local b = 8
while b <= #ARGV do
  local id, expires, delay_until, count = ARGV[b], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
  local claim_expires, dedup_id, group = ARGV[b + 7], ARGV[b + 8], ARGV[b + 10]
  local last = b + 11 + tonumber(ARGV[b + 11])  -- the last of its other fields' pairs
  local key = ns .. 'm:' .. id
  local first = dedup_id ~= '' and remembered(dedup_id, id, ARGV[b + 9])
  answered[#answered + 1] = first or id
  -- a retried post (same ids) must not store a message twice
  if not first and redis.call('EXISTS', key) == 0 then
    local marker = string.format('%d', redis.call('INCR', KEYS[2]))  -- text once, not per command
    local created = ARGV[b + 2]
    if created == '' then created = ARGV[4] end
    -- its other fields' pairs as sent; with claim_expires, dedup_id or group set, a copy of them
    -- with theirs after them (no table, no closure for a message without)
    local set, first_pair, last_pair = ARGV, b + 12, last
    if claim_expires ~= '' or dedup_id ~= '' or group ~= '' then
      set = {unpack(ARGV, b + 12, last)}
      if claim_expires ~= '' then
        set[#set + 1] = 'claim_expires'
        set[#set + 1] = claim_expires
      end
      if dedup_id ~= '' then
        set[#set + 1] = 'dedup_id'
        set[#set + 1] = dedup_id
      end
      if group ~= '' then
        set[#set + 1] = 'group'
        set[#set + 1] = group
      end
      first_pair, last_pair = 1, #set
    end
    redis.call('HSET', key, 'q', name, 'marker', marker, 'body', ARGV[b + 1], 'created', created,
               'expires', expires, 'delay_until', delay_until, 'claim_count', count,
               'dlq_eligible', ARGV[b + 6], unpack(set, first_pair, last_pair))
    redis.call('ZADD', KEYS[6], marker, id)
    redis.call('ZADD', KEYS[7], expires, id)
    if not earliest or tonumber(expires) < tonumber(earliest) then earliest = expires end
    local held = false
    if group ~= '' then
      local members = ARGV[2] .. 'g:' .. group
      redis.call('ZADD', members, marker, id)
      redis.call('SADD', ARGV[2] .. 'groups', group)
      held = redis.call('ZCARD', members) > 1
    end
    -- (a text compared first spares converting a number: '0.0' is no delay, '0' no claim)
    if claim_expires ~= '' and tonumber(claim_expires) > (now or clock()) then
      redis.call('ZADD', KEYS[5], claim_expires, id)
    elseif delay_until ~= '0.0' and tonumber(delay_until) > (now or clock()) then
      redis.call('ZADD', KEYS[4], delay_until, id)
    elseif not held then
      redis.call('ZADD', KEYS[3], marker, id)
    end
    if count ~= '0' and tonumber(count) > 0 then
      redis.call('ZADD', KEYS[8], count, id)
    end
  end
  b = last + 1
end
if earliest then
  due_by(KEYS[1], earliest)
  wake_waiting(ARGV[2], ARGV[7], name)
end
return answered
