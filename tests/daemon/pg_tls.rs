//! TLS to PostgreSQL (src/postgres/tls.rs) against the throwaway cluster of
//! scripts/pg-test-cluster.sh, which runs with ssl=on and a certificate
//! signed by a CA of its own (`CUZK_TEST_PG_CA`): `require` and
//! `verify-full` connect encrypted and the job store works over them;
//! `verify-full` refuses a server its CA did not sign or whose certificate
//! does not name the host; `require` and `verify-full` refuse a server
//! without TLS rather than connect in clear; TLS options that cannot be
//! used are refused before connecting. Its tests run one at a time and in a
//! run of their own (scripts/test.sh): one turns the server's TLS off.

use crate::common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::PgSchema;
use cuzk::postgres::{client_config, describe, PgError, PgFailure, StoreUrl, TlsSettingError};
use cuzk::store::{OpenError, PgJobStore};
use cuzk_actors::store::{JobStore, StoreWrite};

/// One test at a time owns the server's settings.
static DATABASE: Mutex<()> = Mutex::new(());

/// The test cluster's URL with sslmode=verify-full against its CA, or None
/// (the test says it skipped) outside scripts/pg-test-cluster.sh.
fn tls_url(test: &str) -> Option<String> {
    let url = std::env::var("CUZK_TEST_PG_TLS_URL").ok();
    if url.is_none() {
        eprintln!("{test}: skipped, CUZK_TEST_PG_TLS_URL is not set (scripts/pg-test-cluster.sh sets it)");
    }
    url
}

/// `url` with its query replaced by `query`.
fn with_query(url: &str, query: &str) -> String {
    let base = url.split_once('?').map_or(url, |(base, _)| base);
    format!("{base}?{query}")
}

fn ca() -> String {
    std::env::var("CUZK_TEST_PG_CA").expect("CUZK_TEST_PG_CA is set with CUZK_TEST_PG_TLS_URL")
}

/// Whether the session a connection to `url` gets is encrypted, as the
/// server sees it.
fn encrypted(url: &str) -> bool {
    let mut client = client_config(&StoreUrl::new(url))
        .expect("usable settings")
        .connect()
        .unwrap_or_else(|e| panic!("{url}: {}", describe(&e)));
    client
        .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
        .expect("pg_stat_ssl answers")
        .get(0)
}

/// The error connecting to `url` gets, as the daemon would print it.
fn refusal(url: &str) -> String {
    match client_config(&StoreUrl::new(url)).expect("usable settings").connect() {
        Ok(_) => panic!("{url}: connected"),
        Err(e) => describe(&e),
    }
}

#[test]
fn postgres_tls_require_and_verify_full_connect_encrypted() {
    let _database = DATABASE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(url) = tls_url("postgres_tls_require_and_verify_full_connect_encrypted") else { return };
    assert!(encrypted(&url), "verify-full");
    assert!(encrypted(&with_query(&url, "sslmode=require")), "require");
    // No sslmode is prefer, as in libpq: TLS when the server offers it.
    assert!(encrypted(&with_query(&url, "application_name=cuzk-test")), "prefer");
    assert!(!encrypted(&with_query(&url, "sslmode=disable")), "disable");

    // The job store over verify-full: migrated, written and read back.
    let schema = PgSchema::create("postgres_tls_require_and_verify_full_connect_encrypted")
        .expect("the cluster is up");
    let store_url = format!("{}&sslmode=verify-full&sslrootcert={}", schema.url.secret(), ca());
    let store =
        PgJobStore::connect(&StoreUrl::new(store_url), None).expect("the store connects over verify-full");
    let record = common::record("tls", 1);
    let written = store.write(StoreWrite::Accepted(record));
    written.wait_blocking().expect("written over TLS");
    let jobs = store.load().expect("read over TLS");
    assert_eq!(jobs.iter().map(|j| j.record.id.0.as_str()).collect::<Vec<_>>(), ["tls"]);
}

#[test]
fn postgres_tls_verify_full_refuses_a_wrong_ca_or_a_wrong_host() {
    let _database = DATABASE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(url) = tls_url("postgres_tls_verify_full_refuses_a_wrong_ca_or_a_wrong_host") else { return };
    // A CA that did not sign the server's certificate.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).expect("a certificate");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let other_ca = dir.path().join("other-ca.pem");
    std::fs::write(&other_ca, other.cert.pem()).expect("written");
    let wrong_ca =
        refusal(&with_query(&url, &format!("sslmode=verify-full&sslrootcert={}", other_ca.display())));
    assert!(
        wrong_ca.contains("invalid peer certificate") && wrong_ca.contains("UnknownIssuer"),
        "{wrong_ca}"
    );

    // The right CA, but a name the certificate does not hold (the server
    // reached by its address).
    let (base, _) = url.split_once('?').expect("a query");
    let at = base.rfind('@').expect("user@host");
    let colon = base[at..].find(':').map(|i| at + i).expect("host:port");
    let renamed = format!(
        "{}@db.invalid{}?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}",
        &base[..at],
        &base[colon..],
        ca()
    );
    let wrong_name = refusal(&renamed);
    assert!(wrong_name.contains("certificate not valid for name \"db.invalid\""), "{wrong_name}");
    // The same address under a name the certificate holds connects.
    let named = renamed.replace("@db.invalid", "@localhost");
    assert!(encrypted(&named), "{named}");
}

/// Turns the server's TLS off (ALTER SYSTEM and a reload) until dropped.
struct TlsOff {
    url: String,
}

impl TlsOff {
    fn new(url: &str) -> Self {
        let off = Self { url: with_query(url, "sslmode=disable") };
        off.set("ALTER SYSTEM SET ssl = off", "off");
        off
    }

    /// Runs `statement`, reloads and waits until a new session sees `ssl`
    /// as `expected`.
    fn set(&self, statement: &str, expected: &str) {
        let connect = || {
            client_config(&StoreUrl::new(self.url.as_str())).unwrap().connect().expect("connects in clear")
        };
        let mut admin = connect();
        admin.batch_execute(statement).expect("an ALTER SYSTEM");
        admin.batch_execute("SELECT pg_reload_conf()").expect("a reload");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now: String = connect().query_one("SHOW ssl", &[]).expect("SHOW").get(0);
            if now == expected {
                return;
            }
            assert!(Instant::now() < deadline, "ssl is still {now}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for TlsOff {
    fn drop(&mut self) {
        self.set("ALTER SYSTEM RESET ssl", "on");
    }
}

#[test]
fn postgres_tls_require_refuses_a_server_without_tls() {
    let _database = DATABASE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(url) = tls_url("postgres_tls_require_refuses_a_server_without_tls") else { return };
    let _off = TlsOff::new(&url);
    for query in ["sslmode=require".to_string(), format!("sslmode=verify-full&sslrootcert={}", ca())] {
        let refused = refusal(&with_query(&url, &query));
        assert!(refused.contains("server does not support TLS"), "{query}: {refused}");
    }
    // Through the job store, as a start would: a clear error, the password
    // hidden.
    match PgJobStore::connect(&StoreUrl::new(with_query(&url, "sslmode=require")), None) {
        Ok(_) => panic!("the store connected in clear under sslmode=require"),
        Err(error) => {
            let message = error.to_string();
            assert!(
                message.contains("cannot connect") && message.contains("server does not support TLS"),
                "{message}"
            );
            assert!(message.contains("postgres://cuzk:***@"), "the password is hidden: {message}");
            assert!(
                matches!(error, OpenError::Database(PgError { failure: PgFailure::Failed { .. }, .. })),
                "{error:?}"
            );
        }
    }
    // prefer falls back to clear text, as libpq's does.
    assert!(!encrypted(&with_query(&url, "sslmode=prefer")), "prefer");
}

#[test]
fn postgres_tls_settings_that_cannot_be_used_are_refused_before_connecting() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "no certificate here\n").expect("written");
    let missing = dir.path().join("missing.pem");
    let refused = |url: &str| match client_config(&StoreUrl::new(url)) {
        Ok(_) => panic!("{url}: accepted"),
        Err(PgError { failure: PgFailure::Tls(error), on }) => {
            assert!(!on.contains("s3cret"), "the password shows in {on}");
            error
        }
        Err(other) => panic!("{url}: {other}"),
    };
    let url = "postgres://cuzk:s3cret@127.0.0.1:1/jobs";
    assert!(matches!(refused(&format!("{url}?sslmode=verify-full")), TlsSettingError::NoRootCert));
    assert!(
        matches!(refused(&format!("{url}?sslmode=verify-ca&sslrootcert=x")), TlsSettingError::Mode(m) if m == "verify-ca")
    );
    assert!(matches!(refused(&format!("{url}?sslmode=allow")), TlsSettingError::Mode(_)));
    let unused = refused(&format!("{url}?sslmode=require&sslrootcert={}", missing.display()));
    assert!(matches!(unused, TlsSettingError::RootCertUnused(ref m) if m == "require"), "{unused}");
    let unreadable = refused(&format!("{url}?sslmode=verify-full&sslrootcert={}", missing.display()));
    assert!(
        matches!(&unreadable, TlsSettingError::Unreadable { path, .. } if *path == missing),
        "{unreadable}"
    );
    assert!(unreadable.to_string().contains("missing.pem"), "{unreadable}");
    let no_cert = refused(&format!(
        "host=127.0.0.1 password=s3cret sslmode=verify-full sslrootcert='{}'",
        empty.display()
    ));
    assert!(matches!(no_cert, TlsSettingError::NoCertificate { .. }), "{no_cert}");
    // Usable settings still go to the client's own parser.
    assert!(client_config(&StoreUrl::new(format!("{url}?sslmode=require&connect_timeout=3"))).is_ok());
}
