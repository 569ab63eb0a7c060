//! What one partition of a job reserves of the memory budget: a family's by
//! its shape, a Filecoin kind's by its parameter file's counts, less what
//! engines that evaluate on their devices never hold on the host.

use std::sync::Arc;

use cuzk_actors::Reservation;
use cuzk_filecoin::record::Evaluation;
use cuzk_kernels::circuits::CircuitShape;
use cuzk_kernels::cpu::msm_digit_table_bytes;

use crate::backend::ProofJob;

/// How many bytes one partition of a job reserves (backend-specific).
pub type ReservationRule = Arc<dyn Fn(&ProofJob) -> Reservation + Send + Sync>;

/// Memory one partition of `shape` holds on the host, from its NTT domain n
/// (32-byte field elements): a, b and c (3n, released after prove_start),
/// then the assignment, H, the MSM scalars and the signed-digit table
/// arkworks' MSM builds (one 8-byte digit per scalar per window, with
/// windows of ln(n)+2 bits), plus a fixed allowance for MSM buckets and
/// thread-local buffers. `tests/reservation_peak.rs` measures a partition's
/// real peak against it.
pub fn reservation_for(shape: &CircuitShape) -> Reservation {
    const ELEMENT: u64 = 32;
    const BUCKETS_AND_BUFFERS: u64 = 1 << 20;
    let n = shape.estimated_constraints.next_power_of_two() as u64;
    Reservation {
        abc_bytes: 3 * n * ELEMENT,
        retained_bytes: 5 * n * ELEMENT + msm_digit_table_bytes(n) + BUCKETS_AND_BUFFERS,
    }
}

/// The real backends' rule: a family partition by its shape, a Filecoin
/// partition by its parameter file's counts and the evaluation it runs;
/// with `device_evaluation` (engines that evaluate a, b and c on their
/// devices) a partition of compiled matrices holds no host a, b, c, and a
/// Filecoin partition none of what the device's MSMs hold either.
pub fn proving_reservation(evaluation: Evaluation, device_evaluation: bool) -> ReservationRule {
    Arc::new(move |job: &ProofJob| match job {
        ProofJob::Family(work) => on_engines(reservation_for(&work.shape), device_evaluation),
        ProofJob::Filecoin(work) => work.reservation(evaluation, device_evaluation),
    })
}

/// `reservation` without its host a, b and c when the engine evaluates them
/// on its device from the assignment (`device_evaluated`): synthesis then
/// never makes them (3 x 4.3 GB at 32 GiB PoRep).
pub(super) fn on_engines(reservation: Reservation, device_evaluated: bool) -> Reservation {
    if device_evaluated {
        Reservation { abc_bytes: 0, ..reservation }
    } else {
        reservation
    }
}
