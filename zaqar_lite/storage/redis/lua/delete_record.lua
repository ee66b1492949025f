-- delete_record.lua: delete a versioned record, only at an expected version if given
-- (delete_record).
--
-- KEYS[1] zl:{P}:r:<kind>   HASH  record key -> "<version> <value JSON>"
-- KEYS[2] zl:{P}:rk:<kind>  ZSET  record keys, score 0
-- ARGV[1] record key    ARGV[2] expected version, '' for any
-- Returns: 1 when the record was deleted, else 0.
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then return 0 end
if ARGV[2] ~= '' and tonumber(string.match(stored, '^(%d+) ')) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
