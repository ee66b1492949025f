-- edit.lua: edit a delayed message under policy.editable_at (edit_delayed_message).
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"     ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now    ARGV[4] the queue name
-- ARGV[5] message id    ARGV[6] '1' when the body changes, else '0'    ARGV[7] the body (JSON)
-- ARGV[8] the new expires, '' to keep it    ARGV[9] the new delay_until, '' to keep it
--         (both computed by policy.edit_times)
-- Returns: {'no_message'} (absent, expired or in another queue), or
-- {'refused', message...} when the message is claimed or no longer delayed
-- (nothing changed; Python names the reason with policy.check_editable), or
-- {'ok', message...} with the message as edited.
-- The check and the write are one script, so an edit never lands after the
-- delay's end or a claim: editable_at holds for the state it writes over.
-- Keys written: zl:{P}:m:<id>, zl:{P}:q:Q:{expires,delayed,ready}.
-- Also zl:{P}:due, the project's due set (_lib.lua: due_by, record_next_due).
local Q = queue_keys(1)
local ns, now_s, name, id = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
local now = tonumber(now_s)
local key = message_key(ns, id)
local f = redis.call('HMGET', key, 'q', 'expires', 'claim_expires', 'delay_until', 'marker', 'group')
if f[1] ~= name or not after(f[2], now) then return {'no_message'} end
-- policy.editable_at: unexpired (above), its claim (if any) ended, its delay not over
if after(f[3], now) or not after(f[4], now) then
  local refused = dump(ns, id)
  table.insert(refused, 1, 'refused')
  return refused
end
-- its claim (if any) is over: it leaves claimed, where a lapsed claim that
-- fixed a _retry_backoff wait leaves it until a claim or pop moves it
redis.call('ZREM', Q.claimed, id)
if ARGV[9] == '' then redis.call('ZADD', Q.delayed, f[4], id) end
local values = {}
if ARGV[6] == '1' then
  values[#values + 1] = 'body'
  values[#values + 1] = ARGV[7]
end
if ARGV[8] ~= '' then
  values[#values + 1] = 'expires'
  values[#values + 1] = ARGV[8]
  redis.call('ZADD', Q.expires, ARGV[8], id)
  due_by(Q.meta, ARGV[8])
end
if ARGV[9] ~= '' then
  values[#values + 1] = 'delay_until'
  values[#values + 1] = ARGV[9]
  if tonumber(ARGV[9]) > now then
    redis.call('ZADD', Q.delayed, ARGV[9], id)
  else
    redis.call('ZREM', Q.delayed, id)
    if not is_held(id, f[6]) then redis.call('ZADD', Q.ready, f[5], id) end
  end
end
if #values > 0 then redis.call('HSET', key, unpack(values)) end
local reply = dump(ns, id)
table.insert(reply, 1, 'ok')
return reply
