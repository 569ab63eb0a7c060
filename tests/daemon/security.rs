//! Bearer tokens and scopes, the loopback rule, the metrics listener and TLS
//! (docs/security.md), through the real server on the simulated backend.

use crate::common;

use std::io::{Read, Write};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::{agent, response, start_with, TestDaemon};
use cuzk::auth::{parse_token_entry, AuthError, Scope, TokenConfig};
use cuzk::config::{BackendKind, Config};
use cuzk::server::ServerError;
use cuzk::tls::TlsError;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const SUBMITTER: &str = "submit-0123456789abcdef";
const READER: &str = "read-0123456789abcdef";
const BOTH: &str = "both-0123456789abcdef";

fn sim(c: &mut Config) {
    c.backend = BackendKind::Sim;
    c.sim.profile = "winning-post".into();
    c.sim.time_scale = 0.001;
}

fn with_tokens(c: &mut Config) {
    sim(c);
    c.auth.tokens = vec![
        parse_token_entry(&format!("{SUBMITTER}:submit")).unwrap(),
        parse_token_entry(&format!("{READER}:read")).unwrap(),
        parse_token_entry(BOTH).unwrap(),
    ];
}

fn job() -> Value {
    json!({"circuit": "mimc-chain", "params": {"log2_constraints": 4}, "seed": 1})
}

fn call(d: &TestDaemon, method: &str, path: &str, token: Option<&str>) -> (u16, Value, Option<String>) {
    let mut request = agent().request(method, &format!("{}{path}", d.url));
    if let Some(token) = token {
        request = request.set("Authorization", &format!("Bearer {token}"));
    }
    let result = if method == "POST" { request.send_json(job()) } else { request.call() };
    let challenge = match &result {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r.header("WWW-Authenticate").map(str::to_string),
        Err(_) => None,
    };
    let (status, body) = response(result);
    (status, body, challenge)
}

#[test]
fn submit_and_cancel_need_a_token_with_the_submit_scope() {
    let d = start_with(with_tokens);
    let (status, body, challenge) = call(&d, "POST", "/v1/jobs", None);
    assert_eq!(status, 401, "{body}");
    assert!(body["error"].as_str().unwrap().contains("Bearer"), "{body}");
    assert!(challenge.unwrap().starts_with("Bearer"));

    let (status, body, challenge) = call(&d, "POST", "/v1/jobs", Some("wrong-0123456789abcdef"));
    assert_eq!(status, 401, "{body}");
    assert!(challenge.unwrap().contains("invalid_token"));

    let (status, body, challenge) = call(&d, "POST", "/v1/jobs", Some(READER));
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("submit scope"), "{body}");
    assert!(challenge.unwrap().contains("insufficient_scope"));
    assert_eq!(d.get("/v1/status").1["jobs"]["queued"], 0, "refused jobs are not queued");

    let (status, body, _) = call(&d, "POST", "/v1/jobs", Some(SUBMITTER));
    assert_eq!(status, 202, "{body}");
    let id = body["id"].as_str().unwrap();
    let cancel = format!("/v1/jobs/{id}/cancel");
    assert_eq!(call(&d, "POST", &cancel, None).0, 401);
    assert_eq!(call(&d, "POST", &cancel, Some(READER)).0, 403);
    let (status, body, _) = call(&d, "POST", &cancel, Some(BOTH));
    assert!(status == 200 || status == 409, "{status} {body}");

    // Reads stay open unless read_requires_token.
    assert_eq!(call(&d, "GET", &format!("/v1/jobs/{id}"), None).0, 200);
    assert!(agent().get(&format!("{}/metrics", d.url)).call().is_ok());
}

#[test]
fn reads_can_require_a_token_with_the_read_scope() {
    let d = start_with(|c| {
        with_tokens(c);
        c.auth.read_requires_token = true;
    });
    for path in ["/v1/status", "/v1/circuits", "/v1/jobs/nope"] {
        let (status, body, challenge) = call(&d, "GET", path, None);
        assert_eq!(status, 401, "{path}: {body}");
        assert!(challenge.is_some());
        assert_eq!(call(&d, "GET", path, Some(SUBMITTER)).0, 403, "{path}");
    }
    assert_eq!(call(&d, "GET", "/v1/status", Some(READER)).0, 200);
    assert_eq!(call(&d, "GET", "/v1/jobs/nope", Some(BOTH)).0, 404);
    let metrics = agent().get(&format!("{}/metrics", d.url)).call();
    assert_eq!(metrics.unwrap_err().into_response().unwrap().status(), 401);
    assert!(agent()
        .get(&format!("{}/metrics", d.url))
        .set("Authorization", &format!("bearer {READER}"))
        .call()
        .is_ok());
    // Liveness and the API description stay open.
    assert_eq!(call(&d, "GET", "/healthz", None).0, 200);
    assert_eq!(call(&d, "GET", "/v1/openapi.json", None).0, 200);
}

#[test]
fn hashed_tokens_from_the_config_file() {
    let digest = hex::encode(Sha256::digest(SUBMITTER.as_bytes()));
    let config: Config = toml::from_str(&format!(
        "[auth]\nread_requires_token = true\n\
         [[auth.tokens]]\nsha256 = \"{digest}\"\n\
         [[auth.tokens]]\ntoken = \"{READER}\"\nscopes = [\"read\"]\n"
    ))
    .unwrap();
    assert_eq!(config.auth.tokens[0].scopes, vec![Scope::Submit, Scope::Read]);
    let d = start_with(|c| {
        sim(c);
        c.auth = config.auth;
    });
    assert_eq!(call(&d, "POST", "/v1/jobs", Some(SUBMITTER)).0, 202);
    assert_eq!(call(&d, "POST", "/v1/jobs", Some(READER)).0, 403);
    assert_eq!(call(&d, "GET", "/v1/status", Some(READER)).0, 200);
}

/// One raw HTTP/1.1 request with the given headers: (status, body). ureq
/// sets Host and Content-Type itself; a browser attack sets them otherwise.
fn raw(d: &TestDaemon, request: &str) -> (u16, Value) {
    let answer = exchange(d.url.trim_start_matches("http://"), request.as_bytes());
    let status = answer.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// `request`'s bytes on a new connection to `addr`, and all the server
/// answers before it closes the connection (within 10 s).
fn exchange(addr: &str, request: &[u8]) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("the server closes the connection");
    String::from_utf8(answer).unwrap()
}

fn post_job(host: &str, content_type: &str, origin: Option<&str>) -> String {
    let body = job().to_string();
    let origin = origin.map(|o| format!("Origin: {o}\r\n")).unwrap_or_default();
    format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\n{origin}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn get(host: &str, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

/// Without tokens the daemon trusts whoever reaches loopback, so a browser
/// must not be the way in: a cross-site form (text/plain), a page of another
/// origin, and a DNS-rebinding name are refused with a reason; the names
/// configured in auth.allowed_hosts are served. With tokens, names are free.
#[test]
fn without_tokens_browsers_cannot_forge_requests() {
    let d = start_with(|c| {
        sim(c);
        c.auth.allowed_hosts = vec!["cuzk.lan".into()];
    });
    let port = d.url.rsplit(':').next().unwrap().to_string();
    let local = format!("127.0.0.1:{port}");

    let (status, body) = raw(&d, &post_job(&local, "text/plain", None));
    assert_eq!(status, 415, "{body}");
    assert!(body["error"].as_str().unwrap().contains("application/json"), "{body}");
    let (status, body) = raw(&d, &post_job(&local, "application/json", Some("http://evil.example")));
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("CSRF"), "{body}");
    let (status, body) = raw(&d, &get("evil.example", "/v1/status"));
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("DNS-rebinding"), "{body}");
    let (_, status) = d.get("/v1/status");
    assert_eq!(status["jobs"]["queued"], 0, "nothing refused was queued: {status}");

    // Another service of this host is another origin: a page on another
    // port, or over the other scheme, may not change state either.
    for origin in [
        format!("http://localhost:{}", port.parse::<u16>().unwrap() ^ 1),
        format!("https://localhost:{port}"),
        "http://localhost".into(),
    ] {
        let (status, body) = raw(&d, &post_job(&local, "application/json", Some(&origin)));
        assert_eq!(status, 403, "{origin}: {body}");
        assert!(body["error"].as_str().unwrap().contains("CSRF"), "{body}");
    }
    // A proxy that forwarded the request names a client elsewhere.
    let forwarded = post_job(&local, "application/json", None).replacen(
        "\r\n",
        "\r\nX-Forwarded-For: 203.0.113.9\r\n",
        1,
    );
    let (status, body) = raw(&d, &forwarded);
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("came through a proxy"), "{body}");

    let page = format!("http://localhost:{port}");
    assert_eq!(raw(&d, &post_job(&local, "application/json; charset=utf-8", Some(&page))).0, 202);
    let page = format!("http://[::1]:{port}");
    assert_eq!(raw(&d, &post_job(&local, "application/json", Some(&page))).0, 202);
    assert_eq!(raw(&d, &get(&format!("[::1]:{port}"), "/healthz")).0, 200);
    assert_eq!(raw(&d, &get("cuzk.lan:9820", "/v1/status")).0, 200);

    let guarded = start_with(with_tokens);
    assert_eq!(raw(&guarded, &get("evil.example", "/healthz")).0, 200);
}

/// A client that sends its headers and then trickles the body is answered
/// 408 once limits.body_read_timeout_s has passed, and nothing is queued.
#[test]
fn a_trickled_body_times_out() {
    let d = start_with(|c| {
        sim(c);
        c.limits.body_read_timeout_s = 1;
    });
    let addr = d.url.trim_start_matches("http://").to_string();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    let started = std::time::Instant::now();
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut answer = Vec::new();
    // One byte every 200 ms: the body would take 200 s, so an answer before
    // then is the timeout's (the bound only ends a test that gets none).
    while answer.is_empty() && started.elapsed() < Duration::from_secs(120) {
        if stream.write_all(b" ").is_err() {
            break;
        }
        let mut buf = [0u8; 4096];
        if let Ok(n) = stream.read(&mut buf) {
            answer.extend_from_slice(&buf[..n]);
        }
    }
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_read_timeout_s"), "{answer}");
    let (_, status) = d.get("/v1/status");
    assert_eq!(status["jobs"]["queued"], 0, "{status}");
}

/// The last answer in `answer` (all a connection got), which must be a
/// refusal with a JSON body of the length its head states: (status, the
/// part of its reason a test names: "not valid HTTP/1.1", "96 headers",
/// "header_read_timeout_s", or the whole reason).
fn json_refusal(answer: &str) -> (u16, String) {
    // A status line: the reason of a 400 names HTTP/1.1 too.
    let (at, _) = answer
        .rmatch_indices("HTTP/1.1 ")
        .find(|(i, _)| {
            answer.as_bytes().get(i + 9..i + 12).is_some_and(|code| code.iter().all(u8::is_ascii_digit))
        })
        .expect("an answer");
    let last = &answer[at..];
    let (head, body) = last.split_once("\r\n\r\n").expect("a whole head");
    let status = head[9..12].parse().unwrap();
    let header = |name: &str| {
        head.lines()
            .find_map(|line| line.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case(name)))
            .map(|(_, v)| v.trim().to_string())
    };
    assert_eq!(header("content-type").as_deref(), Some("application/json"), "{last}");
    assert_eq!(header("content-length"), Some(body.len().to_string()), "{last}");
    let reason = serde_json::from_str::<Value>(body).expect("a JSON body")["error"]
        .as_str()
        .expect("an error")
        .to_string();
    let named = ["not valid HTTP/1.1", "96 headers", "header_read_timeout_s"];
    (status, named.into_iter().find(|n| reason.contains(n)).map_or(reason, str::to_string))
}

/// Requests actix-http refuses before any handler runs (a header without a
/// colon, 120 headers, a head that never ends, garbage after two good
/// pipelined requests) get the JSON body every other error has, on the API
/// and the metrics listener; the connection closes; nothing is queued.
#[test]
fn protocol_refusals_carry_the_json_body() {
    let d = start_with(|c| {
        sim(c);
        c.limits.header_read_timeout_s = 1;
        c.metrics_listen = Some("127.0.0.1:0".into());
    });
    let api = d.url.trim_start_matches("http://").to_string();
    let metrics = d.daemon.metrics_addr.expect("metrics listener").to_string();
    let many: String = (0..120).map(|i| format!("X-{i}: a\r\n")).collect();
    // actix-http's read limit for a head, 128 KiB, all sent and no end to
    // it (exactly that much: unread bytes would reset the connection).
    let endless = format!("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX: {}", "a".repeat(131_072));
    let endless = &endless.as_bytes()[..131_072];
    let long_head = exchange(&api, endless);
    assert_eq!(json_refusal(&long_head), (431, "96 headers".into()), "{long_head}");
    for addr in [&api, &metrics] {
        let bad_header = exchange(addr, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nno colon\r\n\r\n");
        assert_eq!(json_refusal(&bad_header), (400, "not valid HTTP/1.1".into()), "{bad_header}");
        let too_many =
            exchange(addr, format!("GET /healthz HTTP/1.1\r\nHost: localhost\r\n{many}\r\n").as_bytes());
        assert_eq!(json_refusal(&too_many), (431, "96 headers".into()), "{too_many}");
    }
    let good = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let pipelined = exchange(&api, format!("{good}{good}GARBAGE\x01\r\n\r\n").as_bytes());
    assert_eq!(pipelined.matches(r#"{"status":"ok"}"#).count(), 2, "{pipelined}");
    assert_eq!(json_refusal(&pipelined), (400, "not valid HTTP/1.1".into()), "{pipelined}");
    let unfinished = exchange(&api, b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\n");
    assert_eq!(json_refusal(&unfinished), (408, "header_read_timeout_s".into()), "{unfinished}");
    let (_, status) = d.get("/v1/status");
    assert_eq!(status["jobs"]["queued"], 0, "{status}");
}

#[test]
fn without_tokens_only_loopback_unless_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::test_config(dir.path());
    sim(&mut config);
    config.listen = "0.0.0.0:0".into();
    let error = cuzk::server::spawn(config.clone(), cuzk_kernels::circuits::CircuitRegistry::builtin())
        .err()
        .expect("refuses a non-loopback listener without tokens");
    assert!(
        matches!(&error, ServerError::Auth(AuthError::NoTokensOffLoopback { .. }))
            && error.to_string().contains("--insecure"),
        "{error:?}"
    );

    config.auth.insecure = true;
    let daemon = cuzk::server::spawn(config.clone(), cuzk_kernels::circuits::CircuitRegistry::builtin())
        .expect("--insecure lets it listen");
    let url = format!("http://127.0.0.1:{}", daemon.addr.port());
    let (status, _) = response(agent().post(&format!("{url}/v1/jobs")).send_json(job()));
    assert_eq!(status, 202);
    daemon.stop();

    config.auth.insecure = false;
    config.auth.tokens = vec![parse_token_entry(BOTH).unwrap()];
    let daemon = cuzk::server::spawn(config, cuzk_kernels::circuits::CircuitRegistry::builtin())
        .expect("tokens let it listen");
    daemon.stop();
}

/// A token source that gives no token, or a proxy in front, is refused on
/// loopback too: either would leave the API open to more than this host's
/// users by accident. `--insecure` says it is meant.
#[test]
fn no_tokens_from_a_named_source_or_behind_a_proxy_is_refused_unless_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("tokens");
    std::fs::write(&empty, "# every token was removed\n").unwrap();
    let spawn =
        |config: Config| cuzk::server::spawn(config, cuzk_kernels::circuits::CircuitRegistry::builtin());
    let mut config = common::test_config(dir.path());
    sim(&mut config);
    config.auth.sources.token_file = Some(empty.clone());
    let error = spawn(config.clone()).err().expect("an empty token file is refused");
    assert!(
        matches!(&error, ServerError::Auth(AuthError::NoTokensFromSource { source_name }) if source_name.contains("tokens"))
            && error.to_string().contains("holds no token")
            && error.to_string().contains("--insecure"),
        "{error}"
    );
    config.auth.sources = Default::default();
    config.auth.sources.from_env = Some(Vec::new());
    let error = spawn(config.clone()).err().expect("an empty CUZK_API_TOKENS is refused");
    assert!(error.to_string().starts_with("CUZK_API_TOKENS holds no token"), "{error}");
    config.auth.sources.from_env = Some(vec![parse_token_entry(BOTH).unwrap()]);
    config.auth.add_source_tokens().unwrap();
    spawn(config.clone()).expect("a token from the environment").stop();

    let mut config = common::test_config(dir.path());
    sim(&mut config);
    config.auth.behind_proxy = true;
    let error = spawn(config.clone()).err().expect("behind a proxy without tokens");
    assert!(matches!(&error, ServerError::Auth(AuthError::NoTokensBehindProxy { .. })), "{error}");
    config.auth.insecure = true;
    config.auth.sources.token_file = Some(empty);
    let daemon = spawn(config).expect("--insecure opens it");
    let url = format!("http://127.0.0.1:{}", daemon.addr.port());
    let (status, _) = response(agent().post(&format!("{url}/v1/jobs")).send_json(job()));
    assert_eq!(status, 202);
    daemon.stop();
}

/// A SIGHUP whose token file has become empty would switch authentication
/// off: it is refused, counted as a failed reload, and the tokens in force
/// stay. The command line refuses an empty or unreadable token file at
/// start, on loopback.
#[test]
fn a_reload_to_no_tokens_keeps_the_tokens_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let serve = |tokens: &std::path::Path| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cuzk"));
        command
            .args(["serve", "--backend", "sim", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--token-file")
            .arg(tokens)
            .env_remove("CUZK_API_TOKENS");
        command
    };
    std::fs::write(&tokens, "").unwrap();
    let out = serve(&tokens).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("holds no token") && stderr.contains("--insecure"), "{stderr}");
    let out = serve(&dir.path().join("missing")).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read token file"));

    std::fs::write(&tokens, format!("{BOTH}\n")).unwrap();
    let (serve, url, log) = common::Serve::logged(&mut serve(&tokens));
    let submit = |token: Option<&str>| {
        let mut request = agent().post(&format!("{url}/v1/jobs"));
        if let Some(token) = token {
            request = request.set("Authorization", &format!("Bearer {token}"));
        }
        response(request.send_json(job())).0
    };
    let failed_reloads = || {
        let text = agent().get(&format!("{url}/metrics")).call().unwrap().into_string().unwrap();
        text.lines().any(|l| l == "cuzk_token_reloads_total{outcome=\"failed\"} 1")
    };
    assert_eq!(submit(None), 401);
    std::fs::write(&tokens, "# emptied\n").unwrap();
    let pid = serve.0.id().to_string();
    assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !failed_reloads() {
        assert!(std::time::Instant::now() < deadline, "no failed reload counted");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(submit(None), 401, "anonymous clients stay out");
    assert_eq!(submit(Some(BOTH)), 202, "the token in force stays");
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let mut serve = serve;
    serve.0.wait().unwrap();
    let log = log.join().unwrap();
    assert!(log.contains("reload failed") && log.contains("holds no token"), "{log}");
}

#[test]
fn the_cli_refuses_clearly_and_sends_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["serve", "--backend", "sim", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("CUZK_API_TOKENS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without API tokens") && stderr.contains("--insecure"), "{stderr}");

    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# comment\n{READER}:owner\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["serve", "--backend", "sim", "--token-file"])
        .arg(&tokens)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2: unknown scope"));

    let d = start_with(with_tokens);
    let proofs = dir.path().join("proofs.json");
    let submit = |token: &str| {
        Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args(["submit", "--server", &d.url, "--circuit", "mimc-chain"])
            .args(["--params", r#"{"log2_constraints": 4}"#, "--seed", "3", "--timeout", "60"])
            .arg("--out")
            .arg(&proofs)
            .env("CUZK_TOKEN", token)
            .output()
            .unwrap()
    };
    let out = submit(READER);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP 403"));
    let out = submit(BOTH);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(proofs.exists());
}

#[test]
fn metrics_listener_serves_only_metrics() {
    let d = start_with(|c| {
        with_tokens(c);
        c.metrics_listen = Some("127.0.0.1:0".into());
    });
    let metrics_url = format!("http://{}", d.daemon.metrics_addr.expect("metrics listener"));
    let text = agent().get(&format!("{metrics_url}/metrics")).call().unwrap().into_string().unwrap();
    assert!(text.contains("# TYPE"), "{text}");
    assert_eq!(response(agent().get(&format!("{metrics_url}/healthz")).call()).0, 200);
    for path in ["/v1/status", "/v1/jobs"] {
        let (status, body) = response(agent().get(&format!("{metrics_url}{path}")).call());
        assert_eq!(status, 404, "{path}: {body}");
    }
    let (status, _) = response(
        agent()
            .post(&format!("{metrics_url}/v1/jobs"))
            .set("Authorization", &format!("Bearer {BOTH}"))
            .send_json(job()),
    );
    assert_eq!(status, 404);
}

fn https_get(addr: std::net::SocketAddr, cert_pem: &str, path: &str) -> String {
    https_raw(addr, cert_pem, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
}

/// `request`'s bytes over TLS, and all the server answers before it closes.
fn https_raw(addr: std::net::SocketAddr, cert_pem: &str, request: &str) -> String {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    tls.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    // The server may close without close_notify once it has answered.
    let _ = tls.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn tls_with_a_self_signed_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();

    let d = start_with(|c| {
        sim(c);
        c.tls.cert = Some(cert_path.clone());
        c.tls.key = Some(key_path.clone());
    });
    assert!(d.url.starts_with("https://"), "{}", d.url);
    let answer = https_get(d.daemon.addr, &cert.cert.pem(), "/healthz");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with(r#"{"status":"ok"}"#), "{answer}");
    // actix-http's own refusal, under TLS too, carries the JSON body.
    let answer = https_raw(
        d.daemon.addr,
        &cert.cert.pem(),
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nno colon\r\n\r\n",
    );
    assert_eq!(json_refusal(&answer), (400, "not valid HTTP/1.1".into()), "{answer}");
    // Plain HTTP to the TLS port gets no answer.
    assert!(agent().get(&format!("http://{}/healthz", d.daemon.addr)).call().is_err());

    let mut config = common::test_config(dir.path());
    config.tls.cert = Some(dir.path().join("missing.pem"));
    config.tls.key = Some(key_path);
    let error = cuzk::server::spawn(config, cuzk_kernels::circuits::CircuitRegistry::builtin())
        .err()
        .expect("a missing certificate stops startup");
    assert!(
        matches!(&error, ServerError::Tls(TlsError::Certificates { path, .. }) if path.ends_with("missing.pem"))
            && error.to_string().contains("tls: cannot read certificates"),
        "{error:?}"
    );
}

#[test]
fn token_config_rejects_ambiguity() {
    let mut config = Config::default();
    config.auth.tokens = vec![TokenConfig {
        token: Some(BOTH.into()),
        sha256: Some("00".repeat(32)),
        scopes: vec![Scope::Read],
        tenant: Default::default(),
    }];
    let dir = tempfile::tempdir().unwrap();
    config.data_dir = dir.path().to_path_buf();
    config.listen = "127.0.0.1:0".into();
    let error =
        cuzk::server::spawn(config, cuzk_kernels::circuits::CircuitRegistry::builtin()).err().unwrap();
    assert!(
        matches!(&error, ServerError::Auth(AuthError::TokenOrDigest))
            && error.to_string().contains("exactly one of token and sha256"),
        "{error:?}"
    );
}
