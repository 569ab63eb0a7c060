//! The HTTP API end to end through the real server, on the CPU backend.

use crate::common;

use std::time::Duration;

use common::{agent, response, start};
use cuzk::jobs::JobsError;
use cuzk_actors::messages::JobStatus;
use cuzk_actors::{JobId, Tenant, TenantScope};
use serde_json::{json, Value};

fn small_job() -> Value {
    json!({
        "circuit": "poseidon-merkle",
        "params": {"depth": 4, "challenges": 2},
        "partitions": 2,
        "priority": "high",
        "seed": 7
    })
}

#[test]
fn submit_poll_fetch_verify() {
    let d = start();
    let res = agent().post(&format!("{}/v1/jobs", d.url)).send_json(small_job()).expect("submit");
    assert_eq!(res.status(), 202);
    let location = res.header("Location").expect("Location header").to_string();
    let body: Value = res.into_json().unwrap();
    assert_eq!(body["status"], "queued");
    let id = body["id"].as_str().unwrap();
    assert_eq!(location, format!("/v1/jobs/{id}"));

    let job = d.wait(id, Duration::from_secs(120));
    assert_eq!(job["status"], "done", "{job}");
    assert_eq!(job["circuit_id"], "poseidon-merkle-d4-c2");
    for p in job["partitions"].as_array().unwrap() {
        assert_eq!(p["stage"], "done");
        for timing in ["queue_wait", "synthesis", "gpu_wait", "gpu", "finalize", "total"] {
            assert!(p["timings_ms"][timing].as_f64().is_some(), "{timing} missing in {p}");
        }
    }

    let (status, proofs) = d.get(&format!("/v1/jobs/{id}/proofs"));
    assert_eq!(status, 200);
    assert_eq!(proofs["proofs"].as_array().unwrap().len(), 2);
    // Public inputs: the root, then one index per challenge.
    assert_eq!(proofs["proofs"][0]["public_inputs"].as_array().unwrap().len(), 3);

    let vk = cuzk::client::fetch_vk(&d.url, "poseidon-merkle-d4-c2", None).expect("vk served");
    let results = cuzk::client::verify_proofs(&vk, &proofs).expect("proofs decode");
    assert_eq!(results, vec![(0, true), (1, true)]);

    // A tampered public input must not verify.
    let mut tampered = proofs.clone();
    tampered["proofs"][1]["public_inputs"][0] = proofs["proofs"][0]["public_inputs"][1].clone();
    let results = cuzk::client::verify_proofs(&vk, &tampered).expect("proofs decode");
    assert_eq!(results, vec![(0, true), (1, false)]);

    let (status, circuits) = d.get("/v1/circuits");
    assert_eq!(status, 200);
    let merkle =
        circuits["circuits"].as_array().unwrap().iter().find(|c| c["name"] == "poseidon-merkle").unwrap();
    assert_eq!(merkle["known_shapes"], json!(["poseidon-merkle-d4-c2"]));

    // The recorder is process-wide and other tests run beside this one, so
    // only what this job must have added is checked.
    let metrics = d.metrics();
    assert!(common::metric_value(&metrics, "cuzk_jobs_finished_total{outcome=\"done\"}") >= 1.0, "{metrics}");
    assert!(
        common::metric_value(&metrics, "cuzk_partitions_finished_total{outcome=\"done\"}") >= 2.0,
        "{metrics}"
    );
    assert!(metrics.contains("# TYPE cuzk_gpu_busy_seconds_total counter"), "{metrics}");
    assert!(
        metrics.contains("cuzk_stage_duration_seconds_bucket{stage=\"synthesis\",le=\"0.001\"}"),
        "{metrics}"
    );
}

#[test]
fn proofs_conflict_while_running_and_idempotency_returns_the_same_job() {
    let d = start();
    let mut body = small_job();
    body["request_id"] = json!("req-1");
    let (status, first) = d.post("/v1/jobs", &body);
    assert_eq!(status, 202);
    let id = first["id"].as_str().unwrap();
    let (status, conflict) = d.get(&format!("/v1/jobs/{id}/proofs"));
    assert_eq!(status, 409, "{conflict}");
    assert!(conflict["error"].as_str().unwrap().contains("only once it is done"));

    let (status, again) = d.post("/v1/jobs", &body);
    assert_eq!(status, 200);
    assert_eq!(again["id"], first["id"]);

    let res =
        agent().post(&format!("{}/v1/jobs", d.url)).set("Idempotency-Key", "hdr-1").send_json(small_job());
    let (status, by_header) = response(res);
    assert_eq!(status, 202);
    let res =
        agent().post(&format!("{}/v1/jobs", d.url)).set("Idempotency-Key", "hdr-1").send_json(small_job());
    let (status, repeat) = response(res);
    assert_eq!(status, 200);
    assert_eq!(repeat["id"], by_header["id"]);
    assert_ne!(by_header["id"], first["id"]);

    // The same key with another body is a conflict, named; an empty key is
    // no key at all.
    let mut other = body.clone();
    other["seed"] = json!(99);
    let (status, conflict) = d.post("/v1/jobs", &other);
    assert_eq!(status, 422, "{conflict}");
    let reason = conflict["error"].as_str().unwrap();
    assert!(reason.contains("req-1") && reason.contains(first["id"].as_str().unwrap()), "{reason}");
    let mut empty = small_job();
    empty["request_id"] = json!("");
    assert_eq!(d.post("/v1/jobs", &empty).0, 422);
    let res = agent().post(&format!("{}/v1/jobs", d.url)).set("Idempotency-Key", " ").send_json(small_job());
    let (status, refused) = response(res);
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("must not be empty"), "{refused}");

    assert_eq!(d.wait(id, Duration::from_secs(120))["status"], "done");
}

/// HEAD is served wherever GET is, with the GET's status and headers and
/// no body; a path without a GET is still 404.
#[test]
fn head_is_answered_where_get_is() {
    let d = start();
    for path in ["/healthz", "/v1/status", "/v1/circuits", "/metrics", "/"] {
        let res = agent().head(&format!("{}{path}", d.url)).call().unwrap();
        assert_eq!(res.status(), 200, "HEAD {path}");
        assert!(res.into_string().unwrap().is_empty(), "HEAD {path} has no body");
    }
    let missing = agent().head(&format!("{}/v1/jobs/nope", d.url)).call();
    assert!(matches!(missing, Err(ureq::Error::Status(404, _))), "{missing:?}");
}

/// A HEAD pipelined with a GET behind it, before its answer is read, is
/// answered with its head alone on every route that answers HEAD (issue
/// 40: actix-http framed it by the request decoded last, the GET, and sent
/// the HEAD's body, which the client then read as the next answer).
#[test]
fn a_pipelined_head_is_answered_without_a_body_on_every_route() {
    use std::io::{Read, Write};

    let d = start();
    let res = agent().post(&format!("{}/v1/jobs", d.url)).send_json(small_job()).expect("submit");
    let id = res.into_json::<Value>().unwrap()["id"].as_str().unwrap().to_string();
    let job = d.wait(&id, Duration::from_secs(120));
    let circuit_id = job["circuit_id"].as_str().unwrap().to_string();
    let address = d.url.trim_start_matches("http://").to_string();
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Everything read and not yet taken as an answer.
    let mut pending: Vec<u8> = Vec::new();
    /// The next answer's status and, unless it answers a HEAD, its body,
    /// from `pending` and the stream.
    fn next_answer(
        stream: &mut std::net::TcpStream,
        pending: &mut Vec<u8>,
        head_only: bool,
    ) -> (u16, Vec<u8>) {
        let mut more = |pending: &mut Vec<u8>| {
            let mut chunk = [0u8; 65536];
            let n = stream.read(&mut chunk).expect("an answer within 10 s");
            assert!(n > 0, "the connection closed; read so far: {:?}", String::from_utf8_lossy(pending));
            pending.extend_from_slice(&chunk[..n]);
        };
        let end = loop {
            if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            more(pending);
        };
        let head = String::from_utf8_lossy(&pending[..end]).to_ascii_lowercase();
        let status: u16 = head
            .strip_prefix("http/1.1 ")
            .and_then(|rest| rest.get(..3)?.parse().ok())
            .unwrap_or_else(|| panic!("not an answer's head: {head:?}"));
        let length = match head_only {
            true => 0,
            false => head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:")?.trim().parse::<usize>().ok())
                .unwrap_or_else(|| panic!("no content-length: {head:?}")),
        };
        while pending.len() < end + length {
            more(pending);
        }
        let body = pending[end..end + length].to_vec();
        pending.drain(..end + length);
        (status, body)
    }
    let gets: Vec<String> = cuzk::http::routes()
        .into_iter()
        .filter(|route| route.method == actix_web::http::Method::GET)
        .map(|route| route.path.replace("{id}", &id).replace("{circuit_id}", &circuit_id))
        .collect();
    assert!(gets.len() >= 12, "{gets:?}");
    for path in &gets {
        let pair = format!(
            "HEAD {path} HTTP/1.1\r\nHost: {address}\r\n\r\nGET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n"
        );
        stream.write_all(pair.as_bytes()).unwrap();
        let (status, _) = next_answer(&mut stream, &mut pending, true);
        assert_eq!(status, 200, "HEAD {path}");
        let (status, body) = next_answer(&mut stream, &mut pending, false);
        assert_eq!(
            (status, body.as_slice()),
            (200, &br#"{"status":"ok"}"#[..]),
            "the GET behind HEAD {path}"
        );
    }
    assert!(pending.is_empty(), "bytes after the last answer: {:?}", String::from_utf8_lossy(&pending));
}

/// The fleet's view needs a fleet (a daemon on PostgreSQL, which names its
/// node in its status); an unknown scope is refused by name.
#[test]
fn status_scope_fleet_needs_a_fleet_node_and_unknown_scopes_are_refused() {
    let d = start();
    let (status, own) = d.get("/v1/status?scope=node");
    assert_eq!(status, 200, "{own}");
    let (status, body) = d.get("/v1/status?scope=fleet");
    match own.get("node") {
        Some(node) => {
            assert_eq!(status, 200, "{body}");
            assert_eq!((&body["scope"], &body["node"]), (&json!("fleet"), node), "{body}");
            assert!(
                body["fleet"]["jobs"].is_object() && body["fleet"]["partitions_waiting"].is_number(),
                "{body}"
            );
        }
        None => {
            assert_eq!(status, 422, "{body}");
            assert!(body["error"].as_str().unwrap().contains("store.url"), "{body}");
        }
    }
    let (status, body) = d.get("/v1/status?scope=everything");
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("\"everything\""), "{body}");
}

#[test]
fn client_inputs_are_proved_and_checked() {
    let d = start();
    let leaves: Vec<String> = (0..16).map(|i| format!("{}", 1000 + i)).collect();
    let body = json!({
        "circuit": "poseidon-merkle",
        "params": {"depth": 4, "challenges": 2},
        "partitions": 1,
        "inputs": {"leaves": leaves, "indices": [3, 12]},
    });
    let (status, accepted) = d.post("/v1/jobs", &body);
    assert_eq!(status, 202, "{accepted}");
    let job = d.wait(accepted["id"].as_str().unwrap(), Duration::from_secs(120));
    assert_eq!(job["status"], "done", "{job}");
    let (_, proofs) = d.get(&format!("/v1/jobs/{}/proofs", accepted["id"].as_str().unwrap()));
    let inputs = &proofs["proofs"][0]["public_inputs"];
    // Leaf indices 3 and 12 as little-endian field elements.
    assert_eq!(inputs[1].as_str().unwrap(), format!("03{}", "0".repeat(62)));
    assert_eq!(inputs[2].as_str().unwrap(), format!("0c{}", "0".repeat(62)));
}

#[test]
fn status_flood_does_not_stall_the_job() {
    let d = start();
    let (status, accepted) = d.post("/v1/jobs", &small_job());
    assert_eq!(status, 202);
    let id = accepted["id"].as_str().unwrap().to_string();
    let url = d.url.clone();
    let flooders: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            let id = id.clone();
            std::thread::spawn(move || {
                let agent = agent();
                let mut served = 0;
                loop {
                    let status: Value =
                        agent.get(&format!("{url}/v1/status")).call().unwrap().into_json().unwrap();
                    assert!(status["workers"].is_array());
                    served += 1;
                    let job: Value =
                        agent.get(&format!("{url}/v1/jobs/{id}")).call().unwrap().into_json().unwrap();
                    if job["status"] != "queued" && job["status"] != "running" {
                        return served;
                    }
                }
            })
        })
        .collect();
    let job = d.wait(&id, Duration::from_secs(120));
    assert_eq!(job["status"], "done");
    let served: usize = flooders.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(served > 20, "only {served} status requests were served during the job");
}

#[test]
fn cancel_stops_a_queued_job() {
    let d = common::start_with(|c| c.scheduler.synthesis_threads = 1);
    let mut big = small_job();
    big["partitions"] = json!(8);
    let (_, first) = d.post("/v1/jobs", &big);
    let (_, second) = d.post("/v1/jobs", &big);
    let second_id = second["id"].as_str().unwrap();
    let (status, cancelled) = d.post(&format!("/v1/jobs/{second_id}/cancel"), &json!({}));
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    // Cancelling is idempotent.
    let (status, again) = d.post(&format!("/v1/jobs/{second_id}/cancel"), &json!({}));
    assert_eq!((status, &again["status"]), (200, &json!("cancelled")), "{again}");
    let job = d.wait(second_id, Duration::from_secs(5));
    assert_eq!(job["status"], "cancelled");
    assert!(job["partitions"].as_array().unwrap().iter().all(|p| p["stage"] == "cancelled"), "{job}");
    let first_id = first["id"].as_str().unwrap();
    assert_eq!(d.wait(first_id, Duration::from_secs(180))["status"], "done");
    let (status, late) = d.post(&format!("/v1/jobs/{first_id}/cancel"), &json!({}));
    assert_eq!(status, 409, "{late}");
    assert_eq!(late["status"], "done");
    // Every reservation came back; the shape's key and matrices stay
    // resident and are counted.
    let (_, status) = d.get("/v1/status");
    assert_eq!(status["budget"]["used_bytes"], 0, "{status}");
    assert!(status["budget"]["resident_bytes"].as_u64().unwrap() > 0, "{status}");
    let (status, _) = d.post("/v1/jobs/nope/cancel", &json!({}));
    assert_eq!(status, 404);
}

#[test]
fn a_missed_deadline_is_reported() {
    let d = start();
    let mut late = small_job();
    late["deadline_ms"] = json!(1);
    let (_, accepted) = d.post("/v1/jobs", &late);
    let job = d.wait(accepted["id"].as_str().unwrap(), Duration::from_secs(120));
    assert_eq!((&job["status"], &job["deadline_missed"]), (&json!("done"), &json!(true)), "{job}");
    let metrics = d.metrics();
    assert!(
        common::metric_value(&metrics, "cuzk_jobs_deadline_missed_total{priority=\"high\"}") >= 1.0,
        "{metrics}"
    );

    let mut relaxed = small_job();
    relaxed["deadline_ms"] = json!(3_600_000);
    let (_, accepted) = d.post("/v1/jobs", &relaxed);
    let job = d.wait(accepted["id"].as_str().unwrap(), Duration::from_secs(120));
    assert_eq!(job["deadline_missed"], json!(false), "{job}");
    let (_, plain) = d.get(&format!("/v1/jobs/{}", accepted["id"].as_str().unwrap()));
    assert!(plain.get("deadline_missed").is_some());
}

/// A caller waiting on the job seam hears a job's end without polling:
/// hundreds of waiters at once, the job's final status, a cancel as
/// `cancelled`; a wait whose time runs out first answers the status then;
/// another tenant's job, or none, is not found. With
/// CUZK_TEST_STORE=postgres the daemon is a fleet node, and the same waits
/// are answered from the database.
#[test]
fn waiting_on_the_job_seam_hears_the_end() {
    let d = common::start_with(|c| c.scheduler.synthesis_threads = 1);
    let jobs = d.daemon.jobs.clone();
    let mut big = small_job();
    big["partitions"] = json!(8);
    let (_, first) = d.post("/v1/jobs", &big);
    let (_, second) = d.post("/v1/jobs", &big);
    let first = JobId(first["id"].as_str().unwrap().into());
    let second = JobId(second["id"].as_str().unwrap().into());
    actix_rt::System::new().block_on(async move {
        let all = TenantScope::All;
        // Its first partition cannot be done a millisecond after it was
        // submitted: the shape's key is still being set up.
        let now = jobs.wait(&first, &all, Some(Duration::from_millis(1))).await.unwrap();
        assert!(matches!(now, JobStatus::Queued | JobStatus::Running), "{now:?}");
        let waiters: Vec<_> = (0..300)
            .map(|_| {
                let (jobs, first) = (jobs.clone(), first.clone());
                actix_rt::spawn(async move { jobs.wait(&first, &TenantScope::All, None).await })
            })
            .collect();
        let cancelled = {
            let (jobs, second) = (jobs.clone(), second.clone());
            actix_rt::spawn(async move {
                jobs.wait(&second, &TenantScope::All, Some(Duration::from_secs(60))).await
            })
        };
        // Queued behind the first (one synthesis thread): cancelled before it starts.
        jobs.cancel(&second, &all).await.unwrap();
        assert_eq!(cancelled.await.unwrap().unwrap(), JobStatus::Cancelled);
        for waiter in waiters {
            assert_eq!(waiter.await.unwrap().unwrap(), JobStatus::Done);
        }
        // An ended job answers at once.
        let again = jobs.wait(&first, &all, Some(Duration::from_millis(1))).await.unwrap();
        assert_eq!(again, JobStatus::Done);
        let other = TenantScope::Only(Tenant("another".into()));
        assert!(matches!(jobs.wait(&first, &other, None).await, Err(JobsError::NotFound(_))));
        let none = JobId("no-such-job".into());
        assert!(matches!(jobs.wait(&none, &all, None).await, Err(JobsError::NotFound(_))));
    });
}
