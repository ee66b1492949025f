-- post.lua: store new messages in a queue, creating the queue if missing (post_messages).
--
-- KEYS[1..9]  the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- KEYS[10]    zl:{P}:queues
-- ARGV[1]     "zl:{P}:"        ARGV[2] "zl:{P}:q:Q:"
-- ARGV[3]     the queue name   ARGV[4] now
-- ARGV[5]     '1' to store only if the metadata is still ARGV[6] ('' = no queue), else '0'
-- ARGV[7]     the wake-up payload ("project\nqueue"), published on zl:{P}:q:Q:wake when
--             a message is stored while a claim waits on the queue (_lib.lua: wake_waiting)
-- ARGV[8..]   16 values per message, '' where unset (and then not stored):
--             id, body (JSON), created, expires, delay_until, client_id, claim_id,
--             claim_expires, claim_count, dlq_eligible ('1'/'0'), failures, dead_letter,
--             dedup_id, group, trace (JSON), and (not stored in the message)
--             dedup_until, when the queue may forget the dedup_id
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
local Q = queue_keys(1)
local ns, name, now = ARGV[1], ARGV[3], tonumber(ARGV[4])
local fields = {'id', 'body', 'created', 'expires', 'delay_until', 'client_id', 'claim_id',
                'claim_expires', 'claim_count', 'dlq_eligible', 'failures', 'dead_letter', 'dedup_id', 'group',
                'trace'}
local dedup, dedup_expires = ARGV[2] .. 'dedup', ARGV[2] .. 'dedup_expires'
if not metadata_is(Q.meta, ARGV[5], ARGV[6]) then return 'stale' end
ensure_queue(Q, name, KEYS[10])

-- The id a live entry of dedup_id names, or false after remembering it for message_id.
local function remembered(dedup_id, message_id, dedup_until)
  local lapses = redis.call('ZSCORE', dedup_expires, dedup_id)
  if lapses and tonumber(lapses) > now then return redis.call('HGET', dedup, dedup_id) end
  for _, lapsed in ipairs(redis.call('ZRANGEBYSCORE', dedup_expires, '-inf', now, 'LIMIT', 0, 8)) do
    redis.call('HDEL', dedup, lapsed)
    redis.call('ZREM', dedup_expires, lapsed)
  end
  redis.call('HSET', dedup, dedup_id, message_id)
  redis.call('ZADD', dedup_expires, dedup_until, dedup_id)
  return false
end

local answered = {}
local stored = false
for base = 8, #ARGV, #fields + 1 do
  local m = {}
  for i, field in ipairs(fields) do m[field] = ARGV[base + i - 1] end
  local key = message_key(ns, m.id)
  local first = m.dedup_id ~= '' and remembered(m.dedup_id, m.id, ARGV[base + #fields])
  answered[#answered + 1] = first or m.id
  -- a retried post (same ids) must not store a message twice
  if not first and redis.call('EXISTS', key) == 0 then
    local marker = redis.call('INCR', Q.marker)
    local values = {'q', name, 'marker', marker}
    for i = 2, #fields do
      if m[fields[i]] ~= '' then
        values[#values + 1] = fields[i]
        values[#values + 1] = m[fields[i]]
      end
    end
    redis.call('HSET', key, unpack(values))
    stored = true
    redis.call('ZADD', Q.all, marker, m.id)
    redis.call('ZADD', Q.expires, m.expires, m.id)
    due_by(Q.meta, m.expires)
    local held = false
    if m.group ~= '' then
      local members = ARGV[2] .. 'g:' .. m.group
      redis.call('ZADD', members, marker, m.id)
      redis.call('SADD', ARGV[2] .. 'groups', m.group)
      held = redis.call('ZCARD', members) > 1
    end
    if m.claim_expires ~= '' and tonumber(m.claim_expires) > now then
      redis.call('ZADD', Q.claimed, m.claim_expires, m.id)
    elseif m.delay_until ~= '' and tonumber(m.delay_until) > now then
      redis.call('ZADD', Q.delayed, m.delay_until, m.id)
    elseif not held then
      redis.call('ZADD', Q.ready, marker, m.id)
    end
    if m.claim_count ~= '' and tonumber(m.claim_count) > 0 then
      redis.call('ZADD', Q.counted, m.claim_count, m.id)
    end
  end
end
if stored then wake_waiting(ARGV[2], ARGV[7]) end
return answered
