//! Filecoin's four proof kinds through a real daemon over HTTP on the CPU
//! engine. The sectors, their C1 outputs and vanilla proofs come from
//! filecoin-proofs-api itself (cuzk-filecoin's fixtures), the parameters
//! from `generate`, and every proof is judged by filecoin-proofs-api's own
//! verifiers: accepted as made, rejected with a tampered public input. A
//! PoRep C1 generated without sealing (`synthetic`) is proved and judged the
//! same way by the gRPC conformance suite (tests/grpc_conformance.py), not
//! here: one 2 KiB PoRep proof costs two minutes of CI's two cores.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use common::{start_with, TestDaemon};
use cuzk::config::BackendKind;
use cuzk_filecoin::api::{post, seal, update, PublicReplicaInfo, RegisteredPoStProof, SectorId};
use cuzk_filecoin::fixtures::{self, Sector, PROVER_ID, SEED, TICKET, UPDATE, WINDOW, WINNING};
use cuzk_filecoin::record::Evaluation;
use cuzk_filecoin::Kind;
use serde_json::{json, Value};

/// Proving a 2 KiB PoRep on 2 debug-build cores takes minutes.
const PROOF_TIMEOUT: Duration = Duration::from_secs(1800);

fn daemon() -> TestDaemon {
    daemon_on(BackendKind::Cpu, Evaluation::default())
}

fn daemon_on(backend: BackendKind, evaluation: Evaluation) -> TestDaemon {
    start_with(|config| {
        config.backend = backend;
        config.proving.filecoin_evaluation = evaluation;
        config.params_dir = Some(fixtures::params_dir().to_path_buf());
        config.scheduler.budget = cuzk::config::Budget::Bytes(16 << 30);
        config.limits.max_body_bytes = 64 << 20;
    })
}

/// Submits, waits for the job, and returns the proof bytes the API
/// returns for the call, checking the per-partition proofs add up to them.
fn prove(d: &TestDaemon, kind: &str, input: Value) -> Vec<u8> {
    let (status, body) = d.post("/v1/jobs", &json!({ "circuit": kind, "input": input }));
    assert_eq!(status, 202, "{body}");
    let id = body["id"].as_str().unwrap().to_string();
    let job = d.wait(&id, PROOF_TIMEOUT);
    assert_eq!(job["status"], "done", "{job}");
    let (status, proofs) = d.get(&format!("/v1/jobs/{id}/proofs"));
    assert_eq!(status, 200, "{proofs}");
    assert_eq!(proofs["kind"], kind);
    let proof = hex::decode(proofs["proof"].as_str().unwrap()).unwrap();
    let parts: Vec<u8> = proofs["proofs"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .flat_map(|(i, p)| {
            assert_eq!(p["partition"], i, "partitions in order");
            hex::decode(p["proof"].as_str().unwrap()).unwrap()
        })
        .collect();
    assert_eq!(proof, parts);
    assert_eq!(proof.len() % 192, 0);
    proof
}

fn public_replicas(proof: RegisteredPoStProof, sectors: &[&Sector]) -> BTreeMap<SectorId, PublicReplicaInfo> {
    sectors.iter().map(|s| (s.id, PublicReplicaInfo::new(proof, s.p2.comm_r))).collect()
}

fn post_input(proof: RegisteredPoStProof, randomness: [u8; 32], sectors: &[&Sector]) -> Value {
    let vanilla = fixtures::post_vanilla_proofs(proof, randomness, sectors).unwrap();
    json!({
        "registered_proof": proof,
        "randomness": hex::encode(randomness),
        "prover_id": hex::encode(PROVER_ID),
        "vanilla_proofs": vanilla.iter().map(hex::encode).collect::<Vec<_>>(),
    })
}

#[test]
fn porep_c2_proves_what_verify_seal_accepts() {
    porep_c2_on(&daemon());
}

fn porep_c2_on(d: &TestDaemon) {
    fixtures::ensure_params(&[Kind::Porep]).unwrap();
    let sector = fixtures::seal(1).unwrap();
    let c1 = serde_json::to_value(&sector.c1).unwrap();
    let input = json!({ "c1": c1, "prover_id": hex::encode(PROVER_ID), "sector_id": 1 });
    let proof = prove(d, "porep-c2", input.clone());
    assert_eq!(proof.len(), 192, "one partition at 2 KiB");
    let (comm_r, comm_d) = (sector.p2.comm_r, sector.p2.comm_d);
    let verify = |seed: [u8; 32]| {
        seal::verify_seal(fixtures::SEAL, comm_r, comm_d, PROVER_ID, sector.id, TICKET, seed, &proof)
            .unwrap_or(false)
    };
    assert!(verify(SEED));
    let mut other = SEED;
    other[0] ^= 1;
    assert!(!verify(other), "a proof for another seed");
    // What `cuzk verify --kind porep-c2` runs: the job's own input.
    assert!(cuzk::filecoin::verify(Kind::Porep, &input, &proof).unwrap());
    let mut other_sector = input.clone();
    other_sector["sector_id"] = json!(2);
    assert!(!cuzk::filecoin::verify(Kind::Porep, &other_sector, &proof).unwrap());

    // The file is listed, loaded by the job, and evicted on request.
    let id = Kind::Porep.cache_id(2048).unwrap();
    let listed = |d: &TestDaemon| {
        let (status, params) = d.get("/v1/params");
        assert_eq!(status, 200, "{params}");
        params["files"].as_array().unwrap().iter().find(|f| f["id"] == id.as_str()).cloned()
    };
    let file = listed(d).expect("the PoRep file is listed");
    assert_eq!(file["loaded"], true, "{file}");
    assert!(file["resident_bytes"].as_u64().unwrap() > 1 << 29, "{file}");
    assert_eq!(d.post(&format!("/v1/params/{id}/evict"), &json!({})).0, 200);
    assert_eq!(listed(d).unwrap()["loaded"], false);
    assert_eq!(d.post(&format!("/v1/params/{id}/evict"), &json!({})).0, 404);

    // Curio's form: the same C1 as base64 JSON is the same job.
    let encoded = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&sector.c1).unwrap());
    let body = json!({ "circuit": "porep-c2", "priority": "low",
        "input": { "c1_base64": encoded, "prover_id": hex::encode(PROVER_ID), "sector_id": 1 } });
    let (status, job) = d.post("/v1/jobs", &body);
    assert_eq!(status, 202, "{job}");
    let (status, _) = d.post(&format!("/v1/jobs/{}/cancel", job["id"].as_str().unwrap()), &json!({}));
    assert_eq!(status, 200);

    // Ids the C1 was not sealed for, and a C1 for another seed, are refused at submit.
    let mut bad_seed = sector.c1.clone();
    bad_seed.seed[0] ^= 1;
    for (input, reason) in [
        (json!({ "c1": c1, "prover_id": hex::encode([8u8; 32]), "sector_id": 1 }), "replica id"),
        (json!({ "c1": c1, "prover_id": hex::encode(PROVER_ID), "sector_id": 2 }), "replica id"),
        (json!({ "c1": bad_seed, "prover_id": hex::encode(PROVER_ID), "sector_id": 1 }), "vanilla"),
        (
            json!({ "c1": {"registered_proof": "StackedDrg2KiBV1_1"}, "prover_id": hex::encode(PROVER_ID), "sector_id": 1 }),
            "not a SealCommitPhase1Output",
        ),
        (json!({ "c1_base64": "%%%", "prover_id": hex::encode(PROVER_ID), "sector_id": 1 }), "not base64"),
    ] {
        let (status, body) = d.post("/v1/jobs", &json!({ "circuit": "porep-c2", "input": input }));
        assert_eq!(status, 422, "{reason}: {body}");
        assert!(body["error"].as_str().unwrap().contains(reason), "{reason}: {body}");
    }
}

#[test]
fn winning_and_window_post_prove_what_the_post_verifiers_accept() {
    // Direct evaluation here (the PoSt circuits are the cheapest); the other
    // kinds run the default, compiled.
    post_on(&daemon_on(BackendKind::Cpu, Evaluation::Direct));
}

fn post_on(d: &TestDaemon) {
    fixtures::ensure_params(&[Kind::WinningPost, Kind::WindowPost]).unwrap();
    let sectors: Vec<Sector> = (11..14).map(|id| fixtures::seal(id).unwrap()).collect();
    let all: Vec<&Sector> = sectors.iter().collect();
    let randomness = [44u8; 32];
    let mut other = randomness;
    other[1] ^= 1;

    let winning = prove(d, "winning-post", post_input(WINNING, randomness, &all[..1]));
    let replicas = public_replicas(WINNING, &all[..1]);
    assert!(post::verify_winning_post(&randomness, &winning, &replicas, PROVER_ID).unwrap());
    assert!(!post::verify_winning_post(&other, &winning, &replicas, PROVER_ID).unwrap_or(false));

    // Evicted, then preloaded without a job (with the blank circuit's
    // matrices, which a direct-evaluation daemon's jobs ignore): the next
    // job proves with it.
    let id = Kind::WinningPost.cache_id(2048).unwrap();
    assert_eq!(d.post(&format!("/v1/params/{id}/evict"), &json!({})).0, 200);
    let (status, preloaded) = d.post(&format!("/v1/params/{id}/preload"), &json!({}));
    assert_eq!(status, 200, "{preloaded}");
    assert!(preloaded["resident_bytes"].as_u64().unwrap() > 20 << 20, "{preloaded}");
    let (_, params) = d.get("/v1/params");
    let file = params["files"].as_array().unwrap().iter().find(|f| f["id"] == id.as_str()).cloned().unwrap();
    assert_eq!((&file["loaded"], &file["resident_bytes"]), (&json!(true), &preloaded["resident_bytes"]));
    let (status, missing) = d.post("/v1/params/no-such-circuit/preload", &json!({}));
    assert_eq!(status, 404, "{missing}");
    let again = prove(d, "winning-post", post_input(WINNING, other, &all[..1]));
    assert!(post::verify_winning_post(&other, &again, &replicas, PROVER_ID).unwrap());

    // Three sectors at two per partition: two partitions, the second padded,
    // proved as one job and assembled in partition order.
    let window = prove(d, "window-post", post_input(WINDOW, randomness, &all));
    assert_eq!(window.len(), 2 * 192);
    let replicas = public_replicas(WINDOW, &all);
    let verify = |r: &[u8; 32], proof: &[u8], replicas| {
        post::verify_window_post(r, &[(WINDOW, proof)], replicas, PROVER_ID).unwrap_or(false)
    };
    assert!(verify(&randomness, &window, &replicas));
    assert!(!verify(&other, &window, &replicas));
    let mut swapped = window[192..].to_vec();
    swapped.extend_from_slice(&window[..192]);
    assert!(!verify(&randomness, &swapped, &replicas), "partitions out of order");
    // What `cuzk verify --kind window-post --input FILE` runs.
    let public = |r: [u8; 32]| {
        json!({
            "registered_proof": WINDOW, "randomness": hex::encode(r), "prover_id": hex::encode(PROVER_ID),
            "replicas": all.iter().map(|s| json!({ "sector_id": u64::from(s.id), "comm_r": hex::encode(s.p2.comm_r) })).collect::<Vec<_>>(),
        })
    };
    assert!(cuzk::filecoin::verify(Kind::WindowPost, &public(randomness), &window).unwrap());
    assert!(!cuzk::filecoin::verify(Kind::WindowPost, &public(other), &window).unwrap());
    // `--kind winning-post` for a WindowPoSt proof is refused by name.
    let wrong = cuzk::filecoin::verify(Kind::WinningPost, &public(randomness), &window).unwrap_err();
    assert!(wrong.to_string().contains("is a window-post proof, not winning-post"), "{wrong}");

    // Curio's form: one partition per request (its sectors only).
    let mut single = post_input(WINDOW, randomness, &all[2..]);
    single["partition_index"] = json!(1);
    let part = prove(d, "window-post", single);
    assert_eq!(part.len(), 192);
    let replicas = public_replicas(WINDOW, &all[2..]);
    assert!(verify(&randomness, &part, &replicas));
}

/// A key whose points are all valid but two of them swapped (h's first
/// two, tau^0 and tau^1 times t(tau)/delta): it loads, the witness checks,
/// and every proof made with it is wrong. The finalizer's verification
/// catches each one: the job fails with the reason after its attempts, no
/// proof is served, and each rejection is counted.
#[test]
fn proofs_from_a_damaged_key_are_rejected_and_never_served() {
    fixtures::ensure_params(&[Kind::WinningPost]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let id = Kind::WinningPost.cache_id(2048).unwrap();
    for entry in std::fs::read_dir(fixtures::params_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().contains(&id) {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let params = dir.path().join(format!("v28-{id}.params"));
    let mut bytes = std::fs::read(&params).unwrap();
    // bellperson's layout: the verifying key (alpha_g1, beta_g1, beta_g2,
    // gamma_g2, delta_g1, delta_g2, then ic with its u32 count), then h
    // with its count, uncompressed G1 points of 96 bytes.
    let ic_at = 3 * 96 + 3 * 192;
    let ic = u32::from_be_bytes(bytes[ic_at..ic_at + 4].try_into().unwrap()) as usize;
    let h = ic_at + 4 + ic * 96 + 4;
    let (first, second) = bytes[h..h + 192].split_at_mut(96);
    assert_ne!(first, second);
    first.swap_with_slice(second);
    std::fs::write(&params, bytes).unwrap();

    let d = start_with(|config| {
        config.params_dir = Some(dir.path().to_path_buf());
        config.proving.filecoin_evaluation = Evaluation::Direct;
    });
    let sector = fixtures::seal(11).unwrap();
    let (status, body) = d.post(
        "/v1/jobs",
        &json!({ "circuit": "winning-post", "input": post_input(WINNING, [44; 32], &[&sector]) }),
    );
    assert_eq!(status, 202, "{body}");
    let job = d.wait(body["id"].as_str().unwrap(), PROOF_TIMEOUT);
    assert_eq!(job["status"], "failed", "{job}");
    assert!(job["error"].as_str().unwrap().contains("self-verification"), "{job}");
    let (status, proofs) = d.get(&format!("/v1/jobs/{}/proofs", body["id"].as_str().unwrap()));
    assert!(status >= 400, "no proof served: {status} {proofs}");
    let attempts = cuzk::config::Config::default().scheduler.max_attempts;
    let rejected = common::metric_value(&d.metrics(), "cuzk_proofs_rejected_total{circuit=\"winning-post\"}");
    assert_eq!(rejected, f64::from(attempts), "every attempt's proof rejected and counted");
}

#[test]
fn snap_prove_makes_what_the_update_verifier_accepts() {
    snap_on(&daemon());
}

/// A snap-prove job's input for an update the fixtures made.
fn snap_input(up: &fixtures::Update) -> Value {
    json!({
        "registered_proof": UPDATE,
        "comm_r_old": hex::encode(up.comm_r_old),
        "comm_r_new": hex::encode(up.comm_r_new),
        "comm_d_new": hex::encode(up.comm_d_new),
        "vanilla_proofs": up.vanilla_proofs.iter().map(hex::encode).collect::<Vec<_>>(),
    })
}

fn snap_on(d: &TestDaemon) {
    fixtures::ensure_params(&[Kind::EmptySectorUpdate]).unwrap();
    let sector = fixtures::seal(21).unwrap();
    let up = fixtures::update(&sector).unwrap();
    let input = snap_input(&up);
    let proof = prove(d, "snap-prove", input.clone());
    let verify = |comm_r_new| {
        update::verify_empty_sector_update_proof(UPDATE, &proof, up.comm_r_old, comm_r_new, up.comm_d_new)
            .unwrap_or(false)
    };
    assert!(verify(up.comm_r_new));
    assert!(!verify(up.comm_r_old), "another comm_r_new");
    // What `cuzk verify --kind snap-prove --input FILE` runs.
    let mut public = input.clone();
    public.as_object_mut().unwrap().remove("vanilla_proofs");
    assert!(cuzk::filecoin::verify(Kind::EmptySectorUpdate, &public, &proof).unwrap());
    public["comm_d_new"] = json!(hex::encode(up.comm_r_new));
    assert!(!cuzk::filecoin::verify(Kind::EmptySectorUpdate, &public, &proof).unwrap());
}

#[test]
fn bad_filecoin_inputs_are_refused_before_any_partition_runs() {
    let d = daemon();
    let empty_params = tempfile::tempdir().unwrap();
    let bare = start_with(|c| c.params_dir = Some(empty_params.path().to_path_buf()));
    let hex32 = hex::encode([1u8; 32]);
    let post = |proof: &str| json!({ "registered_proof": proof, "randomness": hex32, "prover_id": hex32, "vanilla_proofs": [] });
    let cases = [
        ("winning-post", post("StackedDrgWindow2KiBV1_2"), "is a window-post proof, not winning-post"),
        ("window-post", post("StackedDrgWinning2KiBV1"), "is a winning-post proof, not window-post"),
        ("winning-post", post("StackedDrgWinning3KiBV1"), "registered_proof"),
        (
            "winning-post",
            json!({ "registered_proof": "StackedDrgWinning2KiBV1", "randomness": "00", "prover_id": hex32, "vanilla_proofs": [] }),
            "randomness must be 32 bytes",
        ),
        (
            "winning-post",
            json!({ "registered_proof": "StackedDrgWinning2KiBV1", "randomness": hex32, "prover_id": hex32, "vanilla_proofs": ["zz"] }),
            "vanilla_proofs[0] is not hex",
        ),
        (
            "winning-post",
            json!({ "registered_proof": "StackedDrgWinning2KiBV1", "randomness": hex32, "prover_id": hex32, "vanilla_proofs": ["00ff"] }),
            "vanilla",
        ),
        (
            "winning-post",
            json!({ "registered_proof": "StackedDrgWinning2KiBV1", "randomness": hex32, "prover_id": hex32, "vanilla_proofs": [], "partition_index": 0 }),
            "partition_index",
        ),
        (
            "snap-prove",
            json!({ "registered_proof": "StackedDrg2KiBV1", "comm_r_old": hex32, "comm_r_new": hex32, "comm_d_new": "0x12", "vanilla_proofs": [] }),
            "comm_d_new must be 32 bytes",
        ),
        (
            "snap-prove",
            json!({ "registered_proof": "StackedDrg2KiBV1", "comm_r_old": hex32, "comm_r_new": hex32, "comm_d_new": hex32, "vanilla_proofs": ["00"] }),
            "invalid request",
        ),
        (
            "snap-prove",
            json!({ "registered_proof": "StackedDrg2KiBV1", "comm_r_old": hex32 }),
            "missing field",
        ),
        ("porep-c2", json!({ "prover_id": hex32, "sector_id": 1 }), "needs c1 or c1_base64"),
        ("porep-c2", json!({ "c1": {}, "c1_base64": "", "prover_id": hex32, "sector_id": 1 }), "not both"),
    ];
    for (kind, input, reason) in cases {
        let (status, body) = d.post("/v1/jobs", &json!({ "circuit": kind, "input": input }));
        assert_eq!(status, 422, "{kind} {reason}: {body}");
        assert!(body["error"].as_str().unwrap().contains(reason), "{kind} {reason}: {body}");
    }
    let (_, status) = d.get("/v1/status");
    assert_eq!(
        status["jobs"].as_object().map(|j| j.values().filter_map(Value::as_u64).sum::<u64>()),
        Some(0),
        "{status}"
    );

    // A valid request whose parameter file is missing names the file.
    fixtures::ensure_params(&[Kind::WinningPost]).unwrap();
    let sector = fixtures::seal(31).unwrap();
    let (status, body) = bare.post(
        "/v1/jobs",
        &json!({ "circuit": "winning-post", "input": post_input(WINNING, [7; 32], &[&sector]) }),
    );
    assert_eq!(status, 422, "{body}");
    let reason = body["error"].as_str().unwrap();
    assert!(reason.contains("is missing") && reason.contains(".params"), "{reason}");
    assert!(reason.contains(&Kind::WinningPost.cache_id(2048).unwrap()), "{reason}");

    // Non-interactive PoRep (a SnarkPack aggregate) is refused by name.
    let mut ni = serde_json::to_value(&sector.c1).unwrap();
    ni["registered_proof"] = json!("StackedDrg2KiBV1_2_Feat_NonInteractivePoRep");
    let input = json!({ "c1": ni, "prover_id": hex::encode(PROVER_ID), "sector_id": 31 });
    let (status, body) = d.post("/v1/jobs", &json!({ "circuit": "porep-c2", "input": input }));
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("non-interactive PoRep"), "{body}");
}

/// Each input built from the 2 KiB fixtures with one field made malformed
/// (an absurd or out-of-tree path index, a path of the wrong length, a
/// commitment that is not a field element, proofs that do not verify) is
/// refused at submit with 422 and a reason; none is queued, so none can
/// reach synthesis and panic there.
#[test]
fn malformed_vanilla_proofs_and_commitments_are_refused_at_submit() {
    fixtures::ensure_params(&[Kind::Porep, Kind::WinningPost, Kind::WindowPost, Kind::EmptySectorUpdate])
        .unwrap();
    let d = daemon();
    let sectors: Vec<Sector> = (41..44).map(|id| fixtures::seal(id).unwrap()).collect();
    let all: Vec<&Sector> = sectors.iter().collect();
    let randomness = [45u8; 32];
    let not_fr = json!(vec![0xffu8; 32]);
    let not_fr_hex = hex::encode([0xffu8; 32]);

    // PoSt: one vanilla proof's field changed, as JSON of the typed proof.
    let post = |kind: Kind, proof: RegisteredPoStProof, sectors: &[&Sector], edit: &dyn Fn(&mut Value)| {
        let mut input = post_input(proof, randomness, sectors);
        let first = hex::decode(input["vanilla_proofs"][0].as_str().unwrap()).unwrap();
        let edited = fixtures::edit_vanilla(kind, &first, |v| edit(v)).unwrap();
        input["vanilla_proofs"][0] = json!(hex::encode(edited));
        input
    };
    let winning = |edit: &dyn Fn(&mut Value)| post(Kind::WinningPost, WINNING, &all[..1], edit);
    let window = |edit: &dyn Fn(&mut Value)| post(Kind::WindowPost, WINDOW, &all, edit);
    let inclusion = |v: &mut Value, n: usize| -> Value {
        v["vanilla_proof"]["sectors"][0]["inclusion_proofs"][n]["data"]["Single"].take()
    };
    let set_inclusion = |v: &mut Value, n: usize, single: Value| {
        v["vanilla_proof"]["sectors"][0]["inclusion_proofs"][n]["data"]["Single"] = single;
    };
    let mut cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "winning-post",
            "an absurd path index",
            winning(&|v| {
                let mut p = inclusion(v, 0);
                p["path"]["path"][0]["index"] = json!(1u64 << 40);
                set_inclusion(v, 0, p);
            }),
            "index",
        ),
        (
            "winning-post",
            "a path index past its node's arity",
            winning(&|v| {
                let mut p = inclusion(v, 3);
                p["path"]["path"][1]["index"] = json!(8);
                set_inclusion(v, 3, p);
            }),
            "index",
        ),
        (
            "winning-post",
            "a path one level short",
            winning(&|v| {
                let mut p = inclusion(v, 0);
                p["path"]["path"].as_array_mut().unwrap().pop();
                set_inclusion(v, 0, p);
            }),
            "path",
        ),
        (
            "winning-post",
            "a sibling that is not a field element",
            winning(&|v| {
                let mut p = inclusion(v, 5);
                p["path"]["path"][0]["hashes"][2] = not_fr.clone();
                set_inclusion(v, 5, p);
            }),
            "field element",
        ),
        (
            "winning-post",
            "comm_c that is not a field element",
            winning(&|v| {
                v["vanilla_proof"]["sectors"][0]["comm_c"] = not_fr.clone();
            }),
            "field element",
        ),
        (
            "winning-post",
            "comm_r_last other than the paths' root",
            winning(&|v| {
                let comm_c = v["vanilla_proof"]["sectors"][0]["comm_c"].clone();
                v["vanilla_proof"]["sectors"][0]["comm_r_last"] = comm_c;
            }),
            "comm_r_last",
        ),
        // filecoin-proofs verifies the first of the 66 challenges only; the
        // circuit proves them all.
        (
            "winning-post",
            "a later challenge answered with another's path",
            winning(&|v| {
                let other = inclusion(v, 4);
                set_inclusion(v, 4, other.clone());
                set_inclusion(v, 9, other);
            }),
            "challenges do not all verify",
        ),
        (
            "window-post",
            "a sector id the proof was not drawn for",
            window(&|v| {
                v["sector_id"] = json!(999);
            }),
            "verify",
        ),
        (
            "window-post",
            "an absurd path index",
            window(&|v| {
                let mut p = inclusion(v, 1);
                p["path"]["path"][0]["index"] = json!(u64::MAX);
                set_inclusion(v, 1, p);
            }),
            "index",
        ),
    ];
    let mut other_randomness = post_input(WINDOW, [46; 32], &all);
    other_randomness["randomness"] = json!(hex::encode(randomness));
    cases.push(("window-post", "proofs drawn under other randomness", other_randomness, "verify"));

    // SnapDeals: a commitment, or the partition proof's fields.
    let up = fixtures::update(&sectors[0]).unwrap();
    let snap_input = snap_input(&up);
    let snap_field = |field: &str| {
        let mut input = snap_input.clone();
        input[field] = json!(not_fr_hex);
        input
    };
    let snap = |edit: &dyn Fn(&mut Value)| {
        let mut input = snap_input.clone();
        let edited =
            fixtures::edit_vanilla(Kind::EmptySectorUpdate, &up.vanilla_proofs[0], |v| edit(v)).unwrap();
        input["vanilla_proofs"][0] = json!(hex::encode(edited));
        input
    };
    cases.extend([
        ("snap-prove", "comm_d_new that is not a field element", snap_field("comm_d_new"), "comm_d_new"),
        ("snap-prove", "comm_r_old that is not a field element", snap_field("comm_r_old"), "comm_r_old"),
        ("snap-prove", "comm_r_new that is not a field element", snap_field("comm_r_new"), "comm_r_new"),
        (
            "snap-prove",
            "a TreeD path one level short",
            snap(&|v| {
                v["challenge_proofs"][0]["proof_d_new"]["data"]["Single"]["path"]["path"]
                    .as_array_mut()
                    .unwrap()
                    .pop();
            }),
            "path",
        ),
        (
            "snap-prove",
            "an absurd path index",
            snap(&|v| {
                v["challenge_proofs"][2]["proof_r_new"]["data"]["Single"]["path"]["path"][0]["index"] =
                    json!(1u64 << 33);
            }),
            "index",
        ),
        (
            "snap-prove",
            "an apex leaf that is not a field element",
            snap(&|v| {
                v["apex_leafs"][0] = not_fr.clone();
            }),
            "field element",
        ),
    ]);

    // PoRep: the C1 output is JSON already.
    let c1 = serde_json::to_value(&sectors[0].c1).unwrap();
    let porep = |edit: &dyn Fn(&mut Value)| {
        let mut c1 = c1.clone();
        edit(&mut c1);
        json!({ "c1": c1, "prover_id": hex::encode(PROVER_ID), "sector_id": 41 })
    };
    cases.extend([
        (
            "porep-c2",
            "a replica id that is not a field element",
            porep(&|c1| c1["replica_id"] = not_fr.clone()),
            "replica_id",
        ),
        (
            "porep-c2",
            "comm_d that is not a field element",
            porep(&|c1| c1["comm_d"] = not_fr.clone()),
            "comm_d",
        ),
        (
            "porep-c2",
            "an absurd comm_d path index",
            porep(&|c1| {
                let proof = first_challenge(c1);
                proof["comm_d_proofs"]["data"]["Single"]["path"]["path"][0]["index"] = json!(1u64 << 40);
            }),
            "index",
        ),
        // The reference zips the openings with the graph's parents: one
        // missing at the end verifies, and the circuit slices on the count.
        (
            "porep-c2",
            "an expander parent's opening missing",
            porep(&|c1| {
                let proof = first_challenge(c1);
                proof["replica_column_proofs"]["exp_parents"].as_array_mut().unwrap().pop();
            }),
            "7 expander parent columns; the graph has 8 expander parents",
        ),
        (
            "porep-c2",
            "a parent column a row short",
            porep(&|c1| {
                let proof = first_challenge(c1);
                proof["replica_column_proofs"]["drg_parents"][2]["column"]["rows"]
                    .as_array_mut()
                    .unwrap()
                    .pop();
            }),
            "DRG parent 2's column has",
        ),
    ]);

    let mut wrong = Vec::new();
    for (kind, what, input, reason) in cases {
        let (status, body) = d.post("/v1/jobs", &json!({ "circuit": kind, "input": input }));
        let error = body["error"].as_str().unwrap_or("");
        if status == 422 && error.contains(reason) {
            eprintln!("{kind}, {what}: {error}");
            continue;
        }
        // What became of it, for the failure message.
        let outcome = match body["id"].as_str() {
            Some(id) => d.wait(id, PROOF_TIMEOUT).to_string(),
            None => body.to_string(),
        };
        wrong.push(format!("{kind}, {what}: {status}, expected 422 naming {reason:?}: {outcome}"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let (_, status) = d.get("/v1/status");
    let jobs: u64 = status["jobs"].as_object().unwrap().values().filter_map(Value::as_u64).sum();
    assert_eq!(jobs, 0, "nothing refused is queued: {status}");
}

/// The vanilla proof of a C1 output's first challenge of its first
/// partition (`{"vanilla_proofs": {"<shape>": [[proof, ...], ...]}}`).
fn first_challenge(c1: &mut Value) -> &mut Value {
    let by_shape = c1["vanilla_proofs"].as_object_mut().unwrap();
    &mut by_shape.values_mut().next().unwrap()[0][0]
}

/// The four kinds on the CUDA engine: `cargo test --features cuda --test
/// filecoin -- --ignored` on a machine with a GPU; it says SKIPPED without one.
#[cfg(feature = "cuda")]
#[test]
#[ignore]
fn every_kind_proves_on_the_cuda_engine() {
    match cuzk_kernels::cuda::detect_devices() {
        Ok(devices) if !devices.is_empty() => {}
        _ => {
            eprintln!("SKIPPED every_kind_proves_on_the_cuda_engine: no CUDA device");
            return;
        }
    }
    let d = daemon_on(BackendKind::Cuda, Evaluation::default());
    porep_c2_on(&d);
    post_on(&d);
    snap_on(&d);
    let (_, workers) = d.get("/v1/workers");
    eprintln!("{workers:#}");
}

/// The device's evaluation of the compiled matrices (the CUDA engine's a, b
/// and c of a deferred partition) equals the host's on a partition of every
/// kind: `cargo test --features cuda --test daemon -- --ignored filecoin::`; it says
/// SKIPPED without a GPU. Needs no parameter file.
#[cfg(feature = "cuda")]
#[test]
#[ignore]
fn device_evaluation_equals_the_host_on_every_kind() {
    use cuzk_filecoin::post::PostRequest;
    use cuzk_filecoin::record::Recorded;
    use cuzk_filecoin::update::UpdateRequest;
    use cuzk_filecoin::ProofRequest;
    use cuzk_kernels::cuda::gpu::{DBuf, DevFr};
    use cuzk_kernels::cuda::{detect_devices, CudaEngine, CudaOptions};
    use cuzk_kernels::device_plan::Place;

    match detect_devices() {
        Ok(devices) if !devices.is_empty() => {}
        _ => {
            eprintln!("SKIPPED device_evaluation_equals_the_host_on_every_kind: no CUDA device");
            return;
        }
    }
    let engine = CudaEngine::new(0, CudaOptions::default()).unwrap();
    let sectors: Vec<Sector> = (41..=42).map(|id| fixtures::seal(id).unwrap()).collect();
    let randomness = [21u8; 32];
    let post = |proof, sectors: &[&Sector]| PostRequest {
        registered_proof: proof,
        randomness,
        prover_id: PROVER_ID,
        vanilla_proofs: fixtures::post_vanilla_proofs(proof, randomness, sectors).unwrap(),
        partition_index: None,
    };
    let update = fixtures::update(&sectors[1]).unwrap();
    let snap = UpdateRequest {
        registered_proof: UPDATE,
        comm_r_old: update.comm_r_old,
        comm_r_new: update.comm_r_new,
        comm_d_new: update.comm_d_new,
        vanilla_proofs: update.vanilla_proofs,
    };
    let porep = cuzk_filecoin::porep::PorepRequest {
        c1: sectors[0].c1.clone(),
        prover_id: PROVER_ID,
        sector_id: u64::from(sectors[0].id),
    };
    let compiled = Evaluation::Compiled;
    let recorded = [
        (Kind::Porep, porep.record_partition(0, compiled)),
        (Kind::WinningPost, post(WINNING, &[&sectors[0]]).record_partition(0, compiled)),
        (Kind::WindowPost, post(WINDOW, &[&sectors[0], &sectors[1]]).record_partition(0, compiled)),
        (Kind::EmptySectorUpdate, snap.record_partition(0, compiled)),
    ];
    for (kind, recorded) in recorded {
        let Ok(Recorded::Assignment { values, .. }) = recorded else {
            panic!("{}: compiled evaluation records the assignment", kind.api_name());
        };
        let shape = kind.blank(2048).unwrap().shape;
        let n = shape.domain_size();
        let want = shape.matrices.evaluate(&values, n).unwrap();
        let z = engine.upload_fr(&values).unwrap();
        let abc: [DBuf<DevFr>; 3] = std::array::from_fn(|_| DBuf::new(n).unwrap());
        let id = kind.cache_id(2048).unwrap();
        let ms = engine.evaluate_device(&id, &shape.matrices, Place::Device, &z, &abc, n).unwrap();
        for (k, want) in want.iter().enumerate() {
            let got = engine.download_fr(&abc[k], n).unwrap();
            assert!(&got == want, "{}: matrix {k} differs", kind.api_name());
        }
        let (name, rows, log) = (kind.api_name(), shape.constraints, n.trailing_zeros());
        eprintln!("{name}: {rows} rows, 2^{log} domain, {ms:.2} ms on the device: equal");
    }
}
