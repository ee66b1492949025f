-- stats.lua: count a queue's unexpired messages by state, with its oldest and newest
-- (queue_stats). Read only.
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"    ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now
-- Returns: {claimed, delayed, total, oldest, newest}; oldest/newest are
-- {id, values...} (dump in _lib.lua) or nil when the queue has no unexpired message.
-- Counts come from ZCOUNT on the expires, claimed and delayed indexes, less the
-- expired messages the sweep has not removed yet, plus the messages whose
-- claim lapsed into a _retry_backoff wait (still in claimed until a claim or
-- pop moves them): O(log n + unswept expired + lapsed claims).
local Q = queue_keys(1)
local ns, now_s = ARGV[1], ARGV[3]
local now = tonumber(now_s)
local live = '(' .. now_s
local total = redis.call('ZCOUNT', Q.expires, live, '+inf')
local claimed = redis.call('ZCOUNT', Q.claimed, live, '+inf')
local delayed = redis.call('ZCOUNT', Q.delayed, live, '+inf')
for _, id in ipairs(redis.call('ZRANGEBYSCORE', Q.claimed, '-inf', now_s)) do
  local f = redis.call('HMGET', message_key(ns, id), 'expires', 'delay_until')
  if after(f[1], now) and after(f[2], now) then delayed = delayed + 1 end
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', Q.expires, '-inf', now_s)) do
  if after(redis.call('ZSCORE', Q.claimed, id), now) then claimed = claimed - 1 end
  if after(redis.call('ZSCORE', Q.delayed, id), now) then delayed = delayed - 1 end
end
local function first_live(command)
  local start = 0
  while true do
    local ids = redis.call(command, Q.all, start, start + 49)
    if #ids == 0 then return false end
    for _, id in ipairs(ids) do
      if after(redis.call('HGET', message_key(ns, id), 'expires'), now) then
        return dump(ns, id)
      end
    end
    start = start + 50
  end
end
if total == 0 then return {claimed, delayed, total, false, false} end
return {claimed, delayed, total, first_live('ZRANGE'), first_live('ZREVRANGE')}
