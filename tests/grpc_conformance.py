#!/usr/bin/env python3
"""Conformance of cuzk's gRPC service (cuzk.v1.ProvingEngine) with Curio's
client, from a client that shares no code with the daemon: Google's C-core
gRPC stack (grpcio), its stubs generated here from the repository's
proto/cuzk/v1/proving.proto with grpcio-tools, and Curio's encodings written
out below (the C1 envelope, base64, Go-numbered proof types, the prover id
from the miner id, raw commitments). The inputs are the 2 KiB sectors of
cuzk-filecoin's fixtures (`cuzk-bench curio-inputs`; the PoRep's C1 is
generated without sealing, so that its proof here is the one showing a
generated C1 proves: the HTTP tests prove a sealed sector's), and every
proof the daemon returns is judged by filecoin-proofs-api's verifiers
(`cuzk verify --kind`).

    target/grpc-venv/bin/python tests/grpc_conformance.py

(scripts/install-test-deps.sh makes the venv.) Environment: CUZK_BIN
(default target/debug/cuzk), CUZK_BENCH_BIN (target/debug/cuzk-bench),
CUZK_TEST_PARAMS_DIR (the 2 KiB parameter files; required).

Six daemons: A proves for real on the CPU engine, on a unix socket
(Curio's deployment); B is the simulated backend, slow on purpose, on a
loopback TCP port with tokens (waiting, cancelling, disconnects, deadlines,
limits, tenants); C refuses every submission (its disk is "full"); D's
parse budget is too small for any real request; E, with the default
limits, takes a burst of 500 calls at once; F, with the default shares,
has one tenant at its share of the parse budget and of the queue while
another's WinningPoSt completes. Every wait is bounded.
"""

import base64
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc
from grpc_tools import protoc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CUZK_BIN", os.path.join(ROOT, "target/debug/cuzk"))
BENCH_BIN = os.environ.get("CUZK_BENCH_BIN", os.path.join(ROOT, "target/debug/cuzk-bench"))
PARAMS = os.environ.get("CUZK_TEST_PARAMS_DIR")
# A 2 KiB PoRep takes minutes on two debug-build cores.
PROOF_TIMEOUT = 900


def fail(message, *daemons):
    for d in daemons:
        d.dump_log()
    print(f"grpc_conformance: FAILED: {message}", flush=True)
    sys.exit(1)


def check(condition, message, *daemons):
    if not condition:
        fail(message, *daemons)


STARTED = time.time()


def step(name):
    print(f"== {time.time() - STARTED:6.1f} s  {name}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the stubs, from the repository's .proto -------------------------------

def generated_stubs(work):
    out = os.path.join(work, "stubs")
    os.makedirs(out)
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    code = protoc.main([
        "grpc_tools.protoc", f"-I{os.path.join(ROOT, 'proto')}", f"-I{include}",
        f"--python_out={out}", f"--grpc_python_out={out}",
        os.path.join(ROOT, "proto/cuzk/v1/proving.proto"),
    ])
    if code != 0:
        fail("grpc_tools.protoc could not compile proto/cuzk/v1/proving.proto")
    sys.path.insert(0, out)
    from cuzk.v1 import proving_pb2, proving_pb2_grpc  # noqa: E402
    return proving_pb2, proving_pb2_grpc


# ---- Curio's encodings, written from its Go code's behaviour ---------------

SIZES = ["2KiB", "8MiB", "512MiB", "32GiB", "64GiB"]


def go_seal_number(name):
    """RegisteredSealProof in filecoin-ffi's Go numbering: five sizes per
    version, V1, V1_1, V1_1_Feat_SyntheticPoRep, V1_2_Feat_NonInteractivePoRep."""
    m = re.fullmatch(r"StackedDrg(\w+?iB)(V1|V1_1|V1_1_Feat_SyntheticPoRep|V1_2_Feat_NonInteractivePoRep)", name)
    versions = ["V1", "V1_1", "V1_1_Feat_SyntheticPoRep", "V1_2_Feat_NonInteractivePoRep"]
    return versions.index(m.group(2)) * 5 + SIZES.index(m.group(1))


def go_post_number(name):
    """RegisteredPoStProof in Go's numbering: Winning V1 0-4, Window V1
    5-9, Window V1_1 10-14, which filecoin-proofs-api calls V1_2."""
    m = re.fullmatch(r"StackedDrg(Winning|Window)(\w+?iB)(V1|V1_2)", name)
    base = {("Winning", "V1"): 0, ("Window", "V1"): 5, ("Window", "V1_2"): 10}[(m.group(1), m.group(3))]
    return base + SIZES.index(m.group(2))


def go_update_number(name):
    m = re.fullmatch(r"StackedDrg(\w+?iB)V1", name)
    return SIZES.index(m.group(1))


def prover_id(miner_id):
    """Go's toProverID: the ID address payload (LEB128), left in 32 bytes."""
    out = bytearray()
    while True:
        byte = miner_id & 0x7F
        miner_id >>= 7
        if miner_id:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            break
    return bytes(out) + bytes(32 - len(out))


def c1_envelope(c1_json, sector, sector_size=2048):
    """Curio's PoRep vanilla_proof: Go's json.Marshal of {SectorNum,
    Phase1Out []byte, SectorSize}: compact, []byte as padded base64."""
    return json.dumps({"SectorNum": sector, "Phase1Out": base64.b64encode(c1_json).decode(),
                       "SectorSize": sector_size}, separators=(",", ":")).encode()


class Inputs:
    """The fixtures' files, read."""

    def __init__(self, directory):
        self.dir = directory
        with open(os.path.join(directory, "manifest.json")) as f:
            self.m = json.load(f)
        self.miner = self.m["miner_id"]
        check(prover_id(self.miner).hex() == self.m["prover_id"],
              "the fixtures' prover id is not Curio's derivation of their miner id")

    def read(self, name):
        with open(os.path.join(self.dir, name), "rb") as f:
            return f.read()

    def porep(self, pb, request_id, **over):
        p = self.m["porep"]
        fields = dict(request_id=request_id, proof_kind=pb.POREP_SEAL_COMMIT, sector_size=2048,
                      registered_proof=go_seal_number(p["registered_proof"]), priority=pb.NORMAL,
                      vanilla_proof=c1_envelope(self.read(p["c1"]), p["sector_id"]),
                      sector_number=p["sector_id"], miner_id=self.miner)
        fields.update(over)
        return pb.SubmitProofRequest(**fields)

    def winning(self, pb, **over):
        w = self.m["winning"]
        randomness = bytes.fromhex(w["randomness"])
        fields = dict(request_id=f"winpost-{self.miner}-{randomness[:8].hex()}", proof_kind=pb.WINNING_POST,
                      sector_size=2048, registered_proof=go_post_number(w["registered_proof"]),
                      priority=pb.CRITICAL, vanilla_proofs=[self.read(v) for v in w["vanilla_proofs"]],
                      miner_id=self.miner, randomness=randomness)
        fields.update(over)
        return pb.SubmitProofRequest(**fields)

    def window(self, pb, partition):
        w = self.m["window"]
        p = w["partitions"][partition]
        randomness = bytes.fromhex(w["randomness"])
        # Go's %d of a []byte: "[12 34 ...]", spaces and brackets included.
        seed_text = "[" + " ".join(str(b) for b in randomness[:8]) + "]"
        return pb.SubmitProofRequest(
            request_id=f"wdpost-{self.miner}-{partition}-{seed_text}", proof_kind=pb.WINDOW_POST_PARTITION,
            sector_size=2048, registered_proof=go_post_number(w["registered_proof"]), priority=pb.HIGH,
            vanilla_proofs=[self.read(v) for v in p["vanilla_proofs"]], miner_id=self.miner,
            randomness=randomness, partition_index=p["index"])

    def snap(self, pb, **over):
        s = self.m["snap"]
        fields = dict(request_id=f"snap-{self.miner}-1", proof_kind=pb.SNAP_DEALS_UPDATE, sector_size=2048,
                      registered_proof=go_update_number(s["registered_proof"]), priority=pb.NORMAL,
                      vanilla_proofs=[self.read(v) for v in s["vanilla_proofs"]], sector_number=1,
                      miner_id=self.miner, comm_r_old=bytes.fromhex(s["comm_r_old"]),
                      comm_r_new=bytes.fromhex(s["comm_r_new"]), comm_d_new=bytes.fromhex(s["comm_d_new"]))
        fields.update(over)
        return pb.SubmitProofRequest(**fields)


# ---- the daemons ------------------------------------------------------------

class Daemon:
    """A `cuzk serve` process with its HTTP port and gRPC target."""

    def __init__(self, work, name, config, grpc_listen, tokens=None, args=(), expect_exit=False):
        self.name = name
        self.work = work
        self.http_port = free_port()
        self.config_path = os.path.join(work, f"{name}.toml")
        with open(self.config_path, "w") as f:
            f.write(config)
        self.log_path = os.path.join(work, f"{name}.log")
        self.grpc_listen = grpc_listen
        self.argv = [BIN, "serve", "--config", self.config_path, "--listen", f"127.0.0.1:{self.http_port}",
                     "--data-dir", os.path.join(work, f"{name}-data"), "--params-dir", PARAMS,
                     "--grpc-listen", grpc_listen, *args]
        if tokens:
            token_file = os.path.join(work, f"{name}.tokens")
            with open(token_file, "w") as f:
                f.write("\n".join(tokens) + "\n")
            self.argv += ["--token-file", token_file]
        self.proc = None
        self.start(expect_exit)

    def start(self, expect_exit=False):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")})
        if expect_exit:
            return
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                fail(f"{self.name} exited with {self.proc.returncode} while starting", self)
            try:
                if self.http("GET", "/healthz")[0] == 200 and "gRPC" in self.log_text():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        fail(f"{self.name} did not start within 120 s", self)

    def target(self):
        return self.grpc_listen

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def dump_log(self):
        print(f"---- {self.name} log (last 60 lines) ----")
        print("\n".join(self.log_text().splitlines()[-60:]))

    def http(self, method, path):
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def job(self, job_id):
        status, view = self.http("GET", f"/v1/jobs/{job_id}")
        check(status == 200, f"{self.name}: GET /v1/jobs/{job_id}: {status} {view}", self)
        return view

    def jobs_by_status(self):
        return self.http("GET", "/v1/status")[1]["jobs"]

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


def stalled_bodies(daemon, token, count):
    """`count` HTTP submissions that send their headers and one byte of a
    1,000-byte body, then nothing: open sockets, for the caller to close."""
    sockets = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", daemon.http_port))
        s.sendall(f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode())
        sockets.append(s)
    return sockets


def until(what, predicate, timeout, *daemons):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    fail(f"{what}: not within {timeout} s", *daemons)


def rpc_error(call, *args, **kwargs):
    """The RpcError a call raises (the test fails if it answers)."""
    try:
        answer = call(*args, **kwargs)
    except grpc.RpcError as e:
        return e
    fail(f"expected an error, got {answer}")


def metric(stub, pb, series):
    """A series' value in GetMetrics' Prometheus text; None when it is not
    exported."""
    text = stub.GetMetrics(pb.GetMetricsRequest(), timeout=30).prometheus_text
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def verify(work, kind, proof, args, public=None):
    """filecoin-proofs-api's verifier on `proof` (cuzk verify --kind)."""
    proof_path = os.path.join(work, f"proof-{kind}.bin")
    with open(proof_path, "wb") as f:
        f.write(proof)
    argv = [BIN, "verify", "--kind", kind, proof_path, *args]
    if public is not None:
        public_path = os.path.join(work, f"public-{kind}.json")
        with open(public_path, "w") as f:
            json.dump(public, f)
        argv += ["--input", public_path]
    # filecoin-proofs reads the verifying keys from its parameter cache;
    # the test files are not the production ones it knows the digests of.
    env = {**os.environ, "FIL_PROOFS_PARAMETER_CACHE": PARAMS, "FIL_PROOFS_VERIFY_PRODUCTION_PARAMS": "0"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    return done.returncode == 0, done.stdout + done.stderr


# ---- the suite --------------------------------------------------------------

def main():
    check(PARAMS and os.path.isdir(PARAMS), "CUZK_TEST_PARAMS_DIR must name the 2 KiB parameter files")
    work = tempfile.mkdtemp(prefix="cuzk-grpc-")
    daemons = []
    try:
        run(work, daemons)
    finally:
        for d in daemons:
            d.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("grpc_conformance: all passed", flush=True)


def run(work, daemons):
    pb, pbg = generated_stubs(work)
    step("fixture inputs (cuzk-bench curio-inputs)")
    inputs_dir = os.path.join(work, "inputs")
    subprocess.run([BENCH_BIN, "curio-inputs", "--out", inputs_dir], check=True, timeout=600,
                   env={**os.environ, "CUZK_TEST_PARAMS_DIR": PARAMS}, stdout=subprocess.DEVNULL)
    inputs = Inputs(inputs_dir)
    big = 256 << 20
    options = [("grpc.max_send_message_length", big), ("grpc.max_receive_message_length", big)]

    step("start-up rules: a stale socket is replaced, plaintext off loopback is refused")
    socket_path = os.path.join(work, "run", "cuzk", "cuzk.sock")
    os.makedirs(os.path.dirname(socket_path))
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(socket_path)
    stale.close()  # the file stays, nobody answers: stale
    refused = Daemon(work, "refused", "", f"0.0.0.0:{free_port()}", expect_exit=True)
    check(refused.proc.wait(timeout=60) != 0 and "refusing gRPC" in refused.log_text(),
          "gRPC on 0.0.0.0 without TLS and tokens must be refused at start", refused)

    a = Daemon(work, "a", "[proving]\nverify_proofs = true\n", f"unix://{socket_path}")
    daemons.append(a)
    mode = stat.S_IMODE(os.stat(socket_path).st_mode)
    check(stat.S_ISSOCK(os.stat(socket_path).st_mode) and mode == 0o660, f"socket mode {oct(mode)}, not 0660", a)
    # Over a unix socket C-core sends the percent-encoded path as
    # :authority, which hyper's HTTP/2 server refuses as malformed
    # (PROTOCOL_ERROR); grpc-go, Curio's stack, sends "localhost" itself.
    channel = grpc.insecure_channel(a.target(), options=options + [("grpc.default_authority", "localhost")])
    stub = pbg.ProvingEngineStub(channel)

    step("A: SubmitProof of a PoRep (Curio's C1 envelope), daemon killed mid-job, AwaitProof after the restart")
    submitted = stub.SubmitProof(inputs.porep(pb, f"porep-{inputs.miner}-1"), timeout=60)
    job_id = submitted.job_id
    check(job_id and submitted.assigned_gpu == "", f"SubmitProof answered {submitted}", a)
    until("the PoRep partition in a stage", lambda: a.job(job_id)["status"] == "running", 120, a)
    a.kill()
    check(os.path.exists(socket_path), "a killed daemon leaves its socket file (stale)", a)
    a.start()
    check(stat.S_ISSOCK(os.stat(socket_path).st_mode), "the restart replaced the stale socket", a)

    def await_after_restart():
        try:
            return stub.AwaitProof(pb.AwaitProofRequest(job_id=job_id, timeout_ms=0), timeout=PROOF_TIMEOUT)
        except grpc.RpcError as e:
            # Stored jobs are being rebuilt: UNAVAILABLE, with when to retry.
            check(e.code() == grpc.StatusCode.UNAVAILABLE, f"AwaitProof after the restart: {e}", a)
            check(any(k == "grpc-retry-pushback-ms" for k, _ in e.trailing_metadata() or ()),
                  f"UNAVAILABLE without a retry hint: {e}", a)
            return None
    porep = until("AwaitProof after the restart", await_after_restart, PROOF_TIMEOUT, a)
    check(porep.status == pb.AwaitProofResponse.COMPLETED, f"the resumed PoRep: {porep}", a)
    check(len(porep.proof) == 192 and porep.total_ms > 0, "one 192-byte partition proof", a)
    check(a.job(job_id)["status"] == "done", "the gRPC job is in /v1/jobs", a)
    p = inputs.m["porep"]
    c1_path = os.path.join(inputs_dir, p["c1"])
    ok, said = verify(work, "porep-c2", porep.proof,
                      ["--c1", c1_path, "--prover-id", prover_id(inputs.miner).hex(), "--sector-id", str(p["sector_id"])])
    check(ok, f"verify_seal rejects the PoRep proof: {said}", a)
    ok, _ = verify(work, "porep-c2", porep.proof,
                   ["--c1", c1_path, "--prover-id", prover_id(inputs.miner + 1).hex(), "--sector-id", str(p["sector_id"])])
    check(not ok, "the PoRep proof verifies for another miner", a)

    step("A: Prove a WinningPoSt (Go number, raw randomness, bincode vanilla proof)")
    winning = stub.Prove(pb.ProveRequest(submit=inputs.winning(pb)), timeout=PROOF_TIMEOUT).result
    check(winning.status == pb.AwaitProofResponse.COMPLETED and len(winning.proof) == 192, f"{winning}", a)
    w = inputs.m["winning"]
    public = {"registered_proof": w["registered_proof"], "randomness": w["randomness"],
              "prover_id": prover_id(inputs.miner).hex(), "replicas": w["sectors"]}
    ok, said = verify(work, "winning-post", winning.proof, [], public)
    check(ok, f"verify_winning_post rejects the proof: {said}", a)

    step("A: Curio's cuzk-bench sends sector_size 32 GiB for a 2 KiB proof: ignored, warned, counted")
    ignored = 'cuzk_grpc_sector_size_ignored_total{kind="winning-post"}'
    check(metric(stub, pb, ignored) == 0, f"{ignored} is not exported at 0 from the start", a)
    bench = inputs.winning(pb, request_id="cuzk-bench-32g", sector_size=32 << 30)
    answer = stub.Prove(pb.ProveRequest(submit=bench), timeout=PROOF_TIMEOUT).result
    check(answer.status == pb.AwaitProofResponse.COMPLETED and len(answer.proof) == 192, f"{answer}", a)
    ok, said = verify(work, "winning-post", answer.proof, [], public)
    check(ok, f"verify_winning_post rejects the proof proved despite sector_size: {said}", a)
    check(metric(stub, pb, ignored) == 1, f"{ignored} did not count the request", a)
    check(any('"cuzk-bench-32g"' in line and f"sector_size {32 << 30} disagrees" in line and "WARN" in line
              for line in a.log_text().splitlines()), "no warning names the request and its sector_size", a)

    step("A: Prove a WindowPoSt as Curio does: one call per partition, in parallel, the last partition short")
    w = inputs.m["window"]
    calls = [stub.Prove.future(pb.ProveRequest(submit=inputs.window(pb, i)), timeout=PROOF_TIMEOUT)
             for i in range(len(w["partitions"]))]
    parts = [call.result().result for call in calls]
    for i, part in enumerate(parts):
        check(part.status == pb.AwaitProofResponse.COMPLETED and len(part.proof) == 192, f"partition {i}: {part}", a)
    check(len(w["partitions"][-1]["sectors"]) < len(w["partitions"][0]["sectors"]), "the last partition is short")
    # Curio merges the partitions' proofs (MergeWindowPoStPartitionProofs)
    # and verifies the whole with every sector.
    public = {"registered_proof": w["registered_proof"], "randomness": w["randomness"],
              "prover_id": prover_id(inputs.miner).hex(),
              "replicas": [s for part in w["partitions"] for s in part["sectors"]]}
    ok, said = verify(work, "window-post", b"".join(p.proof for p in parts), [], public)
    check(ok, f"verify_window_post rejects the merged proof: {said}", a)
    ok, _ = verify(work, "window-post", b"".join(p.proof for p in reversed(parts)), [], public)
    check(not ok, "partitions out of order verify", a)

    step("A: Prove a SnapDeals update (raw 32-byte commitments, one vanilla proof per partition)")
    snap = stub.Prove(pb.ProveRequest(submit=inputs.snap(pb)), timeout=PROOF_TIMEOUT).result
    check(snap.status == pb.AwaitProofResponse.COMPLETED and len(snap.proof) == 192, f"{snap}", a)
    s = inputs.m["snap"]
    public = {k: s[k] for k in ("registered_proof", "comm_r_old", "comm_r_new", "comm_d_new")}
    ok, said = verify(work, "snap-prove", snap.proof, [], public)
    check(ok, f"verify_empty_sector_update_proof rejects the proof: {said}", a)

    step("A: identical requests in flight share a job; a repeat after the end proves again")
    request = pb.ProveRequest(submit=inputs.winning(pb, request_id="winpost-twins"))
    twins = [stub.Prove.future(request, timeout=PROOF_TIMEOUT) for _ in range(2)]
    twins = [t.result().result for t in twins]
    check(all(t.status == pb.AwaitProofResponse.COMPLETED for t in twins), f"{twins}", a)
    check(twins[0].job_id == twins[1].job_id, "two identical requests in flight made two jobs", a)
    again = stub.Prove(request, timeout=PROOF_TIMEOUT).result
    check(again.status == pb.AwaitProofResponse.COMPLETED and again.job_id != twins[0].job_id,
          "a Prove answered from an ended job instead of proving", a)

    step("A: errors as Curio expects them, each logged once with its request and counted")
    refused_before = metric(stub, pb, 'cuzk_grpc_calls_total{method="Prove",code="INVALID_ARGUMENT",result="none"}')
    e = rpc_error(stub.Prove, pb.ProveRequest(), timeout=30)
    check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "missing submit field" in e.details(), f"{e}", a)
    for kind in (0, 9):
        bad = inputs.winning(pb, proof_kind=kind)
        e = rpc_error(stub.Prove, pb.ProveRequest(submit=bad), timeout=30)
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and f"invalid proof_kind: {kind}" in e.details(), f"{e}", a)
        e = rpc_error(stub.SubmitProof, bad, timeout=30)
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, f"SubmitProof kind {kind}: {e}", a)
    check(metric(stub, pb, 'cuzk_grpc_calls_total{method="Prove",code="INVALID_ARGUMENT",result="none"}')
          == (refused_before or 0) + 3, "the INVALID_ARGUMENT answers are not counted", a)
    check(any("gRPC Prove of request" in line and "INVALID_ARGUMENT: invalid proof_kind: 9" in line
              for line in a.log_text().splitlines()), "a refused Prove is not logged with its reason", a)
    # Inputs it cannot prove: OK, with a FAILED result and the reason, each
    # logged with its request id, counted, and in GetStatus' failed count.
    failed_series = 'cuzk_grpc_calls_total{method="Prove",code="OK",result="failed"}'
    check(metric(stub, pb, failed_series) == 0, f"{failed_series} is not exported at 0 from the start", a)
    cases = [
        ("randomness must be 32 bytes", inputs.winning(pb, request_id="short-randomness", randomness=bytes(31))),
        ("registered_proof 99", inputs.winning(pb, request_id="proof-99", registered_proof=99)),
        ("not a WindowPoSt proof", inputs.winning(pb, request_id="wrong-kind", proof_kind=pb.WINDOW_POST_PARTITION)),
        ("comm_d_new must be 32 bytes", inputs.snap(pb, request_id="short-comm-d", comm_d_new=bytes(31))),
        ("C1 envelope", inputs.porep(pb, "porep-bad-envelope", vanilla_proof=b"{\"SectorNum\": 1}")),
        ("replica id", inputs.porep(pb, "porep-wrong-miner", miner_id=inputs.miner + 1)),
    ]
    for reason, bad in cases:
        answer = stub.Prove(pb.ProveRequest(submit=bad), timeout=120).result
        check(answer.status == pb.AwaitProofResponse.FAILED and reason in answer.error_message,
              f"{reason}: {answer}", a)
        logged = [line for line in a.log_text().splitlines()
                  if f'request "{bad.request_id}"' in line and "FAILED" in line and reason in line]
        check(len(logged) == 1, f"{reason}: the FAILED answer is logged {len(logged)} times, not once", a)
    check(metric(stub, pb, failed_series) == len(cases), "the FAILED answers are not counted", a)
    failed = stub.GetStatus(pb.GetStatusRequest(), timeout=30).total_proofs_failed
    check(failed == len(cases), f"GetStatus counts {failed} failed proofs, not {len(cases)}", a)
    e = rpc_error(stub.AwaitProof, pb.AwaitProofRequest(job_id="no-such-job", timeout_ms=1), timeout=30)
    check(e.code() == grpc.StatusCode.NOT_FOUND, f"AwaitProof of an unknown job: {e}", a)
    e = rpc_error(stub.CancelProof, pb.CancelProofRequest(job_id="no-such-job"), timeout=30)
    check(e.code() == grpc.StatusCode.NOT_FOUND, f"CancelProof of an unknown job: {e}", a)
    check(not stub.CancelProof(pb.CancelProofRequest(job_id=job_id), timeout=30).was_running,
          "cancelling a done job stops nothing", a)

    step("A: GetStatus, GetMetrics, PreloadSRS and EvictSRS")
    status = stub.GetStatus(pb.GetStatusRequest(), timeout=30)
    check(len(status.gpus) >= 1 and status.gpus[0].name and status.uptime_seconds >= 1, f"{status}", a)
    check(status.total_proofs_completed >= 6, f"completed jobs: {status.total_proofs_completed}", a)
    loaded = {s.circuit_id: s for s in status.loaded_srs}
    check(any("stacked-proof-of-replication" in c and s.size_bytes > 0 for c, s in loaded.items()),
          f"the PoRep parameters are not listed as loaded: {list(loaded)}", a)
    check(status.pinned_memory_limit_bytes > 0, f"{status}", a)
    text = stub.GetMetrics(pb.GetMetricsRequest(), timeout=30).prometheus_text
    check('cuzk_grpc_calls_total{method="Prove",code="OK",result="completed"}' in text,
          "GetMetrics lacks the gRPC calls", a)
    evicted = stub.EvictSRS(pb.EvictSrsRequest(circuit_id="porep-2k"), timeout=30)
    check(evicted.was_loaded and evicted.freed_bytes > 1 << 29, f"evicting the PoRep parameters: {evicted}", a)
    evicted = stub.EvictSRS(pb.EvictSrsRequest(circuit_id="porep-2k"), timeout=30)
    check(not evicted.was_loaded and evicted.freed_bytes == 0, f"evicting them again: {evicted}", a)
    check(stub.EvictSRS(pb.EvictSrsRequest(circuit_id="winning-2k"), timeout=30).was_loaded, "winning-2k", a)
    preloaded = stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="winning-2k"), timeout=300)
    check(not preloaded.already_loaded, f"{preloaded}", a)
    check(stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="winning-2k"), timeout=300).already_loaded, "again", a)
    e = rpc_error(stub.PreloadSRS, pb.PreloadSrsRequest(circuit_id="porep-3k"), timeout=30)
    check(e.code() == grpc.StatusCode.NOT_FOUND, f"PreloadSRS of an unknown id: {e}", a)
    channel.close()
    a.stop()
    check(not os.path.exists(socket_path), "a stopped daemon removes its socket", a)

    sim_daemons(work, daemons, pb, pbg, inputs, options)
    two_tenants(work, daemons, pb, pbg, inputs, options)


def sim_daemons(work, daemons, pb, pbg, inputs, options):
    step("B: the simulated backend, slow (a WinningPoSt partition synthesizes for about 90 s), with tokens")
    acme, reader, admin = "acme-submit-0123456789", "acme-reader-0123456789", "ops-admin-01234567890"
    urgent = "lane-critical-0123456789"
    port = free_port()
    b = Daemon(work, "b", """
backend = "sim"
[sim]
profile = "winning-post"
time_scale = 100.0
[scheduler]
synthesis_threads = 2
[limits]
max_queued_jobs = 4
# The whole queue may be one tenant's: this step reaches the daemon's limit.
queue_share_per_tenant = 1.0
[auth.tenants.acme]
max_queued_jobs = 1
[grpc]
max_message_bytes = 1048576
max_waiting_calls = 4
""", f"127.0.0.1:{port}", tokens=[f"{acme}@acme:submit", f"{reader}@acme:read", f"{admin}@ops:admin",
                                  f"{urgent}@lane:submit,read,critical"])
    daemons.append(b)
    channel = grpc.insecure_channel(b.target(), options=options)
    stub = pbg.ProvingEngineStub(channel)
    as_acme = (("authorization", f"Bearer {acme}"),)
    as_admin = (("authorization", f"Bearer {admin}"),)

    def cancelled_count():
        return b.jobs_by_status().get("cancelled", 0)

    def unfinished():
        jobs = b.jobs_by_status()
        return jobs.get("queued", 0) + jobs.get("running", 0)

    step("B: tokens: loopback calls need none (tenant default), admin methods and other tenants' jobs do")
    job = stub.SubmitProof(inputs.winning(pb, request_id="acme-1"), metadata=as_acme, timeout=30).job_id
    check(b.job(job)["tenant"] == "acme", "the job is the token's tenant's", b)
    e = rpc_error(stub.AwaitProof, pb.AwaitProofRequest(job_id=job, timeout_ms=1), timeout=30)
    check(e.code() == grpc.StatusCode.NOT_FOUND, f"tenant default sees acme's job: {e}", b)
    e = rpc_error(stub.SubmitProof, inputs.winning(pb), metadata=(("authorization", f"Bearer {reader}"),), timeout=30)
    check(e.code() == grpc.StatusCode.PERMISSION_DENIED, f"a read token submits: {e}", b)
    e = rpc_error(stub.GetStatus, pb.GetStatusRequest(), metadata=(("authorization", "Bearer wrong-0123456789abc"),),
                  timeout=30)
    check(e.code() == grpc.StatusCode.UNAUTHENTICATED, f"an unknown token: {e}", b)
    e = rpc_error(stub.EvictSRS, pb.EvictSrsRequest(circuit_id="winning-2k"), timeout=30)
    check(e.code() == grpc.StatusCode.UNAUTHENTICATED, f"EvictSRS without a token: {e}", b)
    check(not stub.EvictSRS(pb.EvictSrsRequest(circuit_id="winning-2k"), metadata=as_admin, timeout=30).was_loaded,
          "the simulated backend loads no parameters", b)

    step("B: queue limits: the tenant's, then the daemon's, RESOURCE_EXHAUSTED with a retry hint")
    e = rpc_error(stub.SubmitProof, inputs.winning(pb, request_id="acme-2"), metadata=as_acme, timeout=30)
    check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "tenant" in e.details(), f"{e}", b)
    others = [stub.SubmitProof(inputs.winning(pb, request_id=f"fill-{i}"), timeout=30).job_id for i in range(3)]
    e = rpc_error(stub.SubmitProof, inputs.winning(pb, request_id="one-too-many"), timeout=30)
    check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "queue full" in e.details(), f"{e}", b)
    check(dict(e.trailing_metadata()).get("grpc-retry-pushback-ms") == "5000", f"no retry hint: {e}", b)

    step("B: waiting calls are each tenant's share: acme taking all 4 of its places refuses acme only")
    waits = [stub.AwaitProof.future(pb.AwaitProofRequest(job_id=job), metadata=as_acme, timeout=120)
             for _ in range(4)]
    until("acme's 4 calls waiting", lambda: metric(stub, pb, "cuzk_grpc_waiting_calls") == 4, 30, b)
    e = rpc_error(stub.AwaitProof, pb.AwaitProofRequest(job_id=job, timeout_ms=1), metadata=as_acme, timeout=30)
    check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "acme" in e.details(), f"acme's fifth call: {e}", b)
    # The tenant default (tokenless on loopback) still has its places.
    others_wait = stub.AwaitProof(pb.AwaitProofRequest(job_id=others[0], timeout_ms=300), timeout=30)
    check(others_wait.status == pb.AwaitProofResponse.TIMEOUT, f"default's call beside acme's: {others_wait}", b)
    for wait in waits:
        wait.cancel()
    until("acme's calls left", lambda: metric(stub, pb, "cuzk_grpc_waiting_calls") == 0, 30, b)

    step("B: GetStatus shows the load per kind; AwaitProof times out; CancelProof of a running job")
    status = stub.GetStatus(pb.GetStatusRequest(), timeout=30)
    queues = {q.proof_kind: q for q in status.queues}
    check("winning-post" in queues and queues["winning-post"].pending + queues["winning-post"].in_progress == 4,
          f"queues: {status.queues}", b)
    check(len(status.gpus) == 1 and status.gpus[0].name == "sim0", f"{status.gpus}", b)
    started = time.time()
    timed_out = stub.AwaitProof(pb.AwaitProofRequest(job_id=others[0], timeout_ms=300), timeout=30)
    check(timed_out.status == pb.AwaitProofResponse.TIMEOUT and time.time() - started < 5, f"{timed_out}", b)
    until("a partition in a stage", lambda: b.job(job)["partitions"][0]["stage"] == "synthesizing", 60, b)
    check(stub.CancelProof(pb.CancelProofRequest(job_id=job), metadata=as_acme, timeout=30).was_running,
          "was_running for a synthesizing partition", b)
    check(not stub.CancelProof(pb.CancelProofRequest(job_id=job), metadata=as_acme, timeout=30).was_running,
          "was_running for a job cancelled already", b)
    ended = stub.AwaitProof(pb.AwaitProofRequest(job_id=job), metadata=as_acme, timeout=30)
    check(ended.status == pb.AwaitProofResponse.CANCELLED, f"{ended}", b)
    for other in others:
        stub.CancelProof(pb.CancelProofRequest(job_id=other), metadata=as_admin, timeout=30)

    step("B: a Prove whose caller disconnects, or whose deadline passes, cancels its job")
    # The cancelled jobs' partitions hold both synthesis slots until their
    # stage ends (a stage is not interrupted): new jobs stay queued.
    until("the cancelled jobs ended", lambda: unfinished() == 0, 30, b)
    before = cancelled_count()
    call = stub.Prove.future(pb.ProveRequest(submit=inputs.winning(pb, request_id="leaves")), timeout=600)
    until("the Prove's job accepted", lambda: unfinished() == 1, 60, b)
    call.cancel()
    until("the left job cancelled", lambda: cancelled_count() == before + 1, 30, b)
    e = rpc_error(stub.Prove, pb.ProveRequest(submit=inputs.winning(pb, request_id="short-deadline")), timeout=2)
    check(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, f"{e}", b)
    until("the job of the passed deadline cancelled", lambda: cancelled_count() == before + 2, 30, b)

    step("B: ... unless another caller waits on it")
    request = pb.ProveRequest(submit=inputs.winning(pb, request_id="shared"))
    first = stub.Prove.future(request, timeout=600)
    until("the shared job accepted", lambda: unfinished() == 1, 60, b)
    second = stub.Prove.future(request, timeout=600)
    time.sleep(1)
    first.cancel()
    time.sleep(2)
    check(cancelled_count() == before + 2 and unfinished() == 1,
          "the job was cancelled while another Prove waited on it", b)
    second.cancel()
    until("the shared job cancelled once both left", lambda: cancelled_count() == before + 3, 30, b)

    step("B: CRITICAL is earned: Curio's priorities kept, a PoRep sent CRITICAL without the scope runs at normal")
    until("the shared job ended", lambda: unfinished() == 0, 30, b)
    lowered = 'cuzk_priority_lowered_total{kind="porep-c2"}'
    check(metric(stub, pb, lowered) == 0, f"{lowered} is not exported at 0 from the start", b)
    as_urgent = (("authorization", f"Bearer {urgent}"),)
    jobs = {}
    for name, request, metadata in [
        ("bulk PoRep", inputs.porep(pb, "bulk-critical", priority=pb.CRITICAL), ()),
        ("PoRep with the scope", inputs.porep(pb, "lane-critical", priority=pb.CRITICAL), as_urgent),
        ("WinningPoSt", inputs.winning(pb, request_id="winning-critical"), ()),
        ("WindowPoSt", inputs.window(pb, 0), ()),
    ]:
        jobs[name] = stub.SubmitProof(request, metadata=metadata, timeout=120).job_id
    priorities = {name: b.job(job)["priority"] for name, job in jobs.items()}
    check(priorities == {"bulk PoRep": "normal", "PoRep with the scope": "critical", "WinningPoSt": "critical",
                         "WindowPoSt": "high"}, f"priorities: {priorities}", b)
    check(metric(stub, pb, lowered) == 1, f"{lowered} did not count the bulk PoRep", b)
    for job in jobs.values():
        stub.CancelProof(pb.CancelProofRequest(job_id=job), metadata=as_admin, timeout=30)

    step("B: a message over grpc.max_message_bytes is refused before it is read")
    oversized = inputs.porep(pb, "too-big", vanilla_proof=bytes(2 << 20))
    e = rpc_error(stub.Prove, pb.ProveRequest(submit=oversized), timeout=30)
    # tonic's code for it (grpc-go and C-core say RESOURCE_EXHAUSTED).
    check(e.code() == grpc.StatusCode.OUT_OF_RANGE and "too large" in e.details(), f"{e}", b)

    step("B: connections that never send the HTTP/2 preface are closed (within 10 s), calls pass meanwhile")
    silent = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(200)]
    check(stub.GetStatus(pb.GetStatusRequest(), timeout=30) is not None, "GetStatus beside 200 silent connections", b)
    started = time.time()
    for conn in silent:
        # Whatever the daemon sends first, the connection must reach its end.
        try:
            while conn.recv(4096):
                pass
            closed = True
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            closed = False
        conn.close()
        check(closed, f"a silent connection still open after {time.time() - started:.0f} s", b)

    step("B: an oversized job id is refused by its length, never echoed whole")
    for call in (stub.AwaitProof, stub.CancelProof):
        request = (pb.AwaitProofRequest if call is stub.AwaitProof else pb.CancelProofRequest)(job_id="j" * (512 << 10))
        e = rpc_error(call, request, metadata=as_admin, timeout=30)
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and len(e.details()) < 4200 and "jjjj" not in e.details(),
              f"{e.code()} with {len(e.details())} bytes of details", b)
    channel.close()

    step("D: a request whose parse estimate alone is over limits.parse_budget_bytes: final, never retry")
    # The budget holds one 1 KiB body's estimate (8 MiB + 8 KiB) and a
    # little more: a WinningPoSt's text (kilobytes) can never fit.
    # No urgent reserve: the budget is that one body's.
    d = Daemon(work, "d", 'backend = "sim"\n[limits]\nmax_body_bytes = 1024\nparse_budget_bytes = 8404992\n'
               'urgent_parsing_requests = 0\n',
               f"127.0.0.1:{free_port()}")
    daemons.append(d)
    with grpc.insecure_channel(d.target(), options=options) as channel:
        d_stub = pbg.ProvingEngineStub(channel)
        answer = d_stub.Prove(pb.ProveRequest(submit=inputs.winning(pb)), timeout=30).result
        check(answer.status == pb.AwaitProofResponse.FAILED and "never be admitted" in answer.error_message,
              f"Prove: {answer}", d)
        e = rpc_error(d_stub.SubmitProof, inputs.winning(pb), timeout=30)
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "never be admitted" in e.details(), f"{e}", d)
        check("grpc-retry-pushback-ms" not in dict(e.trailing_metadata()), f"a retry hint: {e}", d)
    check(d.jobs_by_status() == {} or sum(d.jobs_by_status().values()) == 0, "a job was made", d)

    step("C: a store that cannot take a job: UNAVAILABLE with a retry hint")
    c = Daemon(work, "c", 'backend = "sim"\n[store]\nmin_free_bytes = 9223372036854775807\n',
               f"127.0.0.1:{free_port()}")
    daemons.append(c)
    with grpc.insecure_channel(c.target(), options=options) as channel:
        e = rpc_error(pbg.ProvingEngineStub(channel).Prove, pb.ProveRequest(submit=inputs.winning(pb)), timeout=30)
    check(e.code() == grpc.StatusCode.UNAVAILABLE and "min_free_bytes" in e.details(), f"{e}", c)
    check(dict(e.trailing_metadata()).get("grpc-retry-pushback-ms") == "5000", f"no retry hint: {e}", c)

    step("E: a burst of 500 Prove calls at once (WindowPoSt partitions), default limits: every one COMPLETED")
    # The parse budget has 32 places; calls whose messages have arrived wait
    # their turn (limits.parse_wait_s) instead of being refused beyond them.
    e_daemon = Daemon(work, "e", 'backend = "sim"\n[sim]\nprofile = "winning-post"\ntime_scale = 0.0001\n',
                      f"127.0.0.1:{free_port()}")
    daemons.append(e_daemon)
    partitions = len(inputs.m["window"]["partitions"])
    calls = []
    for i in range(500):
        request = inputs.window(pb, i % partitions)
        request.request_id = f"burst-{i}"
        calls.append(pb.ProveRequest(submit=request))
    with grpc.insecure_channel(e_daemon.target(), options=options) as channel:
        e_stub = pbg.ProvingEngineStub(channel)
        started = time.time()
        futures = [e_stub.Prove.future(call, timeout=300) for call in calls]
        answers = {}
        for future in futures:
            try:
                status = pb.AwaitProofResponse.Status.Name(future.result().result.status)
            except grpc.RpcError as error:
                status = f"{error.code()}: {error.details()[:120]}"
            answers[status] = answers.get(status, 0) + 1
    print(f"   500 concurrent Prove calls answered in {time.time() - started:.1f} s: {answers}", flush=True)
    check(answers == {"COMPLETED": 500}, f"a burst of 500 Prove calls: {answers}", e_daemon)


def two_tenants(work, daemons, pb, pbg, inputs, options):
    step("F: default shares: alpha's stalled HTTP bodies hold its half of the parse budget; beta's WinningPoSt passes")
    alpha, beta = "alpha-submit-0123456789", "beta-submit-01234567890"
    f = Daemon(work, "f", """
backend = "sim"
[sim]
profile = "winning-post"
# A partition synthesizes for about 4.5 s, one at a time: alpha's jobs are
# still unfinished when its next submission is judged.
time_scale = 5.0
[scheduler]
synthesis_threads = 1
[limits]
# Alpha's share of the queue: 2 (limits.queue_share_per_tenant, 0.5).
max_queued_jobs = 4
# How long a gRPC call whose message has arrived waits for a parse place.
parse_wait_s = 2
""", f"127.0.0.1:{free_port()}", tokens=[f"{alpha}@alpha:submit,read", f"{beta}@beta:submit,read"])
    daemons.append(f)
    as_alpha = (("authorization", f"Bearer {alpha}"),)
    as_beta = (("authorization", f"Bearer {beta}"),)
    places = f.http("GET", "/v1/status")[1]["parsing"]["max_requests"]
    stalled = []
    try:
        # More bodies than the whole budget's places.
        stalled = stalled_bodies(f, alpha, places + 8)
        until("alpha's bodies admitted to parsing",
              lambda: f.http("GET", "/v1/status")[1]["parsing"]["requests"], 30, f)
        time.sleep(1.0)  # the rest, refused or waiting, settle
        held = f.http("GET", "/v1/status")[1]["parsing"]["requests"]
        check(0 < held <= places // 2, f"alpha holds {held} of {places} parse places, more than its half", f)
        with grpc.insecure_channel(f.target(), options=options) as channel:
            stub = pbg.ProvingEngineStub(channel)
            e = rpc_error(stub.SubmitProof, inputs.winning(pb, request_id="alpha-over-share"), metadata=as_alpha,
                          timeout=60)
            check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "parse_share_per_tenant" in e.details(),
                  f"alpha's gRPC call beside its own stalled bodies: {e}", f)
            started = time.time()
            answer = stub.Prove(pb.ProveRequest(submit=inputs.winning(pb, request_id="beta-beside-parsing")),
                                metadata=as_beta, timeout=120).result
            check(answer.status == pb.AwaitProofResponse.COMPLETED, f"beta's WinningPoSt: {answer}", f)
            print(f"   beta's WinningPoSt beside alpha's {held} stalled bodies: {time.time() - started:.1f} s",
                  flush=True)
    finally:
        for s in stalled:
            s.close()

    step("F: alpha at its half of the queue is refused, naming the share; beta's WinningPoSt passes")
    with grpc.insecure_channel(f.target(), options=options) as channel:
        stub = pbg.ProvingEngineStub(channel)
        mine = [stub.SubmitProof(inputs.winning(pb, request_id=f"alpha-{i}"), metadata=as_alpha, timeout=60).job_id
                for i in range(2)]
        e = rpc_error(stub.SubmitProof, inputs.winning(pb, request_id="alpha-2"), metadata=as_alpha, timeout=60)
        check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "queue_share_per_tenant" in e.details(),
              f"alpha's third job: {e}", f)
        answer = stub.Prove(pb.ProveRequest(submit=inputs.winning(pb, request_id="beta-beside-queue")),
                            metadata=as_beta, timeout=120).result
        check(answer.status == pb.AwaitProofResponse.COMPLETED, f"beta's WinningPoSt: {answer}", f)
        for job in mine:
            done = stub.AwaitProof(pb.AwaitProofRequest(job_id=job, timeout_ms=60000), metadata=as_alpha,
                                   timeout=90)
            check(done.status == pb.AwaitProofResponse.COMPLETED, f"alpha's job {job}: {done}", f)


if __name__ == "__main__":
    main()
