-- put_record.lua: write a versioned record by compare-and-set (put_record).
--
-- KEYS[1] zl:{P}:r:<kind>   HASH  record key -> "<version> <value JSON>"
-- KEYS[2] zl:{P}:rk:<kind>  ZSET  record keys, score 0 (ZRANGEBYLEX lists them by key)
-- ARGV[1] record key    ARGV[2] value JSON
-- ARGV[3] expected version, '' to create (the record must not exist)
-- Returns: the new version (1 on create), or 0 on a conflict (nothing changed).
local stored = redis.call('HGET', KEYS[1], ARGV[1])
local version = 0
if stored then version = tonumber(string.match(stored, '^(%d+) ')) end
if ARGV[3] == '' then
  if stored then return 0 end
elseif not stored or version ~= tonumber(ARGV[3]) then
  return 0
end
version = version + 1
redis.call('HSET', KEYS[1], ARGV[1], version .. ' ' .. ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return version
