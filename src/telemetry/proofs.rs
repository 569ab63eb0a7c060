//! Proofs the finalizer's verification rejected before anything was
//! served: a wrong proof made from a witness that synthesis had checked, so
//! the fault is in the proving (a device fault, a key whose points are
//! valid but not the key's), never in the request.

use cuzk_actors::telemetry::{counter, MetricDef};
use cuzk_actors::JobId;
use cuzk_filecoin::Kind;

/// `cuzk_proofs_rejected_total`: proofs the finalizer's verification
/// caught, by circuit: a sign of a failing device or a bad key.
pub const PROOFS_REJECTED: MetricDef = counter(
    "cuzk_proofs_rejected_total",
    "proofs",
    &["circuit"],
    "Partition proofs the finalizer's verification rejected (never served; the partition is proved again, and its job fails after the last attempt), by circuit (a Filecoin kind's API name, or a registered family's).",
);

/// Starts every Filecoin kind's counter at zero (a family's starts with its
/// first rejection).
pub(super) fn start_at_zero() {
    for kind in Kind::ALL {
        metrics::counter!(PROOFS_REJECTED.name, "circuit" => kind.api_name()).absolute(0);
    }
}

/// A partition's proof failed the finalizer's verification against its
/// circuit's verifying key.
pub struct ProofRejected<'a> {
    /// The job whose proof was rejected.
    pub job: &'a JobId,
    /// The partition whose proof was rejected.
    pub partition: u32,
    /// The job's circuit (a kind's API name, or a registered family's).
    pub circuit: &'a str,
    /// The key the proof was checked against.
    pub circuit_id: &'a str,
}

impl ProofRejected<'_> {
    /// Logs the rejection as an error and counts it by circuit.
    pub fn emit(&self) {
        log::error!(
            "job {} partition {} ({}): the proof failed verification against {}'s verifying key; not served, proved again",
            self.job,
            self.partition,
            self.circuit,
            self.circuit_id
        );
        metrics::counter!(PROOFS_REJECTED.name, "circuit" => self.circuit.to_string()).increment(1);
    }
}
