//! The job store: commits that failed, whether it is writable, and damage
//! found in it on start or while running.

use cuzk_actors::telemetry::{counter, gauge, MetricDef};

/// `cuzk_store_write_failures_total`: job store commits that failed, whose
/// writes wait to be retried.
pub const STORE_WRITE_FAILURES: MetricDef = counter(
    "cuzk_store_write_failures_total",
    "transactions",
    &[],
    "Job store transactions that failed to commit (disk full, I/O error); their writes are retried, new jobs refused until one succeeds.",
);
/// `cuzk_store_writable`: whether the job store commits now, for alerting on
/// a store that stopped.
pub const STORE_WRITABLE: MetricDef = gauge(
    "cuzk_store_writable",
    "boolean",
    &[],
    "1 while the job store's last commit succeeded, 0 while it is failing.",
);
/// `cuzk_store_damage_total`: damage found in the job store and repaired, by kind.
pub const STORE_DAMAGE: MetricDef = counter(
    "cuzk_store_damage_total",
    "incidents",
    &["kind"],
    "Damage found in the job store, by kind (on start: record: a record failed its own checksum although its page passed, and was dropped; unreadable: the file failed redb's integrity check or could not be opened, and was moved aside and its intact records salvaged; missing: a store that existed is gone or empty; while running: detached: the open file left its path (its directory removed, another file put in its place), and a copy is written back from it).",
);

/// Starts the failure counter and every damage kind's counter at zero.
pub(super) fn start_at_zero() {
    for kind in StoreDamageKind::ALL {
        metrics::counter!(STORE_DAMAGE.name, "kind" => kind.as_str()).absolute(0);
    }
    metrics::counter!(STORE_WRITE_FAILURES.name).absolute(0);
}

/// A job store commit failed; its writes wait for the store to recover.
pub struct StoreWriteFailed<'a> {
    /// The writes the failed transaction held, kept for the next one.
    pub writes: usize,
    /// Why the commit failed, logged as an error.
    pub error: &'a str,
}

impl StoreWriteFailed<'_> {
    /// Logs the failure as an error, counts it, and marks the store not writable.
    pub fn emit(&self) {
        log::error!("job store: {} writes not committed: {}", self.writes, self.error);
        metrics::counter!(STORE_WRITE_FAILURES.name).increment(1);
        metrics::gauge!(STORE_WRITABLE.name).set(0.0);
    }
}

/// A job store commit succeeded after failures, or the store opened.
pub struct StoreWritable {
    /// Failed commits before this one (0 when the store just opened).
    pub after_failures: u64,
}

impl StoreWritable {
    /// Marks the store writable, logging the recovery if commits had failed.
    pub fn emit(&self) {
        if self.after_failures > 0 {
            log::info!("job store: writable again after {} failed commits", self.after_failures);
        }
        metrics::gauge!(STORE_WRITABLE.name).set(1.0);
    }
}

/// What damage was found in the job store: `cuzk_store_damage_total`'s label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreDamageKind {
    /// A record failed its checksum; it was dropped after the file was copied aside.
    Record,
    /// The file could not be read; it was moved aside and its intact records salvaged.
    Unreadable,
    /// A store that existed is gone or empty.
    Missing,
    /// The open file left its path while the daemon ran: a copy is
    /// written back from the open database.
    Detached,
}

impl StoreDamageKind {
    /// Every kind, for starting the damage counters at zero.
    pub const ALL: [StoreDamageKind; 4] = [
        StoreDamageKind::Record,
        StoreDamageKind::Unreadable,
        StoreDamageKind::Missing,
        StoreDamageKind::Detached,
    ];

    /// The metric's `kind` label.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreDamageKind::Record => "record",
            StoreDamageKind::Unreadable => "unreadable",
            StoreDamageKind::Missing => "missing",
            StoreDamageKind::Detached => "detached",
        }
    }
}

/// Damage found in the job store on start, or its file detached while running.
pub struct StoreDamage<'a> {
    /// What was found: the counter's label.
    pub kind: StoreDamageKind,
    /// What was done about it (files moved aside, records dropped), logged.
    pub detail: &'a str,
}

impl StoreDamage<'_> {
    /// Logs the damage as an error and counts it by kind.
    pub fn emit(&self) {
        log::error!("job store damaged ({}): {}", self.kind.as_str(), self.detail);
        metrics::counter!(STORE_DAMAGE.name, "kind" => self.kind.as_str()).increment(1);
    }
}
