//! Waiting for fleet jobs to end. A fleet job ends in the database, in the
//! transaction of whichever node records its last partition (or fails or
//! cancels it), so no tracker can tell a waiter here. While anyone waits,
//! one thread asks the database every `POLL` which of the jobs waited on
//! have ended, in one query for all of them: a hundred waiters cost what
//! one does. The thread ends when nobody waits any more.

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use cuzk_actors::messages::{JobEnding, JobStatus};
use cuzk_actors::store::{JobOutcome, StoreError};
use cuzk_actors::{JobId, TenantScope};
use postgres::types::Json;
use tokio::sync::oneshot;

use super::stored::{read_end, status_of};
use super::Fleet;

/// How often the database is asked while jobs are waited on: a job's end
/// reaches its waiters this much later at most.
const POLL: Duration = Duration::from_millis(250);

/// The jobs waited on and their waiters.
#[derive(Default)]
pub(super) struct Ends {
    /// Each job's waiters, told its final status when it ends.
    waiting: HashMap<JobId, Vec<oneshot::Sender<JobStatus>>>,
    /// Whether the polling thread runs (it does while `waiting` has jobs).
    polling: bool,
}

impl Fleet {
    /// Watches job `id` until it ends, for any node of the fleet to tell;
    /// None for a job that does not exist or that the scope does not see.
    pub fn watch(self: &Arc<Self>, id: &JobId, scope: &TenantScope) -> Result<Option<JobEnding>, StoreError> {
        let row = self.pool.with("read", |client| read_end(client, id, false))?;
        let Some((_, ended)) = row.filter(|(tenant, _)| scope.sees(tenant)) else {
            return Ok(None);
        };
        let (end, ending) = JobEnding::channel();
        if let Some(status) = ended {
            let _ = end.send(status);
            return Ok(Some(ending));
        }
        let mut ends = self.ends();
        ends.waiting.entry(id.clone()).or_default().push(end);
        if !ends.polling {
            let fleet = self.clone();
            std::thread::Builder::new()
                .name("cuzk-job-ends".into())
                .spawn(move || fleet.poll_ends())
                .map_err(StoreError::unavailable)?;
            ends.polling = true;
        }
        Ok(Some(ending))
    }

    fn ends(&self) -> MutexGuard<'_, Ends> {
        self.ends.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The polling thread: every `POLL`, the waited-on jobs that ended are
    /// told to their waiters; a job no longer in the database (removed
    /// after its retention) drops its waiters, who then find it gone.
    fn poll_ends(&self) {
        loop {
            std::thread::sleep(POLL);
            let ids: Vec<String> = {
                let mut ends = self.ends();
                ends.waiting.retain(|_, waiters| {
                    waiters.retain(|waiter| !waiter.is_closed());
                    !waiters.is_empty()
                });
                if ends.waiting.is_empty() {
                    ends.polling = false;
                    return;
                }
                ends.waiting.keys().map(|id| id.0.clone()).collect()
            };
            let found = self.pool.with("read", |client| {
                client
                    .query("SELECT id, outcome FROM cuzk_jobs WHERE id = ANY($1)", &[&ids])?
                    .iter()
                    .map(|row| {
                        let outcome: Option<Json<JobOutcome>> = row.try_get(1)?;
                        Ok((JobId(row.try_get(0)?), outcome.map(|o| status_of(o.0.stage))))
                    })
                    .collect::<Result<HashMap<_, _>, postgres::Error>>()
            });
            // A database that failed is asked again next time; waiters
            // whose time runs out meanwhile give up on their own.
            let Ok(found) = found else { continue };
            let mut ends = self.ends();
            for id in ids.into_iter().map(JobId) {
                match found.get(&id) {
                    Some(None) => {}
                    Some(Some(status)) => {
                        for waiter in ends.waiting.remove(&id).into_iter().flatten() {
                            let _ = waiter.send(*status);
                        }
                    }
                    None => drop(ends.waiting.remove(&id)),
                }
            }
        }
    }
}
