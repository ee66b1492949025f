-- wrk script for the queue loads of benchmarks/http_load.py, zaqar_compare.py and dlq_delay.py.
--
-- Usage: wrk -t C -c C -s queue_load.lua URL -- MODE QUEUE POST_RATIO CLIENT_ID PROJECT
--                                                [CLAIM_LIMIT [DELETE_MODE [RELEASE_RATIO]]]
--   MODE           post | claim | mixed
--   QUEUE          queue name under /v2/queues/
--   POST_RATIO     mixed only: the share of cycles that post instead of claim+delete
--   CLIENT_ID      the Client-ID header (a UUID)
--   PROJECT        the X-Project-ID header
--   CLAIM_LIMIT    the claims' ?limit= (default 1)
--   DELETE_MODE    each: DELETE every claimed message by its href, one request each
--                  (default); bulk: one DELETE /messages?ids=...&claim_ids=CLAIM
--   RELEASE_RATIO  the share of claims released (DELETE of the claim) instead of
--                  having their messages deleted (default 0; 1 releases every claim)
--
-- Run one connection per thread (-t equal to -c): each thread then sends a
-- request and reads its response strictly in turn, so a claim's DELETEs are the
-- next requests on the same connection and a failure is reported with the
-- exact request that caused it.
--
-- done() prints one line "BENCH_JSON {...}" with the counters summed over
-- threads and wrk's latency percentiles (milliseconds) over all requests, plus
-- the percentiles of the claim requests alone (claim_p50_ms, claim_p99_ms:
-- from building the request to reading the whole response, timed with
-- clock_gettime through LuaJIT's ffi, kept in a histogram of 0.1 ms buckets
-- below 10 ms and 2% buckets above; null where ffi is missing), and those of
-- every request timed the same way (seen_p50_ms, seen_p99_ms). wrk's own
-- percentiles are not the requests' latencies alone: before done() runs, wrk
-- "corrects" its histogram for coordinated omission (stats_correct), adding for
-- each request slower than the mean interval between a connection's requests
-- samples at that interval below it down to the interval, so that one stall
-- of 200 ms at 1 ms a request adds about 200 samples; seen_* count each request
-- once, as it took. ``leftover``
-- lists the follow-up requests (deletes, releases) still due or unanswered when
-- the run ended, as "METHOD PATH", so that the caller can send them afterwards.
-- Only numbers and strings cross from the threads to done(): wrk's copy of a
-- table between Lua states breaks on nested tables.

local threads = {}

function setup(thread)
   table.insert(threads, thread)
   thread:set("id", #threads)
end

local ok_ffi, ffi = pcall(require, "ffi")
local now_ms = nil
if ok_ffi then
   ffi.cdef[[
      typedef struct { long tv_sec; long tv_nsec; } queue_load_timespec;
      int clock_gettime(int clk_id, queue_load_timespec *tp);
   ]]
   local ts = ffi.new("queue_load_timespec")
   now_ms = function()
      ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
      return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
   end
end

local mode, queue, post_ratio, claim_limit, delete_mode, release_ratio
local base, post_req, claim_req
local last_request, claim_started
local pending = {}  -- follow-up requests (deletes, releases) not sent yet
posted, claimed, deleted, released, claims, releases, empty_claims, failures = 0, 0, 0, 0, 0, 0, 0, 0
failure = nil
leftover = ""       -- "METHOD PATH" lines: what is due, including an unanswered follow-up
hmax = -1           -- the highest claim-latency bucket used; bucket b counts in global "h" .. b
amax = -1           -- the same for every request; bucket b counts in global "a" .. b
local started = nil

local function bucket(ms)
   if ms < 10 then
      return math.floor(ms * 10)
   end
   return 100 + math.floor(math.log(ms / 10) / math.log(1.02))
end

local function bucket_ms(b)  -- the upper bound of a bucket
   if b < 100 then
      return (b + 1) / 10
   end
   return 10 * 1.02 ^ (b - 99)
end

local function note_leftover(unanswered)
   local lines = {}
   if unanswered then
      table.insert(lines, unanswered[1] .. " " .. unanswered[2])
   end
   for _, req in ipairs(pending) do
      table.insert(lines, req[1] .. " " .. req[2])
   end
   leftover = table.concat(lines, "\n")
end

function init(args)
   mode, queue, post_ratio = args[1], args[2], tonumber(args[3])
   wrk.headers["Client-ID"] = args[4]
   wrk.headers["X-Project-ID"] = args[5]
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Accept"] = "application/json"
   claim_limit = tonumber(args[6] or "1")
   delete_mode = args[7] or "each"
   release_ratio = tonumber(args[8] or "0")
   base = "/v2/queues/" .. queue
   post_req = {"POST", base .. "/messages", '{"messages": [{"body": {"event": "bench", "n": 1}}]}',
               kind = "post"}
   claim_req = {"POST", base .. "/claims?limit=" .. claim_limit, '{"ttl": 300, "grace": 60}',
                kind = "claim"}
   math.randomseed(id)  -- reproducible, yet different in every thread
end

local function next_request()
   if #pending > 0 then
      return table.remove(pending, 1)
   end
   if mode == "post" or (mode == "mixed" and math.random() < post_ratio) then
      return post_req
   end
   return claim_req
end

function request()
   last_request = next_request()
   if last_request.kind == "delete" or last_request.kind == "release" then
      note_leftover(last_request)
   end
   if now_ms then
      started = now_ms()
      if last_request.kind == "claim" then
         claim_started = started
      end
   end
   return wrk.format(last_request[1], last_request[2], nil, last_request[3])
end

local function record_failure(status, body)
   failures = failures + 1
   if failure == nil then
      failure = string.format("%s %s%s -> %d %s", last_request[1], last_request[2],
                              last_request[3] and (" " .. last_request[3]) or "",
                              status, (body or ""):sub(1, 400))
   end
end

-- Queue what follows a claim answered 201: deletes of its messages, or its release.
local function follow_claim(body)
   local hrefs, ids, claim_id = {}, {}, nil
   for href in body:gmatch('"href"%s*:%s*"([^"]+)"') do
      table.insert(hrefs, href)
      table.insert(ids, href:match("/messages/([^?/]+)"))
      claim_id = claim_id or href:match("claim_id=([%w%-]+)")
   end
   if #hrefs == 0 then
      return false
   end
   claims = claims + 1
   claimed = claimed + #hrefs
   if release_ratio > 0 and math.random() < release_ratio then
      table.insert(pending, {"DELETE", base .. "/claims/" .. claim_id, nil, kind = "release", n = #hrefs})
   elseif delete_mode == "bulk" then
      table.insert(pending, {"DELETE", base .. "/messages?ids=" .. table.concat(ids, ",") ..
                             "&claim_ids=" .. claim_id, nil, kind = "delete", n = #hrefs})
   else
      for _, href in ipairs(hrefs) do
         table.insert(pending, {"DELETE", href, nil, kind = "delete", n = 1})
      end
   end
   return true
end

function response(status, headers, body)
   local kind = last_request.kind
   if started then
      local b = bucket(now_ms() - started)
      local name = "a" .. b
      _G[name] = (_G[name] or 0) + 1
      if b > amax then amax = b end
      started = nil
   end
   if kind == "delete" or kind == "release" then
      if status ~= 204 then
         record_failure(status, body)
      elseif kind == "delete" then
         deleted = deleted + last_request.n
      else
         releases = releases + 1
         released = released + last_request.n
      end
   elseif kind == "claim" then
      if claim_started then
         local b = bucket(now_ms() - claim_started)
         local name = "h" .. b
         _G[name] = (_G[name] or 0) + 1
         if b > hmax then hmax = b end
         claim_started = nil
      end
      if status == 204 then
         empty_claims = empty_claims + 1
      elseif status ~= 201 or not follow_claim(body) then
         record_failure(status, body)
      end
   elseif status == 201 then
      posted = posted + 1
   else
      record_failure(status, body)
   end
   if kind ~= "post" then
      note_leftover(nil)
   end
end

local function json_string(s)
   return '"' .. s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

local function percentile(counts, total, p)
   if total == 0 then
      return "null"
   end
   local rank, seen = math.max(1, math.ceil(total * p / 100)), 0
   for b = 0, #counts do
      seen = seen + (counts[b] or 0)
      if seen >= rank then
         return string.format("%.3f", bucket_ms(b))
      end
   end
end

function done(summary, latency, requests)
   local e = summary.errors
   local fields = {
      string.format('"seconds": %.3f', summary.duration / 1e6),
      string.format('"requests": %d', summary.requests),
      string.format('"p50_ms": %.3f', latency:percentile(50) / 1000),
      string.format('"p99_ms": %.3f', latency:percentile(99) / 1000),
      string.format('"socket_errors": %d', e.connect + e.read + e.write + e.timeout),
   }
   for _, name in ipairs({"posted", "claimed", "deleted", "released", "claims", "releases",
                          "empty_claims", "failures"}) do
      local total = 0
      for _, thread in ipairs(threads) do total = total + thread:get(name) end
      table.insert(fields, string.format('"%s": %d', name, total))
   end
   local first_failure, counts, timed, left = nil, {[0] = 0}, 0, {}
   local seen, seen_timed = {[0] = 0}, 0
   for _, thread in ipairs(threads) do
      first_failure = first_failure or thread:get("failure")
      for b = 0, thread:get("amax") do
         local n = thread:get("a" .. b) or 0
         seen[b] = (seen[b] or 0) + n
         seen_timed = seen_timed + n
      end
      for b = 0, thread:get("hmax") do
         local n = thread:get("h" .. b) or 0
         counts[b] = (counts[b] or 0) + n
         timed = timed + n
      end
      for line in thread:get("leftover"):gmatch("[^\n]+") do table.insert(left, json_string(line)) end
   end
   for b = 0, #counts do counts[b] = counts[b] or 0 end
   table.insert(fields, '"claim_p50_ms": ' .. percentile(counts, timed, 50))
   table.insert(fields, '"claim_p99_ms": ' .. percentile(counts, timed, 99))
   for b = 0, #seen do seen[b] = seen[b] or 0 end
   table.insert(fields, '"seen_p50_ms": ' .. percentile(seen, seen_timed, 50))
   table.insert(fields, '"seen_p99_ms": ' .. percentile(seen, seen_timed, 99))
   table.insert(fields, '"leftover": [' .. table.concat(left, ", ") .. ']')
   table.insert(fields, '"failure": ' .. (first_failure and json_string(first_failure) or "null"))
   io.write("BENCH_JSON {" .. table.concat(fields, ", ") .. "}\n")
end
