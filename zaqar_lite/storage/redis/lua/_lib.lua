-- _lib.lua: helpers shared by the operation scripts; RedisStorage prepends the
-- functions a script calls (and those they call) to it before registering it,
-- so each EVALSHA still runs one self-contained script (client.library_for).
-- Each function starts at a line "local function name(" and ends at a line
-- "end", with the comment lines right above it.
--
-- Key layout (P = percent-encoded project, Q = percent-encoded queue name;
-- "{P}" is the Redis Cluster hash tag, so a project's queues, DLQs, messages
-- and claims share one slot):
--   zl:{P}:queues          ZSET   queue names, score 0
--   zl:{P}:q:Q:meta        STRING queue metadata JSON (the queue exists while it does)
--   zl:{P}:q:Q:marker      STRING last marker assigned in Q (INCR)
--   zl:{P}:q:Q:ready       ZSET   unclaimed, undelayed messages; score marker
--   zl:{P}:q:Q:delayed     ZSET   delayed messages; score delay_until
--   zl:{P}:q:Q:claimed     ZSET   claimed messages; score claim_expires
--   zl:{P}:q:Q:all         ZSET   every message of Q; score marker
--   zl:{P}:q:Q:expires     ZSET   every message of Q; score expires
--   zl:{P}:q:Q:counted     ZSET   messages claimed at least once; score claim_count
--   zl:{P}:q:Q:claims      ZSET   claim ids; score claim expiry
--   zl:{P}:q:Q:c:<claim>   HASH   ttl, grace, created, expires of one claim
--   zl:{P}:q:Q:cm:<claim>  SET    ids of the messages that claim took
--   zl:{P}:q:Q:groups      SET    message groups of Q that have messages
--   zl:{P}:q:Q:g:<group>   ZSET   the group's messages in Q; score marker (the first is its head)
--   zl:{P}:due             ZSET   queue names, score when the sweep next has something to
--                                 do in the queue (due_by, record_next_due); idle ones absent
--   zl:{P}:m:<id>          HASH   one message: q, marker, body, created, expires,
--                                 delay_until, client_id, claim_id, claim_expires,
--                                 claim_count, dlq_eligible, failures, dead_letter,
--                                 dedup_id, group, trace (each only when set)
-- A message of Q is in all and expires, and in at most one of ready, delayed
-- and claimed (none once a script has seen it expired: the sweep owns it then).
-- A grouped message that is not its group's head (claims/groups.py) is *held*:
-- never in ready (in delayed while its delay runs; promote skips it; a claim
-- takes it after its head, claim.lua take_run); when the head leaves Q
-- (leave_groups) the next message becomes the head and goes to ready (or
-- delayed, which the next claim promotes from) unless it is claimed. A head in
-- ready never claimed whose group has a claimed message is passed by a claim
-- (claim.lua); one back from a claim makes its group available again.
--
-- Standard KEYS of every script that takes them:
--   KEYS[1..9]   the queue's meta, marker, ready, delayed, claimed, all, expires,
--                counted, claims (in that order)
--   KEYS[10]     zl:{P}:queues
--   KEYS[11..19] the dead-letter queue's keys, same order (sweep, and claim when it counts claims), or the
--                target queue's (redrive)
-- Message and claim keys are built here from the prefixes ARGV[1] = "zl:{P}:"
-- and ARGV[2] = "zl:{P}:q:Q:"; they carry the same hash tag.
--
-- Times arrive as strings written by Python (repr of a float). Scripts compare
-- them with tonumber() and store the strings they were given: Lua's own
-- number formatting (tostring, .., cjson) keeps only 14 digits.

local function queue_keys(first)
  return {meta = KEYS[first], marker = KEYS[first + 1], ready = KEYS[first + 2],
          delayed = KEYS[first + 3], claimed = KEYS[first + 4], all = KEYS[first + 5],
          expires = KEYS[first + 6], counted = KEYS[first + 7], claims = KEYS[first + 8]}
end

local function message_key(ns, id)
  return ns .. 'm:' .. id
end

-- Publish the wake-up payload "project\nqueue" (project and name: the queue's, not encoded) on
-- the queue's wake-up channel qp .. 'wake' while a long-polling claim waits on the queue: its
-- waiting set qp .. 'waiting' (written by the wake-up channel, service/waiting/channels.py)
-- holds an entry scored at or after the server's time in ms, that is, its highest score is;
-- the server's time is asked, and the payload made, only when the set has one.
local function wake_waiting(qp, project, name)
  local last = redis.call('ZRANGE', qp .. 'waiting', '-1', '-1', 'WITHSCORES')[2]
  if not last then return end
  local t = redis.call('TIME')
  if tonumber(last) >= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
    redis.call('PUBLISH', qp .. 'wake', project .. '\n' .. name)
  end
end

-- True when the stored time string t is set and later than now.
local function after(t, now)
  return t ~= false and t ~= nil and tonumber(t) > now
end

-- The fields of the message hash at key in the order of layout.REPLY_FIELDS (false for a
-- field it does not have): body, created, expires, delay_until, client_id, claim_id,
-- claim_expires, claim_count, dlq_eligible, failures, dead_letter, marker, dedup_id, group,
-- trace.
local function message_fields(key)
  return redis.call('HMGET', key, 'body', 'created', 'expires', 'delay_until', 'client_id', 'claim_id',
                    'claim_expires', 'claim_count', 'dlq_eligible', 'failures', 'dead_letter', 'marker',
                    'dedup_id', 'group', 'trace')
end

-- A message as the reply to Python: {id, then its message_fields}, read by position.
local function dump(ns, id)
  local fields = message_fields(message_key(ns, id))
  table.insert(fields, 1, id)
  return fields
end

-- Whether the queue's stored metadata (at meta_key) is the version a request was
-- planned with: check ~= '1' asks for no comparison; version '' stands for a
-- missing queue (RedisStorage._metadata_text).
local function metadata_is(meta_key, check, version)
  return check ~= '1' or (redis.call('GET', meta_key) or '') == version
end

-- The project's due set (zl:{P}:due) and the queue's name, read from the queue's
-- metadata key ("zl:{P}:q:Q:meta"; neither P nor Q holds a colon or a brace).
local function due_key_and_name(meta_key)
  local ns, name = string.match(meta_key, '^(zl:{[^}]*}:)q:([^:]*):meta$')
  return ns .. 'due', name
end

-- Make the queue whose metadata key is meta_key due for the sweep at `when` at
-- the latest (a time string, or 0 for at once): a due time is only lowered here
-- (ZADD LT adds a missing one, and changes a present one only to a lower score),
-- in the script of the write that may give the sweep something to do; the
-- sweep of the queue sets the next one (record_next_due).
local function due_by(meta_key, when)
  local due, name = due_key_and_name(meta_key)
  redis.call('ZADD', due, 'LT', when, name)
end

-- Record when the sweep next has something to do in Q: its first message
-- expiry or claim end, whichever is earlier; nothing when it has neither.
local function record_next_due(Q)
  local due, name = due_key_and_name(Q.meta)
  local expiry = redis.call('ZRANGE', Q.expires, 0, 0, 'WITHSCORES')[2]
  local claim_end = redis.call('ZRANGE', Q.claims, 0, 0, 'WITHSCORES')[2]
  local next_due = expiry
  if claim_end and (not next_due or tonumber(claim_end) < tonumber(next_due)) then next_due = claim_end end
  if next_due then
    redis.call('ZADD', due, next_due, name)
  else
    redis.call('ZREM', due, name)
  end
end

-- Create a queue (its metadata key meta) with empty metadata unless it exists.
local function ensure_queue(meta, name, index)
  if redis.call('SET', meta, '{}', 'NX') then
    redis.call('ZADD', index, 0, name)
  end
end

-- Whether a message of the queue with prefix qp (ARGV[2] when none is given) is
-- held: it has a group and is not its head.
local function is_held(id, group, qp)
  return group ~= false and group ~= nil
    and redis.call('ZRANGE', (qp or ARGV[2]) .. 'g:' .. group, 0, 0)[1] ~= id
end

-- Whether a group of queue Q (prefix qp) is held (claims/groups.py): one of its
-- messages is claimed, in Q.claimed (live claims only, once promote ran).
-- Work: O(group size) at most.
local function group_is_held(qp, Q, group)
  for _, id in ipairs(redis.call('ZRANGE', qp .. 'g:' .. group, 0, -1)) do
    if redis.call('ZSCORE', Q.claimed, id) then return true end
  end
  return false
end

-- Take messages leaving queue Q (prefix qp) out of their groups; a group whose
-- head leaves gets its next message ready (or delayed when it ever was: the
-- next claim promotes it once due), unless that one is claimed (it stays in claimed). groups[i] is the group of ids[i] (false for
-- none) when the caller has read it, so a message without one costs nothing;
-- with groups nil it is read here, after one EXISTS that ends it when Q has none.
local function leave_groups(qp, Q, ids, groups)
  if not groups and redis.call('EXISTS', qp .. 'groups') == 0 then return end
  for i, id in ipairs(ids) do
    local group
    if groups then
      group = groups[i]
    else
      group = redis.call('HGET', message_key(ARGV[1], id), 'group')
    end
    if group then
      local members = qp .. 'g:' .. group
      local was_head = redis.call('ZRANGE', members, 0, 0)[1] == id
      redis.call('ZREM', members, id)
      local next_id = redis.call('ZRANGE', members, 0, 0)[1]
      if not next_id then
        redis.call('SREM', qp .. 'groups', group)
      elseif was_head and not redis.call('ZSCORE', Q.claimed, next_id) then
        local f = redis.call('HMGET', message_key(ARGV[1], next_id), 'marker', 'delay_until')
        if f[2] and tonumber(f[2]) > 0 then
          redis.call('ZADD', Q.delayed, f[2], next_id)
        else
          redis.call('ZADD', Q.ready, f[1], next_id)
        end
      end
    end
  end
end

-- Drop message ids from every index of queue Q (and their groups: groups as
-- leave_groups takes it), and each one, ids[i], from the set of its last claim,
-- claims[i] (false for none): one call per key for the whole list (at most a
-- page of ids).
local function unindex_all(qp, Q, ids, claims, groups)
  leave_groups(qp, Q, ids, groups)
  for _, key in ipairs({Q.ready, Q.delayed, Q.claimed, Q.all, Q.expires, Q.counted}) do
    redis.call('ZREM', key, unpack(ids))
  end
  local held = {}
  for i, id in ipairs(ids) do
    if claims[i] then
      held[claims[i]] = held[claims[i]] or {}
      table.insert(held[claims[i]], id)
    end
  end
  for claim_id, members in pairs(held) do
    redis.call('SREM', qp .. 'cm:' .. claim_id, unpack(members))
  end
end

-- Drop a message id from every index of queue Q and from its last claim's set.
local function unindex(qp, Q, id, claim_id)
  unindex_all(qp, Q, {id}, {claim_id})
end

-- Delete messages of queue Q at once: ids[i], last claimed by claims[i] (false
-- for none); groups as leave_groups takes it.
local function drop_all(ns, qp, Q, ids, claims, groups)
  if #ids == 0 then return end
  unindex_all(qp, Q, ids, claims, groups)
  local keys = {}
  for i, id in ipairs(ids) do keys[i] = message_key(ns, id) end
  redis.call('DEL', unpack(keys))
end

-- Delete a message of queue Q.
local function drop(ns, qp, Q, id)
  drop_all(ns, qp, Q, {id}, {redis.call('HGET', message_key(ns, id), 'claim_id')})
end

-- Delete a message of queue Q whose fields claim_id and group the caller has
-- read (false when unset): nothing is read again.
local function drop_read(ns, qp, Q, id, claim_id, group)
  drop_all(ns, qp, Q, {id}, {claim_id}, {group})
end

-- Move a message of Q into queue T, named name: it leaves Q's indexes (and its
-- last claim's set), T is created if missing, and the message gets a new
-- marker of T, no claim, no delay, the expiry `expires` and the claim count
-- `count` (strings or numbers, stored as given), and is indexed in T's ready,
-- all, expires and, with a count above 0, counted sets; it leaves its group.
-- Its other fields (body, created, client_id, dlq_eligible, failures,
-- dead_letter, dedup_id, trace) are kept.
local function rehome(ns, qp, Q, T, index, name, id, claim_id, expires, count)
  local key = message_key(ns, id)
  unindex(qp, Q, id, claim_id)
  ensure_queue(T.meta, name, index)
  local marker = redis.call('INCR', T.marker)
  redis.call('HDEL', key, 'claim_id', 'claim_expires', 'group')
  redis.call('HSET', key, 'q', name, 'marker', marker, 'delay_until', '0', 'expires', expires,
             'claim_count', count)
  redis.call('ZADD', T.ready, marker, id)
  redis.call('ZADD', T.all, marker, id)
  redis.call('ZADD', T.expires, expires, id)
  due_by(T.meta, expires)
  if tonumber(count) > 0 then
    redis.call('ZADD', T.counted, count, id)
  end
end

-- Move a message of Q into the dead-letter queue D (policy.dead_lettered):
-- same id, body, count and failures; unclaimed, undelayed, a new DLQ marker,
-- and the provenance record, whose JSON starts with record_head
-- ('{"source_queue":..,"reason":..,"dead_lettered_at":..'). Its expiry becomes
-- dlq_expires (now + the DLQ messages ttl) when that is not ''; else a message
-- moved because it expired gets its own ttl again from now (now + (expires -
-- created), computed in that order as Python does and stored by redis.call,
-- which keeps every digit); else it keeps its expiry.
local function dead_letter(ns, qp, Q, D, index, dlq, id, dlq_expires, record_head, now, expired)
  local key = message_key(ns, id)
  local f = redis.call('HMGET', key, 'claim_id', 'claim_count', 'expires', 'created', 'group')
  local expires = f[3]
  if dlq_expires ~= '' then
    expires = dlq_expires
  elseif expired then
    expires = now + (tonumber(f[3]) - tonumber(f[4]))
  end
  local last_claim = 'null'
  if f[1] then last_claim = cjson.encode(f[1]) end
  local group = ''
  if f[5] then group = ',"group":' .. cjson.encode(f[5]) end
  local record = record_head .. ',"claim_count":' .. f[2] .. ',"last_claim_id":' .. last_claim .. group .. '}'
  rehome(ns, qp, Q, D, index, dlq, id, f[1], expires, f[2])
  redis.call('HSET', key, 'dead_letter', record)
end

-- Index message id of queue Q (of group `group`, false for none) as its delay
-- says: in delayed (score delay_until) while delay_until > now, else in ready
-- (score marker) unless it is held behind its group's head (is_held), when it
-- is in neither: leave_groups indexes it once it is the head.
local function reindex(Q, id, marker, delay_until, now, group)
  if after(delay_until, now) then
    redis.call('ZADD', Q.delayed, delay_until, id)
  elseif not is_held(id, group) then
    redis.call('ZADD', Q.ready, marker, id)
  end
end

-- Move the entries of zset `from` due at now (score <= now) into Q's ready set,
-- scored by marker, or into its delayed set when a lapsed claim left a
-- _retry_backoff wait (delay_until > now); expired and held ones are only
-- dropped from `from` (reindex).
local function promote(ns, Q, from, now_s)
  local due = redis.call('ZRANGEBYSCORE', from, '-inf', now_s)
  if #due == 0 then return end
  local now = tonumber(now_s)
  redis.call('ZREMRANGEBYSCORE', from, '-inf', now_s)
  for _, id in ipairs(due) do
    local f = redis.call('HMGET', message_key(ns, id), 'marker', 'expires', 'delay_until', 'group')
    if f[1] and tonumber(f[2]) > now then
      reindex(Q, id, f[1], f[3], now, f[4])
    end
  end
end

-- backoff.released_delay_until: the delay_until of a claimed message (stored
-- delay_until d and claim_expires c) released at now; delay is the explicit
-- delay ('' for none): a wait of delay, else the wait its claim fixed (d - c
-- when d > c), starts now; no wait is 0.
local function released_delay_until(d, c, now, delay)
  local wait = 0
  if delay ~= '' then
    wait = tonumber(delay)
  elseif d and c and tonumber(d) > tonumber(c) then
    wait = tonumber(d) - tonumber(c)
  end
  if wait == 0 then return 0 end
  return now + wait
end

-- Whether claim_id names a live claim of the queue with prefix qp.
local function claim_is_live(qp, claim_id, now)
  return after(redis.call('HGET', qp .. 'c:' .. claim_id, 'expires'), now)
end

-- policy.check_claim_rules: nil when allowed, else the rule broken
-- ('claimed', 'invalid_claim', 'not_claimed' or 'claimed_by').
local function claim_rule_violation(qp, held_by, held_until, has_claim, claim_id, now)
  local claimed = held_by ~= false and after(held_until, now)
  if has_claim ~= '1' then
    if claimed then return 'claimed' end
    return nil
  end
  if not claim_is_live(qp, claim_id, now) then return 'invalid_claim' end
  if not claimed then return 'not_claimed' end
  if held_by ~= claim_id then return 'claimed_by' end
  return nil
end

-- policy.failure_entry: append a failure entry to the message at `key`, whose
-- stored `failures` (JSON objects, one a line; false for none) the caller read,
-- and keep the last `keep` entries (0 keeps all). at, error_type and err are
-- JSON already; count is the claim count the entry records. An outcome other
-- than 'retry' adds "outcome"; "postponed", the running number of postpones,
-- is carried from the newest entry (plus one for a postpone) while above 0.
local function append_failure(key, failures, at, count, error_type, err, outcome, keep)
  local entries = {}
  if failures then
    for line in string.gmatch(failures, '[^\n]+') do entries[#entries + 1] = line end
  end
  local postponed = 0
  if #entries > 0 then postponed = tonumber(cjson.decode(entries[#entries]).postponed) or 0 end
  if outcome == 'postpone' then postponed = postponed + 1 end
  local entry = '{"at":' .. at .. ',"claim_count":' .. count .. ',"error_type":' .. error_type
                .. ',"error":' .. err
  if outcome ~= 'retry' then entry = entry .. ',"outcome":"' .. outcome .. '"' end
  if postponed > 0 then entry = entry .. ',"postponed":' .. postponed end
  entries[#entries + 1] = entry .. '}'
  local limit = tonumber(keep)
  if limit > 0 then
    while #entries > limit do table.remove(entries, 1) end
  end
  redis.call('HSET', key, 'failures', table.concat(entries, '\n'))
end
