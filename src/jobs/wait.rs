//! Waiting for a job to end, for a front end that answers only then (gRPC's
//! `Prove` and `AwaitProof`). A waiter costs a channel, never a thread or a
//! poll of its own: the tracker tells a single daemon's watchers when their
//! job ends (`WatchJob`); on a fleet node, where jobs end in the database,
//! one thread polls it for every job waited on (`Fleet::watch`).

use std::time::Duration;

use cuzk_actors::messages::JobStatus;
use cuzk_actors::{JobId, TenantScope};

use super::{Jobs, JobsError};

impl Jobs {
    /// Waits until job `id` ends, or `timeout` passes (None: no limit), and
    /// answers its status then: done, failed or cancelled once it ended,
    /// queued or running if the time ran out first.
    pub async fn wait(
        &self,
        id: &JobId,
        scope: &TenantScope,
        timeout: Option<Duration>,
    ) -> Result<JobStatus, JobsError> {
        let was_recovering = self.recovering.is_set();
        let ending = self.keeper.watch(self, id, scope).await?;
        let ending = ending.ok_or_else(|| self.missing(was_recovering, id))?;
        let ended = match timeout {
            Some(timeout) => actix_rt::time::timeout(timeout, ending).await.ok().flatten(),
            None => ending.await,
        };
        match ended {
            Some(status) => Ok(status),
            // The time ran out, or whoever watched gave up (the tracker
            // stopped, the job was removed): the job as it is now.
            None => Ok(self.view(id, scope).await?.status),
        }
    }
}
