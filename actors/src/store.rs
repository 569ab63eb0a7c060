//! Durable job state: what the Tracker records so that a restarted daemon
//! resumes unfinished jobs and still serves finished ones. The trait knows no
//! storage engine; the daemon implements it (an embedded file, or a database
//! a fleet of daemons shares, whose nodes' trackers hold only the partitions
//! they claimed: `Persistence::fleet`).

use std::any::Any;
use std::collections::BTreeMap;
use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::model::{
    JobId, JobSpec, Priority, ProofRecord, RecordedRequest, Reservation, Stage, Submitted, Tenant,
};
use crate::time::{from_unix_ms, unix_ms};

/// Why the store could not do what was asked. The kind says what a caller
/// can do about it: after `Closed` nothing more is written (the daemon is
/// stopping); after `Unavailable` the storage failed and a later write may
/// succeed (the store retries by itself; a client may too).
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// The store was closed on shutdown: the write was not made and none will
    /// be.
    #[error("the job store is closed")]
    Closed,
    /// The storage failed (an I/O or database error); a later write may
    /// succeed.
    #[error("job store: {0}")]
    Unavailable(Arc<dyn Error + Send + Sync>),
}

impl StoreError {
    /// The storage failed with `cause`.
    pub fn unavailable(cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self::Unavailable(Arc::from(cause.into()))
    }
}

/// How the store is doing, for readiness and `/v1/status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StoreHealth {
    /// Why the last commit failed (disk full, I/O error), while no later one
    /// has succeeded: new jobs are refused meanwhile.
    pub failing: Option<String>,
    /// What was found wrong with the stored data on start (damaged records,
    /// a file moved aside, a store gone missing), a sentence each.
    pub incidents: Vec<String>,
}

/// A job as accepted: enough to rebuild its work after a restart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job's name.
    pub id: JobId,
    /// The job's submission order, so that restored jobs queue in the order
    /// they were submitted.
    pub seq: u64,
    /// Its scheduling class.
    pub priority: Priority,
    /// How many partitions it is proved in.
    pub partitions: u32,
    /// The circuit family or Filecoin kind the job named.
    pub circuit: String,
    /// The exact circuit shape it proves.
    pub circuit_id: String,
    /// The caller's idempotency key, so that a repeat after a restart still
    /// returns this job.
    pub idempotency_key: Option<String>,
    /// Whose job it is; absent in stores written before tenants, whose
    /// jobs belong to the default tenant.
    #[serde(default)]
    pub tenant: Tenant,
    /// When it was submitted, so that a restored job keeps its age and order.
    pub submitted_unix_ms: u64,
    /// Relative to submission.
    pub deadline_ms: Option<u64>,
    /// The request as compact JSON, parsed again on restore; emptied once
    /// the job finished (nothing rebuilds a finished job's work).
    pub request: String,
    /// SHA-256 of `request`, kept after the request is emptied so that a
    /// repeated idempotency key is still compared by body. Absent in records
    /// written before it existed, whose request is always there.
    #[serde(default)]
    pub request_digest: Option<[u8; 32]>,
}

/// A spec and its record hold the same job: these two are the one place a
/// job crosses between them.
impl JobRecord {
    /// The record of a job the tracker accepted as `spec`, with what the
    /// spec does not hold: whose it is, its idempotency key and the request
    /// its work is rebuilt from.
    pub fn accepted(
        spec: &JobSpec,
        tenant: Tenant,
        idempotency_key: Option<String>,
        request: RecordedRequest,
    ) -> Self {
        Self {
            id: spec.id.clone(),
            seq: spec.seq,
            priority: spec.priority,
            partitions: spec.partitions,
            circuit: spec.circuit.clone(),
            circuit_id: spec.circuit_id.clone(),
            idempotency_key,
            tenant,
            submitted_unix_ms: unix_ms(spec.submitted.wall),
            deadline_ms: spec.submitted.deadline_after().map(|d| d.as_millis() as u64),
            request_digest: Some(request.digest),
            request: request.text,
        }
    }

    /// The spec of a stored job, whose `work` the caller rebuilt from the
    /// recorded request: on restore, and when a fleet node claims the job's
    /// partitions.
    pub(crate) fn spec(&self, reservation: Reservation, work: Arc<dyn Any + Send + Sync>) -> JobSpec {
        JobSpec {
            id: self.id.clone(),
            seq: self.seq,
            priority: self.priority,
            partitions: self.partitions,
            circuit: self.circuit.clone(),
            circuit_id: self.circuit_id.clone(),
            reservation,
            work,
            submitted: Submitted::new(
                from_unix_ms(self.submitted_unix_ms),
                self.deadline_ms.map(Duration::from_millis),
            ),
            abandoned: Default::default(),
        }
    }

    /// The request's digest, recorded or computed from the request.
    pub fn request_digest(&self) -> [u8; 32] {
        self.request_digest.unwrap_or_else(|| sha2::Sha256::digest(self.request.as_bytes()).into())
    }
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobOutcome {
    /// Done, Failed or Cancelled.
    pub stage: Stage,
    /// Why the job failed or was cancelled; `None` when it is done.
    pub error: Option<String>,
    /// When it ended, which retention counts from.
    pub finished_unix_ms: u64,
}

/// What the node that ran a partition saw of it: the part of a partition's
/// view (`PartitionView`) that only that node knows. A fleet node stores it
/// with the partition's proof, so that every node shows it. Records written
/// before this type held a whole `PartitionView`; its other fields are
/// ignored when read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PartitionDetail {
    /// Milliseconds in each stage it went through, and `total`.
    #[serde(default)]
    pub timings_ms: BTreeMap<String, f64>,
    /// The GPU worker that proved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Milliseconds of each phase of its GPU stage.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_phases_ms: BTreeMap<String, f64>,
    /// Attempts started (1 for the first).
    pub attempts: u32,
    /// The error of the last failed attempt, when it was retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_after: Option<String>,
}

/// One recorded change. Writes of one store are applied in the order given.
#[derive(Clone, Debug)]
pub enum StoreWrite {
    /// The tracker accepted a job: its record is kept until it is removed.
    Accepted(JobRecord),
    /// A partition was proved: its proof is kept, so a restart neither proves
    /// it again nor loses it.
    PartitionProved {
        /// The partition's job.
        job: JobId,
        /// The partition's index in its job.
        index: u32,
        /// The partition's proof.
        proof: ProofRecord,
        /// What a fleet node saw of the partition, kept with the proof so
        /// that every node shows it; None on a single daemon, whose tracker
        /// keeps it.
        detail: Option<PartitionDetail>,
    },
    /// A partition failed for good, ahead of its job's end: a restart that
    /// finds it fails the job.
    PartitionFailed {
        /// The partition's job.
        job: JobId,
        /// The partition's index in its job.
        index: u32,
        /// Why it failed, as the job reports it.
        error: String,
    },
    /// A job ended: a restart serves it as ended and does not run it again.
    Finished {
        /// The job that ended.
        job: JobId,
        /// How it ended.
        outcome: JobOutcome,
    },
    /// Past retention: the job and everything recorded of it go.
    Removed(JobId),
    /// Changes nothing; committed once every write queued before it is.
    Barrier,
}

/// A job as the store has it on start.
#[derive(Clone, Debug)]
pub struct StoredJob {
    /// The job as accepted, from which its work is rebuilt.
    pub record: JobRecord,
    /// The proofs of its proved partitions, by index: they are not proved
    /// again.
    pub proofs: BTreeMap<u32, ProofRecord>,
    /// The errors of its partitions that failed for good, by index.
    pub failures: BTreeMap<u32, String>,
    /// How the job ended; `None` while it is unfinished.
    pub outcome: Option<JobOutcome>,
}

/// Resolves once a write (and every write queued before it) is durable.
#[derive(Debug)]
pub struct Committed(tokio::sync::oneshot::Receiver<Result<(), StoreError>>);

/// The sending half of [`Committed`], for store implementations.
pub struct CommitSignal(tokio::sync::oneshot::Sender<Result<(), StoreError>>);

impl Committed {
    /// A new signal and the future that resolves when it is sent or dropped.
    pub fn channel() -> (CommitSignal, Committed) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (CommitSignal(tx), Committed(rx))
    }

    /// Waits outside any async runtime.
    pub fn wait_blocking(self) -> Result<(), StoreError> {
        self.0.blocking_recv().unwrap_or(Err(StoreError::Closed))
    }
}

impl CommitSignal {
    /// Tells the waiter how the write went: durable, or why not.
    pub fn send(self, result: Result<(), StoreError>) {
        // The waiter may have gone (client hung up); the write stands.
        let _ = self.0.send(result);
    }
}

impl Future for Committed {
    type Output = Result<(), StoreError>;

    /// A signal dropped unsent means the store closed before this write.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|received| received.unwrap_or(Err(StoreError::Closed)))
    }
}

/// Durable job storage. Methods never block on disk: writes are queued and
/// committed by the store's own writer.
pub trait JobStore: Send + Sync {
    /// Queues a write; `Committed` resolves when it is durable.
    fn write(&self, write: StoreWrite) -> Committed;

    /// Every job recorded and not removed, in submission order.
    fn load(&self) -> Result<Vec<StoredJob>, StoreError>;

    /// Commits everything queued, then closes: later writes fail. Blocks.
    fn close(&self) -> Result<(), StoreError>;

    /// Whether writes succeed now, and what was found wrong on start.
    fn health(&self) -> StoreHealth {
        StoreHealth::default()
    }
}

/// A fleet node's load, published by the tracker as it changes so that the
/// claimer (a plain thread) sizes its claims without asking: partitions
/// held and not yet started, and partitions held in all.
#[derive(Debug, Default)]
pub struct FleetLoad {
    /// Partitions held and not yet started (queued or waiting for budget): the
    /// claimer claims only what leaves room beside them.
    pub waiting: AtomicUsize,
    /// Partitions held and not yet over, whatever their stage.
    pub held: AtomicUsize,
}

/// What the Tracker keeps and for how long.
#[derive(Clone)]
pub struct Persistence {
    /// Where jobs are recorded; `None` keeps them in memory only, lost on
    /// restart.
    pub store: Option<Arc<dyn JobStore>>,
    /// Set on a fleet node (a store shared with other daemons): jobs come to
    /// the tracker only as claimed partitions, and end in the database, in
    /// the transaction that records their last partition; the tracker
    /// forgets a job once the partitions it held are over.
    pub fleet: Option<Arc<FleetLoad>>,
    /// Finished jobs older than this are forgotten (memory and store).
    pub retention: Option<Duration>,
    /// How often the tracker looks for finished jobs past retention.
    pub sweep_interval: Duration,
}

impl Persistence {
    /// Nothing stored, nothing forgotten.
    pub fn in_memory() -> Self {
        Self { store: None, fleet: None, retention: None, sweep_interval: Duration::from_secs(60) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fleet partition's detail as stored before it had its own type (a
    /// whole `PartitionView`) reads back as the detail it holds.
    #[test]
    fn a_detail_stored_as_a_whole_partition_view_reads_back() {
        let old = r#"{"index":3,"stage":"done","timings_ms":{"gpu":2.5,"total":9.0},
            "worker":"cpu0/0","node":"a","gpu_phases_ms":{"msm":1.5},"attempts":2,
            "retried_after":"device lost"}"#;
        let detail: PartitionDetail = serde_json::from_str(old).unwrap();
        assert_eq!(
            detail,
            PartitionDetail {
                timings_ms: BTreeMap::from([("gpu".into(), 2.5), ("total".into(), 9.0)]),
                worker: Some("cpu0/0".into()),
                gpu_phases_ms: BTreeMap::from([("msm".into(), 1.5)]),
                attempts: 2,
                retried_after: Some("device lost".into()),
            }
        );
        let again: PartitionDetail = serde_json::from_str(&serde_json::to_string(&detail).unwrap()).unwrap();
        assert_eq!(again, detail);
    }

    /// A record written before jobs had tenants reads back as the default
    /// tenant's; one written since keeps its tenant.
    #[test]
    fn records_without_a_tenant_belong_to_the_default_tenant() {
        let old = r#"{"id":"j","seq":1,"priority":"normal","partitions":1,"circuit":"c",
            "circuit_id":"c-k4","idempotency_key":null,"submitted_unix_ms":1,
            "deadline_ms":null,"request":"{}"}"#;
        let record: JobRecord = serde_json::from_str(old).unwrap();
        assert_eq!(record.tenant, Tenant::default());
        let record = JobRecord { tenant: Tenant("acme".into()), ..record };
        let again: JobRecord = serde_json::from_str(&serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(again.tenant.as_str(), "acme");
    }

    /// A spec recorded and rebuilt is the same job: its fields, its time of
    /// submission (to the millisecond the store keeps) and its deadline.
    #[test]
    fn a_spec_survives_its_record() {
        let submitted_wall = from_unix_ms(1_700_000_000_123);
        let spec = JobSpec {
            id: JobId("j".into()),
            seq: 7,
            priority: Priority::High,
            partitions: 3,
            circuit: "mimc-chain".into(),
            circuit_id: "mimc-chain-k4".into(),
            reservation: Reservation { abc_bytes: 10, retained_bytes: 20 },
            work: Arc::new(()),
            submitted: Submitted::new(submitted_wall, Some(Duration::from_millis(5_000))),
            abandoned: Default::default(),
        };
        let request = RecordedRequest { text: "{}".into(), digest: [9; 32] };
        let record = JobRecord::accepted(&spec, Tenant("acme".into()), Some("key".into()), request);
        assert_eq!(
            (record.seq, record.priority, record.partitions, record.submitted_unix_ms, record.deadline_ms),
            (7, Priority::High, 3, 1_700_000_000_123, Some(5_000))
        );
        assert_eq!((record.tenant.as_str(), record.idempotency_key.as_deref()), ("acme", Some("key")));
        assert_eq!((record.request.as_str(), record.request_digest), ("{}", Some([9; 32])));
        let again = record.spec(spec.reservation, Arc::new(()));
        assert_eq!(
            (&again.id, again.seq, again.priority, again.partitions),
            (&spec.id, 7, Priority::High, 3)
        );
        assert_eq!((again.circuit.as_str(), again.circuit_id.as_str()), ("mimc-chain", "mimc-chain-k4"));
        assert_eq!(again.reservation, spec.reservation);
        assert_eq!(again.submitted.wall, submitted_wall);
        assert_eq!(again.submitted.deadline_after(), Some(Duration::from_millis(5_000)));
    }
}
