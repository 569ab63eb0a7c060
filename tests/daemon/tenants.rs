//! Tenants (docs/security.md, "Tenants"), through the real server on the
//! simulated backend: each tenant reads, cancels and keys only its own jobs,
//! an admin sees all; per-tenant queue and rate limits answer 429 with
//! Retry-After; a restart keeps each job's tenant; critical is earned by
//! the token's scope or the kind, else lowered; and the `cuzk` binary
//! reloads its tokens on SIGHUP and keeps an environment token out of
//! /proc/PID/environ.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{agent, metric_value, response, spawn_ready, start_with, test_config, Serve};
use cuzk::auth::parse_token_entry;
use cuzk::config::{BackendKind, Config};
use cuzk::tenants::TenantLimits;
use serde_json::{json, Value};

const ALPHA: &str = "alpha-0123456789abcdef";
const BETA: &str = "beta-0123456789abcdef";
const ADMIN: &str = "admin-0123456789abcdef";

/// Fast simulated jobs (winning-post at a thousandth of its time), or ones
/// that stay queued for minutes (porep-32g in real time).
fn sim(c: &mut Config, fast: bool) {
    c.backend = BackendKind::Sim;
    c.sim.profile = if fast { "winning-post" } else { "porep-32g" }.into();
    c.sim.time_scale = if fast { 0.001 } else { 1.0 };
    if !fast {
        // A full-length partition fits, so jobs wait instead of failing.
        c.scheduler.budget = cuzk::config::Budget::Bytes(1 << 40);
    }
}

/// Tokens of tenants `alpha` and `beta` and an admin of tenant `ops`;
/// every read needs a token, so that reads are kept apart too.
fn tenants(c: &mut Config) {
    c.auth.tokens = [format!("{ALPHA}@alpha"), format!("{BETA}@beta"), format!("{ADMIN}@ops:admin")]
        .iter()
        .map(|entry| parse_token_entry(entry).unwrap())
        .collect();
    c.auth.read_requires_token = true;
}

fn job(seed: u64) -> Value {
    json!({"circuit": "mimc-chain", "params": {"log2_constraints": 4}, "seed": seed})
}

/// (status, body, Retry-After) of a request with a token and, for a POST,
/// a body and an optional idempotency key.
fn call(
    url: &str,
    method: &str,
    path: &str,
    token: &str,
    body: Option<(&Value, Option<&str>)>,
) -> (u16, Value, Option<u64>) {
    let mut request =
        agent().request(method, &format!("{url}{path}")).set("Authorization", &format!("Bearer {token}"));
    let result = match body {
        Some((body, key)) => {
            if let Some(key) = key {
                request = request.set("Idempotency-Key", key);
            }
            request.send_json(body)
        }
        None if method == "POST" => request.send_bytes(b""),
        None => request.call(),
    };
    let retry_after = match &result {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r.header("Retry-After").and_then(|v| v.parse().ok()),
        Err(_) => None,
    };
    let (status, body) = response(result);
    (status, body, retry_after)
}

fn submit(url: &str, token: &str, seed: u64, key: Option<&str>) -> (u16, Value, Option<u64>) {
    call(url, "POST", "/v1/jobs", token, Some((&job(seed), key)))
}

fn get(url: &str, token: &str, path: &str) -> (u16, Value) {
    let (status, body, _) = call(url, "GET", path, token, None);
    (status, body)
}

fn wait_done(url: &str, token: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, job) = get(url, token, &format!("/v1/jobs/{id}"));
        assert_eq!(status, 200, "{job}");
        if job["status"] == "done" {
            return job;
        }
        assert!(Instant::now() < deadline, "job {id} not done: {job}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_tenant_sees_and_cancels_only_its_own_jobs_and_an_admin_all() {
    let d = start_with(|c| {
        sim(c, true);
        tenants(c);
    });
    let (status, accepted, _) = submit(&d.url, ALPHA, 1, None);
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap().to_string();
    let done = wait_done(&d.url, ALPHA, &id);
    assert_eq!(done["tenant"], "alpha", "{done}");

    // To beta the job does not exist: the answers of a missing job, word
    // for word.
    let missing = "0123456789abcdef0123456789abcdef";
    for (path, missing_path) in [
        (format!("/v1/jobs/{id}"), format!("/v1/jobs/{missing}")),
        (format!("/v1/jobs/{id}/proofs"), format!("/v1/jobs/{missing}/proofs")),
    ] {
        let (status, body) = get(&d.url, BETA, &path);
        assert_eq!(status, 404, "{path}: {body}");
        let (_, absent) = get(&d.url, BETA, &missing_path);
        assert_eq!(body["error"].as_str().unwrap().replace(&id, missing), absent["error"], "{path}");
    }
    let (status, body, _) = call(&d.url, "POST", &format!("/v1/jobs/{id}/cancel"), BETA, None);
    assert_eq!(status, 404, "{body}");

    // The owner and the admin read it; the admin sees which job the GPU
    // served, a tenant does not.
    assert_eq!(get(&d.url, ALPHA, &format!("/v1/jobs/{id}/proofs")).0, 200);
    let (status, view) = get(&d.url, ADMIN, &format!("/v1/jobs/{id}"));
    assert_eq!((status, &view["tenant"]), (200, &json!("alpha")), "{view}");
    assert_eq!(get(&d.url, ADMIN, &format!("/v1/jobs/{id}/proofs")).0, 200);
    let (_, timeline) = get(&d.url, ADMIN, "/v1/timeline?format=json");
    assert!(timeline.to_string().contains(&id), "the admin sees job ids: {timeline}");
    for path in ["/v1/timeline?format=json", "/v1/workers"] {
        let (status, body) = get(&d.url, BETA, path);
        assert_eq!(status, 200, "{body}");
        assert!(!body.to_string().contains("\"job\""), "{path} shows a job id to a tenant: {body}");
    }

    // Cancelling: beta's running job is beyond alpha, within the admin.
    let (status, accepted, _) = submit(&d.url, BETA, 2, None);
    assert_eq!(status, 202, "{accepted}");
    let beta_job = accepted["id"].as_str().unwrap();
    let cancel = format!("/v1/jobs/{beta_job}/cancel");
    assert_eq!(call(&d.url, "POST", &cancel, ALPHA, None).0, 404);
    let (status, body, _) = call(&d.url, "POST", &cancel, ADMIN, None);
    assert!(status == 200 || status == 409, "{status} {body}");
    // Preloading parameter files is the operator's: a tenant's token is
    // refused before the route is looked at.
    let (status, body, _) = call(&d.url, "POST", "/v1/params/x/preload", ALPHA, None);
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("admin scope"), "{body}");
}

#[test]
fn idempotency_keys_are_per_tenant() {
    let d = start_with(|c| {
        sim(c, true);
        tenants(c);
    });
    let (status, first, _) = submit(&d.url, ALPHA, 7, Some("shared-key"));
    assert_eq!(status, 202, "{first}");
    let (status, again, _) = submit(&d.url, ALPHA, 7, Some("shared-key"));
    assert_eq!((status, &again["id"]), (200, &first["id"]), "{again}");
    // The same key and body from beta is beta's own, new job.
    let (status, other, _) = submit(&d.url, BETA, 7, Some("shared-key"));
    assert_eq!(status, 202, "{other}");
    assert_ne!(other["id"], first["id"]);
    let (status, other_again, _) = submit(&d.url, BETA, 7, Some("shared-key"));
    assert_eq!((status, &other_again["id"]), (200, &other["id"]));
    // A key still conflicts within its tenant.
    let (status, conflict, _) = submit(&d.url, BETA, 8, Some("shared-key"));
    assert_eq!(status, 422, "{conflict}");
}

#[test]
fn a_tenant_queue_limit_answers_429_for_that_tenant_only() {
    let d = start_with(|c| {
        sim(c, false);
        c.auth.tokens = vec![
            parse_token_entry(&format!("{ALPHA}@gamma")).unwrap(),
            parse_token_entry(&format!("{BETA}@epsilon")).unwrap(),
        ];
        c.auth.tenants.insert("gamma".into(), TenantLimits { max_queued_jobs: 1, ..Default::default() });
        c.limits.queue_full_retry_after_s = 7;
    });
    let zero = r#"cuzk_tenant_refusals_total{tenant="gamma",reason="queue_full"}"#;
    assert!(d.metrics().lines().any(|l| l == format!("{zero} 0")), "starts at zero:\n{}", d.metrics());
    let (status, first, _) = submit(&d.url, ALPHA, 1, None);
    assert_eq!(status, 202, "{first}");
    let (status, body, retry_after) = submit(&d.url, ALPHA, 2, None);
    assert_eq!(status, 429, "{body}");
    assert_eq!(retry_after, Some(7));
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("gamma") && error.contains("its limit of 1"), "{error}");
    assert_eq!(metric_value(&d.metrics(), zero), 1.0);
    // Another tenant is not held by gamma's limit.
    assert_eq!(submit(&d.url, BETA, 3, None).0, 202);
    // Once gamma's job ends, gamma may submit again.
    let cancel = format!("/v1/jobs/{}/cancel", first["id"].as_str().unwrap());
    assert_eq!(call(&d.url, "POST", &cancel, ALPHA, None).0, 200);
    assert_eq!(submit(&d.url, ALPHA, 4, None).0, 202);
}

/// No tenant takes more than its share of the daemon's queue
/// (`limits.queue_share_per_tenant`, half by default), configured limit or
/// not: at its share its submissions are answered 429 naming the share,
/// while another tenant's are taken; the operator's own (admin) are held
/// to the daemon's limit only. Without shares, alpha would have filled
/// the queue and beta been refused.
#[test]
fn no_tenant_takes_more_than_its_share_of_the_queue() {
    let d = start_with(|c| {
        sim(c, false);
        tenants(c);
        c.limits.max_queued_jobs = 4;
    });
    assert_eq!(submit(&d.url, ALPHA, 1, None).0, 202);
    assert_eq!(submit(&d.url, ALPHA, 2, None).0, 202);
    let (status, body, _) = submit(&d.url, ALPHA, 3, None);
    assert_eq!(status, 429, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("alpha") && error.contains("queue_share_per_tenant"), "{error}");
    let series = r#"cuzk_tenant_refusals_total{tenant="alpha",reason="queue_full"}"#;
    let metrics = agent().get(&format!("{}/metrics", d.url)).set("Authorization", &format!("Bearer {ADMIN}"));
    assert_eq!(metric_value(&metrics.call().unwrap().into_string().unwrap(), series), 1.0);
    // Beta's share is its own; the admin fills the rest of the queue.
    assert_eq!(submit(&d.url, BETA, 4, None).0, 202);
    assert_eq!(submit(&d.url, ADMIN, 5, None).0, 202);
    let (status, body, _) = submit(&d.url, ADMIN, 6, None);
    assert_eq!(status, 429, "{body}");
    assert!(body["error"].as_str().unwrap().contains("queue full"), "the daemon's limit: {body}");
}

#[test]
fn a_tenant_submit_rate_answers_429_with_the_wait() {
    let d = start_with(|c| {
        sim(c, true);
        c.auth.tokens = vec![
            parse_token_entry(&format!("{ALPHA}@delta")).unwrap(),
            parse_token_entry(&format!("{BETA}@zeta")).unwrap(),
        ];
        c.auth.tenant_defaults =
            TenantLimits { submit_rate_per_s: 0.25, submit_burst: 2, ..Default::default() };
    });
    assert_eq!(submit(&d.url, ALPHA, 1, None).0, 202);
    assert_eq!(submit(&d.url, ALPHA, 2, None).0, 202);
    let (status, body, retry_after) = submit(&d.url, ALPHA, 3, None);
    assert_eq!(status, 429, "{body}");
    let retry_after = retry_after.expect("Retry-After");
    assert!((1..=4).contains(&retry_after), "{retry_after}");
    assert!(body["error"].as_str().unwrap().contains("submit rate"), "{body}");
    let series = r#"cuzk_tenant_refusals_total{tenant="delta",reason="rate_limited"}"#;
    assert_eq!(metric_value(&d.metrics(), series), 1.0);
    // zeta has a bucket of its own.
    assert_eq!(submit(&d.url, BETA, 4, None).0, 202);
}

#[test]
fn a_restart_keeps_each_jobs_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    sim(&mut config, true);
    let start = || {
        // Gate::new takes the tokens out of the config it is given.
        let mut config = config.clone();
        tenants(&mut config);
        cuzk::server::spawn(config, cuzk_kernels::circuits::CircuitRegistry::builtin())
            .expect("daemon starts")
    };
    let daemon = start();
    let url = daemon.url();
    let (_, accepted, _) = submit(&url, ALPHA, 1, Some("kept-key"));
    let id = accepted["id"].as_str().unwrap().to_string();
    wait_done(&url, ALPHA, &id);
    daemon.stop();

    let daemon = start();
    let url = daemon.url();
    let (status, view) = get(&url, ALPHA, &format!("/v1/jobs/{id}"));
    assert_eq!((status, &view["tenant"]), (200, &json!("alpha")), "{view}");
    assert_eq!(get(&url, BETA, &format!("/v1/jobs/{id}")).0, 404);
    // The key is still alpha's (the same job) and still not beta's.
    let (status, again, _) = submit(&url, ALPHA, 1, Some("kept-key"));
    assert_eq!((status, again["id"].as_str()), (200, Some(id.as_str())));
    assert_eq!(submit(&url, BETA, 1, Some("kept-key")).0, 202);
    daemon.stop();
}

/// Critical is earned, not claimed (issue 40): a bulk token asking for
/// critical on a kind outside `scheduler.critical_kinds` gets the kind's
/// default, counted, and keeps it across a restart; a token with the
/// critical scope keeps critical on any kind; admin does not imply the
/// scope; a kind on the list is critical for anyone; a list naming no
/// known circuit is refused at start.
#[test]
fn critical_is_earned_by_the_token_or_the_kind() {
    const URGENT: &str = "urgent-0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    // Jobs that stay queued: their priorities are read, not run.
    sim(&mut config, false);
    config.scheduler.critical_kinds = vec!["poseidon-merkle".into()];
    let start = || {
        let mut config = config.clone();
        tenants(&mut config);
        config.auth.tokens.push(parse_token_entry(&format!("{URGENT}@alpha:submit,read,critical")).unwrap());
        // Its jobs stay queued, so a restart rebuilds them before a lookup
        // answers (503 recovering until then: the flake of CI 2026-12-07).
        spawn_ready(config)
    };
    let daemon = start();
    let url = daemon.url();
    let lowered = r#"cuzk_priority_lowered_total{kind="mimc-chain"}"#;
    let metrics = || {
        let scrape = agent().get(&format!("{url}/metrics")).set("Authorization", &format!("Bearer {ADMIN}"));
        scrape.call().unwrap().into_string().unwrap()
    };
    let before = metric_value(&metrics(), lowered);
    let critical = |circuit: &str, token: &str, seed: u64| {
        let body = match circuit {
            "poseidon-merkle" => {
                json!({"circuit": circuit, "params": {"depth": 8, "challenges": 2}, "seed": seed, "priority": "critical"})
            }
            _ => {
                json!({"circuit": circuit, "params": {"log2_constraints": 4}, "seed": seed, "priority": "critical"})
            }
        };
        let (status, accepted, _) = call(&url, "POST", "/v1/jobs", token, Some((&body, None)));
        assert_eq!(status, 202, "{accepted}");
        let id = accepted["id"].as_str().unwrap().to_string();
        let (_, view) = get(&url, ADMIN, &format!("/v1/jobs/{id}"));
        (id, view["priority"].as_str().unwrap().to_string())
    };
    let (bulk, priority) = critical("mimc-chain", ALPHA, 1);
    assert_eq!(priority, "normal", "a bulk token's critical family job runs at its default");
    assert_eq!(critical("mimc-chain", ADMIN, 2).1, "normal", "admin does not imply the critical scope");
    assert_eq!(metric_value(&metrics(), lowered), before + 2.0, "each lowering is counted");
    assert_eq!(critical("mimc-chain", URGENT, 3).1, "critical", "the critical scope keeps it");
    assert_eq!(
        critical("poseidon-merkle", BETA, 4).1,
        "critical",
        "a kind on the list is critical for anyone"
    );
    assert_eq!(metric_value(&metrics(), lowered), before + 2.0);
    daemon.stop();
    // Restored from the store, the job keeps the priority it was made at.
    let daemon = start();
    let (_, view) = get(&daemon.url(), ADMIN, &format!("/v1/jobs/{bulk}"));
    assert_eq!(view["priority"], "normal", "{view}");
    daemon.stop();

    let mut unknown = test_config(dir.path());
    unknown.scheduler.critical_kinds = vec!["winning-post".into(), "no-such-kind".into()];
    let refused = cuzk::server::spawn(unknown, cuzk_kernels::circuits::CircuitRegistry::builtin())
        .err()
        .expect("an unknown kind is refused at start");
    let said = refused.to_string();
    assert!(said.contains("scheduler.critical_kinds") && said.contains("no-such-kind"), "{said}");
}

#[test]
fn sighup_reloads_tokens_and_the_environment_token_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let (config, tokens) = (dir.path().join("cuzk.toml"), dir.path().join("tokens"));
    const FROM_CONFIG: &str = "config-0123456789abcdef";
    const FROM_ENV: &str = "environ-0123456789abcdef";
    std::fs::write(
        &config,
        format!("[auth]\nread_requires_token = true\n[[auth.tokens]]\ntoken = \"{FROM_CONFIG}\"\ntenant = \"cfg\"\n"),
    )
    .unwrap();
    std::fs::write(&tokens, format!("{ALPHA}@alpha\n")).unwrap();
    let (serve, url, log) = Serve::logged(
        Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(["serve", "--backend", "sim", "--sim-profile", "winning-post", "--time-scale", "0.001"])
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(&config)
            .arg("--token-file")
            .arg(&tokens)
            .env("CUZK_API_TOKENS", format!("{FROM_ENV}@env")),
    );
    let pid = serve.0.id();

    let status = |token: &str| call(&url, "GET", "/v1/status", token, None).0;
    for token in [FROM_CONFIG, ALPHA, FROM_ENV] {
        assert_eq!(status(token), 200, "{token}");
    }
    assert_eq!(status(BETA), 401);
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(
        !String::from_utf8_lossy(&environ).contains(FROM_ENV),
        "the token is still in /proc/{pid}/environ"
    );

    let hangup =
        || assert!(Command::new("kill").args(["-HUP", &pid.to_string()]).status().unwrap().success());
    let until = |what: &str, check: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let reloads = |outcome: &str| {
        let scrape = agent()
            .get(&format!("{url}/metrics"))
            .set("Authorization", &format!("Bearer {FROM_CONFIG}"))
            .call();
        let text = scrape.ok().and_then(|r| r.into_string().ok()).unwrap_or_default();
        metric_value(&text, &format!("cuzk_token_reloads_total{{outcome=\"{outcome}\"}}"))
    };

    // alpha out, beta in; the config's and the environment's tokens stay.
    std::fs::write(&tokens, format!("# rotated\n{BETA}@beta:read\n")).unwrap();
    hangup();
    until("beta's token", &|| status(BETA) == 200);
    assert_eq!(status(ALPHA), 401);
    assert_eq!(status(FROM_CONFIG), 200);
    assert_eq!(status(FROM_ENV), 200);
    assert_eq!(reloads("ok"), 1.0);

    // A file that does not parse: the reload fails, beta keeps working.
    std::fs::write(&tokens, format!("{ALPHA}@alpha:owner\n")).unwrap();
    hangup();
    until("the failed reload", &|| reloads("failed") == 1.0);
    assert_eq!(status(BETA), 200);
    assert_eq!(status(ALPHA), 401);

    assert!(Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let mut serve = serve;
    let exit = serve.0.wait().unwrap();
    let log = log.join().unwrap();
    assert!(exit.success(), "{log}");
    assert!(log.contains("reload failed") && log.contains("unknown scope"), "{log}");
}
