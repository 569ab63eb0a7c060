//! Starts the actors, each on the threads its role needs, wired together.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use actix::prelude::*;
use serde::Serialize;

use crate::backend::Backend;
use crate::budget::{self, BudgetManager};
use crate::dispatcher::{self, Dispatcher, Peers, WorkerSlot};
use crate::finalizer::Finalizer;
use crate::gpu_worker::{self, GpuWorker};
use crate::mailbox::mailbox;
use crate::messages::{
    BudgetStatus, GetBudgetStatus, GetQueueStatus, GetTrackerStatus, GetWorkers, QueueStatus, SetResident,
    TrackerPort, TrackerStatus, WorkerReport,
};
use crate::model::{Lane, WorkerId};
use crate::pacer::PacerConfig;
use crate::store::Persistence;
use crate::synthesis::SynthesisWorker;
use crate::tracker::{self, Tracker};
use crate::worker_monitor::{self, WorkerMonitor};

/// How the actor system is sized and tuned: built from the daemon's
/// configuration, and logged at start.
#[derive(Clone, Debug, Serialize)]
pub struct SystemConfig {
    /// Partitions synthesized at once; critical ones have
    /// `dispatcher::CRITICAL_SYNTHESIS_SLOTS` more, and a thread each.
    pub synthesis_threads: usize,
    /// Threads running prove_finish, each a finalizer of its own.
    pub finalizer_threads: usize,
    /// General GPU workers per device, each on a thread of its own (at least
    /// one).
    pub workers_per_device: usize,
    /// Extra workers per device, after the general ones, that take only
    /// critical partitions (0: none).
    pub critical_workers_per_device: usize,
    /// Partitions queued in a GPU worker's mailbox behind the one it runs.
    pub gpu_lookahead: usize,
    /// Host bytes that partitions in flight and the backend's resident data may
    /// hold together; the budget manager never grants beyond it.
    pub budget_bytes: u64,
    /// How the dispatcher paces the start of syntheses.
    pub pacer: PacerConfig,
    /// Attempts a partition gets (stage errors and panics) before its job fails.
    pub max_attempts: u32,
}

/// Handles to a running actor system.
#[derive(Clone)]
pub struct ProvingSystem {
    /// Where jobs are submitted, cancelled and queried.
    pub tracker: Addr<Tracker>,
    /// Where the workers' time accounts and timelines are read, and span
    /// subscriptions are made.
    pub monitor: Addr<WorkerMonitor>,
    /// Where queue depths and the pacer's state are read, and where shutdown
    /// holds queued partitions back.
    pub dispatcher: Addr<Dispatcher>,
    /// Where the budget's state is read and the backend's resident bytes are
    /// reported.
    pub budget: Addr<BudgetManager>,
    /// The backend the stages run on, for callers that ask it directly (its
    /// name, devices and memory plan).
    pub backend: Arc<dyn Backend>,
    /// The configuration the system was started with, for callers that size
    /// their own work by it (a fleet node's claimer).
    pub config: SystemConfig,
    _arbiters: Arc<Vec<Arbiter>>,
}

/// What `/v1/status` shows of the scheduler.
#[derive(Debug, Serialize)]
pub struct SystemStatus {
    /// The backend's name ("cpu", "cuda" or "sim").
    pub backend: String,
    /// Bytes budgeted, in use and waited for.
    pub budget: BudgetStatus,
    /// Partitions in each queue, and the pacer's state.
    pub queues: QueueStatus,
    /// Job and partition counts, shown at the top level of the status.
    #[serde(flatten)]
    pub tracker: TrackerStatus,
    /// Each GPU worker with its last few spans; `/v1/workers` has more.
    pub workers: Vec<WorkerReport>,
    /// Each device's memory plan (`Backend::device_memory`); absent when
    /// the backend has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<serde_json::Value>,
}

/// Spans per worker in `/v1/status`.
const STATUS_SPANS: usize = 8;

impl ProvingSystem {
    /// Starts every actor, keeping jobs in memory only. Must run inside an
    /// actix `System`.
    pub fn start(config: SystemConfig, backend: Arc<dyn Backend>) -> Self {
        Self::start_with(config, backend, Persistence::in_memory())
    }

    /// Starts every actor; the tracker records jobs as `persistence` says.
    pub fn start_with(config: SystemConfig, backend: Arc<dyn Backend>, persistence: Persistence) -> Self {
        let (tracker, tracker_box) = mailbox::<Tracker>(tracker::MAILBOX_CAPACITY);
        let (dispatcher, dispatcher_box) = mailbox::<Dispatcher>(dispatcher::MAILBOX_CAPACITY);
        let (budget, budget_box) = mailbox::<BudgetManager>(budget::MAILBOX_CAPACITY);
        let (monitor, monitor_box) = mailbox::<WorkerMonitor>(worker_monitor::MAILBOX_CAPACITY);
        let mut arbiters = Vec::new();

        // Every recipient made from one address shares that actor's one
        // mailbox, so reports of different kinds keep their order.
        let tracker_port = TrackerPort {
            progress: tracker.clone().recipient(),
            proved: tracker.clone().recipient(),
            failed: tracker.clone().recipient(),
        };
        let synthesis = {
            let (backend, tracker, dispatcher, budget) =
                (backend.clone(), tracker.clone(), dispatcher.clone(), budget.clone());
            // A thread for each slot, the critical partitions' own included.
            let threads = config.synthesis_threads.max(1) + dispatcher::CRITICAL_SYNTHESIS_SLOTS;
            SyncArbiter::start(threads, move || SynthesisWorker {
                backend: backend.clone(),
                progress: tracker.clone().recipient(),
                done: dispatcher.clone().recipient(),
                resident: budget.clone().recipient(),
            })
        };
        let finalizer = {
            let (backend, tracker, budget) = (backend.clone(), tracker_port.clone(), budget.clone());
            let active = Arc::new(AtomicUsize::new(0));
            SyncArbiter::start(config.finalizer_threads.max(1), move || Finalizer {
                backend: backend.clone(),
                tracker: tracker.clone(),
                release: budget.clone().recipient(),
                active: active.clone(),
            })
        };

        let mut worker_ids = Vec::new();
        let mut workers = Vec::new();
        // The general workers first, then the critical lane's, numbered on.
        let lanes: Vec<Lane> = std::iter::repeat_n(Lane::General, config.workers_per_device.max(1))
            .chain(std::iter::repeat_n(Lane::Critical, config.critical_workers_per_device))
            .collect();
        for device in 0..backend.devices().len() {
            for (worker, &lane) in lanes.iter().enumerate() {
                let id = WorkerId { device, worker };
                let arbiter = Arbiter::new();
                let worker = GpuWorker {
                    id,
                    slot: workers.len(),
                    backend: backend.clone(),
                    tracker: tracker_port.clone(),
                    spans: vec![monitor.clone().recipient(), tracker.clone().recipient()],
                    dropped: monitor.clone().recipient(),
                    done: dispatcher.clone().recipient(),
                    release: budget.clone().recipient(),
                    finalizer: finalizer.clone().recipient(),
                    free_since: std::time::Instant::now(),
                };
                // Supervised: a worker that stops after a panic is restarted
                // on the same mailbox.
                let addr = Supervisor::start_in_arbiter(&arbiter.handle(), move |ctx| {
                    ctx.set_mailbox_capacity(gpu_worker::MAILBOX_CAPACITY);
                    worker
                });
                arbiters.push(arbiter);
                worker_ids.push((id, lane));
                workers.push(WorkerSlot::new(id, lane, addr.recipient()));
            }
        }

        let tracker_arbiter = Arbiter::new();
        tracker_box.start_on(
            &tracker_arbiter.handle(),
            Tracker::new(
                dispatcher.clone().recipient(),
                dispatcher.clone().recipient(),
                backend.clone(),
                config.max_attempts,
            )
            .with_persistence(persistence),
        );
        let monitor_arbiter = Arbiter::new();
        monitor_box.start_on(&monitor_arbiter.handle(), WorkerMonitor::new(worker_ids));
        let dispatcher_arbiter = Arbiter::new();
        dispatcher_box.start_on(
            &dispatcher_arbiter.handle(),
            Dispatcher::new(
                Peers {
                    progress: tracker.clone().recipient(),
                    failed: tracker.clone().recipient(),
                    handed_over: monitor.clone().recipient(),
                    idle_cause: monitor.clone().recipient(),
                    reserve: budget.clone().recipient(),
                    release: budget.clone().recipient(),
                    synthesis: synthesis.recipient(),
                },
                workers,
                config.synthesis_threads,
                config.gpu_lookahead,
                config.pacer.clone(),
            ),
        );
        let budget_arbiter = Arbiter::new();
        budget_box.start_on(&budget_arbiter.handle(), BudgetManager::new(config.budget_bytes));
        // What the backend holds already counts before the first synthesis.
        budget.do_send(SetResident::of(backend.as_ref()));
        arbiters.extend([tracker_arbiter, monitor_arbiter, dispatcher_arbiter, budget_arbiter]);

        Self { tracker, monitor, dispatcher, budget, backend, config, _arbiters: Arc::new(arbiters) }
    }

    /// Budget, queues, jobs and workers. Each request is in its actor's
    /// mailbox as soon as `send` returns, so the four are answered
    /// concurrently even though they are awaited in turn.
    pub async fn status(&self) -> Result<SystemStatus, MailboxError> {
        let budget = self.budget.send(GetBudgetStatus);
        let queues = self.dispatcher.send(GetQueueStatus);
        let tracker = self.tracker.send(GetTrackerStatus);
        let workers = self.monitor.send(GetWorkers { spans: STATUS_SPANS });
        Ok(SystemStatus {
            backend: self.backend.name().to_string(),
            budget: budget.await?,
            queues: queues.await?,
            tracker: tracker.await?,
            workers: workers.await?,
            devices: self.backend.device_memory(),
        })
    }
}
