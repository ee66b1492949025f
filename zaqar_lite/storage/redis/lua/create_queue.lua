-- create_queue.lua: create a queue with its metadata unless it exists (create_queue).
--
-- KEYS[1] zl:{P}:q:Q:meta   STRING queue metadata JSON; the queue exists while this does
-- KEYS[2] zl:{P}:queues     ZSET   the project's queue names, score 0
-- ARGV[1] metadata JSON     ARGV[2] queue name
-- Returns: 1 if the queue was created, 0 if it existed (nothing changed).
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
redis.call('ZADD', KEYS[2], 'NX', 0, ARGV[2])
return 1
