-- delete.lua: delete one message under policy.check_claim_rules (delete_message).
--
-- KEYS[1..9] the queue's meta, marker, ready, delayed, claimed, all, expires, counted, claims
-- ARGV[1] "zl:{P}:"     ARGV[2] "zl:{P}:q:Q:"    ARGV[3] now    ARGV[4] the queue name
-- ARGV[5] message id    ARGV[6] '1' when a claim id is given, else '0'    ARGV[7] claim id
-- Returns: 'ok' (also for an absent or expired message, left as is), or the
-- claim rule broken: 'claimed', 'invalid_claim', 'not_claimed', 'claimed_by'
-- (nothing changed).
-- Keys written: zl:{P}:m:<id> (deleted), the queue's indexes, zl:{P}:q:Q:cm:<claim>.
local Q = queue_keys(1)
local ns, qp, now_s, name, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local now = tonumber(now_s)
local f = redis.call('HMGET', message_key(ns, id), 'q', 'expires', 'claim_id', 'claim_expires', 'group')
if f[1] ~= name or not after(f[2], now) then return 'ok' end
local broken = claim_rule_violation(qp, f[3], f[4], ARGV[6], ARGV[7], now)
if broken then return broken end
drop_read(ns, qp, Q, id, f[3], f[5])
return 'ok'
