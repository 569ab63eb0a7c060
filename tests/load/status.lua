-- Polls GET /v1/status, one request per connection every LOAD_POLL_MS.
local token = os.getenv("LOAD_TOKEN")
local every = tonumber(os.getenv("LOAD_POLL_MS") or "5")

wrk.path = "/v1/status"
wrk.headers["Authorization"] = "Bearer " .. token

local threads = {}

function setup(thread)
    table.insert(threads, thread)
end

function init(args)
    bad = 0
end

function delay()
    return every
end

function response(status, headers, body)
    if status ~= 200 then
        bad = bad + 1
    end
end

function done(summary, latency, requests)
    local b = 0
    for _, t in ipairs(threads) do
        b = b + t:get("bad")
    end
    io.write(string.format("STATUS requests=%d non_200=%d p50_ms=%.2f p99_ms=%.2f\n",
        summary.requests, b, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
