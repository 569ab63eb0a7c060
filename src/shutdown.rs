//! Graceful shutdown: on SIGTERM or Ctrl-C the daemon stops taking jobs,
//! lets partitions already started finish (within a grace period), commits
//! the job store and exits. Whatever is left resumes on the next start.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_actors::messages::{CountRunningPartitions, HoldQueued};
use cuzk_actors::store::JobStore;
use cuzk_actors::ProvingSystem;
use tokio::sync::mpsc::UnboundedSender;

/// Whether new jobs are taken; closed for good once a shutdown begins.
#[derive(Clone, Default)]
pub struct Intake(Arc<AtomicBool>);

impl Intake {
    /// Whether new jobs are still taken.
    pub fn is_open(&self) -> bool {
        !self.0.load(Ordering::Acquire)
    }

    /// Stops taking new jobs, for good: a shutdown has begun.
    pub fn close(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A request to stop, carrying how long started partitions may still run.
pub type StopRequests = UnboundedSender<Duration>;

/// Asks for a graceful stop on the first SIGTERM or Ctrl-C (actix-web's own
/// signal handling is off: it would stop the server without draining).
/// Intake closes in the signal's own task, before anything else runs.
pub fn forward_signals(stop: StopRequests, grace: Duration, intake: Intake) -> std::io::Result<()> {
    let mut terminate = actix_rt::signal::unix::signal(actix_rt::signal::unix::SignalKind::terminate())?;
    let (on_terminate, terminate_intake) = (stop.clone(), intake.clone());
    actix_rt::spawn(async move {
        if terminate.recv().await.is_some() {
            terminate_intake.close();
            log::info!("SIGTERM: shutting down");
            let _ = on_terminate.send(grace);
        }
    });
    actix_rt::spawn(async move {
        if actix_rt::signal::ctrl_c().await.is_ok() {
            intake.close();
            log::info!("Ctrl-C: shutting down");
            let _ = stop.send(grace);
        }
    });
    Ok(())
}

/// Closes intake, holds queued partitions, waits up to `grace` for started
/// ones, then commits and closes the store. Reads are served throughout.
pub async fn drain(system: &ProvingSystem, intake: &Intake, jobs: Arc<dyn JobStore>, grace: Duration) {
    intake.close();
    // Answered only after the dispatcher has reported every partition it
    // started, so the count below cannot miss one.
    let _ = system.dispatcher.send(HoldQueued).await;
    let deadline = Instant::now() + grace;
    loop {
        let running = system.tracker.send(CountRunningPartitions).await.unwrap_or(0);
        if running == 0 {
            log::info!("shutdown: no partition running");
            break;
        }
        if Instant::now() >= deadline {
            log::warn!(
                "shutdown: {running} partitions still running after {grace:?}; they resume on the next start"
            );
            break;
        }
        actix_rt::time::sleep(Duration::from_millis(50)).await;
    }
    match actix_rt::task::spawn_blocking(move || jobs.close()).await {
        Ok(Ok(())) => log::info!("shutdown: job store committed and closed"),
        Ok(Err(error)) => log::error!("shutdown: job store: {error}"),
        Err(error) => log::error!("shutdown: job store close failed: {error}"),
    }
}
