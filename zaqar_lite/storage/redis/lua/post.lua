-- post.lua: store new messages in a queue, creating the queue if missing (post_messages).
--
-- KEYS[1..9]  the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- KEYS[10]    zl:{P}:queues
-- ARGV[1]     "zl:{P}:"        ARGV[2] "zl:{P}:q:Q:"
-- ARGV[3]     the queue name   ARGV[4] now
-- ARGV[5]     '1' to store only if the metadata is still ARGV[6] ('' = no queue), else '0'
-- ARGV[7..]   13 values per message, '' where unset (and then not stored):
--             id, body (JSON), created, expires, delay_until, client_id, claim_id,
--             claim_expires, claim_count, dlq_eligible ('1'/'0'), failures, dead_letter,
--             trace (JSON)
-- Returns:    the number of messages stored (an id already stored is skipped), or
--             'stale' when the metadata is not ARGV[6] (nothing stored).
-- Keys written: zl:{P}:q:Q:{meta,marker,ready|delayed|claimed,all,expires,counted},
--             zl:{P}:queues, zl:{P}:m:<id>; markers follow list order.
local Q = queue_keys(1)
local ns, name, now = ARGV[1], ARGV[3], tonumber(ARGV[4])
local fields = {'id', 'body', 'created', 'expires', 'delay_until', 'client_id', 'claim_id',
                'claim_expires', 'claim_count', 'dlq_eligible', 'failures', 'dead_letter', 'trace'}
if not metadata_is(Q.meta, ARGV[5], ARGV[6]) then return 'stale' end
ensure_queue(Q, name, KEYS[10])
local stored = 0
for base = 7, #ARGV, #fields do
  local m = {}
  for i, field in ipairs(fields) do m[field] = ARGV[base + i - 1] end
  local key = message_key(ns, m.id)
  -- a retried post (same ids) must not store a message twice
  if redis.call('EXISTS', key) == 0 then
    local marker = redis.call('INCR', Q.marker)
    local values = {'q', name, 'marker', marker}
    for i = 2, #fields do
      if m[fields[i]] ~= '' then
        values[#values + 1] = fields[i]
        values[#values + 1] = m[fields[i]]
      end
    end
    redis.call('HSET', key, unpack(values))
    redis.call('ZADD', Q.all, marker, m.id)
    redis.call('ZADD', Q.expires, m.expires, m.id)
    if m.claim_expires ~= '' and tonumber(m.claim_expires) > now then
      redis.call('ZADD', Q.claimed, m.claim_expires, m.id)
    elseif m.delay_until ~= '' and tonumber(m.delay_until) > now then
      redis.call('ZADD', Q.delayed, m.delay_until, m.id)
    else
      redis.call('ZADD', Q.ready, marker, m.id)
    end
    if m.claim_count ~= '' and tonumber(m.claim_count) > 0 then
      redis.call('ZADD', Q.counted, m.claim_count, m.id)
    end
    stored = stored + 1
  end
end
return stored
