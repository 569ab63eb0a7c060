//! Which prove_start calls share a pass over a streamed key (issue 12 item
//! 4): a call whose key streams opens a pass, or joins the open pass of the
//! same key while it has room. The pass's first call proves for all of them
//! (prove.rs) and hands each joined call its output; a joined call only
//! waits. A pass takes calls until its first call's MSMs start: through that
//! call's upload and H step (about 0.4 s at the 32 GiB shape), and then up
//! to `CudaOptions::pass_wait` longer. The device's workers supply the
//! calls: with partitions queued, both workers of a device call together
//! and, finishing together, call together again; with none queued, a call
//! is not held back beyond `pass_wait` (default zero: docs/gpu.md says
//! why).

use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::bases::{Fingerprint, KeyBases};
use super::gpu::Res;
use super::{prove, CudaEngine};
use crate::groth16::{PreparedCircuit, ProveStartOutput, Synthesized, Urgency};
use crate::{DeviceError, KernelError};

/// A call proved in another call's pass, waiting for its output.
pub(super) struct Joiner {
    pub syn: Synthesized,
    /// Where its output goes (dropped unsent: the pass failed before
    /// taking it).
    pub reply: mpsc::Sender<Res<ProveStartOutput>>,
}

/// A pass still taking calls.
struct Open {
    /// Tells this pass from a later one of the same key.
    id: u64,
    circuit_id: String,
    fingerprint: Fingerprint,
    /// Calls in the pass, its first one and those taken included.
    members: usize,
    /// Calls joined and not yet taken by the first one.
    joiners: Vec<Joiner>,
}

/// The engine's open passes.
#[derive(Default)]
pub(super) struct Passes {
    open: Mutex<(u64, Vec<Open>)>,
    /// Signalled when a call joins a pass.
    joined: Condvar,
    /// Passes proved and the partitions they held, for `pass_counts`.
    counts: Mutex<(u64, u64)>,
}

/// What a call does on entering: prove a pass (its own partition first), or
/// wait for its output from the pass it joined.
pub(super) enum Role {
    Lead(Synthesized, Lead),
    Join(mpsc::Receiver<Res<ProveStartOutput>>),
}

/// The first call's hold on its pass: the pass closes when this drops, on
/// an error or a panic too, so that no call waits on a pass nobody proves
/// (their receivers hear that no output comes) and later calls open
/// another.
pub(super) struct Lead {
    /// The pass, for `Passes::take`.
    pub id: u64,
    passes: Arc<Passes>,
}

impl Drop for Lead {
    fn drop(&mut self) {
        self.passes.close(self.id);
    }
}

impl Passes {
    fn lock(&self) -> Res<MutexGuard<'_, (u64, Vec<Open>)>> {
        (self.open.lock()).map_err(|e| DeviceError::engine("locking the open passes", e))
    }

    /// Joins an open pass of this key with fewer than `limit` calls, else
    /// opens a pass, held open by the returned `Lead` (whose id `take`
    /// names it by).
    pub fn enter(
        self: &Arc<Self>,
        circuit_id: &str,
        fingerprint: &Fingerprint,
        syn: Synthesized,
        limit: usize,
    ) -> Res<Role> {
        let mut open = self.lock()?;
        let open_to =
            |o: &&mut Open| o.circuit_id == circuit_id && o.fingerprint == *fingerprint && o.members < limit;
        if let Some(pass) = open.1.iter_mut().find(open_to) {
            let (reply, rx) = mpsc::channel();
            pass.members += 1;
            pass.joiners.push(Joiner { syn, reply });
            self.joined.notify_all();
            return Ok(Role::Join(rx));
        }
        open.0 += 1;
        let id = open.0;
        open.1.push(Open {
            id,
            circuit_id: circuit_id.to_string(),
            fingerprint: fingerprint.clone(),
            members: 1,
            joiners: Vec::new(),
        });
        let lead = Lead { id, passes: self.clone() };
        Ok(Role::Lead(syn, lead))
    }

    /// For pass `id`'s first call: the calls that joined since it last
    /// asked, waiting until `until` for one while the pass has room. None:
    /// the pass is closed (a later call opens a pass of its own).
    pub fn take(&self, id: u64, until: Instant, limit: usize) -> Res<Vec<Joiner>> {
        let mut open = self.lock()?;
        loop {
            let Some(pass) = open.1.iter_mut().find(|p| p.id == id) else {
                return Ok(Vec::new());
            };
            if !pass.joiners.is_empty() {
                return Ok(std::mem::take(&mut pass.joiners));
            }
            let now = Instant::now();
            if pass.members >= limit || now >= until {
                open.1.retain(|p| p.id != id);
                return Ok(Vec::new());
            }
            open = (self.joined.wait_timeout(open, until - now))
                .map_err(|e| DeviceError::engine("waiting for calls to join a pass", e))?
                .0;
        }
    }

    /// Closes pass `id` if it is still open; calls that joined and were not
    /// taken get no output (their receivers say so).
    fn close(&self, id: u64) {
        if let Ok(mut open) = self.open.lock() {
            open.1.retain(|p| p.id != id);
        }
    }

    /// Counts a proved pass of `partitions` partitions.
    pub fn count(&self, partitions: usize) {
        if let Ok(mut c) = self.counts.lock() {
            c.0 += 1;
            c.1 += partitions as u64;
        }
    }

    /// Passes proved so far and the partitions they held.
    pub fn counts(&self) -> (u64, u64) {
        self.counts.lock().map_or((0, 0), |c| *c)
    }
}

impl CudaEngine {
    /// prove_start with the key's bases from `bases` (the circuit's
    /// `ProvingKey` for `prove_start`; the benchmark's fabricated 32 GiB
    /// shape otherwise); the circuit's pk then serves only prove_finish. A
    /// normal call whose key streams may share its pass over the bases with
    /// other calls of the same key (passes.rs); an urgent one never waits
    /// for others.
    pub fn prove_start_with(
        &self,
        circuit: &PreparedCircuit,
        bases: &dyn KeyBases,
        syn: Synthesized,
        urgency: Urgency,
    ) -> Res<ProveStartOutput> {
        // The device's memory plan says how many partitions a pass over
        // the streamed parts holds (device_plan.rs); with nothing streamed,
        // a call proves alone.
        let (plan, urgent) = self.plan_for(circuit, bases, urgency, false)?;
        let limit = plan.pass;
        let first = |outputs: Vec<Res<ProveStartOutput>>| outputs.into_iter().next().expect("one");
        if urgency == Urgency::Urgent || limit == 1 || !plan.streams() {
            let alone =
                self.prove_pass(circuit, bases, syn, urgency, (&plan, urgent), &mut |_, _| Vec::new());
            return alone.and_then(first);
        }
        prove::check(circuit, &syn)?;
        let fingerprint = bases.fingerprint();
        let (syn, lead) = match self.passes.enter(&circuit.circuit_id, &fingerprint, syn, limit)? {
            Role::Lead(syn, lead) => (syn, lead),
            Role::Join(output) => {
                return output.recv().unwrap_or_else(|_| {
                    Err(DeviceError::engine(
                        "a shared pass over a streamed key",
                        "its first call ended without this partition's output",
                    ))
                })
            }
        };
        let until = Instant::now() + self.options.pass_wait;
        let mut replies = Vec::new();
        let mut more = |m: usize, inputs: usize| {
            let joiners = self.passes.take(lead.id, until, limit).unwrap_or_default();
            let mut syns = Vec::new();
            for j in joiners {
                if j.syn.assignment.len() == m && j.syn.num_inputs == inputs {
                    replies.push(j.reply);
                    syns.push(j.syn);
                } else {
                    let _ = j.reply.send(Err(KernelError::Synthesis(format!(
                        "{} variables and {} public inputs; the pass's partitions have {m} and {inputs}",
                        j.syn.assignment.len(),
                        j.syn.num_inputs
                    ))));
                }
            }
            syns
        };
        let result = self.prove_pass(circuit, bases, syn, urgency, (&plan, urgent), &mut more);
        // Closed now (and on an unwind): calls that join later open their
        // own pass.
        drop(lead);
        match result {
            Ok(outputs) => {
                let mut outputs = outputs.into_iter();
                let own = outputs.next().expect("the first call's output");
                for (reply, output) in replies.into_iter().zip(outputs) {
                    let _ = reply.send(output);
                }
                own
            }
            Err(e) => {
                for reply in replies {
                    let _ = reply.send(Err(e.clone()));
                }
                Err(e)
            }
        }
    }

    /// Passes proved so far (a call alone is a pass of one) and the
    /// partitions they held: their ratio is the mean partitions per pass.
    pub fn pass_counts(&self) -> (u64, u64) {
        self.passes.counts()
    }
}

#[cfg(test)]
mod tests {
    use super::{Fingerprint, Passes, Role};
    use crate::groth16::{Abc, Synthesized};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn syn() -> Synthesized {
        Synthesized { abc: Abc::Deferred, assignment: vec![], num_inputs: 1 }
    }

    fn key(k: usize) -> Fingerprint {
        Fingerprint { lens: [k; 4], points: vec![] }
    }

    #[test]
    fn calls_join_an_open_pass_of_their_key_up_to_the_limit() {
        let passes = Arc::new(Passes::default());
        let lead = |r: Role| match r {
            Role::Lead(_, lead) => lead,
            Role::Join(_) => panic!("joined"),
        };
        let first = lead(passes.enter("c", &key(1), syn(), 3).unwrap());
        // Another circuit, or the same circuit id with another key: passes
        // of their own.
        let _other = lead(passes.enter("d", &key(1), syn(), 3).unwrap());
        let _new_key = lead(passes.enter("c", &key(2), syn(), 3).unwrap());
        let joined: Vec<Role> = (0..2).map(|_| passes.enter("c", &key(1), syn(), 3).unwrap()).collect();
        assert!(joined.iter().all(|r| matches!(r, Role::Join(_))));
        // Full: the fourth call opens a pass of its own.
        let fourth = lead(passes.enter("c", &key(1), syn(), 3).unwrap());
        assert_ne!(fourth.id, first.id);
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(passes.take(first.id, far, 3).unwrap().len(), 2);
        // Full and nothing left to take: closed at once, without waiting.
        assert!(passes.take(first.id, far, 3).unwrap().is_empty());
        // Closed: a call now joins the fourth call's pass.
        assert!(matches!(passes.enter("c", &key(1), syn(), 3).unwrap(), Role::Join(_)));
    }

    #[test]
    fn a_pass_with_room_waits_for_calls_until_its_deadline_then_closes() {
        let passes = Arc::new(Passes::default());
        let Role::Lead(_, first) = passes.enter("c", &key(1), syn(), 2).unwrap() else { panic!("joined") };
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                let r = passes.enter("c", &key(1), syn(), 2).unwrap();
                assert!(matches!(r, Role::Join(_)));
            });
            let until = Instant::now() + Duration::from_secs(60);
            let taken = passes.take(first.id, until, 2).unwrap();
            assert_eq!(taken.len(), 1, "woken by the join");
        });
        let Role::Lead(_, second) = passes.enter("c", &key(1), syn(), 2).unwrap() else {
            panic!("the full pass took a call")
        };
        let t = Instant::now();
        let deadline = t + Duration::from_millis(30);
        assert!(passes.take(second.id, deadline, 2).unwrap().is_empty());
        assert!(t.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_pass_whose_first_call_ends_closes_and_its_calls_hear_it() {
        let passes = Arc::new(Passes::default());
        let Role::Lead(_, lead) = passes.enter("c", &key(1), syn(), 2).unwrap() else { panic!("joined") };
        let Role::Join(output) = passes.enter("c", &key(1), syn(), 2).unwrap() else { panic!("led") };
        // The first call fails or unwinds before taking the joined call.
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _held = lead;
            panic!("a bug in the pass");
        }));
        assert!(unwound.is_err());
        assert!(output.recv().is_err(), "the joined call is not left waiting");
        // The next call opens a pass of its own instead of joining a dead one.
        assert!(matches!(passes.enter("c", &key(1), syn(), 2).unwrap(), Role::Lead(..)));
    }
}
