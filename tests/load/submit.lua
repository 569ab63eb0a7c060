-- POST /v1/jobs until this thread has had its share of 202s; then the thread
-- stops (tests/load.sh interrupts wrk, which prints, once all have). A 429
-- is honoured: the connection waits Retry-After seconds before the next
-- request, and the job is submitted again then.
local token = os.getenv("LOAD_TOKEN")
local total = tonumber(os.getenv("LOAD_JOBS") or "10000")
-- One connection per thread (wrk -t N -c N), so that no request is in
-- flight when a thread stops: exactly LOAD_JOBS jobs are accepted.
local nthreads = tonumber(os.getenv("LOAD_THREADS") or "2")
local partitions = os.getenv("LOAD_PARTITIONS") or "2"

wrk.method = "POST"
wrk.path = "/v1/jobs"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.body = '{"circuit":"mimc-chain","params":{"log2_constraints":4},"partitions":'
    .. partitions .. ',"seed":1}'

local threads = {}

function setup(thread)
    table.insert(threads, thread)
    -- The last thread takes the remainder.
    local share = math.floor(total / nthreads)
    if #threads == nthreads then
        share = total - share * (nthreads - 1)
    end
    thread:set("quota", share)
end

function init(args)
    accepted, refused, unexpected, pause = 0, 0, 0, 0
end

function delay()
    local ms = pause * 1000
    pause = 0
    return ms
end

function response(status, headers, body)
    if status == 202 then
        accepted = accepted + 1
        if accepted >= quota then
            wrk.thread:stop()
        end
    elseif status == 429 then
        refused = refused + 1
        -- actix-web sends header names in lower case.
        pause = tonumber(headers["retry-after"] or headers["Retry-After"]) or 1
    else
        unexpected = unexpected + 1
        io.stderr:write("unexpected " .. status .. ": " .. body .. "\n")
    end
end

function done(summary, latency, requests)
    local a, r, u = 0, 0, 0
    for _, t in ipairs(threads) do
        a = a + t:get("accepted")
        r = r + t:get("refused")
        u = u + t:get("unexpected")
    end
    io.write(string.format("SUBMIT accepted=%d refused_429=%d unexpected=%d p50_ms=%.2f p99_ms=%.2f\n",
        a, r, u, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
