//! The CPU engine for prove_start: arkworks' NTT and MSM on a dedicated
//! thread pool, so that proving never competes with synthesis for threads.

use ark_ec::VariableBaseMSM;
use ark_ff::PrimeField;
use rayon::prelude::*;

use crate::groth16::{
    assignment_bigints, compiled, compute_h_cpu, timed, Abc, PreparedCircuit, ProveStartEngine,
    ProveStartOutput, Synthesized,
};
use crate::{DeviceError, G1Projective, KernelError};

/// Bytes of the signed-digit table arkworks' MSM builds for n scalars: one
/// 8-byte digit per scalar per window, windows of ln(n) + 2 bits (ln(n) as
/// log2(n) * 0.69), one more window than 255 bits need for the carries. The
/// daemon's memory reservations (families and Filecoin kinds) count it.
pub fn msm_digit_table_bytes(n: u64) -> u64 {
    let window_bits = u64::from(n.max(1).ilog2()) * 69 / 100 + 2;
    let windows = 255u64.div_ceil(window_bits) + 1;
    n * windows * 8
}

/// prove_start on the host's cores (arkworks' NTT and MSM), on a thread pool of its own.
pub struct CpuEngine {
    pool: rayon::ThreadPool,
}

impl CpuEngine {
    /// An engine with `threads` proving threads (0: one per core).
    pub fn new(threads: usize) -> Result<Self, KernelError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("cuzk-cpu-prove-{i}"))
            .build()
            .map_err(|e| DeviceError::engine("starting the CPU prover threads", e))?;
        Ok(Self { pool })
    }
}

impl ProveStartEngine for CpuEngine {
    fn name(&self) -> &str {
        "cpu"
    }

    fn prove_start(
        &self,
        circuit: &PreparedCircuit,
        synthesized: Synthesized,
    ) -> Result<ProveStartOutput, KernelError> {
        // The daemon leaves a key in its file only when every engine reads
        // keys by range; this one reads whole queries.
        if circuit.key_source.is_some() {
            return Err(KernelError::Key(format!(
                "{}: the key was left in its parameter file, which only an engine that reads keys by range proves from",
                circuit.circuit_id
            )));
        }
        self.pool.install(|| {
            let mut phases = Vec::new();
            let freed_bytes = synthesized.abc_bytes();
            let Synthesized { abc, assignment, num_inputs } = synthesized;
            // A deferred partition (the daemon defers only for engines that
            // evaluate on a device) is evaluated here, as synthesis would.
            let [a, b, c] = match abc {
                Abc::Host { a, b, c } => [a, b, c],
                Abc::Deferred => timed(&mut phases, "evaluate", || {
                    compiled(circuit)?.evaluate(&assignment, circuit.domain_size)
                })?,
            };
            let domain = circuit.domain();
            let h = timed(&mut phases, "ntt", || compute_h_cpu(&domain, a, b, c));
            let pk = &circuit.pk;
            let h_acc = timed(&mut phases, "msm_h", || {
                let scalars: Vec<_> = h.par_iter().map(|s| s.into_bigint()).collect();
                drop(h);
                G1Projective::msm_bigint(&pk.h_query, &scalars)
            });
            let scalars = assignment_bigints(&assignment);
            let l_acc = timed(&mut phases, "msm_l", || {
                G1Projective::msm_bigint(&pk.l_query, &scalars[num_inputs - 1..])
            });
            let a_acc = timed(&mut phases, "msm_a", || {
                G1Projective::msm_bigint(&pk.a_query[1..], &circuit.a_selection.gather(&scalars))
            });
            let b1_acc = timed(&mut phases, "msm_b1", || {
                G1Projective::msm_bigint(&pk.b_g1_query[1..], &circuit.b_selection.gather(&scalars))
            });
            Ok(ProveStartOutput {
                a_acc,
                b1_acc,
                l_acc,
                h_acc,
                b2_acc: None,
                assignment,
                num_inputs,
                freed_bytes,
                phases,
                device_active: None,
            })
        })
    }
}
