-- wrk script for tests/test_load.py: what an operator's browser and API
-- clients ask of the service while a session runs. Every dashboard page, the
-- HTMX fragments the pages poll, the API listings, and an operator adding a
-- memory now and then, in turn.
--
--   wrk ... -s load_mix.lua http://127.0.0.1:PORT -- <session id>
--
-- `done` prints one JSON line (prefixed WRK_RESULT) that the test parses,
-- because wrk prints socket errors and non-2xx/3xx counts only when non-zero.

local session = "1"
local mix = {}
local counter = 0
local thread_id = 0
local next_thread_id = 0

function setup(thread)
   next_thread_id = next_thread_id + 1
   thread:set("thread_id", next_thread_id)
end

function init(args)
   session = args[1] or session
   local htmx = { ["HX-Request"] = "true" }
   local json = { ["Content-Type"] = "application/json" }
   mix = {
      { "GET", "/" },
      { "GET", "/sessions" },
      { "GET", "/sessions", htmx },
      { "GET", "/sessions/" .. session },
      { "GET", "/sessions/" .. session .. "/live?after=1000000000", htmx },
      { "GET", "/events" },
      { "GET", "/events?level=warning", htmx },
      { "GET", "/memories" },
      { "GET", "/memories?status=active", htmx },
      { "GET", "/cooldowns" },
      { "GET", "/config" },
      { "GET", "/api/v1/health" },
      { "GET", "/api/v1/sessions" },
      { "GET", "/api/v1/sessions/" .. session },
      { "GET", "/api/v1/events?limit=100" },
      { "GET", "/api/v1/memories?limit=100" },
      { "GET", "/api/v1/memories/context" },
      { "GET", "/api/v1/cooldowns" },
      { "GET", "/api/v1/stats" },
      { "POST", "/api/v1/memories", json },
   }
end

function request()
   counter = counter + 1
   local entry = mix[(counter % #mix) + 1]
   local body = nil
   if entry[1] == "POST" then
      body = string.format(
         '{"category": "maintenance", "service": "loadtest", "observation": "Operator note %d-%d"}',
         thread_id, counter)
   end
   return wrk.format(entry[1], entry[2], entry[3], body)
end

function done(summary, latency, requests)
   io.write(string.format(
      'WRK_RESULT {"requests": %d, "duration_us": %d, "bytes": %d, "connect": %d, "read": %d, ' ..
      '"write": %d, "status": %d, "timeout": %d, "latency_p50_ms": %.1f, "latency_p99_ms": %.1f, ' ..
      '"latency_max_ms": %.1f}\n',
      summary.requests, summary.duration, summary.bytes, summary.errors.connect, summary.errors.read,
      summary.errors.write, summary.errors.status, summary.errors.timeout,
      latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
