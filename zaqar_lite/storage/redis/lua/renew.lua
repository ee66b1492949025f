-- renew.lua: renew a live claim from now (renew_claim).
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"      ARGV[2] "zl:{P}:q:Q:"     ARGV[3] now       ARGV[4] claim id
-- ARGV[5] new claim expiry (now + ttl)            ARGV[6] expiry floor (now + ttl + grace)
-- ARGV[7] ttl            ARGV[8] grace             ARGV[9] the queue name
-- ARGV[10] the claim's new created time (now: its age counts from the renewal,
-- policy.renewed_claim)
-- Returns: 1, or 0 when the claim is absent or expired (nothing changed).
-- Every message the claim still holds (claim_id matches, claim_expires > now,
-- unexpired) gets the new claim expiry and expires = max(expires, floor)
-- (policy.claimed_expiry), and a _retry_backoff wait its claim fixed moves
-- along: delay_until = new claim expiry + (delay_until - claim_expires) when
-- delay_until > claim_expires (policy.claim_renewed); ids it no longer holds
-- leave its cm set.
-- Keys written: zl:{P}:q:Q:c:<claim>, zl:{P}:q:Q:cm:<claim>, zl:{P}:q:Q:{claims,claimed,expires},
-- zl:{P}:m:<id>.
local Q = queue_keys(1)
local ns, qp, now_s, claim_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local claim_expires, floor, name = ARGV[5], ARGV[6], ARGV[9]
local now = tonumber(now_s)
local record = qp .. 'c:' .. claim_id
if not claim_is_live(qp, claim_id, now) then return 0 end
redis.call('HSET', record, 'ttl', ARGV[7], 'grace', ARGV[8], 'created', ARGV[10], 'expires', claim_expires)
redis.call('ZADD', Q.claims, claim_expires, claim_id)
local members = qp .. 'cm:' .. claim_id
for _, id in ipairs(redis.call('SMEMBERS', members)) do
  local key = message_key(ns, id)
  local f = redis.call('HMGET', key, 'q', 'claim_id', 'claim_expires', 'expires', 'delay_until')
  if f[1] == name and f[2] == claim_id and after(f[3], now) and after(f[4], now) then
    local expires = f[4]
    if tonumber(expires) < tonumber(floor) then expires = floor end
    redis.call('HSET', key, 'claim_expires', claim_expires, 'expires', expires)
    if f[5] and tonumber(f[5]) > tonumber(f[3]) then
      redis.call('HSET', key, 'delay_until', tonumber(claim_expires) + (tonumber(f[5]) - tonumber(f[3])))
    end
    redis.call('ZADD', Q.claimed, claim_expires, id)
    redis.call('ZADD', Q.expires, expires, id)
  else
    redis.call('SREM', members, id)
  end
end
return 1
