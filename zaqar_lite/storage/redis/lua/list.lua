-- list.lua: read up to `limit` unexpired messages with marker > marker, FIFO (list_messages).
-- Read only.
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"    ARGV[2] "zl:{P}:q:Q:"    ARGV[3] marker (0 for the start)
-- ARGV[4] limit         ARGV[5] now
-- ARGV[6] '1' to include claimed messages    ARGV[7] '1' to include delayed ones
-- ARGV[8] '1' to skip messages posted by ARGV[9] (a client id), else '0'
-- Returns: the messages, each {id, values...} (dump in _lib.lua).
-- Walks zl:{P}:q:Q:all from the marker; cost O(log n + messages skipped + limit).
local Q = queue_keys(1)
local ns, limit, now = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
local with_claimed, with_delayed = ARGV[6] == '1', ARGV[7] == '1'
local skip_client, client = ARGV[8] == '1', ARGV[9]
local found = {}
local lower = '(' .. ARGV[3]
local page = math.max(limit, 50)
while #found < limit do
  local batch = redis.call('ZRANGEBYSCORE', Q.all, lower, '+inf', 'WITHSCORES', 'LIMIT', 0, page)
  for i = 1, #batch, 2 do
    local id = batch[i]
    lower = '(' .. batch[i + 1]
    local f = redis.call('HMGET', message_key(ns, id), 'expires', 'claim_id', 'claim_expires',
                         'delay_until', 'client_id')
    if after(f[1], now)
        and (with_claimed or not (f[2] and after(f[3], now)))
        and (with_delayed or not after(f[4], now) or (f[2] and after(f[3], now)))
        and not (skip_client and (f[5] or '') == client) then
      found[#found + 1] = dump(ns, id)
      if #found == limit then break end
    end
  end
  if #batch < 2 * page then break end
end
return found
