//! A few connections to the fleet's database for the HTTP handlers'
//! questions (submit, read, cancel, status), which run on blocking threads:
//! at most `MAX_CONNECTIONS` at once, so a burst of requests queues here
//! rather than opening a connection each on the database.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use cuzk_actors::store::StoreError;
use postgres::Client;

use crate::postgres::{client_config, Connector, PgError, Place, StoreUrl};
use crate::telemetry::FleetDb;

const MAX_CONNECTIONS: usize = 8;
/// A request waiting longer than this for a connection is answered 503.
const WAIT_FOR_CONNECTION: Duration = Duration::from_secs(10);

/// A question waited longer than `WAIT_FOR_CONNECTION` for a connection.
#[derive(Debug, thiserror::Error)]
#[error("{0}: every connection is busy")]
pub struct Busy(Place);

pub struct Pool {
    /// How each connection connects.
    config: Connector,
    /// The database (its password hidden), as errors name it.
    place: Place,
    /// Idle connections, and how many exist in all (idle or in use).
    state: Mutex<(Vec<Client>, usize)>,
    /// Signalled when a connection is returned or closed.
    freed: Condvar,
}

impl Pool {
    pub fn new(url: &StoreUrl) -> Result<Self, PgError> {
        Ok(Self {
            config: client_config(url)?,
            place: Place::new("fleet database", url),
            state: Mutex::new((Vec::new(), 0)),
            freed: Condvar::new(),
        })
    }

    /// Runs `work` on a connection; `op` labels its time in
    /// `cuzk_fleet_db_seconds`. A connection that failed is closed, not
    /// reused: the next caller connects afresh (the database may have
    /// restarted).
    pub fn with<T>(
        &self,
        op: &'static str,
        work: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut client = self.take()?;
        let started = Instant::now();
        let result = work(&mut client);
        FleetDb { op, elapsed: started.elapsed() }.emit();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(value) => {
                state.0.push(client);
                self.freed.notify_one();
                Ok(value)
            }
            Err(e) => {
                state.1 -= 1;
                self.freed.notify_one();
                Err(StoreError::unavailable(self.place.failed(op, e)))
            }
        }
    }

    fn take(&self) -> Result<Client, StoreError> {
        let deadline = Instant::now() + WAIT_FOR_CONNECTION;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(client) = state.0.pop() {
                return Ok(client);
            }
            if state.1 < MAX_CONNECTIONS {
                state.1 += 1;
                drop(state);
                return self.config.connect().map_err(|e| {
                    let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                    state.1 -= 1;
                    self.freed.notify_one();
                    StoreError::unavailable(self.place.failed("cannot connect", e))
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StoreError::unavailable(Busy(self.place.clone())));
            }
            state = self.freed.wait_timeout(state, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

impl Drop for Pool {
    /// The client drives a runtime of its own, which must not be dropped on
    /// an async runtime's thread (the daemon's, where the pool goes with
    /// the handlers' state): the idle connections close on a thread of
    /// their own.
    fn drop(&mut self) {
        let idle = std::mem::take(&mut self.state.get_mut().unwrap_or_else(|e| e.into_inner()).0);
        if !idle.is_empty() {
            let _ = std::thread::Builder::new().name("cuzk-pool-close".into()).spawn(move || drop(idle));
        }
    }
}
