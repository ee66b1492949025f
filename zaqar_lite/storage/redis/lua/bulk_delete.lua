-- bulk_delete.lua: delete messages by id, optionally guarded by claim ids (delete_messages).
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"    ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now    ARGV[4] the queue name
-- ARGV[5] n, the number of claim ids that follow, or -1 when none were given
-- ARGV[6 .. 5+n] claim ids; the remaining ARGV are message ids.
-- Returns: '' when every unexpired listed message of the queue was deleted, else
-- the id (highest marker) of one kept because a live claim not listed holds it.
-- Absent or expired ids are left alone.
-- Keys written: zl:{P}:m:<id> (deleted), the queue's indexes, zl:{P}:q:Q:cm:<claim>.
local Q = queue_keys(1)
local ns, qp, name = ARGV[1], ARGV[2], ARGV[4]
local now = tonumber(ARGV[3])
local n = tonumber(ARGV[5])
local allowed, first = nil, 6
if n >= 0 then
  allowed = {}
  for i = 6, 5 + n do allowed[ARGV[i]] = true end
  first = 6 + n
end
local kept, kept_marker = '', -1
local doomed, claims = {}, {}
for i = first, #ARGV do
  local id = ARGV[i]
  local f = redis.call('HMGET', message_key(ns, id), 'q', 'expires', 'claim_id', 'claim_expires',
                       'marker')
  if f[1] == name and after(f[2], now) then
    if allowed and f[3] and after(f[4], now) and not allowed[f[3]] then
      if tonumber(f[5]) > kept_marker then kept, kept_marker = id, tonumber(f[5]) end
    else
      doomed[#doomed + 1] = id
      claims[#doomed] = f[3]
    end
  end
end
drop_all(ns, qp, Q, doomed, claims)
return kept
