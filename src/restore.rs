//! Restoring stored jobs on start. Finished jobs are handed to the tracker
//! at once (they need nothing rebuilt); unfinished ones are rebuilt from
//! their recorded requests on a thread of their own while the listener
//! already answers: `/healthz` is up, `/v1/status` says `recovering`, and
//! what needs the whole job set (submissions, a job not found) is answered
//! 503 with Retry-After until the rebuild is done.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use cuzk_actors::messages::{RestoreJobs, RestoredJob};
use cuzk_actors::store::{JobOutcome, JobStore, StoreWrite, StoredJob};
use cuzk_actors::time::unix_ms;
use cuzk_actors::ProvingSystem;

use crate::job_input::JobParser;

/// The thread that rebuilds unfinished jobs could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the restore thread: {0}")]
pub struct RestoreError(std::io::Error);

/// Set while unfinished jobs are being rebuilt after a start.
#[derive(Clone, Default)]
pub struct Recovering(Arc<AtomicBool>);

impl Recovering {
    /// Whether stored jobs are still being rebuilt.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Hands finished jobs to the tracker now and rebuilds the unfinished ones
/// in the background; the flag clears once they are all with the tracker.
pub fn start(
    system: &ProvingSystem,
    parser: Arc<JobParser>,
    store: Arc<dyn JobStore>,
    stored: Vec<StoredJob>,
) -> Result<Recovering, RestoreError> {
    let (finished, unfinished): (Vec<_>, Vec<_>) = stored.into_iter().partition(|job| job.outcome.is_some());
    let finished_count = finished.len();
    system.tracker.do_send(RestoreJobs(finished.into_iter().map(RestoredJob::Finished).collect()));
    let recovering = Recovering::default();
    if unfinished.is_empty() {
        if finished_count > 0 {
            log::info!("job store: {finished_count} finished jobs restored");
        }
        return Ok(recovering);
    }
    recovering.0.store(true, Ordering::Release);
    let (flag, tracker) = (recovering.clone(), system.tracker.clone());
    std::thread::Builder::new()
        .name("cuzk-restore".into())
        .spawn(move || {
            let count = unfinished.len();
            let started = std::time::Instant::now();
            let restored = rebuild(&parser, store.as_ref(), unfinished);
            // Queued before the flag clears, so it reaches the tracker
            // before any submission that the cleared flag lets through.
            tracker.do_send(RestoreJobs(restored));
            flag.0.store(false, Ordering::Release);
            log::info!(
                "job store: {finished_count} finished jobs restored, {count} unfinished rebuilt in {:.2}s",
                started.elapsed().as_secs_f64()
            );
        })
        .map_err(RestoreError)?;
    Ok(recovering)
}

/// Turns stored unfinished jobs back into tracker jobs: the work is rebuilt
/// from the recorded request by the submit handler's own parser; one that no
/// longer parses (a circuit gone, a limit lowered) fails, recorded.
fn rebuild(parser: &JobParser, store: &dyn JobStore, stored: Vec<StoredJob>) -> Vec<RestoredJob> {
    stored
        .into_iter()
        .map(|mut job| match parser.parse(job.record.request.as_bytes()) {
            Ok(parsed) => RestoredJob::Unfinished {
                reservation: parsed.reservation,
                work: Arc::new(parsed.work),
                stored: job,
            },
            Err(error) => {
                let outcome = JobOutcome {
                    stage: cuzk_actors::Stage::Failed,
                    error: Some(format!("cannot resume after restart: {error}")),
                    finished_unix_ms: unix_ms(SystemTime::now()),
                };
                log::warn!("job {}: {}", job.record.id, outcome.error.as_deref().unwrap_or(""));
                drop(
                    store
                        .write(StoreWrite::Finished { job: job.record.id.clone(), outcome: outcome.clone() }),
                );
                job.outcome = Some(outcome);
                RestoredJob::Finished(job)
            }
        })
        .collect()
}
