//! A fleet node's lease renewer: every third of a lease, on a thread and a
//! connection of its own (a slow claim never delays a renewal), it asks the
//! tracker what this node holds, renews those leases with each partition's
//! stage, and tells the tracker which it no longer holds, whose work stops.
//! A failed renewal is retried at the next round; if the database stays
//! away longer than a lease, other nodes may claim the partitions when it
//! returns, and this node's results for them are then not recorded.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use actix::Addr;
use cuzk_actors::messages::{GetHeld, LeasesLost};
use cuzk_actors::store::StoreError;
use cuzk_actors::tracker::Tracker;

use super::leases::{Leases, LeasesError};
use super::Settings;
use crate::telemetry::{FleetLeaseLost, FleetRenewed};

/// Why a round of renewals did not happen; the next round tries again.
#[derive(Debug, thiserror::Error)]
enum Missed {
    #[error("the tracker did not answer")]
    TrackerSilent,
    #[error(transparent)]
    Connect(#[from] LeasesError),
    #[error(transparent)]
    Renew(#[from] StoreError),
}

/// How long the renewer waits for the tracker's answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// Renews until the tracker stops (the daemon is gone): partitions still
/// running through a shutdown's drain keep their leases.
pub(super) fn run(settings: Settings, tracker: Addr<Tracker>, mut leases: Option<Leases>) {
    let every = settings.lease / 3;
    while tracker.connected() {
        let started = Instant::now();
        if let Err(e) = round(&settings, &tracker, &mut leases) {
            log::warn!("fleet: renewing leases failed ({e}); retrying in {every:?}");
            leases = None;
        }
        std::thread::sleep(every.saturating_sub(started.elapsed()));
    }
}

fn round(settings: &Settings, tracker: &Addr<Tracker>, leases: &mut Option<Leases>) -> Result<(), Missed> {
    let (answer, held) = mpsc::channel();
    tracker.do_send(GetHeld(answer));
    let held = held.recv_timeout(ASK_TIMEOUT).map_err(|_| Missed::TrackerSilent)?;
    if leases.is_none() {
        *leases = Some(Leases::connect(&settings.url, &settings.node, settings.lease)?);
    }
    let connection = leases.as_mut().expect("connected above");
    let lost = if held.is_empty() { Vec::new() } else { connection.renew(&held)? };
    // What was renewed is what this node still holds.
    let renewed = held.len() - lost.len();
    FleetRenewed { renewed, held: renewed }.emit();
    if !lost.is_empty() {
        for key in &lost {
            FleetLeaseLost { partition: &key.to_string(), when: "renewing it" }.emit();
        }
        tracker.do_send(LeasesLost(lost));
    }
    Ok(())
}
