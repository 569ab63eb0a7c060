//! What a CUDA engine keeps between calls: the parts of proving keys that
//! their circuits' device-memory plans keep resident, NTT tables, the
//! circuits' A and B selections and their compiled matrices (device memory,
//! within the running circuit's plan's room), and the parts the plans
//! stream, held in pinned host memory and streamed through the device per
//! call (the pinned budget, host memory). Least recently used entries not in
//! use, and not an urgent circuit's, are evicted to make room.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustacuda::error::CudaError;

use super::bases::{Fingerprint, KeyBases, Query};
use super::gpu::{DBuf, DevG1Affine, DevG2Affine, Res, Workspace};
use super::ntt::NttTables;
use super::r1cs::{DeviceMatrices, LONG_ROW};
use super::streamed::HostKey;
use super::CudaEngine;
use crate::device_plan::{Place, Plan};
use crate::groth16::Selection;
use crate::r1cs::{Flattened, Matrices};
use crate::{DeviceCause, DeviceError, KernelError};

/// A circuit's bases on the device: the parts its plan keeps resident
/// (device_plan.rs), the others streamed (`HostKey`).
pub struct ResidentKey {
    /// A, B1, L, H (Query's order), each when resident.
    g1: [Option<DBuf<DevG1Affine>>; 4],
    /// b_g2_query, when resident (and the engine runs B's G2 MSM).
    pub b2: Option<DBuf<DevG2Affine>>,
    /// Which parts it holds (device_plan::PARTS order).
    parts: [bool; 5],
    /// Identifies the key.
    fingerprint: Fingerprint,
    /// Device bytes held, for the cache's room.
    bytes: u64,
}

impl ResidentKey {
    pub fn query(&self, q: Query) -> Option<&DBuf<DevG1Affine>> {
        self.g1[q as usize].as_ref()
    }
}

/// A circuit's A and B selections on the device (ascending indices into
/// the assignment after the constant one), from which the device gathers
/// those queries' scalars; `None` for a query over every variable.
pub struct DeviceSelections {
    pub a: Option<DBuf<u32>>,
    pub b: Option<DBuf<u32>>,
    /// One more than the largest index: a call's assignment must have at
    /// least this many variables after the constant one, or the gather
    /// would read past it.
    pub limit: usize,
    /// Identifies the selections (`sample`).
    sample: u64,
    /// Device bytes held, for the cache's room.
    bytes: u64,
}

/// A hash of the selections' lengths and of up to 4097 evenly spaced
/// indices of each: what tells a circuit's selections from another's under
/// the same circuit id (a new setup) without reading 130 million indices
/// per call. Two selections of the same length that agree at every sampled
/// index but differ elsewhere would be taken for the same: a new setup of a
/// circuit changes its key too, whose fingerprint is checked apart.
fn sample(selections: [&Selection; 2]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for s in selections {
        match s {
            Selection::All => u64::MAX.hash(&mut h),
            Selection::Only(idx) => {
                idx.len().hash(&mut h);
                let step = (idx.len() / 4096).max(1);
                idx.iter().step_by(step).for_each(|i| i.hash(&mut h));
                idx.last().hash(&mut h);
            }
        }
    }
    h.finish()
}

/// A key as a call proves with it: the parts on the device and the parts
/// in pinned host memory, which together are the whole key.
pub struct Loaded {
    pub device: Option<Arc<ResidentKey>>,
    pub host: Option<Arc<HostKey>>,
}

impl Loaded {
    /// G1 query `q` on the device, when resident.
    pub fn device_query(&self, q: Query) -> Option<&DBuf<DevG1Affine>> {
        self.device.as_ref().and_then(|k| k.query(q))
    }

    /// B's G2 query on the device, when resident.
    pub fn device_b2(&self) -> Option<&DBuf<DevG2Affine>> {
        self.device.as_ref().and_then(|k| k.b2.as_ref())
    }
}

/// Entries with the tick of their last use.
pub struct Cache {
    keys: HashMap<String, (Arc<ResidentKey>, u64)>,
    tables: HashMap<usize, (Arc<NttTables>, u64)>,
    streamed: HashMap<String, (Arc<HostKey>, u64)>,
    selections: HashMap<String, (Arc<DeviceSelections>, u64)>,
    matrices: HashMap<String, (Arc<DeviceMatrices>, u64)>,
    tick: u64,
    /// The urgent circuits (and their NTT domains), whose entries the
    /// device's plan reserves: never evicted to make room for others.
    kept: (std::collections::HashSet<String>, std::collections::HashSet<usize>),
}

impl Cache {
    pub fn new() -> Self {
        Self {
            keys: HashMap::new(),
            tables: HashMap::new(),
            streamed: HashMap::new(),
            selections: HashMap::new(),
            matrices: HashMap::new(),
            tick: 0,
            kept: Default::default(),
        }
    }

    fn bytes(&self) -> u64 {
        self.keys.values().map(|(k, _)| k.bytes).sum::<u64>()
            + self.tables.values().map(|(t, _)| t.bytes()).sum::<u64>()
            + self.selections.values().map(|(s, _)| s.bytes).sum::<u64>()
            + self.matrices.values().map(|(m, _)| m.bytes).sum::<u64>()
    }

    fn pinned_bytes(&self) -> u64 {
        self.streamed.values().map(|(k, _)| k.bytes).sum::<u64>()
            + self.matrices.values().map(|(m, _)| m.pinned).sum::<u64>()
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Marks `circuit_id`'s entries and its domain's tables as kept for
    /// good (an urgent circuit) or as evictable.
    pub fn keep(&mut self, circuit_id: &str, domain: usize, kept: bool) {
        if kept {
            self.kept.0.insert(circuit_id.to_string());
            self.kept.1.insert(domain);
        } else {
            self.kept.0.remove(circuit_id);
        }
    }

    /// Frees everything (the engine's context current).
    pub fn clear(&mut self) {
        self.keys.clear();
        self.tables.clear();
        self.streamed.clear();
        self.selections.clear();
        self.matrices.clear();
    }
}

/// The least recently used entry of `map` that no call holds and `kept`
/// does not keep.
fn idle_lru<K: Clone + Eq + Hash, V>(
    map: &HashMap<K, (Arc<V>, u64)>,
    kept: &std::collections::HashSet<K>,
) -> Option<(K, u64)> {
    map.iter()
        .filter(|(k, (v, _))| Arc::strong_count(v) == 1 && !kept.contains(*k))
        .min_by_key(|(_, (_, t))| *t)
        .map(|(k, (_, t))| (k.clone(), *t))
}

/// The entry of `id` when `current` says it is the key asked for (its
/// fingerprint, and B's G2 query when the engine runs that MSM), marked
/// used at `tick`; otherwise a stale entry of `id` is dropped.
fn cached<V>(
    map: &mut HashMap<String, (Arc<V>, u64)>,
    id: &str,
    tick: u64,
    current: impl Fn(&V) -> bool,
) -> Option<Arc<V>> {
    if let Some((k, used)) = map.get_mut(id) {
        if current(k) {
            *used = tick;
            return Some(k.clone());
        }
    }
    map.remove(id);
    None
}

/// A selection's indices, when it has any.
fn indices(s: &Selection) -> Option<&[u32]> {
    match s {
        Selection::Only(idx) if !idx.is_empty() => Some(idx),
        _ => None,
    }
}

/// An entry `make_room` evicts.
enum Victim {
    Key(String),
    Tables(usize),
    Selections(String),
    Matrices(String),
}

fn exhausted(what: &str, need: u64, budget: u64, held: u64) -> KernelError {
    DeviceError::memory(
        format!("making room for {need} {what} bytes"),
        format!("{what} room of {budget} bytes exhausted by {held} bytes in use by running calls (the device memory plan in /v1/status; [cuda] memory_limit_bytes, pinned_budget_bytes)"),
    )
}

impl CudaEngine {
    pub(super) fn cache(&self) -> Res<std::sync::MutexGuard<'_, Cache>> {
        self.cache.lock().map_err(|e| DeviceError::engine("locking the engine cache", e))
    }

    /// Device bytes held by resident proving keys, NTT tables, selections
    /// and compiled matrices.
    pub fn resident_bytes(&self) -> u64 {
        self.cache.lock().map(|c| c.bytes()).unwrap_or(0)
    }

    /// Pinned host bytes held by streamed keys.
    pub fn pinned_bytes(&self) -> u64 {
        self.cache.lock().map(|c| c.pinned_bytes()).unwrap_or(0)
    }

    /// Drops the kept data of a circuit (e.g. when its shape is retired).
    pub fn evict(&self, circuit_id: &str) {
        if self.gpu.enter().is_ok() {
            if let Ok(mut c) = self.cache.lock() {
                c.keys.remove(circuit_id);
                c.streamed.remove(circuit_id);
                c.selections.remove(circuit_id);
                c.matrices.remove(circuit_id);
            }
        }
    }

    /// Evicts least recently used device entries not in use (and not an
    /// urgent circuit's) until `need` more bytes fit `room`: the running
    /// circuit's plan's `cache_room`, or the device's usable bytes for an
    /// entry no plan covers (the tests' and the benchmark's).
    fn make_room(&self, cache: &mut Cache, need: u64, room: u64) -> Res<()> {
        while cache.bytes() + need > room {
            // The least recently used entry not in use, of any kind.
            let (ids, domains) = (&cache.kept.0, &cache.kept.1);
            let key = idle_lru(&cache.keys, ids).map(|(id, t)| (t, Victim::Key(id)));
            let tables = idle_lru(&cache.tables, domains).map(|(n, t)| (t, Victim::Tables(n)));
            let sel = idle_lru(&cache.selections, ids).map(|(id, t)| (t, Victim::Selections(id)));
            let rows = idle_lru(&cache.matrices, ids).map(|(id, t)| (t, Victim::Matrices(id)));
            match [key, tables, sel, rows].into_iter().flatten().min_by_key(|e| e.0) {
                Some((_, Victim::Key(id))) => cache.keys.remove(&id).map(drop),
                Some((_, Victim::Tables(n))) => cache.tables.remove(&n).map(drop),
                Some((_, Victim::Selections(id))) => cache.selections.remove(&id).map(drop),
                Some((_, Victim::Matrices(id))) => cache.matrices.remove(&id).map(drop),
                None => return Err(exhausted("resident", need, room, cache.bytes())),
            };
        }
        Ok(())
    }

    /// The circuit's A and B selections on the device, copied there when
    /// not yet (cuMemcpyHtoD, once per circuit: 0.6 GB at the 32 GiB
    /// shape); `None` when both queries take every variable.
    pub(super) fn selections(
        &self,
        circuit_id: &str,
        a: &Selection,
        b: &Selection,
        room: u64,
    ) -> Res<Option<Arc<DeviceSelections>>> {
        if (a, b) == (&Selection::All, &Selection::All) {
            return Ok(None);
        }
        let mut cache = self.cache()?;
        let tick = cache.next_tick();
        let id = sample([a, b]);
        let current = |s: &DeviceSelections| s.sample == id;
        if let Some(s) = cached(&mut cache.selections, circuit_id, tick, current) {
            return Ok(Some(s));
        }
        let (ia, ib) = (indices(a), indices(b));
        let need = 4 * (ia.map_or(0, <[u32]>::len) + ib.map_or(0, <[u32]>::len)) as u64;
        self.make_room(&mut cache, need, room)?;
        let upload = |idx: Option<&[u32]>| -> Res<Option<DBuf<u32>>> {
            let Some(idx) = idx else { return Ok(None) };
            let buf = DBuf::new(idx.len())?;
            buf.copy_from_host(idx)?;
            Ok(Some(buf))
        };
        let limit =
            (ia.into_iter().chain(ib)).filter_map(|v| v.iter().max()).max().map_or(0, |&m| m as usize + 1);
        let sel =
            Arc::new(DeviceSelections { a: upload(ia)?, b: upload(ib)?, limit, sample: id, bytes: need });
        cache.selections.insert(circuit_id.to_string(), (sel.clone(), tick));
        Ok(Some(sel))
    }

    /// NTT tables for size n, resident (uploaded through `ws`), for a
    /// caller outside any plan (tests, the benchmark).
    pub fn tables(&self, n: usize, ws: &Workspace) -> Res<Arc<NttTables>> {
        self.tables_within(n, ws, self.usable)
    }

    /// NTT tables for size n, made room for within `room` (a plan's
    /// `cache_room`).
    pub(super) fn tables_within(&self, n: usize, ws: &Workspace, room: u64) -> Res<Arc<NttTables>> {
        self.gpu.enter()?;
        let mut cache = self.cache()?;
        let tick = cache.next_tick();
        if let Some((t, used)) = cache.tables.get_mut(&n) {
            *used = tick;
            return Ok(t.clone());
        }
        self.make_room(&mut cache, NttTables::bytes_for(n), room)?;
        let t = Arc::new(NttTables::new(n, ws)?);
        debug_assert_eq!(t.bytes(), NttTables::bytes_for(n));
        cache.tables.insert(n, (t.clone(), tick));
        Ok(t)
    }

    /// The key of `circuit_id` as `plan` splits it: the parts it keeps
    /// resident on the device, the others in pinned host memory.
    pub(super) fn key(
        &self,
        circuit_id: &str,
        bases: &dyn KeyBases,
        ws: &Workspace,
        plan: &Plan,
    ) -> Res<Loaded> {
        let with_b2 = self.options.g2_on_gpu;
        let mut resident = plan.resident;
        resident[4] &= with_b2;
        let streamed = [0, 1, 2, 3, 4].map(|i| !resident[i] && (i < 4 || with_b2));
        let any = |parts: [bool; 5]| parts.iter().any(|&p| p);
        let device = match any(resident) {
            true => Some(self.resident(circuit_id, bases, ws, resident, plan.cache_room())?),
            false => None,
        };
        let host = match any(streamed) {
            true => Some(self.host_key(circuit_id, bases, streamed)?),
            false => None,
        };
        Ok(Loaded { device, host })
    }

    /// The `parts` of the circuit's bases on the device, uploaded through
    /// `ws` when not resident yet (waits for the upload: other calls'
    /// streams use them).
    fn resident(
        &self,
        circuit_id: &str,
        bases: &dyn KeyBases,
        ws: &Workspace,
        parts: [bool; 5],
        room: u64,
    ) -> Res<Arc<ResidentKey>> {
        let mut cache = self.cache()?;
        let tick = cache.next_tick();
        let fp = bases.fingerprint();
        let current = |k: &ResidentKey| k.fingerprint == fp && k.parts == parts;
        if let Some(k) = cached(&mut cache.keys, circuit_id, tick, current) {
            return Ok(k);
        }
        self.make_room(&mut cache, part_bytes(bases, parts), room)?;
        let upload = || -> Res<_> {
            let mut g1 = Vec::with_capacity(4);
            for q in Query::ALL {
                g1.push(match parts[q as usize] {
                    true => Some(ws.upload_filled(bases.len(q), |s, o| bases.g1(q, s, o))?),
                    false => None,
                });
            }
            let b2 = match parts[4] {
                true => Some(ws.upload_filled(bases.b2_len(), |s, o| bases.g2(s, o))?),
                false => None,
            };
            ws.synchronize("uploading a proving key")?;
            Ok((g1, b2))
        };
        let (g1, b2) = self.upload_with_room(ws, upload)?;
        let bytes =
            g1.iter().flatten().map(|b| b.bytes()).sum::<u64>() + b2.as_ref().map_or(0, |b| b.bytes());
        let key = Arc::new(ResidentKey {
            g1: g1.try_into().map_err(|_| ()).expect("four queries"),
            b2,
            parts,
            fingerprint: fp,
            bytes,
        });
        cache.keys.insert(circuit_id.to_string(), (key.clone(), tick));
        Ok(key)
    }

    /// Runs `upload`, and once more when the device was out of memory after
    /// freeing the workspaces' idle buffers: they live outside the cache's
    /// room, so they can be what keeps an entry that fits it from fitting
    /// the device.
    fn upload_with_room<T>(&self, ws: &Workspace, upload: impl Fn() -> Res<T>) -> Res<T> {
        match upload() {
            Err(KernelError::Device(DeviceError {
                cause: DeviceCause::Driver(CudaError::OutOfMemory),
                ..
            })) => {
                ws.release()?;
                self.release_pooled();
                upload()
            }
            uploaded => uploaded,
        }
    }

    /// The circuit's compiled matrices where `place` says, uploaded through
    /// `ws` (or written into pinned host memory) when not yet (once per
    /// circuit: 7.4 GB at 32 GiB PoRep), when those kept under its id are
    /// another circuit's, or when its plan moved them.
    pub(super) fn device_matrices(
        &self,
        circuit_id: &str,
        matrices: &Matrices,
        ws: &Workspace,
        room: u64,
        place: Place,
    ) -> Res<Arc<DeviceMatrices>> {
        let mut cache = self.cache()?;
        let tick = cache.next_tick();
        let fp = matrices.fingerprint();
        let current = |d: &DeviceMatrices| d.fingerprint == fp && d.place == place;
        if let Some(d) = cached(&mut cache.matrices, circuit_id, tick, current) {
            return Ok(d);
        }
        let flat = Flattened::new(matrices, LONG_ROW)?;
        match place {
            Place::Device => self.make_room(&mut cache, flat.device_bytes(), room)?,
            Place::Host => self.make_pinned_room(&mut cache, flat.ends_and_terms_bytes())?,
        }
        let d = Arc::new(self.upload_with_room(ws, || DeviceMatrices::upload(&flat, fp, ws, place))?);
        cache.matrices.insert(circuit_id.to_string(), (d.clone(), tick));
        Ok(d)
    }

    /// Drops streamed keys not in use (least recently used first, never an
    /// urgent circuit's) until `need` more pinned bytes fit the pinned
    /// budget (streamed keys and matrices on the host together).
    fn make_pinned_room(&self, cache: &mut Cache, need: u64) -> Res<()> {
        while cache.pinned_bytes() + need > self.pinned_budget {
            let Some((id, _)) = idle_lru(&cache.streamed, &cache.kept.0) else {
                return Err(exhausted("pinned", need, self.pinned_budget, cache.pinned_bytes()));
            };
            cache.streamed.remove(&id);
        }
        Ok(())
    }

    /// The `parts` of the circuit's bases in pinned host memory, copied
    /// there when not yet.
    fn host_key(&self, circuit_id: &str, bases: &dyn KeyBases, parts: [bool; 5]) -> Res<Arc<HostKey>> {
        let mut cache = self.cache()?;
        let tick = cache.next_tick();
        let fp = bases.fingerprint();
        let current = |k: &HostKey| k.fingerprint == fp && k.parts == parts;
        if let Some(k) = cached(&mut cache.streamed, circuit_id, tick, current) {
            return Ok(k);
        }
        self.make_pinned_room(&mut cache, part_bytes(bases, parts))?;
        let key = Arc::new(HostKey::new(bases, parts)?);
        cache.streamed.insert(circuit_id.to_string(), (key.clone(), tick));
        Ok(key)
    }
}

/// Bytes of a key's `parts` (device_plan::PARTS order) in the kernels'
/// layout.
fn part_bytes(bases: &dyn KeyBases, parts: [bool; 5]) -> u64 {
    let g1: usize = (Query::ALL.iter()).filter(|&&q| parts[q as usize]).map(|&q| bases.len(q)).sum();
    let g2 = if parts[4] { bases.b2_len() } else { 0 };
    (g1 * std::mem::size_of::<DevG1Affine>() + g2 * std::mem::size_of::<DevG2Affine>()) as u64
}
