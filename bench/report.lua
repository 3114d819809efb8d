-- Prints wrk's summary as one JSON line, so the benchmark reads figures, not prose.
local body_file = os.getenv("BENCH_BODY_FILE")
local cookie = os.getenv("BENCH_COOKIE")
local hx = os.getenv("BENCH_HX")
local fresh = os.getenv("BENCH_FRESH_IDS")
-- BENCH_PATHS: comma-separated paths asked for in turn (GET), instead of the URL's own.
local paths = {}
for path in string.gmatch(os.getenv("BENCH_PATHS") or "", "[^,]+") do table.insert(paths, path) end
wrk.headers["Accept"] = "application/json"
if cookie then wrk.headers["Cookie"] = cookie end
if hx then wrk.headers["HX-Request"] = "true"; wrk.headers["Accept"] = "text/html" end
if body_file then
  local f = io.open(body_file, "r")
  wrk.body = f:read("*a")
  f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

-- BENCH_DELAY_MS: each connection waits this long after a reply before its next request, as
-- a person does between clicks (the first request of each connection goes at once).
local pause = tonumber(os.getenv("BENCH_DELAY_MS") or "")
if pause then delay = function() return pause end end

local counter = 0
local thread_tag = tostring(math.random(1, 1e9))
request = function()
  if #paths > 0 then
    counter = counter + 1
    return wrk.format(nil, paths[counter % #paths + 1])
  end
  if fresh then
    counter = counter + 1
    local body = string.gsub(wrk.body, "@ID@", thread_tag .. "-" .. counter)
    return wrk.format(nil, nil, nil, body)
  end
  return wrk.format()
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "non2xx": %d,'
    .. ' "connect": %d, "read": %d, "write": %d, "timeout": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect, e.read, e.write, e.timeout))
end
