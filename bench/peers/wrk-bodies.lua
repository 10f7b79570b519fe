-- wrk script for `npm run bench:peers`: request n sends line n of a file of prepared bodies,
-- so each of Mandate's Intents (own nonce, own signature) is sent once and OPA and Cerbos are
-- asked the same cases in the same order. Lines are "key id <TAB> signature <TAB> body"; the
-- first two are empty for OPA and Cerbos. Past the end of the file it starts over, which
-- Mandate refuses as replays: counted as non-2xx, so a short file shows up as failures.
--   wrk -t1 -c32 -d10s -s wrk-bodies.lua URL -- FILE
local requests = {}
local n = 0

function init(args)
  local file = assert(io.open(args[1], "r"), "cannot open " .. tostring(args[1]))
  for line in file:lines() do
    local key, signature, body = line:match("^([^\t]*)\t([^\t]*)\t(.*)$")
    assert(body, "a line without two tabs in " .. args[1])
    local headers = { ["Content-Type"] = "application/json" }
    if key ~= "" then
      headers["x-service-key-id"] = key
      headers["x-service-signature"] = signature
    end
    requests[#requests + 1] = wrk.format("POST", nil, headers, body)
  end
  file:close()
  assert(#requests > 0, "no bodies in " .. args[1])
end

function request()
  n = n % #requests + 1
  return requests[n]
end

-- One JSON line the bench parses (times in µs).
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'PEERS_WRK {"requests":%d,"duration_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"latency_us":{"p50":%d,"p99":%d,"max":%d}}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
