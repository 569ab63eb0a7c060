//! A fleet node: partitions claimed and taken over, leases renewed and lost,
//! partitions held, and round trips to the fleet's database.

use std::time::Duration;

use cuzk_actors::telemetry::{counter, gauge, histogram, MetricDef};

/// Database round trips: 100 µs (loopback) to 10 s (a database in trouble).
const DATABASE_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 10.0];

/// `cuzk_fleet_claimed_partitions_total`: partitions this node took from the
/// fleet's queue.
pub const FLEET_CLAIMED: MetricDef = counter(
    "cuzk_fleet_claimed_partitions_total",
    "partitions",
    &[],
    "Partitions this node claimed from the fleet's shared queue (PostgreSQL store only).",
);
/// `cuzk_fleet_reclaimed_partitions_total`: claims that took over a
/// partition from a node whose lease ran out.
pub const FLEET_RECLAIMED: MetricDef = counter(
    "cuzk_fleet_reclaimed_partitions_total",
    "partitions",
    &[],
    "Claimed partitions whose earlier lease had run out: work taken over from a node that stopped or stalled.",
);
/// `cuzk_fleet_lease_renewals_total`: leases this node extended.
pub const FLEET_RENEWALS: MetricDef = counter(
    "cuzk_fleet_lease_renewals_total",
    "leases",
    &[],
    "Leases this node renewed, one per partition per renewal.",
);
/// `cuzk_fleet_leases_lost_total`: partitions whose lease this node found
/// gone, and whose work it dropped.
pub const FLEET_LEASES_LOST: MetricDef = counter(
    "cuzk_fleet_leases_lost_total",
    "leases",
    &[],
    "Partitions this node held whose lease it found gone (run out and taken over, or the job ended elsewhere): their work stops and its result is not recorded.",
);
/// `cuzk_fleet_held_partitions`: partitions this node holds leases on now.
pub const FLEET_HELD: MetricDef =
    gauge("cuzk_fleet_held_partitions", "partitions", &[], "Partitions this node holds leases on now.");
/// `cuzk_fleet_db_seconds`: round-trip times to the fleet's database, by
/// operation, to tell a slow database from a slow node.
pub const FLEET_DB: MetricDef = MetricDef {
    buckets: DATABASE_BUCKETS,
    ..histogram(
        "cuzk_fleet_db_seconds",
        &["op"],
        "Round trips to the fleet's database, by operation (claim, renew, submit, read, cancel, status).",
    )
};
/// The operations `cuzk_fleet_db_seconds` is labelled with.
pub const FLEET_DB_OPS: &[&str] = &["claim", "renew", "submit", "read", "cancel", "status"];

/// Starts the fleet's counters and gauge at zero and registers the database
/// histogram of every operation.
pub(super) fn start_at_zero() {
    for def in [FLEET_CLAIMED, FLEET_RECLAIMED, FLEET_RENEWALS, FLEET_LEASES_LOST] {
        metrics::counter!(def.name).absolute(0);
    }
    metrics::gauge!(FLEET_HELD.name).set(0.0);
    for op in FLEET_DB_OPS {
        // Registered, so that it is scraped before its first observation.
        let _ = metrics::histogram!(FLEET_DB.name, "op" => *op);
    }
}

/// Partitions a fleet node claimed; `reclaimed` of them had a lease that
/// ran out before.
pub struct FleetClaimed {
    /// Partitions the claim took.
    pub partitions: usize,
    /// Of those, the ones whose earlier lease had run out.
    pub reclaimed: usize,
}

impl FleetClaimed {
    /// Logs the claim (at debug level) and counts the partitions claimed and
    /// taken over.
    pub fn emit(&self) {
        log::debug!("fleet: claimed {} partitions ({} taken over)", self.partitions, self.reclaimed);
        metrics::counter!(FLEET_CLAIMED.name).increment(self.partitions as u64);
        metrics::counter!(FLEET_RECLAIMED.name).increment(self.reclaimed as u64);
    }
}

/// A fleet node renewed `renewed` leases and holds `held` partitions.
pub struct FleetRenewed {
    /// Leases the renewal extended.
    pub renewed: usize,
    /// Partitions this node holds leases on after it.
    pub held: usize,
}

impl FleetRenewed {
    /// Counts the renewals and sets the partitions held.
    pub fn emit(&self) {
        metrics::counter!(FLEET_RENEWALS.name).increment(self.renewed as u64);
        metrics::gauge!(FLEET_HELD.name).set(self.held as f64);
    }
}

/// A lease a fleet node held was gone `when` it looked (at renewal, or
/// when recording the partition's result).
pub struct FleetLeaseLost<'a> {
    /// The partition's `job/index` name, for the log line.
    pub partition: &'a str,
    /// When the loss was found (at renewal, or recording its result).
    pub when: &'a str,
}

impl FleetLeaseLost<'_> {
    /// Logs the loss as a warning and counts it.
    pub fn emit(&self) {
        log::warn!(
            "fleet: lease on {} gone when {}: run out and taken over, or its job ended elsewhere; this node's work on it is dropped",
            self.partition,
            self.when
        );
        metrics::counter!(FLEET_LEASES_LOST.name).increment(1);
    }
}

/// One round trip to the fleet's database.
pub struct FleetDb {
    /// One of `FLEET_DB_OPS`.
    pub op: &'static str,
    /// The round trip's time: the histogram's observation.
    pub elapsed: Duration,
}

impl FleetDb {
    /// Records the round trip in the operation's histogram.
    pub fn emit(&self) {
        metrics::histogram!(FLEET_DB.name, "op" => self.op).record(self.elapsed.as_secs_f64());
    }
}
