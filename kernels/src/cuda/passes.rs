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

use std::sync::{mpsc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::bases::Fingerprint;
use super::gpu::Res;
use crate::groth16::{ProveStartOutput, Synthesized};
use crate::DeviceError;

/// How many partitions of a shape one pass can hold on a device of
/// `device_bytes` whose resident budget is `budget`: the first takes its
/// whole peak (its scalars, the H step's three other buffers of n, two
/// buffers of `chunk` bases per G1 query of a plan and B's G2 query's, and
/// a GiB for the sorts and partial sums), each further one its scalars (H's,
/// the assignment, A's and B's gathered: 32 bytes each). At least 1.
pub(super) fn room(
    device_bytes: u64,
    budget: u64,
    chunk: usize,
    n: usize,
    m: usize,
    picked: usize,
) -> usize {
    let scalars = 32 * (n + m + picked) as u64;
    let peak = scalars + 96 * n as u64 + chunk as u64 * (2 * 2 * 96 + 2 * 192) + (1 << 30);
    match device_bytes.saturating_sub(budget).checked_sub(peak) {
        Some(left) => 1 + (left / scalars.max(1)) as usize,
        None => 1,
    }
}

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
    Lead(Synthesized, u64),
    Join(mpsc::Receiver<Res<ProveStartOutput>>),
}

impl Passes {
    fn lock(&self) -> Res<MutexGuard<'_, (u64, Vec<Open>)>> {
        (self.open.lock()).map_err(|e| DeviceError::engine("locking the open passes", e))
    }

    /// Joins an open pass of this key with fewer than `limit` calls, else
    /// opens a pass (the id that `take` and `close` name it by).
    pub fn enter(
        &self,
        circuit_id: &str,
        fingerprint: &Fingerprint,
        syn: Synthesized,
        limit: usize,
    ) -> Res<Role> {
        let mut open = self.lock()?;
        let room = |o: &&mut Open| {
            o.circuit_id == circuit_id && o.fingerprint == *fingerprint && o.members < limit
        };
        if let Some(pass) = open.1.iter_mut().find(room) {
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
        Ok(Role::Lead(syn, id))
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
    pub fn close(&self, id: u64) {
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

#[cfg(test)]
mod tests {
    use super::{room, Fingerprint, Passes, Role};
    use crate::groth16::Synthesized;
    use std::time::{Duration, Instant};

    fn syn() -> Synthesized {
        Synthesized {
            a: vec![],
            b: vec![],
            c: vec![],
            assignment: vec![],
            num_inputs: 1,
        }
    }

    fn key(k: usize) -> Fingerprint {
        Fingerprint {
            lens: [k; 4],
            points: vec![],
        }
    }

    #[test]
    fn a_pass_holds_what_the_memory_outside_the_budget_holds() {
        let gb = 1u64 << 30;
        let (n, m, picked, chunk) = (1 << 27, 130 << 20, 163 << 20, 1 << 23);
        // The 32 GiB shape on an H200 under a 16 GiB budget: 14.1 GB of
        // scalars per partition, a 34.5 GB peak for the first.
        assert_eq!(room(141 * gb, 16 * gb, chunk, n, m, picked), 8);
        // A 24 GB card keeps 60% for the resident budget: no room for a
        // second partition (nor, at this shape, for the first's peak).
        assert_eq!(room(24 * gb, 24 * gb / 10 * 6, chunk, n, m, picked), 1);
        // An empty shape does not divide by zero.
        assert!(room(141 * gb, 0, 0, 0, 0, 0) > 1);
    }

    #[test]
    fn calls_join_an_open_pass_of_their_key_up_to_the_limit() {
        let passes = Passes::default();
        let lead = |r: Role| match r {
            Role::Lead(_, id) => id,
            Role::Join(_) => panic!("joined"),
        };
        let id = lead(passes.enter("c", &key(1), syn(), 3).unwrap());
        // Another key, or the same circuit id with another key: passes of
        // their own.
        lead(passes.enter("d", &key(1), syn(), 3).unwrap());
        lead(passes.enter("c", &key(2), syn(), 3).unwrap());
        let joined: Vec<Role> = (0..2)
            .map(|_| passes.enter("c", &key(1), syn(), 3).unwrap())
            .collect();
        assert!(joined.iter().all(|r| matches!(r, Role::Join(_))));
        // Full: the fourth call opens a pass of its own.
        let fourth = lead(passes.enter("c", &key(1), syn(), 3).unwrap());
        assert_ne!(fourth, id);
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(passes.take(id, far, 3).unwrap().len(), 2);
        // Full and nothing left to take: closed at once, without waiting.
        assert!(passes.take(id, far, 3).unwrap().is_empty());
        // Closed: a call now joins the fourth call's pass.
        assert!(matches!(
            passes.enter("c", &key(1), syn(), 3).unwrap(),
            Role::Join(_)
        ));
    }

    #[test]
    fn a_pass_with_room_waits_for_calls_until_its_deadline_then_closes() {
        let passes = Passes::default();
        let Role::Lead(_, id) = passes.enter("c", &key(1), syn(), 2).unwrap() else {
            panic!("joined")
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                let r = passes.enter("c", &key(1), syn(), 2).unwrap();
                assert!(matches!(r, Role::Join(_)));
            });
            let until = Instant::now() + Duration::from_secs(60);
            assert_eq!(
                passes.take(id, until, 2).unwrap().len(),
                1,
                "woken by the join"
            );
        });
        let Role::Lead(_, id) = passes.enter("c", &key(1), syn(), 2).unwrap() else {
            panic!("the full pass took a call")
        };
        let t = Instant::now();
        assert!(passes
            .take(id, t + Duration::from_millis(30), 2)
            .unwrap()
            .is_empty());
        assert!(t.elapsed() >= Duration::from_millis(30));
        // A closed pass's receivers hear that no output comes.
        let Role::Lead(_, id) = passes.enter("c", &key(1), syn(), 2).unwrap() else {
            panic!("joined a closed pass")
        };
        let Role::Join(rx) = passes.enter("c", &key(1), syn(), 2).unwrap() else {
            panic!("led")
        };
        passes.close(id);
        assert!(rx.recv().is_err());
    }
}
