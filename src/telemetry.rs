//! The daemon's telemetry, and the metrics catalogue it exports.
//!
//! The daemon's own events and its part of the catalogue live here, one file
//! per subject, beside nothing of the scheduler's: adding a metric of the
//! HTTP layer, the job store, the tenants or the fleet touches only this
//! crate. The scheduler's events and part live in `cuzk_actors::telemetry`.
//!
//! | file | subject |
//! | --- | --- |
//! | `http` | requests served, by route and status |
//! | `grpc` | gRPC calls answered, by method, code and result; refusals and FAILED answers logged; calls waiting on jobs; ignored sector sizes; Curio requests given jobs |
//! | `proofs` | proofs the finalizer's verification rejected, never served |
//! | `store` | the job store: failed commits, writable or not, damage found on start |
//! | `tenants` | tenants' refusals, critical priorities lowered, token reloads on SIGHUP |
//! | `fleet` | a fleet node: claims, renewals, lost leases, held partitions, database round trips |
//!
//! [`CATALOGUE`] is every metric `/metrics` exports, both parts in one list;
//! docs/metrics.md lists the same, and tests/metrics_catalogue.rs keeps
//! catalogue, docs and a live scrape in agreement.

mod fleet;
mod grpc;
mod http;
mod proofs;
mod store;
mod tenants;

use cuzk_actors::telemetry::{MetricDef, MetricKind, SCHEDULER_METRICS};

pub use fleet::{
    FleetClaimed, FleetDb, FleetLeaseLost, FleetRenewed, FLEET_CLAIMED, FLEET_DB, FLEET_DB_OPS, FLEET_HELD,
    FLEET_LEASES_LOST, FLEET_RECLAIMED, FLEET_RENEWALS,
};
pub use grpc::{
    GrpcCall, GrpcJob, GrpcNotProved, GrpcWaiting, SectorSizeIgnored, GRPC_CALLS, GRPC_SECTOR_SIZE_IGNORED,
    GRPC_WAITING,
};
pub use http::{HttpRequest, HTTP_REQUESTS};
pub use proofs::{ProofRejected, PROOFS_REJECTED};
pub use store::{
    StoreDamage, StoreDamageKind, StoreWritable, StoreWriteFailed, STORE_DAMAGE, STORE_WRITABLE,
    STORE_WRITE_FAILURES,
};
pub use tenants::{
    PriorityLowered, TenantLimit, TenantRefused, TenantsConfigured, TokensReloaded, PRIORITY_LOWERED,
    TENANT_REFUSALS, TOKEN_RELOADS,
};

/// The daemon's part of the catalogue, in the order docs/metrics.md lists
/// it (after the scheduler's).
pub const DAEMON_METRICS: &[MetricDef] = &[
    HTTP_REQUESTS,
    GRPC_CALLS,
    GRPC_SECTOR_SIZE_IGNORED,
    GRPC_WAITING,
    PROOFS_REJECTED,
    STORE_WRITE_FAILURES,
    STORE_WRITABLE,
    STORE_DAMAGE,
    TENANT_REFUSALS,
    PRIORITY_LOWERED,
    TOKEN_RELOADS,
    FLEET_CLAIMED,
    FLEET_RECLAIMED,
    FLEET_RENEWALS,
    FLEET_LEASES_LOST,
    FLEET_HELD,
    FLEET_DB,
];

/// Every metric the daemon exports: the scheduler's part, then the daemon's.
pub const CATALOGUE: &[MetricDef] =
    &joined::<{ SCHEDULER_METRICS.len() + DAEMON_METRICS.len() }>(SCHEDULER_METRICS, DAEMON_METRICS);

/// `first` then `second` as one array, built at compile time so that the
/// catalogue stays a plain slice; `N` must be their total length.
const fn joined<const N: usize>(first: &[MetricDef], second: &[MetricDef]) -> [MetricDef; N] {
    assert!(first.len() + second.len() == N, "N is the parts' total length");
    let mut all = [first[0]; N];
    let mut i = 0;
    while i < N {
        all[i] = if i < first.len() { first[i] } else { second[i - first.len()] };
        i += 1;
    }
    all
}

/// Rewrites the exporter's text so that float counters are typed `counter`.
pub fn fix_exposition(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let float_counter = line.strip_prefix("# TYPE ").and_then(|rest| {
            let name = rest.strip_suffix(" gauge")?;
            CATALOGUE.iter().find(|d| d.name == name && d.kind == MetricKind::FloatCounter)
        });
        match float_counter {
            Some(def) => {
                out.push_str("# TYPE ");
                out.push_str(def.name);
                out.push_str(" counter");
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Registers help texts and units with the installed recorder, and starts
/// the labelled counters at zero for every known label value, so that they
/// are scraped (and rated, and charted) before their first event.
pub fn describe_all() {
    cuzk_actors::telemetry::start_at_zero();
    store::start_at_zero();
    proofs::start_at_zero();
    fleet::start_at_zero();
    grpc::start_at_zero();
    http::start_at_zero();
    tenants::start_at_zero();
    for def in CATALOGUE {
        match def.kind {
            MetricKind::Counter => metrics::describe_counter!(def.name, def.help),
            MetricKind::Gauge | MetricKind::FloatCounter => {
                metrics::describe_gauge!(def.name, def.help)
            }
            MetricKind::Histogram => {
                metrics::describe_histogram!(def.name, metrics::Unit::Seconds, def.help)
            }
        }
    }
}
