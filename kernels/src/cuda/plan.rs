//! The engine's side of the device-memory plan (device_plan.rs): a
//! circuit's counts read off its prepared circuit and key, one plan per
//! circuit, kept and revised when a call measures more than the estimate,
//! the urgent circuits' bytes reserved beside every other plan, and the gate
//! that holds a general call until one of its plan's slots is free.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};

use super::bases::{Fingerprint, KeyBases, Query};
use super::ntt::NttTables;
use super::r1cs::LONG_ROW;
use super::CudaEngine;
use crate::device_plan::{self, CircuitReport, Counts, Device, MemoryReport, Needs, Plan, Reserve};
use crate::groth16::{PreparedCircuit, Selection, Urgency};
use crate::r1cs::Flattened;
use crate::{DeviceError, KernelError};

type Res<T> = Result<T, KernelError>;

/// A circuit's plan and what it was made from.
struct Entry {
    /// The key the plan is for: a new setup under the same id is planned
    /// again.
    fingerprint: Fingerprint,
    /// Whether the circuit is urgent (the critical lane's): its bytes are
    /// reserved beside every other circuit's plan, and its calls take no
    /// general slot.
    urgent: bool,
    /// An urgent call asked for it and it stayed general (too large to
    /// reserve for good): later urgent calls need not ask again.
    declined: bool,
    /// The needs as estimated, and the largest workspace a call of it was
    /// measured to hold (0 before its first call).
    estimated: Needs,
    measured: u64,
    plan: Plan,
}

impl Entry {
    /// The needs the plan trusts: the estimate, with a call's peak raised
    /// to what a call measured when that is more.
    fn needs(&self) -> Needs {
        measured_needs(&self.estimated, self.measured)
    }
}

/// `estimated` with a call's peak raised to `measured` (0: no call yet)
/// when that is more, and marked measured once a call has run. A peak
/// raises both estimates, whichever plan it was measured under: that errs
/// on the safe side, since a call with parts of the key resident holds at
/// least what one with none holds beside its chunk buffers.
fn measured_needs(estimated: &Needs, measured: u64) -> Needs {
    Needs {
        call: estimated.call.max(measured),
        streamed_call: estimated.streamed_call.max(measured),
        measured: measured > 0,
        ..*estimated
    }
}

/// The call a workspace peak measured under `plan` stands for: less the
/// chunk buffers, which a streamed call takes from its workspace and the
/// plan counts apart, so that the plan's call and chunk buffers add up to
/// the peak.
fn call_of_peak(plan: &Plan, peak: u64) -> u64 {
    match plan.streams() {
        true => peak.saturating_sub(plan.needs.stream),
        false => peak,
    }
}

/// Every circuit's plan on one device.
pub(super) struct Plans {
    device: Device,
    circuits: HashMap<String, Entry>,
}

impl Plans {
    pub fn new(device: Device) -> Self {
        Self { device, circuits: HashMap::new() }
    }

    /// The plan of `id` from `needs`, beside the urgent circuits other
    /// than `id` and the lane's workspaces (its own call counted when it
    /// is urgent).
    fn make(&self, id: &str, needs: &Needs, urgent: bool) -> Res<Plan> {
        let others: Vec<Needs> = (self.circuits.iter())
            .filter(|(other, e)| e.urgent && other.as_str() != id)
            .map(|(_, e)| e.needs())
            .collect();
        let lane_call =
            (others.iter().map(|n| n.call)).chain(urgent.then_some(needs.call)).max().unwrap_or(0);
        let reserve = Reserve::new(&self.device, &others, lane_call);
        device_plan::plan(&self.device, needs, reserve)
            .map_err(|e| DeviceError::memory(format!("planning device memory for {id}"), e))
    }

    /// Plans every other circuit again after `id`'s urgent bytes changed
    /// (a plan that no longer fits is kept: its calls fail with the
    /// reason when they ask for memory, rather than a preload of another
    /// circuit failing for it).
    fn revise_others(&mut self, id: &str) {
        let ids: Vec<String> = self.circuits.keys().filter(|k| k.as_str() != id).cloned().collect();
        for other in ids {
            let (needs, urgent) = {
                let e = &self.circuits[&other];
                (e.needs(), e.urgent)
            };
            if let Ok(plan) = self.make(&other, &needs, urgent) {
                let e = self.circuits.get_mut(&other).expect("listed");
                if e.plan != plan {
                    log::info!("{other}: device memory plan revised: {}", plan.describe());
                    e.plan = plan;
                }
            }
        }
    }

    fn report(&self) -> MemoryReport {
        let mut circuits: Vec<CircuitReport> = (self.circuits.iter())
            .map(|(id, e)| CircuitReport {
                circuit_id: id.clone(),
                urgent: e.urgent,
                measured_call_bytes: e.measured,
                plan: e.plan.clone(),
            })
            .collect();
        circuits.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        MemoryReport { device: self.device, circuits }
    }
}

/// The counts of `circuit` with the key `bases`: what its plan is made
/// from. `with_b2`: B's G2 query is on the device too.
fn counts(circuit: &PreparedCircuit, bases: &dyn KeyBases, with_b2: bool, chunk: usize) -> Res<Counts> {
    let n = circuit.domain_size;
    let picked = |s: &Selection| match s {
        Selection::All => 0,
        Selection::Only(idx) => idx.len(),
    };
    let gathered = [picked(&circuit.a_selection), picked(&circuit.b_selection)];
    let matrices = match circuit.matrices.num_constraints() {
        0 => 0,
        _ => Flattened::new(&circuit.matrices, LONG_ROW)?.device_bytes(),
    };
    let [a, b1, l, h] = Query::ALL.map(|q| bases.len(q));
    Ok(Counts {
        domain: n,
        assignment: circuit.num_inputs + l,
        points: [a, b1, l, h, if with_b2 { bases.b2_len() } else { 0 }],
        gathered,
        fixed: NttTables::bytes_for(n) + 4 * (gathered[0] + gathered[1]) as u64,
        matrices,
        chunk,
    })
}

/// The general calls holding a workspace on the device now, and the
/// signal that one has ended.
#[derive(Default)]
pub(super) struct Gate {
    active: Mutex<usize>,
    freed: Condvar,
}

/// A general call's place under its plan's slots, given back on drop.
pub(super) struct Slot<'g>(&'g Gate);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Ok(mut active) = self.0.active.lock() {
            *active -= 1;
        }
        self.0.freed.notify_all();
    }
}

impl Gate {
    /// Waits until fewer than `slots` general calls hold a workspace, then
    /// takes a place: the call's `lease` phase shows the wait.
    pub fn enter(&self, slots: usize) -> Res<Slot<'_>> {
        let lock_error = |e: std::sync::PoisonError<MutexGuard<'_, usize>>| {
            DeviceError::engine("waiting for a device memory slot", e)
        };
        let mut active = self.active.lock().map_err(lock_error)?;
        while *active >= slots.max(1) {
            active = self.freed.wait(active).map_err(lock_error)?;
        }
        *active += 1;
        Ok(Slot(self))
    }
}

impl CudaEngine {
    fn plans(&self) -> Res<MutexGuard<'_, Plans>> {
        (self.plans.lock()).map_err(|e| DeviceError::engine("locking the device memory plans", e))
    }

    /// The plan of `circuit` with the key `bases`, and whether the circuit
    /// is urgent: made now (and logged) when the circuit has none or its key
    /// changed. A circuit becomes urgent when warmed as urgent (the preload
    /// of a kind whose jobs are critical by default), or at an urgent call
    /// when it is small enough to keep for good (at most an eighth of the
    /// device: a 32 GiB WinningPoSt takes about 4 GB); an urgent call of a
    /// large circuit (a PoRep a client marked critical) is planned, and
    /// waits for a slot, as a general one. The other circuits are planned
    /// again beside a new urgent one. Fails, for good, when the device
    /// cannot hold the circuit.
    pub(super) fn plan_for(
        &self,
        circuit: &PreparedCircuit,
        bases: &dyn KeyBases,
        urgency: Urgency,
        warming: bool,
    ) -> Res<(Plan, bool)> {
        let id = &circuit.circuit_id;
        let fingerprint = bases.fingerprint();
        let asks = urgency == Urgency::Urgent;
        {
            let plans = self.plans()?;
            if let Some(e) = plans.circuits.get(id).filter(|e| e.fingerprint == fingerprint) {
                if e.urgent || !asks || (e.declined && !warming) {
                    return Ok((e.plan.clone(), e.urgent));
                }
            }
        }
        // Counting the compiled matrices' layout takes a pass over them:
        // outside the lock.
        let (with_b2, chunk) = (self.options.g2_on_gpu, self.options.stream_chunk);
        let estimated = Needs::from_counts(&counts(circuit, bases, with_b2, chunk)?);
        let small = estimated.fixed + estimated.matrices + estimated.key.iter().sum::<u64>() + estimated.call
            <= self.usable / 8;
        let mut plans = self.plans()?;
        let (was_urgent, measured) = match plans.circuits.get(id) {
            Some(e) if e.fingerprint == fingerprint => (e.urgent, e.measured),
            _ => (false, 0),
        };
        let urgent = was_urgent || (asks && (warming || small));
        let needs = measured_needs(&estimated, measured);
        let plan = plans.make(id, &needs, urgent)?;
        log::info!(
            "{id} on {}: device memory plan{}: {}",
            self.name,
            if urgent { " (urgent: reserved)" } else { "" },
            plan.describe()
        );
        let declined = asks && !urgent;
        let entry = Entry { fingerprint, urgent, declined, estimated, measured, plan: plan.clone() };
        plans.circuits.insert(id.clone(), entry);
        self.cache()?.keep(id, circuit.domain_size, urgent);
        if urgent {
            plans.revise_others(id);
        }
        Ok((plan, urgent))
    }

    /// Records the workspace peak a call of one partition of `circuit_id`
    /// held; the first (the plan's calls ran one at a time until it came)
    /// and any peak above the plan's call revise the plan (logged). A call
    /// on a streamed key took its chunk buffers from the workspace too,
    /// while the plan counts them apart (`Needs::stream`): they come off
    /// the peak, so that the plan's call and chunk buffers together are
    /// the peak measured (the 32 GiB PoRep streamed under a 40 GB cap
    /// held 29.35 GB, 6.4 of it chunk buffers, against 24.0 + 6.4
    /// estimated).
    pub(super) fn measured(&self, circuit_id: &str, peak: u64) {
        let Ok(mut plans) = self.plans() else { return };
        let Some(e) = plans.circuits.get_mut(circuit_id) else { return };
        let peak = call_of_peak(&e.plan, peak);
        if peak <= e.measured {
            return;
        }
        e.measured = peak;
        let (needs, urgent, old) = (e.needs(), e.urgent, e.plan.clone());
        if needs == old.needs {
            return;
        }
        match plans.make(circuit_id, &needs, urgent) {
            Ok(plan) => {
                log::info!(
                    "{circuit_id}: a call held {:.2} GB of workspace, chunk buffers apart (estimated {:.2}); device memory plan revised: {}",
                    peak as f64 / 1e9,
                    old.call as f64 / 1e9,
                    plan.describe()
                );
                plans.circuits.get_mut(circuit_id).expect("present").plan = plan;
                if urgent {
                    plans.revise_others(circuit_id);
                }
            }
            Err(e) => log::warn!(
                "{circuit_id}: a call held {peak} bytes of workspace, chunk buffers apart, more than the device can plan for: {e}"
            ),
        }
    }

    /// The device as planned and every circuit's plan, for `/v1/status`.
    pub fn plans_report(&self) -> Option<MemoryReport> {
        self.plans.lock().ok().map(|p| p.report())
    }
}

#[cfg(test)]
mod tests {
    use super::{call_of_peak, measured_needs, Gate};
    use crate::device_plan::{self, Counts, Device, Needs, Reserve};
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_streamed_call_is_planned_at_its_measured_peak_not_above_it() {
        // A 2^20 circuit on a device that holds one streamed call and
        // none of its key.
        let counts = Counts {
            domain: 1 << 20,
            assignment: 1 << 20,
            points: [1 << 20, 1 << 19, 1 << 20, (1 << 20) - 1, 1 << 19],
            gathered: [0, 1 << 19],
            fixed: 1 << 20,
            matrices: 1 << 24,
            chunk: 1 << 18,
        };
        let needs = Needs::from_counts(&counts);
        let device =
            |usable| Device { usable, general: 2, urgent: 0, pass_limit: 1, resident_limit: u64::MAX };
        let usable = counts.fixed + counts.matrices + needs.streamed_call + needs.stream;
        let plan = device_plan::plan(&device(usable), &needs, Reserve::default()).unwrap();
        assert!(plan.streams() && plan.call == needs.streamed_call, "{}", plan.describe());
        // A peak 1 MB above the estimate, chunk buffers included: the
        // revised plan holds exactly that.
        let peak = needs.streamed_call + needs.stream + (1 << 20);
        let revised = measured_needs(&needs, call_of_peak(&plan, peak));
        let p = device_plan::plan(&device(usable + (1 << 20)), &revised, Reserve::default()).unwrap();
        assert_eq!(p.call + needs.stream, peak, "{}", p.describe());
        // With the key resident nothing comes off.
        let resident = device_plan::plan(&device(u64::MAX / 4), &needs, Reserve::default()).unwrap();
        assert!(!resident.streams());
        assert_eq!(call_of_peak(&resident, peak), peak);
    }

    #[test]
    fn a_call_past_the_slots_waits_for_one_to_end() {
        let gate = Gate::default();
        let (first, second) = (gate.enter(2).unwrap(), gate.enter(2).unwrap());
        let released = AtomicBool::new(false);
        std::thread::scope(|s| {
            let third = s.spawn(|| {
                let _slot = gate.enter(2).unwrap();
                // Only a slot given back lets it in.
                assert!(released.load(Ordering::SeqCst), "entered while both slots were held");
            });
            released.store(true, Ordering::SeqCst);
            drop(first);
            third.join().unwrap();
        });
        drop(second);
        // Both given back: two more enter at once.
        let _both = (gate.enter(2).unwrap(), gate.enter(2).unwrap());
        assert_eq!(*gate.active.lock().unwrap(), 2);
    }
}
