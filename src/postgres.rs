//! PostgreSQL, for every part of the daemon that keeps something there: the
//! job store (`store/pg.rs`), the fleet's leases and queries (`fleet/`) and
//! the fleet's proving keys (`keys/shared.rs`). The URL (`StoreUrl`, never
//! shown with its password), how to connect (`Connector`: the client's
//! settings and the TLS they ask for, `tls.rs`), the error every use
//! answers (`PgError`, naming who used which database and what failed),
//! and the schema (`migrate.rs`). It imports nothing of the daemon.

mod migrate;
mod tls;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use migrate::migrate;
pub use tls::TlsSettingError;

/// A PostgreSQL failure, and where: `on` names who used which database
/// (its URL with the password hidden), e.g. `leases on
/// postgres://cuzk:***@db/jobs`.
#[derive(Debug, thiserror::Error)]
#[error("{on}: {failure}")]
pub struct PgError {
    /// Who used which database, the password hidden (`Place`).
    pub on: String,
    /// What went wrong.
    pub failure: PgFailure,
}

/// What failed. The first two are settings to fix, the next two a schema
/// this cuzk cannot use; `Failed` is the database or the network, which
/// may be back later.
#[derive(Debug, thiserror::Error)]
pub enum PgFailure {
    /// `store.url` does not parse as a connection string.
    #[error("not a PostgreSQL connection string: {}", describe(.0))]
    NotAUrl(postgres::Error),
    /// `sslmode` or `sslrootcert` cannot be used as written.
    #[error("{0}")]
    Tls(TlsSettingError),
    /// The database was migrated by a newer cuzk, whose tables this one might
    /// misread: it refuses to use them.
    #[error("the database is at schema version {found}, newer than this cuzk knows ({known}): run a cuzk at least as new as the one that migrated it")]
    NewerSchema {
        /// The schema version the database is at.
        found: i32,
        /// The newest version this build has migrations for.
        known: i32,
    },
    /// A migration of the schema failed; it was rolled back.
    #[error("migration {version:04}_{name}: {}", describe(error))]
    Migration {
        /// The migration's number.
        version: i32,
        /// The migration's name (its file's, after the number).
        name: &'static str,
        /// What the database answered.
        error: postgres::Error,
    },
    /// A connection or a statement failed while doing `doing`.
    #[error("{doing}: {}", describe(error))]
    Failed {
        /// What was being done, for the message (`cannot connect`, ...).
        doing: String,
        /// What the database or the network answered.
        error: postgres::Error,
    },
}

/// Who uses which database, as its errors name it (`PgError::on`).
#[derive(Clone, Debug)]
pub struct Place(String);

impl Place {
    /// `who` (e.g. `leases on`) on the database at `url`.
    pub fn new(who: &str, url: &StoreUrl) -> Self {
        Place(format!("{who} {url}"))
    }

    /// The database at `url` alone, where the rest of a message says who
    /// uses it.
    pub fn url(url: &StoreUrl) -> Self {
        Place(url.to_string())
    }

    /// The error of `failure` at this place.
    pub fn error(&self, failure: PgFailure) -> PgError {
        PgError { on: self.0.clone(), failure }
    }

    /// The database failed while doing `doing` (`cannot connect`, ...).
    pub fn failed(&self, doing: impl Into<String>, error: postgres::Error) -> PgError {
        self.error(PgFailure::Failed { doing: doing.into(), error })
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A PostgreSQL error with its cause (the client's own `Display` says only
/// "db error" or "error connecting to server"), on one line.
pub fn describe(error: &postgres::Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string().replace('\n', "; "));
        cause = e.source();
    }
    text
}

/// `store.url`: a PostgreSQL connection string, as a URL
/// (`postgres://user:password@host:port/database?option=value`) or as
/// `key=value` pairs. Shown (`Debug`, `Display`) with its password hidden,
/// so that no log line or error ever carries it.
#[derive(Clone, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct StoreUrl(String);

impl StoreUrl {
    /// Wraps a connection string; it is not checked until it is used.
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL itself, password included: only for connecting.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.0))
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

/// A connection string with every password replaced by `***`: the user
/// info of a URL, and a `password` option in a URL's query or in
/// `key=value` form. Hides too much rather than too little when the string
/// is malformed.
pub fn redact(url: &str) -> String {
    let mut shown = url.to_string();
    if let Some(scheme) = shown.find("://") {
        let start = scheme + 3;
        // The user info ends at the last '@' before the query: a password
        // may hold '/' or '@' unencoded.
        let end = shown[start..].find('?').map_or(shown.len(), |i| start + i);
        if let Some(at) = shown[start..end].rfind('@') {
            if let Some(colon) = shown[start..start + at].find(':') {
                shown.replace_range(start + colon + 1..start + at, "***");
            }
        }
    }
    hide_option(&shown, "password")
}

/// `text` with the value of every `name=` option hidden: after the start,
/// a '?', a '&' or whitespace, up to the next '&' or whitespace (or the
/// closing quote of a quoted value).
fn hide_option(text: &str, name: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let key = format!("{name}=");
    let mut shown = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = lower[at..].find(&key).map(|i| at + i) {
        let value = found + key.len();
        let boundary = found == 0 || matches!(text.as_bytes()[found - 1], b'?' | b'&' | b' ' | b'\t' | b'\n');
        shown.push_str(&text[at..value]);
        at = value;
        if !boundary {
            continue;
        }
        let rest = &text[value..];
        let len = if let Some(quoted) = rest.strip_prefix('\'') {
            // A quoted key=value password may hold spaces and \' escapes.
            let mut escaped = false;
            quoted
                .char_indices()
                .find(|&(_, c)| {
                    let closes = c == '\'' && !escaped;
                    escaped = c == '\\' && !escaped;
                    closes
                })
                .map_or(rest.len(), |(i, _)| i + 2)
        } else {
            rest.find(|c: char| c == '&' || c.is_whitespace()).unwrap_or(rest.len())
        };
        shown.push_str("***");
        at = value + len;
    }
    shown.push_str(&text[at..]);
    shown
}

/// How to connect to one database: the client's settings and the TLS
/// they ask for.
#[derive(Clone)]
pub struct Connector {
    /// The URL's settings, the timeouts it left unset filled in.
    config: postgres::Config,
    /// The TLS session `sslmode` asks for (unused under `disable`).
    tls: tokio_postgres_rustls::MakeRustlsConnect,
}

impl Connector {
    /// A new connection. Under `require` and `verify-full` a server
    /// without TLS, or one whose certificate does not verify, is refused
    /// here: never a connection in clear.
    pub fn connect(&self) -> Result<postgres::Client, postgres::Error> {
        self.config.connect(self.tls.clone())
    }
}

/// How to connect to `url`: refused when it is malformed or its TLS
/// options cannot be used (a CA file unreadable, a mode unknown); the
/// timeouts it leaves unset filled in.
pub fn client_config(url: &StoreUrl) -> Result<Connector, PgError> {
    let place = Place(format!("store.url {url}"));
    let tls = tls::read(url.secret()).map_err(|e| place.error(PgFailure::Tls(e)))?;
    let mut config: postgres::Config = tls.rest.parse().map_err(|e| place.error(PgFailure::NotAUrl(e)))?;
    config.ssl_mode(tls.mode);
    with_defaults(&mut config);
    Ok(Connector { config, tls: tls.connector })
}

/// Timeouts the URL did not set. Without them a database host that
/// vanished (no reset, packets dropped) would hold the writer thread, and
/// every submission waiting on it, for as long as the kernel's defaults
/// (hours).
fn with_defaults(config: &mut postgres::Config) {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(30));
    }
    // The library's default is the kernel's two hours; a URL asking for
    // exactly that keeps it.
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(Duration::from_secs(10));
    }
    if config.get_application_name().is_none() {
        config.application_name("cuzk");
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_hidden_in_every_form() {
        let cases = [
            ("postgres://cuzk:s3cret@db:5432/jobs", "postgres://cuzk:***@db:5432/jobs"),
            (
                "postgresql://cuzk:p/a@ss@db/jobs?sslmode=disable",
                "postgresql://cuzk:***@db/jobs?sslmode=disable",
            ),
            ("postgres://cuzk@db/jobs", "postgres://cuzk@db/jobs"),
            (
                "postgres://db/jobs?user=cuzk&password=s3cret&x=1",
                "postgres://db/jobs?user=cuzk&password=***&x=1",
            ),
            ("host=db user=cuzk password=s3cret dbname=jobs", "host=db user=cuzk password=*** dbname=jobs"),
            ("host=db PASSWORD='s3 \\' cret' dbname=jobs", "host=db PASSWORD=*** dbname=jobs"),
            ("host=db mypassword=x", "host=db mypassword=x"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact(url), shown, "{url}");
        }
    }
}
