#!/usr/bin/env python3
"""Many concurrent gRPC calls on one HTTP/2 connection (a benchmark, not a
test: it prints figures for docs/benchmarks.md, "500 concurrent Prove
calls"). Against the daemon on the simulated backend:

1. waiting: N jobs made by SubmitProof that never finish, then N AwaitProof
   calls on them, then N Prove calls on new ones, all on one channel: the
   daemon's RSS at each step (the waiting calls' memory beyond their jobs'),
   the latency of GET /v1/status and of GetStatus with none and with N
   calls waiting, and how long the N jobs take to be cancelled once their
   callers leave (the channel closed);
2. running: N jobs that do finish, submitted at once by SubmitProof and
   watched over HTTP, then N Prove calls at once: wall time and the GPU worker's idle
   time for each.

    CUZK_TEST_PARAMS_DIR=DIR target/grpc-venv/bin/python bench/grpc_prove.py --calls 500

CUZK_BIN and CUZK_BENCH_BIN name the binaries (default target/debug/...).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import grpc_conformance as conformance  # noqa: E402  (its stubs, encodings and daemon runner)


# Calls timed one after another per latency figure.
SAMPLES = 500


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def metric(daemon, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{daemon.http_port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def latencies(call, n):
    """Milliseconds of n calls one after another: median and p99."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def idle_seconds(daemon):
    workers = daemon.http("GET", "/v1/workers")[1]["workers"]
    return sum(sum(w["idle_seconds"].values()) for w in workers), sum(w["busy_seconds"] for w in workers)


def sim_daemon(work, name, time_scale, args):
    return conformance.Daemon(work, name, f"""
backend = "sim"
[sim]
profile = "winning-post"
time_scale = {time_scale}
jitter = 0.0
[limits]
max_queued_jobs = {4 * args.calls}
""", f"127.0.0.1:{conformance.free_port()}")


def waiting(work, pb, pbg, inputs, args):
    n = args.calls
    d = sim_daemon(work, "waiting", 10000.0, args)
    try:
        channel = grpc.insecure_channel(d.target())
        stub = pbg.ProvingEngineStub(channel)
        status_http = lambda: d.http("GET", "/v1/status")  # noqa: E731
        status_grpc = lambda: stub.GetStatus(pb.GetStatusRequest(), timeout=30)  # noqa: E731
        status_grpc()
        rows = [("none waiting", rss_bytes(d.proc.pid), latencies(status_http, SAMPLES), latencies(status_grpc, SAMPLES))]
        jobs = [stub.SubmitProof(inputs.winning(pb, request_id=f"submitted-{i}"), timeout=60).job_id for i in range(n)]
        rows.append((f"{n} jobs (SubmitProof), none waiting", rss_bytes(d.proc.pid), latencies(status_http, SAMPLES),
                     latencies(status_grpc, SAMPLES)))
        awaiting = [stub.AwaitProof.future(pb.AwaitProofRequest(job_id=j), timeout=3600) for j in jobs]
        conformance.until("the AwaitProof calls waiting", lambda: metric(d, "cuzk_grpc_waiting_calls") == n, 120, d)
        rows.append((f"{n} AwaitProof waiting on them", rss_bytes(d.proc.pid), latencies(status_http, SAMPLES),
                     latencies(status_grpc, SAMPLES)))
        for call in awaiting:
            call.cancel()
        conformance.until("the AwaitProof calls gone", lambda: metric(d, "cuzk_grpc_waiting_calls") == 0, 120, d)
        cancelled = d.jobs_by_status().get("cancelled", 0)
        conformance.check(cancelled == 0, f"AwaitProof callers leaving cancelled {cancelled} SubmitProof jobs", d)
        started = time.perf_counter()
        proving = [stub.Prove.future(pb.ProveRequest(submit=inputs.winning(pb, request_id=f"prove-{i}")), timeout=3600)
                   for i in range(n)]
        conformance.until("the Prove calls waiting", lambda: metric(d, "cuzk_grpc_waiting_calls") == n, 300, d)
        submitted_s = time.perf_counter() - started
        rows.append((f"{n} Prove waiting (and {n} more jobs)", rss_bytes(d.proc.pid), latencies(status_http, SAMPLES),
                     latencies(status_grpc, SAMPLES)))
        started = time.perf_counter()
        channel.close()
        conformance.until("the Prove jobs cancelled", lambda: d.jobs_by_status().get("cancelled", 0) == n, 300, d)
        cancel_s = time.perf_counter() - started
        del proving
        print(f"\n### Waiting ({n} calls on one connection; jobs that never finish)\n")
        print("| state | daemon RSS MiB | GET /v1/status ms p50 / p99 | GetStatus ms p50 / p99 |")
        print("| --- | --- | --- | --- |")
        for what, rss, http, grpc_ in rows:
            print(f"| {what} | {rss / 2**20:.1f} | {http[0]:.2f} / {http[1]:.2f} | {grpc_[0]:.2f} / {grpc_[1]:.2f} |")
        per_await = (rows[2][1] - rows[1][1]) / n
        print(f"\n- per waiting AwaitProof call, beyond its job: {per_await / 1024:.1f} KiB")
        print(f"- per Prove call with its job: {(rows[3][1] - rows[2][1]) / n / 1024:.1f} KiB")
        print(f"- {n} Prove calls submitted and waiting after {submitted_s:.1f} s; "
              f"their {n} jobs cancelled {cancel_s:.2f} s after the connection closed")
    finally:
        d.stop()


def running(work, pb, pbg, inputs, args):
    n = args.calls
    d = sim_daemon(work, "running", args.time_scale, args)
    try:
        stub = pbg.ProvingEngineStub(grpc.insecure_channel(d.target()))
        idle0, busy0 = idle_seconds(d)
        started = time.perf_counter()
        submits = [stub.SubmitProof.future(inputs.winning(pb, request_id=f"polled-{i}"), timeout=600) for i in range(n)]
        for submit in submits:
            submit.result()
        conformance.until("the submitted jobs done", lambda: d.jobs_by_status().get("done", 0) == n, 1800, d)
        polled_s = time.perf_counter() - started
        idle1, busy1 = idle_seconds(d)
        started = time.perf_counter()
        calls = [stub.Prove.future(pb.ProveRequest(submit=inputs.winning(pb, request_id=f"proved-{i}")), timeout=1800)
                 for i in range(n)]
        answers = [c.result().result for c in calls]
        proved_s = time.perf_counter() - started
        idle2, busy2 = idle_seconds(d)
        done = sum(a.status == pb.AwaitProofResponse.COMPLETED for a in answers)
        conformance.check(done == n, f"{done} of {n} Prove calls completed", d)
        print(f"\n### Running ({n} jobs that finish; sim time_scale {args.time_scale})\n")
        print("| how | wall s | GPU worker busy s | idle s | busy fraction |")
        print("| --- | --- | --- | --- | --- |")
        for how, wall, busy, idle in [
            (f"{n} SubmitProof at once, then GET /v1/status until done", polled_s, busy1 - busy0, idle1 - idle0),
            (f"{n} Prove at once on one connection", proved_s, busy2 - busy1, idle2 - idle1),
        ]:
            print(f"| {how} | {wall:.1f} | {busy:.1f} | {idle:.1f} | {busy / max(busy + idle, 1e-9):.3f} |")
    finally:
        d.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--time-scale", type=float, default=0.02,
                        help="the running phase's sim time scale (0.02: about 25 ms per job)")
    args = parser.parse_args()
    conformance.check(conformance.PARAMS, "CUZK_TEST_PARAMS_DIR must name the 2 KiB parameter files")
    work = tempfile.mkdtemp(prefix="cuzk-grpc-bench-")
    pb, pbg = conformance.generated_stubs(work)
    inputs_dir = os.path.join(work, "inputs")
    subprocess.run([conformance.BENCH_BIN, "curio-inputs", "--out", inputs_dir], check=True, timeout=600,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    inputs = conformance.Inputs(inputs_dir)
    print(f"cuzk {subprocess.run([conformance.BIN, '--version'], capture_output=True, text=True).stdout.strip()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    waiting(work, pb, pbg, inputs, args)
    running(work, pb, pbg, inputs, args)
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
