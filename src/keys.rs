//! Proving keys and matrices per circuit shape: set up on first use,
//! persisted under the data directory, reloaded on later starts; and
//! Filecoin's keys, read from their parameter files on first use.
//!
//! In a fleet (the job store on PostgreSQL) a shape's key is the fleet's:
//! set up once, by the first node that needs it, and published in the
//! database (`keys/shared.rs`), from where every other node copies it to
//! its own key directory, so that partitions proved on different nodes
//! verify with one key.
//!
//! A family's shape is prepared (set up, or loaded from its key file) on a
//! thread of its own, never on the synthesis thread that first needs it: a
//! setup can take minutes, and other shapes' partitions keep the synthesis
//! threads meanwhile. While it runs, its estimated memory counts as resident,
//! so the budget admits that much less. The jobs that asked for it are its
//! waiters, and the shape's jobs accepted but not asking yet (queued:
//! `KeyStore::record_expected`) are expected: once every waiter and every expected
//! job is abandoned (cancelled or failed) the setup stops at its next
//! question (`kernels::setup`: at most
//! `SETUP_CHUNK` scalars of a multiplication, or one step, later) and its
//! estimate stops counting at once.
//!
//! A Filecoin parameter file's load counts too: the file's size, as resident,
//! from before it reads until its prepared circuit replaces it with the
//! measured figure. Whoever watches the resident bytes (the budget) is told
//! of each change made off the synthesis threads.
//!
//! Here the key cache and the preparations; beside it, by role:
//! `keys/dir.rs` the key directory's files, `keys/error.rs` why a key
//! could not be prepared, `keys/shared.rs` the fleet's published keys.

mod dir;
mod error;
mod shared;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::error::Error;
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use ark_groth16::VerifyingKey;
use ark_serialize::CanonicalDeserialize;
use cuzk_actors::Abandonment;
use cuzk_kernels::circuits::{CircuitFamily, CircuitInstance, CircuitShape, WitnessSource};
use cuzk_kernels::groth16::PreparedCircuit;
use cuzk_kernels::Bls12_381;
use rand::SeedableRng;

use dir::KeyDir;
pub use error::{KeyError, OpenError, PrepareError};
pub use shared::{KeyLock, SharedKey, SharedKeyError, SharedKeys};

use crate::postgres::StoreUrl;

/// A circuit's key once prepared, or why it could not be: kept, and
/// answered to every later job of the circuit.
type Slot = Arc<OnceLock<Result<Arc<PreparedCircuit>, Arc<PrepareError>>>>;

/// Host bytes a circuit-specific setup holds at its peak, per constraint:
/// measured 727 MB for 2^18 `mimc-chain` constraints (2,773 B), rounded up.
const SETUP_BYTES_PER_CONSTRAINT: u64 = 2_900;
/// Bytes of a proving key file per constraint: five G1 or G2 queries of
/// about one element per variable (96-byte G1, 192-byte G2 uncompressed).
const KEY_FILE_BYTES_PER_CONSTRAINT: u64 = 640;
/// Jobs a shape keeps expected at most: past it the earliest is forgotten
/// (a cancel may then stop a setup that job would still have asked for,
/// as before queued jobs were expected). The queue limits bound unfinished
/// jobs already; this bounds a shape's list without them.
const EXPECTED_PER_SHAPE: usize = 4_096;

/// A shape being set up or loaded on its own thread, or a Filecoin
/// parameter file being loaded: counted as resident until it ends.
struct Preparing {
    /// Its estimated host memory.
    bytes: u64,
    /// The jobs that asked for a setup: when every one is abandoned, the
    /// setup stops. Empty for a parameter file's load, which jobs of any
    /// number share and which is never stopped.
    waiters: Vec<Abandonment>,
}

/// Told when the resident bytes change off the synthesis threads.
type ResidentWatch = Box<dyn Fn() + Send + Sync>;

/// What a setup of `shape` is estimated to need, before it starts.
pub struct SetupCost {
    /// Peak host memory of the setup.
    pub memory_bytes: u64,
    /// Size of the key file it writes.
    pub key_file_bytes: u64,
}

impl SetupCost {
    /// The estimate for a setup of `shape`, from its number of constraints.
    pub fn of(shape: &CircuitShape) -> Self {
        let constraints = shape.estimated_constraints as u64;
        Self {
            memory_bytes: constraints * SETUP_BYTES_PER_CONSTRAINT,
            key_file_bytes: constraints * KEY_FILE_BYTES_PER_CONSTRAINT,
        }
    }
}

/// A shape's key, or that it is still being prepared.
pub enum Preparation {
    /// The key is here, ready to prove with.
    Ready(Arc<PreparedCircuit>),
    /// Being set up or loaded on its own thread; ask again later.
    Pending,
}

/// The key store: the key cache, and where keys are kept. Its lock is held
/// only to find a shape's slot; setup and loading run outside it, and
/// concurrent users of one shape wait on that shape's slot alone.
pub struct KeyStore {
    /// `<data_dir>/keys`: each shape's `.pk` and `.vk` files.
    dir: KeyDir,
    /// Each circuit's key once prepared (or why not), by circuit id.
    slots: Mutex<HashMap<String, Slot>>,
    /// Shapes being prepared on their own threads and parameter files
    /// being loaded, with their estimated memory (counted as resident until
    /// they finish) and a setup's waiters.
    preparing: Mutex<HashMap<String, Preparing>>,
    /// Jobs accepted for a shape whose key is not ready and that have not
    /// asked for it yet (queued), by circuit id: a setup does not stop
    /// while one of them is not abandoned, since it will ask soon. A job
    /// leaves its list when it asks, a shape's list goes when its key is
    /// ready or failed, and abandoned jobs are pruned as lists are read.
    /// Locked only under `preparing`, so that a preparation's end and a
    /// new expected job are ordered.
    expected: Mutex<HashMap<String, Vec<Abandonment>>>,
    /// Told when the resident bytes change outside a synthesis (a setup or
    /// a load starting, ending or stopped, a key evicted): the budget, so
    /// that it admits by the current figure. Set once, by the server.
    resident_watch: OnceLock<ResidentWatch>,
    /// The fleet's keys, which a shape's key must be: None for a daemon
    /// that proves alone (its keys are its own).
    shared: Option<SharedKeys>,
    /// Why the last preparation of a shape could not use the fleet's key
    /// store: answered once, to the next partition that asks, as a
    /// retryable failure; the one after prepares again.
    unavailable: Mutex<HashMap<String, SharedKeyError>>,
}

impl KeyStore {
    /// A daemon's own keys, under `<data_dir>/keys`.
    pub fn open(data_dir: &Path) -> Result<Self, OpenError> {
        Self::with_shared(data_dir, None)
    }

    /// A fleet node's keys: the fleet's, published in the PostgreSQL
    /// database at `url` (the job store's), copied under `<data_dir>/keys`.
    /// Fails when the database cannot be reached or migrated.
    pub fn open_shared(data_dir: &Path, url: &StoreUrl) -> Result<Self, OpenError> {
        Self::with_shared(data_dir, Some(SharedKeys::connect(url)?))
    }

    fn with_shared(data_dir: &Path, shared: Option<SharedKeys>) -> Result<Self, OpenError> {
        Ok(Self {
            dir: KeyDir::open(data_dir)?,
            slots: Mutex::new(HashMap::new()),
            preparing: Mutex::default(),
            expected: Mutex::default(),
            resident_watch: OnceLock::new(),
            shared,
            unavailable: Mutex::default(),
        })
    }

    fn slot(&self, circuit_id: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(circuit_id.to_string()).or_default().clone()
    }

    /// Calls `watch` whenever the resident bytes change outside a
    /// synthesis. Only the first call counts.
    pub fn on_resident_change(&self, watch: impl Fn() + Send + Sync + 'static) {
        let _ = self.resident_watch.set(Box::new(watch));
    }

    /// Tells the watcher the resident bytes changed (also after an
    /// engine's warm: its streamed key parts are pinned host memory the
    /// budget counts).
    pub(crate) fn resident_changed(&self) {
        if let Some(watch) = self.resident_watch.get() {
            watch();
        }
    }

    fn preparing(&self) -> std::sync::MutexGuard<'_, HashMap<String, Preparing>> {
        self.preparing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The expected jobs, taken only under `preparing` (its guard, passed
    /// in, is the proof).
    fn expected<'a>(
        &'a self,
        _preparing: &std::sync::MutexGuard<'_, HashMap<String, Preparing>>,
    ) -> std::sync::MutexGuard<'a, HashMap<String, Vec<Abandonment>>> {
        self.expected.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts an accepted job of `circuit_id` that has not asked for its
    /// key yet (`job`: its abandonment) as expected by the shape's setup,
    /// unless the key is ready. It takes only the store's short locks, never
    /// a setup's time: the tracker calls it at intake. Every shape's
    /// abandoned jobs are pruned when a shape's list is made, so the lists
    /// hold only unfinished jobs (or ones finished without asking, which
    /// only a fleet node's job proved elsewhere can be: bounded by
    /// `EXPECTED_PER_SHAPE`, and gone when the shape's key is ready).
    pub fn record_expected(&self, circuit_id: &str, job: &Abandonment) {
        let preparing = self.preparing();
        let ready = {
            let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.get(circuit_id).is_some_and(|s| s.get().is_some())
        };
        if ready || job.is_set() {
            return;
        }
        let mut expected = self.expected(&preparing);
        if !expected.contains_key(circuit_id) {
            expected.retain(|_, jobs| {
                jobs.retain(|j| !j.is_set());
                !jobs.is_empty()
            });
        }
        let jobs = expected.entry(circuit_id.to_string()).or_default();
        jobs.retain(|j| !j.is_set());
        if jobs.len() >= EXPECTED_PER_SHAPE {
            jobs.remove(0);
        }
        jobs.push(job.clone());
    }

    /// The prepared circuit for a shape if it is ready; otherwise starts
    /// preparing it (loading its key file or setting it up) on a thread of
    /// its own, once, and answers `Pending`. `waiter` (the asking job) is
    /// counted among the preparation's waiters, no longer expected: a
    /// setup stops once every waiter and every expected job is abandoned,
    /// and the next ask starts it again; an abandoned
    /// job starts none. A failed preparation is kept: every later job of
    /// the shape fails the same way; one that could not use the fleet's key
    /// store is answered once and then tried again.
    pub fn prepared(
        self: &Arc<Self>,
        family: &Arc<dyn CircuitFamily>,
        shape: &CircuitShape,
        waiter: &Abandonment,
    ) -> Result<Preparation, KeyError> {
        let id = &shape.circuit_id;
        let slot = self.slot(id);
        if let Some(ready) = slot.get() {
            return ready.clone().map(Preparation::Ready).map_err(KeyError::Failed);
        }
        let mut preparing = self.preparing();
        if let Some(jobs) = self.expected(&preparing).get_mut(id) {
            jobs.retain(|j| !j.same_job(waiter));
        }
        if let Some(running) = preparing.get_mut(id) {
            if !running.waiters.iter().any(|w| w.same_job(waiter)) {
                running.waiters.retain(|w| !w.is_set());
                running.waiters.push(waiter.clone());
            }
            return Ok(Preparation::Pending);
        }
        // Abandoned between its synthesis starting and this ask (its setup
        // perhaps stopped for it just now): no setup for it.
        if waiter.is_set() {
            return Ok(Preparation::Pending);
        }
        if let Some(why) = self.unavailable.lock().unwrap_or_else(|e| e.into_inner()).remove(id) {
            return Err(KeyError::Unavailable(why));
        }
        let estimate = match self.dir.pk_path(id).exists() {
            true => 0,
            false => SetupCost::of(shape).memory_bytes,
        };
        preparing.insert(id.clone(), Preparing { bytes: estimate, waiters: vec![waiter.clone()] });
        drop(preparing);
        self.resident_changed();
        let (store, family, shape) = (self.clone(), family.clone(), shape.clone());
        let started = std::thread::Builder::new().name(format!("cuzk-setup-{id}")).spawn(move || {
            let id = &shape.circuit_id;
            match store.load_or_setup(family.as_ref(), &shape, &|| store.nobody_waits(id)) {
                Ok(prepared) => drop(slot.get_or_init(|| Ok(Arc::new(prepared)))),
                Err(KeyError::Failed(why)) => drop(slot.get_or_init(|| Err(why))),
                Err(KeyError::Unavailable(why)) => {
                    log::warn!("cannot prepare {id}: the fleet's key store: {why}");
                    let mut unavailable = store.unavailable.lock().unwrap_or_else(|e| e.into_inner());
                    unavailable.insert(id.clone(), why);
                }
                Err(KeyError::Stopped) => {
                    // `nobody_waits` forgot it when it said so: a new
                    // setup of the shape may be running already.
                    log::info!("setup of {id} stopped: every job waiting for it was cancelled or failed");
                    return;
                }
            }
            let mut preparing = store.preparing();
            preparing.remove(id);
            // A ready (or failed) key answers every later ask at once;
            // after an unavailable fleet store the expected jobs will
            // ask again, so they stay.
            if slot.get().is_some() {
                store.expected(&preparing).remove(id);
            }
            drop(preparing);
            store.resident_changed();
        });
        if let Err(error) = started {
            self.preparing().remove(id);
            self.resident_changed();
            return Err(KeyError::Failed(Arc::new(PrepareError::Thread { id: id.clone(), error })));
        }
        Ok(Preparation::Pending)
    }

    /// Whether every job waiting for `circuit_id`'s setup, and every job
    /// of the shape expected to ask for it, is abandoned (the abandoned
    /// expected ones are pruned). If so the setup is forgotten here, its
    /// estimate no longer counted (the watcher told), and it must stop: a
    /// later job starts a new one.
    fn nobody_waits(&self, circuit_id: &str) -> bool {
        let mut preparing = self.preparing();
        let waiters_gone = preparing
            .get(circuit_id)
            .is_some_and(|p| !p.waiters.is_empty() && p.waiters.iter().all(Abandonment::is_set));
        let abandoned = waiters_gone && {
            let mut expected = self.expected(&preparing);
            let left = expected.get_mut(circuit_id).map_or(0, |jobs| {
                jobs.retain(|j| !j.is_set());
                jobs.len()
            });
            if left == 0 {
                expected.remove(circuit_id);
            }
            left == 0
        };
        if abandoned {
            preparing.remove(circuit_id);
            drop(preparing);
            self.resident_changed();
        }
        abandoned
    }

    /// Whether a shape is prepared, being prepared, or has a key on disk:
    /// its first job costs no new setup.
    pub fn has_key(&self, circuit_id: &str) -> bool {
        let ready = self
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(circuit_id)
            .is_some_and(|s| s.get().is_some());
        ready || self.preparing().contains_key(circuit_id) || self.dir.pk_path(circuit_id).exists()
    }

    /// Where keys are written (for the free-space check before a setup).
    pub fn key_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The prepared circuit `circuit_id`, built by `build` from the
    /// parameter file `file` on first use (a Filecoin parameter file, read
    /// where the operator keeps it). A failure is kept: every later job of
    /// the circuit fails the same way. While it loads, the file's size
    /// counts as resident (its points are decoded one for one, a little
    /// larger in memory than on disk), the watcher told before the read
    /// starts and again once the measured figure replaces the estimate.
    pub fn prepared_with<E: Into<Box<dyn Error + Send + Sync>>>(
        &self,
        circuit_id: &str,
        file: &Path,
        build: impl FnOnce() -> Result<PreparedCircuit, E>,
    ) -> Result<Arc<PreparedCircuit>, Arc<PrepareError>> {
        let mut loaded = false;
        let prepared = self
            .slot(circuit_id)
            .get_or_init(|| {
                loaded = true;
                let _counted = LoadCounted::start(self, circuit_id, file);
                build().map(Arc::new).map_err(|e| Arc::new(PrepareError::Build(e.into())))
            })
            .clone();
        if loaded {
            self.resident_changed();
        }
        prepared
    }

    /// The verifying key of a shape already set up (in memory or on disk;
    /// in a fleet, in memory or published, never a local file that may
    /// predate the fleet's key). Looking up never adds a slot (ids come
    /// from clients) and never leaves the key directory.
    pub fn verifying_key(&self, circuit_id: &str) -> Option<VerifyingKey<Bls12_381>> {
        let id_chars = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if circuit_id.is_empty() || !circuit_id.chars().all(id_chars) {
            return None;
        }
        let slot = {
            let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.get(circuit_id).cloned()
        };
        if let Some(Ok(prepared)) = slot.as_ref().and_then(|s| s.get()) {
            return Some(prepared.pk.vk.clone());
        }
        let bytes = match &self.shared {
            Some(shared) => shared.verifying_key(circuit_id).unwrap_or_else(|e| {
                log::warn!("{e}");
                None
            })?,
            None => self.dir.read_vk(circuit_id)?,
        };
        VerifyingKey::deserialize_compressed(&bytes[..]).ok()
    }

    /// Host bytes of every prepared shape (keys and matrices), and the
    /// estimated bytes of the setups running now.
    pub fn resident_bytes(&self) -> u64 {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let prepared: u64 = slots
            .values()
            .filter_map(|slot| match slot.get() {
                Some(Ok(prepared)) => Some(prepared.resident_bytes()),
                _ => None,
            })
            .sum();
        drop(slots);
        prepared + self.transient_bytes()
    }

    /// The estimated bytes of the setups and loads running now: part of
    /// `resident_bytes` until each ends (the budget waits for them).
    pub fn transient_bytes(&self) -> u64 {
        self.preparing().values().map(|p| p.bytes).sum()
    }

    /// Circuits prepared and held now, with their resident bytes.
    pub fn loaded(&self) -> BTreeMap<String, u64> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots
            .iter()
            .filter_map(|(id, slot)| match slot.get() {
                Some(Ok(prepared)) => Some((id.clone(), prepared.resident_bytes())),
                _ => None,
            })
            .collect()
    }

    /// Forgets a prepared circuit (or a failed attempt to prepare it): its
    /// memory is freed once the partitions using it finish, and the next job
    /// prepares it again. Whether there was anything to forget.
    pub fn evict(&self, circuit_id: &str) -> bool {
        let evicted = self.slots.lock().unwrap_or_else(|e| e.into_inner()).remove(circuit_id).is_some();
        if evicted {
            self.resident_changed();
        }
        evicted
    }

    /// circuit ids with a key on disk or in memory.
    pub fn known_shapes(&self) -> BTreeSet<String> {
        let mut ids = self.dir.ids();
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        ids.extend(slots.iter().filter(|(_, s)| matches!(s.get(), Some(Ok(_)))).map(|(id, _)| id.clone()));
        ids
    }

    /// A daemon's own key: its key file if that loads and fits, else a new
    /// setup. In a fleet, the fleet's key, under the shape's lock so that
    /// nodes needing it at once do one setup: the published key (copied
    /// here unless the local file is already it), or, when none is
    /// published, this node's own (kept from before it joined, or set up
    /// now), published.
    /// A setup asks `stop` as it goes (`PreparedCircuit::setup_until`) and
    /// ends `Stopped` when it answers true.
    fn load_or_setup(
        &self,
        family: &dyn CircuitFamily,
        shape: &CircuitShape,
        stop: &dyn Fn() -> bool,
    ) -> Result<PreparedCircuit, KeyError> {
        let instance =
            || family.instance(shape, &WitnessSource::Seed(0)).expect("a seed always yields an instance");
        let id = &shape.circuit_id;
        let Some(shared) = &self.shared else {
            return self.load_or_set_up_locally(id, instance, stop).map_err(error::failed);
        };
        let mut lock = shared.lock(id).map_err(|e| KeyError::Unavailable(e.into()))?;
        if let Some(key) = lock.key().map_err(KeyError::Unavailable)? {
            return self.adopt(&mut lock, id, &key, instance);
        }
        let prepared = self.load_or_set_up_locally(id, instance, stop).map_err(error::failed)?;
        let vk = dir::vk_bytes(id, &prepared.pk.vk).map_err(error::failed)?;
        match lock.publish(&self.dir.pk_path(id), &vk).map_err(KeyError::Unavailable)? {
            None => {
                log::info!("published the key of {id} to the fleet");
                Ok(prepared)
            }
            Some(theirs) => self.adopt(&mut lock, id, &theirs, instance),
        }
    }

    fn load_or_set_up_locally(
        &self,
        id: &str,
        instance: impl Fn() -> Box<dyn CircuitInstance>,
        stop: &dyn Fn() -> bool,
    ) -> Result<PreparedCircuit, PrepareError> {
        if self.dir.pk_path(id).exists() {
            match self.load(id, &instance) {
                Ok(prepared) => {
                    log::info!("loaded proving key for {id}");
                    return Ok(prepared);
                }
                Err(e) => log::warn!("{e}; setting up again"),
            }
        }
        log::info!("circuit-specific setup for {id}");
        let started = std::time::Instant::now();
        let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
        let prepared =
            PreparedCircuit::setup_until(id, instance, &mut rng, stop).map_err(PrepareError::Setup)?;
        self.persist(&prepared)?;
        log::info!("setup for {id} took {:.2}s", started.elapsed().as_secs_f64());
        Ok(prepared)
    }

    /// The key in the shape's key file, if it fits the circuit.
    fn load(
        &self,
        id: &str,
        instance: impl Fn() -> Box<dyn CircuitInstance>,
    ) -> Result<PreparedCircuit, PrepareError> {
        let pk = self.dir.read_pk(id)?;
        PreparedCircuit::from_key(id, pk, instance())
            .map_err(|error| PrepareError::Misfit { id: id.into(), error })
    }

    /// Makes the fleet's published key this node's: the proving key copied
    /// from the database unless the local file is already it, the
    /// verifying key file written, the key loaded.
    fn adopt(
        &self,
        lock: &mut KeyLock,
        id: &str,
        key: &SharedKey,
        instance: impl Fn() -> Box<dyn CircuitInstance>,
    ) -> Result<PreparedCircuit, KeyError> {
        self.dir.make().map_err(error::failed)?;
        if !self.dir.holds(id, key.pk_sha256) {
            log::info!("copying the fleet's key for {id} ({} bytes)", key.pk_bytes);
            lock.download(key, &self.dir.pk_path(id)).map_err(KeyError::Unavailable)?;
        }
        self.dir.write_vk(id, &key.vk).map_err(error::failed)?;
        let prepared =
            self.load(id, instance).map_err(|e| error::failed(PrepareError::Fleet(Box::new(e))))?;
        log::info!("loaded the fleet's key for {id}");
        Ok(prepared)
    }

    fn persist(&self, prepared: &PreparedCircuit) -> Result<(), PrepareError> {
        self.dir.write(&prepared.circuit_id, &prepared.pk)
    }
}

/// A parameter file's load, counted as resident while it lasts: forgotten
/// when the load ends, returned or unwound.
struct LoadCounted<'a> {
    /// Whose resident bytes count it.
    store: &'a KeyStore,
    /// The circuit being loaded.
    id: &'a str,
}

impl<'a> LoadCounted<'a> {
    fn start(store: &'a KeyStore, id: &'a str, file: &Path) -> Self {
        let bytes = fs::metadata(file).map_or(0, |m| m.len());
        store.preparing().insert(id.to_string(), Preparing { bytes, waiters: Vec::new() });
        store.resident_changed();
        Self { store, id }
    }
}

impl Drop for LoadCounted<'_> {
    fn drop(&mut self) {
        self.store.preparing().remove(self.id);
    }
}
