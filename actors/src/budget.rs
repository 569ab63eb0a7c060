//! The BudgetManager: a byte budget for partitions in flight. Grants in
//! strict queue order (priority, then job age, then partition index); every
//! release re-runs the grant loop inside the same handler, so no waiter can
//! miss a wakeup. The budget is never exceeded. A partition is refused at
//! once only when it could never fit, beside what the backend keeps for
//! good; resident bytes of work that ends by itself (a setup, a load) are
//! waited for, and a waiter that the backend's lasting bytes have since put
//! out of reach is refused then, so none waits for ever.

use std::collections::{BTreeMap, HashMap};

use actix::prelude::*;

use crate::error::BudgetExceeded;
use crate::messages::{BudgetDecision, BudgetStatus, GetBudgetStatus, Release, Reserve, SetResident};
use crate::model::{PartitionKey, QueueOrder};
use crate::telemetry;

/// Bound of the budget's mailbox: reservations and releases of every partition
/// in flight pass through it.
pub const MAILBOX_CAPACITY: usize = 1024;

/// The actor that owns the byte budget: it grants reservations in queue order
/// and takes back the bytes partitions release.
pub struct BudgetManager {
    limit: u64,
    used: u64,
    /// Held by the backend across partitions (keys, matrices).
    resident: u64,
    /// Of `resident`, what setups and loads in flight hold until they end.
    transient: u64,
    /// The most ever in use at once, resident bytes included.
    peak: u64,
    held: HashMap<PartitionKey, u64>,
    waiting: BTreeMap<QueueOrder, Waiter>,
}

struct Waiter {
    key: PartitionKey,
    bytes: u64,
    reply: Recipient<BudgetDecision>,
}

impl BudgetManager {
    /// A budget of `limit` bytes with nothing in use; publishes the empty gauge
    /// at once.
    pub fn new(limit: u64) -> Self {
        telemetry::BudgetChanged { used: 0, resident: 0, limit }.emit();
        Self {
            limit,
            used: 0,
            resident: 0,
            transient: 0,
            peak: 0,
            held: HashMap::new(),
            waiting: BTreeMap::new(),
        }
    }

    /// Whether `bytes` exceed what the budget leaves beside the backend's
    /// lasting bytes: the partition can never be granted.
    fn never_fits(&self, bytes: u64) -> bool {
        bytes > self.limit.saturating_sub(self.resident - self.transient)
    }

    fn refusal(&self, key: PartitionKey, needed: u64) -> BudgetDecision {
        BudgetDecision {
            key,
            granted: Err(BudgetExceeded {
                needed,
                limit: self.limit,
                resident: self.resident - self.transient,
            }),
        }
    }

    fn grant_waiters(&mut self) {
        while let Some(entry) = self.waiting.first_entry() {
            if self.used + self.resident + entry.get().bytes > self.limit {
                break;
            }
            let waiter = entry.remove();
            self.used += waiter.bytes;
            self.peak = self.peak.max(self.used + self.resident);
            *self.held.entry(waiter.key.clone()).or_default() += waiter.bytes;
            waiter.reply.do_send(BudgetDecision { key: waiter.key, granted: Ok(()) });
        }
        telemetry::BudgetChanged { used: self.used, resident: self.resident, limit: self.limit }.emit();
    }
}

impl Actor for BudgetManager {
    type Context = Context<Self>;
}

impl Handler<Reserve> for BudgetManager {
    type Result = ();

    fn handle(&mut self, msg: Reserve, _: &mut Context<Self>) {
        if self.never_fits(msg.bytes) {
            msg.reply.do_send(self.refusal(msg.key, msg.bytes));
            return;
        }
        self.waiting.insert(msg.order, Waiter { key: msg.key, bytes: msg.bytes, reply: msg.reply });
        self.grant_waiters();
    }
}

impl Handler<Release> for BudgetManager {
    type Result = ();

    fn handle(&mut self, msg: Release, _: &mut Context<Self>) {
        self.waiting.retain(|_, w| w.key != msg.key);
        if let Some(held) = self.held.get_mut(&msg.key) {
            let amount = msg.bytes.unwrap_or(*held).min(*held);
            *held -= amount;
            self.used -= amount;
            if *held == 0 {
                self.held.remove(&msg.key);
            }
        }
        self.grant_waiters();
    }
}

impl Handler<SetResident> for BudgetManager {
    type Result = ();

    fn handle(&mut self, msg: SetResident, _: &mut Context<Self>) {
        let transient = msg.transient.min(msg.bytes);
        if (msg.bytes, transient) != (self.resident, self.transient) {
            self.resident = msg.bytes;
            self.transient = transient;
            self.peak = self.peak.max(self.used + self.resident);
            // A setup that ended as a key larger than its estimate can put
            // a waiter out of reach: it is refused now, not left waiting.
            let out_of_reach: Vec<QueueOrder> = (self.waiting.iter())
                .filter(|(_, w)| self.never_fits(w.bytes))
                .map(|(order, _)| *order)
                .collect();
            for order in out_of_reach {
                let waiter = self.waiting.remove(&order).expect("a key of waiting");
                waiter.reply.do_send(self.refusal(waiter.key, waiter.bytes));
            }
            self.grant_waiters();
        }
    }
}

impl Handler<GetBudgetStatus> for BudgetManager {
    type Result = BudgetStatus;

    fn handle(&mut self, _: GetBudgetStatus, _: &mut Context<Self>) -> BudgetStatus {
        BudgetStatus {
            limit_bytes: self.limit,
            used_bytes: self.used,
            resident_bytes: self.resident,
            peak_bytes: self.peak,
            holders: self.held.len(),
            waiting: self.waiting.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::model::{JobId, Priority};

    /// Hands the budget's decisions to the test.
    struct Decisions(mpsc::Sender<BudgetDecision>);

    impl Actor for Decisions {
        type Context = Context<Self>;
    }

    impl Handler<BudgetDecision> for Decisions {
        type Result = ();
        fn handle(&mut self, msg: BudgetDecision, _: &mut Context<Self>) {
            let _ = self.0.send(msg);
        }
    }

    fn reserve(index: u32, bytes: u64, reply: &Recipient<BudgetDecision>) -> Reserve {
        Reserve {
            key: PartitionKey { job: JobId("j".into()), index },
            order: (Reverse(Priority::Normal), 1, index),
            bytes,
            reply: reply.clone(),
        }
    }

    /// The decision on partition `index`, if one comes within a short wait.
    async fn decision(rx: &mpsc::Receiver<BudgetDecision>, index: u32) -> Option<Result<(), BudgetExceeded>> {
        for _ in 0..50 {
            actix_rt::time::sleep(Duration::from_millis(10)).await;
            if let Ok(d) = rx.try_recv() {
                assert_eq!(d.key.index, index, "decisions in order");
                return Some(d.granted);
            }
        }
        None
    }

    #[actix_rt::test]
    async fn a_partition_waits_for_a_setup_to_end_and_is_refused_only_when_it_can_never_fit() {
        let (tx, rx) = mpsc::channel();
        let reply = Decisions(tx).start().recipient();
        let budget = BudgetManager::new(100).start();
        // A setup's 60-byte estimate of 80 resident bytes: a 50-byte
        // partition fits once it ends, so it waits instead of failing.
        budget.do_send(SetResident { bytes: 80, transient: 60 });
        budget.do_send(reserve(0, 50, &reply));
        assert!(decision(&rx, 0).await.is_none(), "granted or refused while the setup runs");
        budget.do_send(SetResident { bytes: 20, transient: 0 });
        assert!(matches!(decision(&rx, 0).await, Some(Ok(()))), "not granted when the setup ended");
        budget.do_send(Release { key: PartitionKey { job: JobId("j".into()), index: 0 }, bytes: None });

        // What the backend keeps for good is never waited for.
        budget.do_send(SetResident { bytes: 80, transient: 0 });
        budget.do_send(reserve(1, 50, &reply));
        match decision(&rx, 1).await {
            Some(Err(e)) => assert_eq!((e.needed, e.limit, e.resident), (50, 100, 80)),
            other => panic!("a partition that can never fit: {other:?}"),
        }

        // A waiter that a setup's larger key puts out of reach is refused
        // then, not left waiting for ever.
        budget.do_send(SetResident { bytes: 80, transient: 60 });
        budget.do_send(reserve(2, 50, &reply));
        assert!(decision(&rx, 2).await.is_none());
        budget.do_send(SetResident { bytes: 90, transient: 0 });
        match decision(&rx, 2).await {
            Some(Err(e)) => assert_eq!((e.needed, e.resident), (50, 90)),
            other => panic!("out of reach after the setup: {other:?}"),
        }
    }
}
