//! The BudgetManager: a byte budget for partitions in flight. Grants in
//! strict queue order (priority, then job age, then partition index); every
//! release re-runs the grant loop inside the same handler, so no waiter can
//! miss a wakeup. The budget is never exceeded.

use std::collections::{BTreeMap, HashMap};

use actix::prelude::*;

use crate::error::BudgetExceeded;
use crate::messages::{BudgetDecision, BudgetStatus, GetBudgetStatus, Release, Reserve, SetResident};
use crate::model::{PartitionKey, QueueOrder};
use crate::telemetry;

pub const MAILBOX_CAPACITY: usize = 1024;

pub struct BudgetManager {
    limit: u64,
    used: u64,
    /// Held by the backend across partitions (keys, matrices).
    resident: u64,
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
    pub fn new(limit: u64) -> Self {
        telemetry::BudgetChanged { used: 0, resident: 0, limit }.emit();
        Self {
            limit,
            used: 0,
            resident: 0,
            peak: 0,
            held: HashMap::new(),
            waiting: BTreeMap::new(),
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
            waiter.reply.do_send(BudgetDecision {
                key: waiter.key,
                granted: Ok(()),
            });
        }
        telemetry::BudgetChanged {
            used: self.used,
            resident: self.resident,
            limit: self.limit,
        }
        .emit();
    }
}

impl Actor for BudgetManager {
    type Context = Context<Self>;
}

impl Handler<Reserve> for BudgetManager {
    type Result = ();

    fn handle(&mut self, msg: Reserve, _: &mut Context<Self>) {
        let available = self.limit.saturating_sub(self.resident);
        if msg.bytes > available {
            msg.reply.do_send(BudgetDecision {
                key: msg.key,
                granted: Err(BudgetExceeded {
                    needed: msg.bytes,
                    limit: self.limit,
                    resident: self.resident,
                }),
            });
            return;
        }
        self.waiting.insert(
            msg.order,
            Waiter {
                key: msg.key,
                bytes: msg.bytes,
                reply: msg.reply,
            },
        );
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
        if msg.bytes != self.resident {
            self.resident = msg.bytes;
            self.peak = self.peak.max(self.used + self.resident);
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
