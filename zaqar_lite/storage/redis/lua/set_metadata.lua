-- set_metadata.lua: replace the metadata of an existing queue (set_queue_metadata).
--
-- KEYS[1] zl:{P}:q:Q:meta   STRING queue metadata JSON; the queue exists while this does
-- ARGV[1] metadata JSON
-- Returns: 1 if replaced, 0 if the queue does not exist (nothing changed).
-- Keys written: KEYS[1], and zl:{P}:due (the queue is due at once: _lib.lua due_by).
if redis.call('SET', KEYS[1], ARGV[1], 'XX') then
  due_by(KEYS[1], 0)  -- a new policy may make the sweep move messages it left so far
  return 1
end
return 0
