//! A fleet node's claimer: a thread of its own with its own connection,
//! LISTENing for the wake-ups submissions send. It claims partitions only
//! while fewer than `room` of this node's wait to start (queued, or waiting
//! for budget), so the node takes what its synthesis threads and budget can
//! start, and the rest stays in the queue for other nodes. It looks when
//! woken, when its last claim left work behind, and every `poll` otherwise
//! (a lease that ran out elsewhere sends no wake-up).
//!
//! Each claim's jobs are rebuilt from their records by the submit handler's
//! parser, then handed to the tracker. A partition this node cannot prove
//! (a Filecoin parameter file it lacks) is put back, and its circuit passed
//! by for a while; one whose lease ran out `max_attempts` times fails. When
//! a shutdown begins, what the node claimed and has not started is put back
//! for the other nodes at once (a rolling restart delays no partition by a
//! lease).

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use actix::Addr;
use cuzk_actors::messages::{Claimed, GetHeld, LeasesLost};
use cuzk_actors::store::{FleetLoad, JobStore, StoreError, StoreWrite};
use cuzk_actors::tracker::Tracker;
use cuzk_actors::{JobId, PartitionKey, Reservation, Stage};

use super::leases::{Claim, Leases};
use super::Settings;
use crate::job_input::JobParser;
use crate::shutdown::Intake;
use crate::telemetry::FleetClaimed;

/// How long the claimer waits for a wake-up between looks at its room; a
/// wait on the socket, not a query.
const TICK: Duration = Duration::from_millis(100);
/// The same while work is known to wait and only room is missing.
const BUSY_TICK: Duration = Duration::from_millis(10);
/// How long a circuit this node cannot prove is passed by before it is
/// tried again (its parameter file may have been fetched meanwhile).
const UNPROVABLE_FOR: Duration = Duration::from_secs(600);
/// How often finished jobs past retention are removed.
const SWEEP_EVERY: Duration = Duration::from_secs(300);
/// Jobs whose rebuilt work is kept, so that a job's partitions claimed one
/// by one parse its request once.
const WORK_CACHE: usize = 64;

type Work = (Arc<dyn Any + Send + Sync>, Reservation);

pub(super) struct Claimer {
    pub settings: Settings,
    pub tracker: Addr<Tracker>,
    pub parser: Arc<JobParser>,
    /// Records a partition's failure (a claim past `max_attempts`, a
    /// request that no longer parses) as any failure is recorded.
    pub store: Arc<dyn JobStore>,
    pub load: Arc<FleetLoad>,
    /// Partitions waiting to start below which the claimer claims more.
    pub room: usize,
    pub max_attempts: u32,
    pub retention: Duration,
    /// Closed when a shutdown begins: no more claims.
    pub intake: Intake,
}

impl Claimer {
    pub fn run(self, mut leases: Leases) {
        let mut state = State::default();
        loop {
            if !self.intake.is_open() {
                self.put_back_unstarted(&mut leases);
                return;
            }
            match self.round(&mut leases, &mut state) {
                Ok(()) => state.failing_since = None,
                Err(e) => {
                    if state.failing_since.is_none() {
                        log::warn!("fleet: claiming failed ({e}); retrying every second");
                        state.failing_since = Some(Instant::now());
                    }
                    std::thread::sleep(Duration::from_secs(1));
                    match Leases::connect(&self.settings.url, &self.settings.node, self.settings.lease)
                        .map_err(StoreError::unavailable)
                        .and_then(|mut fresh| fresh.listen().map(|()| fresh))
                    {
                        Ok(fresh) => {
                            leases = fresh;
                            state.work_maybe = true;
                        }
                        Err(e) => log::debug!("fleet: reconnecting the claimer failed: {e}"),
                    }
                }
            }
        }
    }

    /// One look: claim if there is room and maybe work, sweep if due, then
    /// wait for a wake-up.
    fn round(&self, leases: &mut Leases, state: &mut State) -> Result<(), StoreError> {
        let room = self.room.saturating_sub(self.load.waiting.load(Ordering::Relaxed));
        let due = state.last_look.is_none_or(|at| at.elapsed() >= self.settings.poll);
        if room > 0 && (state.work_maybe || due) {
            state.last_look = Some(Instant::now());
            state.unprovable.retain(|_, since| since.elapsed() < UNPROVABLE_FOR);
            let skip: Vec<String> = state.unprovable.keys().cloned().collect();
            let claims = leases.claim(room, &skip)?;
            // A full claim may have left more behind.
            state.work_maybe = claims.len() == room;
            if !claims.is_empty() {
                self.hand_over(leases, state, claims)?;
            }
        }
        if state.last_sweep.is_none_or(|at| at.elapsed() >= SWEEP_EVERY) {
            state.last_sweep = Some(Instant::now());
            let removed = leases.sweep(self.retention)?;
            if removed > 0 {
                log::info!("retention: removed {removed} finished jobs from the fleet's database");
            }
        }
        let tick = if state.work_maybe { BUSY_TICK } else { TICK };
        if leases.wait_for_work(tick)? {
            state.work_maybe = true;
        }
        Ok(())
    }

    /// On a shutdown: the partitions held and not started (queued, or
    /// waiting for budget) leave the tracker first, so none starts here,
    /// then go back to the queue with their attempts not counted. One that
    /// started in between is only given up: its result is not recorded
    /// (its lease is no longer this node's).
    fn put_back_unstarted(&self, leases: &mut Leases) {
        let (answer, held) = mpsc::channel();
        self.tracker.do_send(GetHeld(answer));
        let Ok(held) = held.recv_timeout(Duration::from_secs(2)) else { return };
        let unstarted: Vec<PartitionKey> = held
            .into_iter()
            .filter(|(_, stage)| *stage <= Stage::WaitingBudget)
            .map(|(key, _)| key)
            .collect();
        if unstarted.is_empty() {
            return;
        }
        self.tracker.do_send(LeasesLost(unstarted.clone()));
        let partitions: Vec<(JobId, u32)> = unstarted.into_iter().map(|key| (key.job, key.index)).collect();
        match leases.release(&partitions) {
            Ok(()) => log::info!(
                "fleet: shutting down; {} partitions not started put back for the other nodes",
                partitions.len()
            ),
            Err(e) => log::warn!(
                "fleet: shutting down; putting back {} partitions failed ({e}): their leases run out instead",
                partitions.len()
            ),
        }
    }

    /// Rebuilds the claimed partitions' jobs and gives them to the tracker.
    fn hand_over(
        &self,
        leases: &mut Leases,
        state: &mut State,
        claims: Vec<Claim>,
    ) -> Result<(), StoreError> {
        FleetClaimed { partitions: claims.len(), reclaimed: claims.iter().filter(|c| c.attempt > 1).count() }
            .emit();
        let mut by_job: Vec<(JobId, Vec<(u32, u32)>)> = Vec::new();
        for claim in claims {
            if claim.attempt > self.max_attempts {
                let error = format!(
                    "its lease ran out {} times (the nodes holding it stopped or stalled); scheduler.max_attempts is {}",
                    claim.attempt - 1,
                    self.max_attempts
                );
                drop(self.store.write(StoreWrite::PartitionFailed {
                    job: claim.job,
                    index: claim.index,
                    error,
                }));
                continue;
            }
            match by_job.iter_mut().find(|(job, _)| *job == claim.job) {
                Some((_, partitions)) => partitions.push((claim.index, claim.attempt)),
                None => by_job.push((claim.job, vec![(claim.index, claim.attempt)])),
            }
        }
        let ids: Vec<&JobId> = by_job.iter().map(|(job, _)| job).collect();
        let mut records: HashMap<JobId, _> =
            leases.records(&ids)?.into_iter().map(|record| (record.id.clone(), record)).collect();
        let mut unprovable = Vec::new();
        for (job, partitions) in by_job {
            // Ended (cancelled) between the claim and this read.
            let Some(record) = records.remove(&job) else { continue };
            if !crate::filecoin::has_parameter_file(
                &record.circuit,
                &record.circuit_id,
                &self.parser.params_dir,
            ) {
                log::warn!(
                    "fleet: passing by {} for {UNPROVABLE_FOR:?}: its parameter file is not in {}",
                    record.circuit_id,
                    self.parser.params_dir.display()
                );
                state.unprovable.insert(record.circuit_id.clone(), Instant::now());
                unprovable.extend(partitions.into_iter().map(|(index, _)| (job.clone(), index)));
                continue;
            }
            let work = match state.work.get(&job) {
                Some(work) => Ok(work.clone()),
                None => self.parser.parse(record.request.as_bytes()).map(|parsed| {
                    let work: Work = (Arc::new(parsed.work), parsed.reservation);
                    if state.work.len() >= WORK_CACHE {
                        state.work.clear();
                    }
                    state.work.insert(job.clone(), work.clone());
                    work
                }),
            };
            match work {
                Ok((work, reservation)) => {
                    self.tracker.do_send(Claimed { record, work, reservation, partitions })
                }
                Err(error) => {
                    let error =
                        format!("its request no longer parses on node {}: {error}", self.settings.node);
                    for (index, _) in partitions {
                        drop(self.store.write(StoreWrite::PartitionFailed {
                            job: job.clone(),
                            index,
                            error: error.clone(),
                        }));
                    }
                }
            }
        }
        if !unprovable.is_empty() {
            leases.release(&unprovable)?;
        }
        Ok(())
    }
}

/// What the claimer remembers between rounds.
#[derive(Default)]
struct State {
    /// Work may be waiting: a wake-up came, or the last claim was full.
    work_maybe: bool,
    last_look: Option<Instant>,
    last_sweep: Option<Instant>,
    /// Circuits this node cannot prove, since when.
    unprovable: HashMap<String, Instant>,
    /// Rebuilt work of recent jobs.
    work: HashMap<JobId, Work>,
    /// When claiming started failing, for one log line per outage.
    failing_since: Option<Instant>,
}
