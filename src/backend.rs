//! The proving backend: the actors' stage bodies on top of cuzk-kernels.
//! Synthesis and finalization run on the CPU; prove_start runs on one
//! engine per device (the CPU engine, or the CUDA engine with `cuda`).

use std::sync::Arc;
use std::time::Instant;

use ark_groth16::Groth16;
use ark_serialize::CanonicalSerialize;
use ark_std::UniformRand;
use cuzk_actors::backend::run_stage_as;
use cuzk_actors::{
    Backend, ErrorKind, Finished, JobSpec, Payload, Phases, Priority, StageError, Started, Synthesized,
};
use cuzk_filecoin::record::Evaluation;
use cuzk_kernels::circuits::{CircuitFamily, CircuitShape, WitnessSource};
use cuzk_kernels::groth16::{self, PreparedCircuit, ProveStartEngine, ProveStartOutput, Urgency};
use cuzk_kernels::{Bls12_381, Fr, KernelError};

use crate::config::ProvingConfig;
use crate::filecoin::{CircuitLoading, FilecoinJob};
use crate::keys::{KeyError, KeyStore, Preparation};
use crate::telemetry::ProofRejected;

/// What a job asks the backend to prove.
pub enum ProofJob {
    /// A registered arkworks family (the demonstration circuits).
    Family(FamilyJob),
    /// One of Filecoin's proof kinds.
    Filecoin(FilecoinJob),
}

/// A job of a registered family: its shape and a witness per partition.
pub struct FamilyJob {
    /// The family that builds each partition's circuit.
    pub family: Arc<dyn CircuitFamily>,
    /// The circuit's size and parameters, which pick its key.
    pub shape: CircuitShape,
    /// One witness per partition.
    pub witnesses: Vec<PartitionWitness>,
}

/// Where a partition's witness comes from, as a job holds it until its
/// partition is synthesized.
#[derive(Clone, Debug, PartialEq)]
pub enum PartitionWitness {
    /// A random valid instance drawn from this seed.
    Seed(u64),
    /// The client's inputs as compact JSON text, parsed when the partition is
    /// synthesized: text is what a job's memory limit counts, and partitions
    /// given one object share one copy of it.
    Inputs(Arc<str>),
}

/// A job's stored inputs that no longer parse (they were JSON when the job
/// was accepted, so only a damaged record gives this).
#[derive(Debug, thiserror::Error)]
#[error("stored inputs are not JSON: {0}")]
pub struct StoredInputsError(#[from] serde_json::Error);

impl PartitionWitness {
    /// The source the family builds an instance from.
    pub fn source(&self) -> Result<WitnessSource, StoredInputsError> {
        match self {
            PartitionWitness::Seed(seed) => Ok(WitnessSource::Seed(*seed)),
            PartitionWitness::Inputs(text) => Ok(WitnessSource::Inputs(serde_json::from_str(text)?)),
        }
    }
}

impl ProofJob {
    /// The circuit id the job reports (a Filecoin parameter file's cache id).
    pub fn circuit_id(&self) -> &str {
        match self {
            ProofJob::Family(job) => &job.shape.circuit_id,
            ProofJob::Filecoin(job) => &job.cache_id,
        }
    }
}

/// How soon a job's partitions need the device: critical jobs (WinningPoSt
/// by default) run ahead of the others on a device they share.
pub(crate) fn urgency(priority: Priority) -> Urgency {
    match priority {
        Priority::Critical => Urgency::Urgent,
        Priority::High | Priority::Normal | Priority::Low => Urgency::Normal,
    }
}

/// A proving device: a name and the engine that runs prove_start on it.
pub struct Device {
    /// The device as logs and `/v1/status` name it (e.g. `cuda0 NVIDIA H100`).
    pub name: String,
    /// The engine that runs prove_start on the device.
    pub engine: Arc<dyn ProveStartEngine>,
}

/// The real prover behind the scheduler's stages (CPU or CUDA engines): it
/// synthesizes, proves and finalizes partitions with the keys of the key store.
pub struct ProvingBackend {
    /// The engines' name (`cpu`, `cuda`), as the metrics and logs say it.
    kind: &'static str,
    /// Every circuit's keys and matrices: set up, loaded from their files,
    /// or shared by the fleet.
    keys: Arc<KeyStore>,
    /// The engines, one per device.
    devices: Vec<Device>,
    /// The finalizer checks each proof against its verifying key
    /// (`proving.verify_proofs`), so that a wrong one is never served.
    verify_proofs: bool,
    /// `proving.malloc_trim`: the heap returned to the system after each
    /// finalization.
    trim_after_finalize: bool,
    /// How Filecoin partitions get their a, b and c.
    evaluation: Evaluation,
    /// Whether every device's engine evaluates a, b and c on the device
    /// (`ProveStartEngine::evaluates_on_device`): synthesis then stops at
    /// the assignment of a circuit with compiled matrices.
    device_evaluation: bool,
    /// How Filecoin circuits are loaded (shapes kept on disk, keys left in
    /// their files when every engine reads them by range).
    loading: CircuitLoading,
}

struct SynthesizedPartition {
    circuit: Arc<PreparedCircuit>,
    synthesized: groth16::Synthesized,
}

struct StartedPartition {
    circuit: Arc<PreparedCircuit>,
    output: ProveStartOutput,
}

impl ProvingBackend {
    /// The backend of `devices` (of engine kind `kind`, e.g. `cuda`), with keys from
    /// `keys`; asks the engines whether to evaluate on the device and read keys by range.
    pub fn new(
        kind: &'static str,
        keys: Arc<KeyStore>,
        devices: Vec<Device>,
        config: &ProvingConfig,
        mut loading: CircuitLoading,
    ) -> Self {
        let device_evaluation = !devices.is_empty() && devices.iter().all(|d| d.engine.evaluates_on_device());
        loading.key_in_file = !devices.is_empty() && devices.iter().all(|d| d.engine.reads_key_by_range());
        Self {
            kind,
            keys,
            devices,
            verify_proofs: config.verify_proofs,
            trim_after_finalize: config.malloc_trim,
            evaluation: config.filecoin_evaluation,
            device_evaluation,
            loading,
        }
    }

    /// How this backend's Filecoin circuits are loaded: preloads must load
    /// them the same way.
    pub fn loading(&self) -> &CircuitLoading {
        &self.loading
    }

    /// Whether the engines evaluate a, b and c on their devices, so that a
    /// partition holds none on the host (its reservation's `abc_bytes`).
    pub fn device_evaluation(&self) -> bool {
        self.device_evaluation
    }

    /// A family partition: the shape's key, the instance from its witness
    /// source, a, b and c from the cached matrices (or left to the engine).
    fn synthesize_family(
        &self,
        job: &JobSpec,
        work: &FamilyJob,
        partition: u32,
    ) -> Result<(Arc<PreparedCircuit>, groth16::Synthesized, Phases), StageError> {
        let started = Instant::now();
        // The key store keeps a failed setup as failed, so no retry can help;
        // a fleet's key store that could not be reached may be back soon, and
        // a stopped setup starts again when asked.
        let prepared = self.keys.prepared(&work.family, &work.shape, &job.abandonment());
        let prepared = prepared.map_err(|e| match e {
            KeyError::Failed(_) => StageError::permanent(e),
            KeyError::Unavailable(_) | KeyError::Stopped => StageError::retryable(e),
        });
        let circuit = match prepared? {
            Preparation::Ready(circuit) => circuit,
            Preparation::Pending => {
                return Err(StageError::not_ready(format!(
                    "the key of {} is being prepared",
                    work.shape.circuit_id
                )))
            }
        };
        let key_ready = started.elapsed();
        let source = work
            .witnesses
            .get(partition as usize)
            .ok_or_else(|| StageError::permanent(format!("no witness for partition {partition}")))?
            .source()
            .map_err(StageError::permanent)?;
        let instance = work.family.instance(&work.shape, &source).map_err(StageError::permanent)?;
        let assignment = groth16::assign(&circuit, instance).map_err(kernel_failure)?;
        let synthesized = if self.device_evaluation {
            groth16::defer(&circuit, assignment)
        } else {
            groth16::evaluate(&circuit, assignment)
        }
        .map_err(kernel_failure)?;
        let phases = vec![("key", key_ready), ("synthesize", started.elapsed() - key_ready)];
        Ok((circuit, synthesized, phases))
    }

    fn job(job: &JobSpec) -> Result<&ProofJob, StageError> {
        job.work
            .downcast_ref::<ProofJob>()
            .ok_or_else(|| StageError::permanent("job carries no proof request"))
    }
}

/// A kernel failure, by whether another attempt could pass: the kernels
/// know which of their failures may not recur (`KernelError::retryable`).
fn kernel_failure(error: KernelError) -> StageError {
    if error.retryable() {
        StageError::retryable(error)
    } else {
        StageError::permanent(error)
    }
}

fn serialize(value: &impl CanonicalSerialize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(value.compressed_size());
    value.serialize_compressed(&mut bytes).expect("writing to a Vec cannot fail");
    bytes
}

impl Backend for ProvingBackend {
    fn name(&self) -> &str {
        self.kind
    }

    fn devices(&self) -> Vec<String> {
        self.devices.iter().map(|d| d.name.clone()).collect()
    }

    fn synthesize(&self, job: &JobSpec, partition: u32) -> Result<Synthesized, StageError> {
        let (circuit, synthesized, phases) = match Self::job(job)? {
            ProofJob::Family(work) => self.synthesize_family(job, work, partition)?,
            // Synthesis of a checked request is a function of the request
            // alone: if the reference circuit still panics on it, every
            // attempt would, so the job fails at once, saying why.
            ProofJob::Filecoin(work) => run_stage_as("synthesis", ErrorKind::Permanent, || {
                let on_device = self.device_evaluation;
                work.synthesize_for(&self.keys, partition, self.evaluation, on_device, &self.loading)
            })?,
        };
        Ok(Synthesized { payload: Payload::new(SynthesizedPartition { circuit, synthesized }), phases })
    }
    fn prove_start(
        &self,
        device: usize,
        job: &JobSpec,
        _partition: u32,
        input: Payload,
    ) -> Result<Started, StageError> {
        let SynthesizedPartition { circuit, synthesized } = input.take()?;
        let device =
            self.devices.get(device).ok_or_else(|| StageError::permanent(format!("no device {device}")))?;
        let output = device
            .engine
            .prove_start_as(&circuit, synthesized, urgency(job.priority))
            .map_err(kernel_failure)?;
        let phases = output.phases.iter().map(|p| (p.phase, p.duration)).collect();
        Ok(Started {
            freed_bytes: output.freed_bytes,
            device_active: output.device_active,
            phases,
            payload: Payload::new(StartedPartition { circuit, output }),
        })
    }

    fn device_memory(&self) -> Vec<serde_json::Value> {
        (self.devices.iter())
            .filter_map(|d| {
                let report = d.engine.memory_report()?;
                Some(serde_json::json!({ "device": d.name, "memory": report }))
            })
            .collect()
    }

    /// The keys and matrices the key store holds, and what the engines hold
    /// in host memory beside them (the CUDA engine's streamed key parts,
    /// pinned): all of it outside the partitions' reservations.
    fn resident_bytes(&self) -> u64 {
        self.keys.resident_bytes() + self.devices.iter().map(|d| d.engine.host_bytes()).sum::<u64>()
    }

    fn transient_bytes(&self) -> u64 {
        self.keys.transient_bytes()
    }

    /// A family job waits for its shape's key like the jobs whose
    /// partitions asked for it: a cancel of the job that started the setup
    /// leaves it running for this one (`KeyStore::record_expected`). A Filecoin
    /// parameter file's load is never stopped, so its jobs need no count.
    fn accepted(&self, job: &JobSpec) {
        if let Ok(ProofJob::Family(work)) = Self::job(job) {
            self.keys.record_expected(&work.shape.circuit_id, &job.abandonment());
        }
    }

    fn prove_finish(&self, job: &JobSpec, partition: u32, input: Payload) -> Result<Finished, StageError> {
        let StartedPartition { circuit, output } = input.take()?;
        let mut rng = rand::thread_rng();
        let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
        let public_inputs: Vec<Fr> = output.public_inputs().to_vec();
        let (proof, mut phases) = groth16::prove_finish(&circuit, output, r, s).map_err(kernel_failure)?;
        let mut phases = if self.verify_proofs {
            let valid = groth16::timed(&mut phases, "verify", || {
                let pvk = ark_groth16::prepare_verifying_key(circuit.vk());
                Groth16::<Bls12_381>::verify_proof(&pvk, &proof, &public_inputs)
            });
            match valid {
                Ok(true) => phases,
                // A fault on the device can make a wrong proof from a good
                // witness (checked at synthesis): worth another attempt.
                Ok(false) => {
                    ProofRejected {
                        job: &job.id,
                        partition,
                        circuit: &job.circuit,
                        circuit_id: &job.circuit_id,
                    }
                    .emit();
                    return Err(StageError::retryable("proof failed self-verification"));
                }
                Err(e) => return Err(StageError::permanent(format!("self-verification error: {e}"))),
            }
        } else {
            phases
        };
        if self.trim_after_finalize {
            groth16::timed(&mut phases, "malloc_trim", release_freed_memory);
        }
        Ok(Finished {
            proof: serialize(&proof),
            public_inputs: public_inputs.iter().map(serialize).collect(),
            phases: phases.iter().map(|p| (p.phase, p.duration)).collect(),
        })
    }
}

/// Hands memory freed by the partition back to the OS. glibc keeps freed
/// arenas otherwise, and a prover's heap grows to the sum of its peaks. It
/// runs on a finalizer thread, where its cost (a walk of the heap) delays no
/// GPU worker.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::{urgency, Priority, Urgency};

    #[test]
    fn only_critical_jobs_are_urgent_on_the_device() {
        let urgent: Vec<Priority> =
            (Priority::ALL.into_iter()).filter(|&p| urgency(p) == Urgency::Urgent).collect();
        assert_eq!(urgent, [Priority::Critical]);
    }
}
