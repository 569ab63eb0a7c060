#!/usr/bin/env python3
"""Issue 40's figures (docs/benchmarks.md), against a `cuzk serve` on the
simulated backend, with the gRPC conformance suite's helpers (run with the
python that has grpcio, as scripts/test.sh does):

  CUZK_TEST_PARAMS_DIR=target/test-params target/grpc-venv/bin/python scripts/fairness-bench.py shares
  CUZK_TEST_PARAMS_DIR=target/test-params target/grpc-venv/bin/python scripts/fairness-bench.py grpc

shares: tenant alpha opens 40 HTTP bodies that stall after one byte, then
tenant beta submits five small jobs; once with parse_share_per_tenant = 1.0
(the whole budget one tenant's: the behaviour before the shares) and once
with the default.
grpc: a wrong token with a 200 MiB message (the daemon's peak memory
growth), then a WinningPoSt Prove and GetStatus timed alone and beside two
clients looping 120 MiB messages.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import grpc  # noqa: E402
import grpc_conformance as gc  # noqa: E402

MIB = 1 << 20
ALPHA, BETA = "alpha-0123456789abcdef", "beta-0123456789abcdef"
# Every daemon started, stopped however the case ends.
DAEMONS = []
SIM = 'backend = "sim"\n[sim]\nprofile = "winning-post"\ntime_scale = 0.0001\n'


def shares(work):
    for share in (1.0, None):
        config = SIM + ("" if share is None else f"[limits]\nparse_share_per_tenant = {share}\n")
        d = gc.Daemon(work, f"shares-{share}", config, f"127.0.0.1:{gc.free_port()}",
                      tokens=[f"{ALPHA}@alpha", f"{BETA}@beta"])
        DAEMONS.append(d)
        stalled = gc.stalled_bodies(d, ALPHA, 40)
        time.sleep(1.0)
        parsing = d.http("GET", "/v1/status")[1]["parsing"]
        answers, seconds = [], []
        for seed in range(5):
            body = json.dumps({"circuit": "mimc-chain", "params": {"log2_constraints": 4}, "seed": seed}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{d.http_port}/v1/jobs", data=body, method="POST",
                                             headers={"Content-Type": "application/json",
                                                      "Authorization": f"Bearer {BETA}"})
            started = time.time()
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    answers.append(response.status)
            except urllib.error.HTTPError as e:
                answers.append(e.code)
            seconds.append(round(time.time() - started, 4))
        print(json.dumps({"parse_share_per_tenant": share or "default", "alpha_admitted": parsing["requests"],
                          "beta_answers": answers, "beta_seconds": seconds}))
        for s in stalled:
            s.close()
        d.stop()


def grpc_large(work):
    pb, pbg = gc.generated_stubs(work)
    inputs_dir = os.path.join(work, "inputs")
    subprocess.run([gc.BENCH_BIN, "curio-inputs", "--out", inputs_dir], check=True, timeout=600,
                   env={**os.environ, "CUZK_TEST_PARAMS_DIR": gc.PARAMS}, stdout=subprocess.DEVNULL)
    inputs = gc.Inputs(inputs_dir)
    d = gc.Daemon(work, "large", SIM, f"127.0.0.1:{gc.free_port()}", tokens=[f"{ALPHA}@alpha:submit,read,critical"])
    DAEMONS.append(d)

    def status_field(field):
        with open(f"/proc/{d.proc.pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

    options = [("grpc.max_send_message_length", 256 * MIB), ("grpc.max_receive_message_length", 256 * MIB)]
    stub = pbg.ProvingEngineStub(grpc.insecure_channel(d.target(), options=options))
    token = (("authorization", f"Bearer {ALPHA}"),)
    stub.Prove(pb.ProveRequest(submit=inputs.winning(pb, request_id="warm")), metadata=token, timeout=60)

    before = status_field("VmRSS:")
    with open(f"/proc/{d.proc.pid}/clear_refs", "w") as f:
        f.write("5")
    started = time.time()
    try:
        stub.SubmitProof(inputs.winning(pb, request_id="bad", vanilla_proof=os.urandom(200 * MIB)),
                         metadata=(("authorization", "Bearer wrong-0123456789abc"),), timeout=120)
        outcome = "OK (not refused)"
    except grpc.RpcError as e:
        outcome = f"{e.code().name}: {e.details()[:80]}"
    print(f"a wrong token with a 200 MiB message: {outcome} in {time.time() - started:.2f} s; "
          f"peak growth {(status_field('VmHWM:') - before) / MIB:.1f} MiB")

    stop, answered = threading.Event(), [0, 0]

    def flood(i):
        payload = os.urandom(120 * MIB)
        s = pbg.ProvingEngineStub(grpc.insecure_channel(d.target(), options=options))
        while not stop.is_set():
            try:
                s.SubmitProof(inputs.winning(pb, request_id=f"flood-{i}-{answered[i]}", vanilla_proof=payload),
                              metadata=token, timeout=120)
            except grpc.RpcError:
                pass
            answered[i] += 1

    def timed(call):
        out = []
        for _ in range(10):
            started = time.time()
            call()
            out.append(time.time() - started)
            time.sleep(0.2)
        return out

    proved = [0]

    def prove():
        proved[0] += 1
        r = stub.Prove(pb.ProveRequest(submit=inputs.winning(pb, request_id=f"w-{proved[0]}")), metadata=token,
                       timeout=120)
        gc.check(r.result.status == pb.AwaitProofResponse.COMPLETED, f"a WinningPoSt: {r}", d)

    def get_status():
        stub.GetStatus(pb.GetStatusRequest(), metadata=token, timeout=120)

    alone = (timed(prove), timed(get_status))
    for i in range(2):
        threading.Thread(target=flood, args=(i,), daemon=True).start()
    while sum(answered) < 2:
        time.sleep(0.5)
    first = sum(answered)
    flooded = (timed(prove), timed(get_status))
    stop.set()

    def text(xs):
        return f"median {statistics.median(xs):.3f} s, worst {max(xs):.3f} s"

    for name, a, f in (("WinningPoSt Prove", alone[0], flooded[0]), ("GetStatus", alone[1], flooded[1])):
        print(f"{name}: alone {text(a)}; beside two 120 MiB loops {text(f)}")
    print(f"120 MiB messages answered while timed: {sum(answered) - first}")
    d.stop()


def main():
    cases = {"shares": shares, "grpc": grpc_large}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        sys.exit(f"usage: {sys.argv[0]} shares|grpc")
    gc.check(gc.PARAMS and os.path.isdir(gc.PARAMS), "CUZK_TEST_PARAMS_DIR must name the 2 KiB parameter files")
    work = tempfile.mkdtemp(prefix="cuzk-fairness-")
    try:
        cases[sys.argv[1]](work)
    finally:
        for d in DAEMONS:
            d.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
