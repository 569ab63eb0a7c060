//! What a CUDA engine keeps between calls, under two budgets: proving keys
//! resident on the device and NTT tables (the resident budget, device
//! memory), and keys too large for that budget, held in pinned host memory
//! and streamed through the device per call (the pinned budget, host
//! memory). Least recently used entries not in use are evicted to make room.

use std::collections::HashMap;
use std::sync::Arc;

use rustacuda::error::CudaError;

use super::bases::{Fingerprint, KeyBases, Query};
use super::gpu::{DBuf, DevG1Affine, DevG2Affine, DeviceElement, Res, Workspace};
use super::ntt::NttTables;
use super::streamed::HostKey;
use super::CudaEngine;
use crate::{DeviceCause, DeviceError, KernelError};

/// Points converted into the staging at a time while a key is uploaded (the
/// whole query at once would double a 12.5 GB query on the host).
const UPLOAD_RANGE: usize = 1 << 20;

/// A circuit's bases on the device.
pub struct ResidentKey {
    /// A, B1, L, H (Query's order).
    g1: [DBuf<DevG1Affine>; 4],
    /// b_g2_query, when the engine runs B's G2 MSM.
    pub b2: Option<DBuf<DevG2Affine>>,
    /// Identifies the key.
    fingerprint: Fingerprint,
    /// Device bytes held, for the resident budget.
    bytes: u64,
}

impl ResidentKey {
    pub fn query(&self, q: Query) -> &DBuf<DevG1Affine> {
        &self.g1[q as usize]
    }
}

/// A key as a call proves with it.
pub enum Loaded {
    /// On the device.
    Resident(Arc<ResidentKey>),
    /// In pinned host memory, streamed through the device.
    Streamed(Arc<HostKey>),
}

/// Entries with the tick of their last use.
pub struct Cache {
    keys: HashMap<String, (Arc<ResidentKey>, u64)>,
    tables: HashMap<usize, (Arc<NttTables>, u64)>,
    streamed: HashMap<String, (Arc<HostKey>, u64)>,
    tick: u64,
}

impl Cache {
    pub fn new() -> Self {
        Self {
            keys: HashMap::new(),
            tables: HashMap::new(),
            streamed: HashMap::new(),
            tick: 0,
        }
    }

    fn bytes(&self) -> u64 {
        self.keys.values().map(|(k, _)| k.bytes).sum::<u64>()
            + self.tables.values().map(|(t, _)| t.bytes()).sum::<u64>()
    }

    fn pinned_bytes(&self) -> u64 {
        self.streamed.values().map(|(k, _)| k.bytes).sum()
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Frees everything (the engine's context current).
    pub fn clear(&mut self) {
        self.keys.clear();
        self.tables.clear();
        self.streamed.clear();
    }
}

/// The least recently used entry of `map` that no call holds.
fn idle_lru<K: Clone, V>(map: &HashMap<K, (Arc<V>, u64)>) -> Option<(K, u64)> {
    map.iter()
        .filter(|(_, (v, _))| Arc::strong_count(v) == 1)
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

fn exhausted(what: &str, need: u64, budget: u64, held: u64) -> KernelError {
    DeviceError::engine(
        format!("making room for {need} {what} bytes"),
        format!("{what} budget of {budget} bytes exhausted by {held} bytes in use"),
    )
}

impl CudaEngine {
    fn cache(&self) -> Res<std::sync::MutexGuard<'_, Cache>> {
        self.cache
            .lock()
            .map_err(|e| DeviceError::engine("locking the engine cache", e))
    }

    /// Device bytes held by resident proving keys and NTT tables.
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
            }
        }
    }

    /// Evicts least recently used device entries not in use until `need`
    /// more bytes fit the resident budget.
    fn make_room(&self, cache: &mut Cache, need: u64) -> Res<()> {
        while cache.bytes() + need > self.budget {
            match (idle_lru(&cache.keys), idle_lru(&cache.tables)) {
                (Some((id, tk)), Some((_, tt))) if tk <= tt => {
                    cache.keys.remove(&id);
                }
                (_, Some((n, _))) => {
                    cache.tables.remove(&n);
                }
                (Some((id, _)), None) => {
                    cache.keys.remove(&id);
                }
                (None, None) => {
                    return Err(exhausted("resident", need, self.budget, cache.bytes()))
                }
            }
        }
        Ok(())
    }

    /// NTT tables for size n, resident (uploaded through `ws`).
    pub fn tables(&self, n: usize, ws: &Workspace) -> Res<Arc<NttTables>> {
        self.gpu.enter()?;
        let mut cache = self.cache()?;
        let tick = cache.next_tick();
        if let Some((t, used)) = cache.tables.get_mut(&n) {
            *used = tick;
            return Ok(t.clone());
        }
        self.make_room(&mut cache, NttTables::bytes_for(n))?;
        let t = Arc::new(NttTables::new(n, ws)?);
        debug_assert_eq!(t.bytes(), NttTables::bytes_for(n));
        cache.tables.insert(n, (t.clone(), tick));
        Ok(t)
    }

    /// The key of `circuit_id`: resident on the device when its bases fit
    /// the resident budget, else streamed from pinned host memory.
    pub(super) fn key(
        &self,
        circuit_id: &str,
        bases: &dyn KeyBases,
        ws: &Workspace,
    ) -> Res<Loaded> {
        if bases.bytes(self.options.g2_on_gpu) > self.budget {
            Ok(Loaded::Streamed(self.host_key(circuit_id, bases)?))
        } else {
            Ok(Loaded::Resident(self.resident(circuit_id, bases, ws)?))
        }
    }

    /// The circuit's bases on the device, uploaded through `ws` when not
    /// resident yet (waits for the upload: other calls' streams use them).
    fn resident(
        &self,
        circuit_id: &str,
        bases: &dyn KeyBases,
        ws: &Workspace,
    ) -> Res<Arc<ResidentKey>> {
        let mut cache = self.cache()?;
        let tick = cache.next_tick();
        let fp = bases.fingerprint();
        let with_b2 = self.options.g2_on_gpu;
        let current = |k: &ResidentKey| k.fingerprint == fp && (k.b2.is_some() || !with_b2);
        if let Some(k) = cached(&mut cache.keys, circuit_id, tick, current) {
            return Ok(k);
        }
        self.make_room(&mut cache, bases.bytes(with_b2))?;
        let upload = || -> Res<_> {
            let mut g1 = Vec::with_capacity(4);
            for q in Query::ALL {
                g1.push(upload_ranges(ws, bases.len(q), |s, o| bases.g1(q, s, o))?);
            }
            let b2 = if with_b2 {
                Some(upload_ranges(ws, bases.b2_len(), |s, o| bases.g2(s, o))?)
            } else {
                None
            };
            ws.synchronize("uploading a proving key")?;
            Ok((g1, b2))
        };
        // The workspaces' idle buffers live outside the resident budget: when
        // they are what keeps a key from fitting, free them and try again.
        let (g1, b2) = match upload() {
            Err(KernelError::Device(DeviceError {
                cause: DeviceCause::Driver(CudaError::OutOfMemory),
                ..
            })) => {
                ws.release()?;
                self.release_pooled();
                upload()?
            }
            uploaded => uploaded?,
        };
        let bytes =
            g1.iter().map(|b| b.bytes()).sum::<u64>() + b2.as_ref().map_or(0, |b| b.bytes());
        let key = Arc::new(ResidentKey {
            g1: g1.try_into().map_err(|_| ()).expect("four queries"),
            b2,
            fingerprint: fp,
            bytes,
        });
        cache
            .keys
            .insert(circuit_id.to_string(), (key.clone(), tick));
        Ok(key)
    }

    /// The circuit's bases in pinned host memory, copied there when not yet.
    fn host_key(&self, circuit_id: &str, bases: &dyn KeyBases) -> Res<Arc<HostKey>> {
        let mut cache = self.cache()?;
        let tick = cache.next_tick();
        let fp = bases.fingerprint();
        let with_b2 = self.options.g2_on_gpu;
        let current = |k: &HostKey| k.fingerprint == fp && (k.b2().is_some() || !with_b2);
        if let Some(k) = cached(&mut cache.streamed, circuit_id, tick, current) {
            return Ok(k);
        }
        let need = bases.bytes(with_b2);
        while cache.pinned_bytes() + need > self.pinned_budget {
            let Some((id, _)) = idle_lru(&cache.streamed) else {
                return Err(exhausted(
                    "pinned",
                    need,
                    self.pinned_budget,
                    cache.pinned_bytes(),
                ));
            };
            cache.streamed.remove(&id);
        }
        let key = Arc::new(HostKey::new(bases, with_b2)?);
        cache
            .streamed
            .insert(circuit_id.to_string(), (key.clone(), tick));
        Ok(key)
    }
}

/// A new owned device buffer of `len` elements, filled range by range from
/// `fill` through the workspace's staging (queued; synchronize before use
/// on another stream).
fn upload_ranges<T: DeviceElement>(
    ws: &Workspace,
    len: usize,
    fill: impl Fn(usize, &mut [T]),
) -> Res<DBuf<T>> {
    let mut buf = DBuf::new(len)?;
    let mut host = vec![T::ZERO; UPLOAD_RANGE.min(len)];
    for start in (0..len).step_by(UPLOAD_RANGE) {
        let n = UPLOAD_RANGE.min(len - start);
        fill(start, &mut host[..n]);
        ws.upload_at(&mut buf, start, &host[..n])?;
    }
    Ok(buf)
}
