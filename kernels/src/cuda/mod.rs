//! The CUDA engine for prove_start (feature `cuda`).
//!
//! One [`CudaEngine`] per device, shared by that device's GPU workers: one
//! CUDA context (made current on each calling thread), a workspace leased
//! per call from a pool (stream, pinned staging, reused device buffers), the
//! proving-key bases of each circuit uploaded once and kept resident
//! (LRU-evicted against a memory budget), H by seven NTTs on the device, the
//! four G1 MSMs and, with `g2_on_gpu`, B's G2 MSM. Kernels: kernels/cuda.

pub mod bench;
pub mod gpu;
// Random inputs: the benchmark's; public only for the GPU tests (feature
// `testutil`, which kernels' own dev-dependency turns on).
#[cfg(feature = "testutil")]
pub mod inputs;
#[cfg(not(feature = "testutil"))]
mod inputs;
mod launch_params;
pub mod msm;
pub mod ntt;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustacuda::device::Device;
use rustacuda::error::CudaError;
use rustacuda::event::{Event, EventFlags};
use rustacuda::stream::Stream;

use crate::groth16::{
    PhaseTiming, PreparedCircuit, ProveStartEngine, ProveStartOutput, Selection, Synthesized,
};
use crate::{DeviceCause, DeviceError, Fr, G1Affine, G2Affine, KernelError};
use gpu::{
    driver, DBuf, DevFq, DevFq2, DevFr, DevG1Affine, DevG1Jac, DevG2Affine, DevG2Jac, DevPtr,
    DeviceElement, Gpu, Launch, Res, Workspace,
};
use msm::{MsmGroup, ZeroOne, G1, G2};
use ntt::NttTables;

/// A CUDA device as the driver reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it.
    pub uuid: String,
    pub total_memory: u64,
}

/// The CUDA devices present (an error when the driver cannot be loaded or
/// initialized; an empty list when it reports none).
pub fn detect_devices() -> Result<Vec<DeviceInfo>, KernelError> {
    gpu::init()?;
    let n = Device::num_devices().map_err(driver("cuDeviceGetCount"))?;
    let mut out = Vec::new();
    for ordinal in 0..n {
        let d = Device::get_device(ordinal).map_err(driver("cuDeviceGet"))?;
        let name = d.name().map_err(driver("cuDeviceGetName"))?;
        let u = d.uuid().map_err(driver("cuDeviceGetUuid"))?;
        let h = hex::encode(u);
        let uuid = format!(
            "GPU-{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        );
        let total_memory = d.total_memory().map_err(driver("cuDeviceTotalMem"))? as u64;
        out.push(DeviceInfo {
            ordinal: ordinal as usize,
            name,
            uuid,
            total_memory,
        });
    }
    Ok(out)
}

/// Engine options.
#[derive(Clone, Debug)]
pub struct CudaOptions {
    /// Run B's G2 MSM on the GPU (else `b2_acc` is `None` and the finalizer
    /// does it on the CPU).
    pub g2_on_gpu: bool,
    /// Bytes of device memory the resident proving keys may take; `None`:
    /// 60% of the device's memory (the rest is for the per-proof buffers).
    pub resident_budget: Option<u64>,
    /// Reuse device buffers from the calls' workspaces; false: allocate and
    /// free every temporary buffer (cuMemFree synchronizes the context), as
    /// v1 did, for comparison. Streams and pinned staging are kept either way.
    pub pool: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        Self {
            g2_on_gpu: true,
            resident_budget: None,
            pool: true,
        }
    }
}

/// What identifies a proving key: its query lengths, delta_g1 and beta_g1.
type Fingerprint = (usize, usize, usize, usize, Vec<DevG1Affine>);

/// A circuit's bases on the device.
struct ResidentKey {
    /// a_query.
    a: DBuf<DevG1Affine>,
    /// b_g1_query.
    b1: DBuf<DevG1Affine>,
    /// l_query.
    l: DBuf<DevG1Affine>,
    /// h_query.
    h: DBuf<DevG1Affine>,
    /// b_g2_query, when the engine runs B's G2 MSM.
    b2: Option<DBuf<DevG2Affine>>,
    /// Length of a_query.
    a_len: usize,
    /// Length of b_g1_query (and of b_g2_query).
    b_len: usize,
    /// Length of l_query.
    l_len: usize,
    /// Length of h_query.
    h_len: usize,
    /// Identifies the key. A circuit_id reused for a different key (a new
    /// setup) re-uploads instead of proving with stale bases.
    fingerprint: Fingerprint,
    /// Device bytes held, for the resident budget.
    bytes: u64,
}

fn fingerprint(circuit: &PreparedCircuit) -> Fingerprint {
    let pk = &circuit.pk;
    (
        pk.a_query.len(),
        pk.b_g1_query.len(),
        pk.l_query.len(),
        pk.h_query.len(),
        G1::to_device(&[pk.delta_g1, pk.beta_g1]),
    )
}

struct Cache {
    keys: HashMap<String, (Arc<ResidentKey>, u64)>,
    tables: HashMap<usize, (Arc<NttTables>, u64)>,
    tick: u64,
}

impl Cache {
    fn bytes(&self) -> u64 {
        self.keys.values().map(|(k, _)| k.bytes).sum::<u64>()
            + self.tables.values().map(|(t, _)| t.bytes()).sum::<u64>()
    }
}

pub struct CudaEngine {
    gpu: Gpu,
    options: CudaOptions,
    budget: u64,
    name: String,
    cache: Mutex<Cache>,
    /// Workspaces of finished calls, one per call that ran concurrently.
    workspaces: Mutex<Vec<Workspace>>,
}

/// A workspace leased to one call: back to the engine's pool when dropped,
/// after its stream has finished (see `Workspace`), or freed when the
/// stream failed.
pub struct Lease<'e> {
    engine: &'e CudaEngine,
    ws: Option<Workspace>,
}

impl std::ops::Deref for Lease<'_> {
    type Target = Workspace;
    fn deref(&self) -> &Workspace {
        self.ws.as_ref().expect("held until drop")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let Some(ws) = self.ws.take() else { return };
        if ws.stream.synchronize().is_ok() {
            if let Ok(mut pool) = self.engine.workspaces.lock() {
                pool.push(ws);
            }
        }
    }
}

impl CudaEngine {
    pub fn new(device_ordinal: usize, options: CudaOptions) -> Result<Self, KernelError> {
        let gpu = Gpu::new(device_ordinal)?;
        let total = gpu
            .device
            .total_memory()
            .map_err(driver("cuDeviceTotalMem"))? as u64;
        let budget = options.resident_budget.unwrap_or(total / 10 * 6);
        let dev_name = gpu.device.name().unwrap_or_else(|_| "?".into());
        Ok(Self {
            gpu,
            options,
            budget,
            name: format!("cuda:{device_ordinal} ({dev_name})"),
            cache: Mutex::new(Cache {
                keys: HashMap::new(),
                tables: HashMap::new(),
                tick: 0,
            }),
            workspaces: Mutex::new(Vec::new()),
        })
    }

    /// A workspace for one call (the context current on this thread).
    pub fn lease(&self) -> Res<Lease<'_>> {
        self.gpu.enter()?;
        let pooled = self.workspaces.lock().ok().and_then(|mut v| v.pop());
        let ws = match pooled {
            Some(ws) => ws,
            None => Workspace::new(self.options.pool)?,
        };
        Ok(Lease {
            engine: self,
            ws: Some(ws),
        })
    }

    /// Frees the idle device buffers of the pooled workspaces (cuMemFree:
    /// waits for the context's work).
    pub fn release_pooled(&self) {
        if let Ok(pool) = self.workspaces.lock() {
            for ws in pool.iter() {
                let _ = ws.release();
            }
        }
    }

    /// Device bytes held idle by the pooled workspaces.
    pub fn pooled_bytes(&self) -> u64 {
        self.workspaces
            .lock()
            .map_or(0, |v| v.iter().map(|w| w.idle_bytes()).sum())
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn options(&self) -> &CudaOptions {
        &self.options
    }

    /// Device bytes held by resident proving keys and NTT tables.
    pub fn resident_bytes(&self) -> u64 {
        self.cache.lock().map(|c| c.bytes()).unwrap_or(0)
    }

    /// Drops the resident data of a circuit (e.g. when its shape is retired).
    pub fn evict(&self, circuit_id: &str) {
        if self.gpu.enter().is_ok() {
            if let Ok(mut c) = self.cache.lock() {
                c.keys.remove(circuit_id);
            }
        }
    }

    /// Evicts least recently used entries not in use until `need` more bytes fit.
    fn make_room(&self, cache: &mut Cache, need: u64) -> Res<()> {
        while cache.bytes() + need > self.budget {
            let victim_key = cache
                .keys
                .iter()
                .filter(|(_, (k, _))| Arc::strong_count(k) == 1)
                .min_by_key(|(_, (_, t))| *t)
                .map(|(id, (_, t))| (id.clone(), *t));
            let victim_table = cache
                .tables
                .iter()
                .filter(|(_, (k, _))| Arc::strong_count(k) == 1)
                .min_by_key(|(_, (_, t))| *t)
                .map(|(n, (_, t))| (*n, *t));
            match (victim_key, victim_table) {
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
                    return Err(DeviceError::engine(
                        format!("making room for {need} resident bytes"),
                        format!(
                            "resident budget of {} bytes exhausted by {} bytes in use",
                            self.budget,
                            cache.bytes()
                        ),
                    ))
                }
            }
        }
        Ok(())
    }

    /// NTT tables for size n, resident (uploaded through `ws`).
    pub fn tables(&self, n: usize, ws: &Workspace) -> Res<Arc<NttTables>> {
        self.gpu.enter()?;
        let mut cache = self
            .cache
            .lock()
            .map_err(|e| DeviceError::engine("locking the engine cache", e))?;
        cache.tick += 1;
        let tick = cache.tick;
        if let Some((t, used)) = cache.tables.get_mut(&n) {
            *used = tick;
            return Ok(t.clone());
        }
        let need = (n as u64) * 32 + (1 << 16);
        self.make_room(&mut cache, need)?;
        let t = Arc::new(NttTables::new(n, ws)?);
        cache.tables.insert(n, (t.clone(), tick));
        Ok(t)
    }

    /// The circuit's bases on the device, uploaded through `ws` when not
    /// resident yet (waits for the upload: other calls' streams use them).
    fn resident(&self, circuit: &PreparedCircuit, ws: &Workspace) -> Res<Arc<ResidentKey>> {
        let mut cache = self
            .cache
            .lock()
            .map_err(|e| DeviceError::engine("locking the engine cache", e))?;
        cache.tick += 1;
        let tick = cache.tick;
        let fp = fingerprint(circuit);
        if let Some((k, used)) = cache.keys.get_mut(&circuit.circuit_id) {
            let has_b2 = k.b2.is_some();
            if k.fingerprint == fp && (has_b2 || !self.options.g2_on_gpu) {
                *used = tick;
                return Ok(k.clone());
            }
        }
        let pk = &circuit.pk;
        let with_b2 = self.options.g2_on_gpu;
        let g1 = (pk.a_query.len() + pk.b_g1_query.len() + pk.l_query.len() + pk.h_query.len())
            * std::mem::size_of::<DevG1Affine>();
        let g2 = if with_b2 {
            pk.b_g2_query.len() * std::mem::size_of::<DevG2Affine>()
        } else {
            0
        };
        let need = (g1 + g2) as u64;
        cache.keys.remove(&circuit.circuit_id);
        self.make_room(&mut cache, need)?;
        let upload = || -> Res<_> {
            let a = ws.upload_owned(&G1::to_device(&pk.a_query))?;
            let b1 = ws.upload_owned(&G1::to_device(&pk.b_g1_query))?;
            let l = ws.upload_owned(&G1::to_device(&pk.l_query))?;
            let h = ws.upload_owned(&G1::to_device(&pk.h_query))?;
            let b2 = if with_b2 {
                Some(ws.upload_owned(&G2::to_device(&pk.b_g2_query))?)
            } else {
                None
            };
            ws.synchronize("uploading a proving key")?;
            Ok((a, b1, l, h, b2))
        };
        // The workspaces' idle buffers live outside the resident budget: when
        // they are what keeps a key from fitting, free them and try again.
        let (a, b1, l, h, b2) = match upload() {
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
            a.bytes() + b1.bytes() + l.bytes() + h.bytes() + b2.as_ref().map_or(0, |b| b.bytes());
        let key = Arc::new(ResidentKey {
            a,
            b1,
            l,
            h,
            b2,
            a_len: pk.a_query.len(),
            b_len: pk.b_g1_query.len(),
            l_len: pk.l_query.len(),
            h_len: pk.h_query.len(),
            fingerprint: fp,
            bytes,
        });
        cache
            .keys
            .insert(circuit.circuit_id.clone(), (key.clone(), tick));
        Ok(key)
    }

    fn prove_start_inner(
        &self,
        circuit: &PreparedCircuit,
        syn: Synthesized,
    ) -> Res<ProveStartOutput> {
        self.gpu.enter()?;
        let gpu = &self.gpu;
        let n = circuit.domain_size;
        if syn.a.len() != n || syn.b.len() != n || syn.c.len() != n {
            return Err(KernelError::Synthesis(format!(
                "a, b, c have {}, {}, {} elements; the domain has {n}",
                syn.a.len(),
                syn.b.len(),
                syn.c.len()
            )));
        }
        let ws = self.lease()?;
        let stream = &ws.stream;
        let key = self.resident(circuit, &ws)?;
        let tables = self.tables(n, &ws)?;
        self.gpu.enter()?;
        let ev = || Event::new(EventFlags::DEFAULT).map_err(driver("cuEventCreate"));
        let mut marks: Vec<(&'static str, Event)> = Vec::new();
        let start = ev()?;
        start.record(stream).map_err(driver("cuEventRecord"))?;
        let mark = |marks: &mut Vec<(&'static str, Event)>, name: &'static str| -> Res<()> {
            let e = ev()?;
            e.record(stream).map_err(driver("cuEventRecord"))?;
            marks.push((name, e));
            Ok(())
        };

        // upload
        let freed_bytes = syn.abc_bytes();
        let Synthesized {
            a,
            b,
            c,
            assignment,
            num_inputs,
        } = syn;
        let m = assignment.len();
        let mut da = ws.buffer::<DevFr>(n)?;
        let mut db = ws.buffer::<DevFr>(n)?;
        let mut dc = ws.buffer::<DevFr>(n)?;
        let mut dz = ws.buffer::<DevFr>(m)?;
        ws.upload(&mut da, msm::fr_dev(&a))?;
        ws.upload(&mut db, msm::fr_dev(&b))?;
        ws.upload(&mut dc, msm::fr_dev(&c))?;
        ws.upload(&mut dz, msm::fr_dev(&assignment))?;
        msm::from_mont(gpu, &ws, dz.ptr(), dz.ptr(), m)?;
        mark(&mut marks, "upload")?;

        // H
        let scratch = ws.buffer::<DevFr>(n)?;
        tables.compute_h(gpu, stream, da.ptr(), db.ptr(), dc.ptr(), scratch.ptr())?;
        mark(&mut marks, "ntt")?;
        // Back to the workspace: later buffers reuse them after the NTT, in
        // stream order. The host's a, b, c (copied into the staging) are
        // freed while the NTT runs, not before it is queued.
        drop((a, b, c, db, dc, scratch));

        let h_len = key.h_len.min(n);
        let l_len = key.l_len.min(m - num_inputs);
        // A's and B's scalars: the assignment after the constant one when the
        // key holds every variable, else the selected entries, gathered here
        // and uploaded beside it (Filecoin's keys).
        let a_sel = self.selected(&circuit.a_selection, &assignment, &ws)?;
        let b_sel = self.selected(&circuit.b_selection, &assignment, &ws)?;
        let shared = a_sel.is_none() && b_sel.is_none();
        let (a_ptr, a_len) = match &a_sel {
            Some((scalars, len)) => (scalars.ptr(), *len),
            None => (dz.ptr_at(1), key.a_len.min(m) - 1),
        };
        let (b_ptr, b_len) = match &b_sel {
            Some((scalars, len)) => (scalars.ptr(), *len),
            None => (dz.ptr_at(1), key.b_len.min(m) - 1),
        };
        // Results of the four G1 MSMs (H, L, A, B1), OUT_SLOTS each, and of
        // B's G2 MSM; each plan's shape says which slots it wrote.
        let slots = msm::OUT_SLOTS;
        let out = ws.buffer::<DevG1Jac>(4 * slots)?;
        let out2 = match key.b2 {
            Some(_) => Some(ws.buffer::<DevG2Jac>(slots)?),
            None => None,
        };
        let (o_h, o_l, o_a, o_b1) = (
            out.ptr(),
            out.ptr_at(slots),
            out.ptr_at(2 * slots),
            out.ptr_at(3 * slots),
        );
        let rule = ZeroOne::Auto;

        msm::from_mont(gpu, &ws, da.ptr(), da.ptr(), h_len)?;
        let plan_h = msm::plan(gpu, &ws, da.ptr(), h_len, rule)?;
        msm::accumulate::<G1>(gpu, &ws, &plan_h, key.h.ptr(), o_h)?;
        let s_h = plan_h.shape;
        drop(plan_h);
        drop(da);
        mark(&mut marks, "msm_h")?;

        let plan_l = msm::plan(gpu, &ws, dz.ptr_at(num_inputs), l_len, rule)?;
        msm::accumulate::<G1>(gpu, &ws, &plan_l, key.l.ptr(), o_l)?;
        let s_l = plan_l.shape;
        drop(plan_l);
        mark(&mut marks, "msm_l")?;

        // With every variable in both, A and B sort the same scalars once.
        let plan_a = msm::plan(gpu, &ws, a_ptr, a_len, rule)?;
        msm::accumulate::<G1>(gpu, &ws, &plan_a, key.a.ptr_at(1), o_a)?;
        mark(&mut marks, "msm_a")?;
        let plan_b_own = if shared {
            None
        } else {
            Some(msm::plan(gpu, &ws, b_ptr, b_len, rule)?)
        };
        let plan_b = plan_b_own.as_ref().unwrap_or(&plan_a);
        msm::accumulate::<G1>(gpu, &ws, plan_b, key.b1.ptr_at(1), o_b1)?;
        mark(&mut marks, "msm_b1")?;
        if let (Some(b2), Some(o_b2)) = (&key.b2, &out2) {
            msm::accumulate::<G2>(gpu, &ws, plan_b, b2.ptr_at(1), o_b2.ptr())?;
            mark(&mut marks, "msm_b2")?;
        }
        let (s_a, s_b) = (plan_a.shape, plan_b.shape);
        drop(plan_b_own);
        drop(plan_a);
        drop((dz, a_sel, b_sel));

        let mut host = vec![DevG1Jac::ZERO; 4 * slots];
        out.download(&mut host, stream)?;
        let mut host2 = vec![DevG2Jac::ZERO; slots];
        if let Some(o_b2) = &out2 {
            o_b2.download(&mut host2, stream)?;
        }
        mark(&mut marks, "download")?;
        stream.synchronize().map_err(driver("prove_start"))?;
        drop((out, out2));

        let result = |i: usize| &host[i * slots..(i + 1) * slots];
        let h_acc = msm::combine::<G1>(result(0), s_h);
        let l_acc = msm::combine::<G1>(result(1), s_l);
        let a_acc = msm::combine::<G1>(result(2), s_a);
        let b1_acc = msm::combine::<G1>(result(3), s_b);
        let b2_acc = key.b2.as_ref().map(|_| msm::combine::<G2>(&host2, s_b));

        let mut phases = Vec::new();
        let mut prev = &start;
        for (name, e) in &marks {
            let ms = e
                .elapsed_time_f32(prev)
                .map_err(driver("cuEventElapsedTime"))?;
            phases.push(PhaseTiming {
                phase: name,
                duration: Duration::from_secs_f64(ms as f64 / 1e3),
            });
            prev = e;
        }
        Ok(ProveStartOutput {
            a_acc,
            b1_acc,
            l_acc,
            h_acc,
            b2_acc,
            assignment,
            num_inputs,
            freed_bytes,
            phases,
        })
    }

    /// A query's gathered scalars on the device, as plain integers, and
    /// their count; `None` when the query takes the whole assignment
    /// (already on the device).
    fn selected(
        &self,
        selection: &Selection,
        assignment: &[Fr],
        ws: &Workspace,
    ) -> Res<Option<(DBuf<DevFr>, usize)>> {
        if *selection == Selection::All {
            return Ok(None);
        }
        let gathered = selection.gather(&assignment[1..]);
        let mut device = ws.buffer::<DevFr>(gathered.len())?;
        ws.upload(&mut device, msm::fr_dev(&gathered))?;
        msm::from_mont(&self.gpu, ws, device.ptr(), device.ptr(), gathered.len())?;
        Ok(Some((device, gathered.len())))
    }

    // ---- building blocks, for tests and benchmarks ----

    /// Uploads G1 bases (resident until dropped).
    pub fn upload_g1(&self, points: &[G1Affine]) -> Res<DBuf<DevG1Affine>> {
        self.upload(&G1::to_device(points))
    }

    pub fn upload_g2(&self, points: &[G2Affine]) -> Res<DBuf<DevG2Affine>> {
        self.upload(&G2::to_device(points))
    }

    /// Uploads field elements (Montgomery form, as arkworks holds them).
    pub fn upload_fr(&self, s: &[Fr]) -> Res<DBuf<DevFr>> {
        self.upload(msm::fr_dev(s))
    }

    /// Copies elements to a new (owned) device buffer and waits for the copy.
    fn upload<T: DeviceElement>(&self, elements: &[T]) -> Res<DBuf<T>> {
        let ws = self.lease()?;
        let buffer = ws.upload_owned(elements)?;
        ws.synchronize("upload")?;
        Ok(buffer)
    }

    /// Copies the first `n` elements of a buffer back and waits for the copy.
    fn download<T: DeviceElement>(&self, buf: &DBuf<T>, n: usize) -> Res<Vec<T>> {
        let ws = self.lease()?;
        let mut host = vec![T::ZERO; n];
        buf.download(&mut host, &ws.stream)?;
        ws.synchronize("download")?;
        Ok(host)
    }

    pub fn download_fr(&self, buf: &DBuf<DevFr>, n: usize) -> Res<Vec<Fr>> {
        Ok(msm::fr_from_dev(&self.download(buf, n)?))
    }

    /// MSM in group `G` (msm::G1 or msm::G2) of device-resident bases and
    /// scalars (Montgomery Fr, n of each), the 0/1 split as `rule` says.
    /// Synchronous; includes the scalars' conversion and the bucket sort.
    pub fn msm_device<G: MsmGroup>(
        &self,
        bases: &DBuf<G::Affine>,
        scalars: &DBuf<DevFr>,
        n: usize,
        rule: ZeroOne,
    ) -> Res<G::Curve> {
        let ws = self.lease()?;
        let gpu = &self.gpu;
        let plain = ws.buffer::<DevFr>(n)?;
        msm::from_mont(gpu, &ws, scalars.ptr(), plain.ptr(), n)?;
        let plan = msm::plan(gpu, &ws, plain.ptr(), n, rule)?;
        let out = ws.buffer::<G::Jac>(msm::OUT_SLOTS)?;
        msm::accumulate::<G>(gpu, &ws, &plan, bases.ptr(), out.ptr())?;
        let mut host = vec![G::Jac::ZERO; plan.shape.outputs()];
        out.download(&mut host, &ws.stream)?;
        ws.synchronize("msm")?;
        Ok(msm::combine::<G>(&host, plan.shape))
    }

    /// One-shot MSM from host data (tests).
    pub fn msm<G: MsmGroup>(
        &self,
        bases: &[<G::Curve as ark_ec::CurveGroup>::Affine],
        scalars: &[Fr],
        rule: ZeroOne,
    ) -> Res<G::Curve> {
        let n = bases.len().min(scalars.len());
        let b = self.upload(&G::to_device(&bases[..n]))?;
        let s = self.upload_fr(&scalars[..n])?;
        self.msm_device::<G>(&b, &s, n, rule)
    }

    /// In-place NTT of device data of size n (a power of two).
    pub fn ntt_device(&self, data: &DBuf<DevFr>, n: usize, inverse: bool, coset: bool) -> Res<()> {
        let scratch = DBuf::<DevFr>::new(n)?;
        self.ntt_device_with(data, &scratch, n, inverse, coset)
            .map(|_| ())
    }

    /// As `ntt_device`, with a caller-held scratch buffer of n elements.
    /// Returns the passes' time on the stream in ms, from CUDA events around
    /// them: the benchmark sets it beside the host's wall clock (which also
    /// counts the lease, the launches and the synchronization), and sppark's
    /// NTT rows in bench/sppark time its stream the same way.
    pub fn ntt_device_with(
        &self,
        data: &DBuf<DevFr>,
        scratch: &DBuf<DevFr>,
        n: usize,
        inverse: bool,
        coset: bool,
    ) -> Res<f64> {
        let ws = self.lease()?;
        let t = self.tables(n, &ws)?;
        self.gpu.enter()?;
        let ev = || Event::new(EventFlags::DEFAULT).map_err(driver("cuEventCreate"));
        let (start, stop) = (ev()?, ev()?);
        start.record(&ws.stream).map_err(driver("cuEventRecord"))?;
        t.ntt(
            &self.gpu,
            &ws.stream,
            data.ptr(),
            scratch.ptr(),
            inverse,
            coset,
        )?;
        stop.record(&ws.stream).map_err(driver("cuEventRecord"))?;
        ws.synchronize("ntt")?;
        let ms = stop
            .elapsed_time_f32(&start)
            .map_err(driver("cuEventElapsedTime"))?;
        Ok(ms as f64)
    }

    /// Runs a field test kernel on the words of n elements of a and b:
    /// op 0 add, 1 sub, 2 mul, 3 sqr, 4 neg, 5 from_mont (Fr) or double (Fq,
    /// Fq2). Returns the words of the n results.
    pub fn field_op(&self, field: FieldTest, op: u32, a: &[u64], b: &[u64]) -> Res<Vec<u64>> {
        match field {
            FieldTest::Fr => self.field_test(a, b, |g, st, l, x, y, o: DevPtr<DevFr>, n| {
                g.test_fr_op(st, l, op, x, y, o, n)
            }),
            FieldTest::Fq => self.field_test(a, b, |g, st, l, x, y, o: DevPtr<DevFq>, n| {
                g.test_fq_op(st, l, op, x, y, o, n)
            }),
            FieldTest::Fq2 => self.field_test(a, b, |g, st, l, x, y, o: DevPtr<DevFq2>, n| {
                g.test_fq2_op(st, l, op, x, y, o, n)
            }),
        }
    }

    /// `test_kernel` over the words of field elements of type `F`.
    fn field_test<F: DeviceElement>(
        &self,
        a: &[u64],
        b: &[u64],
        kernel: impl FnOnce(&Gpu, &Stream, Launch, DevPtr<F>, DevPtr<F>, DevPtr<F>, u32) -> Res<()>,
    ) -> Res<Vec<u64>> {
        let out = self.test_kernel(F::from_words(a), F::from_words(b), 1, kernel)?;
        Ok(F::as_words(&out).to_vec())
    }

    /// Runs the group's point test kernel: for each i, 2a, a + b (mixed)
    /// and (a + b) + a, as the device computed them.
    pub fn curve_ops<G: MsmGroup>(
        &self,
        a: &[<G::Curve as ark_ec::CurveGroup>::Affine],
        b: &[<G::Curve as ark_ec::CurveGroup>::Affine],
    ) -> Res<Vec<G::Curve>> {
        let (a, b) = (G::to_device(a), G::to_device(b));
        let out = self.test_kernel(&a, &b, 3, G::TEST_OPS)?;
        Ok(out.iter().map(G::from_device).collect())
    }

    /// Uploads a and b, launches a test `kernel` over their n elements
    /// (one thread each) into `per_input * n` outputs, and returns those.
    fn test_kernel<I: DeviceElement, O: DeviceElement>(
        &self,
        a: &[I],
        b: &[I],
        per_input: usize,
        kernel: impl FnOnce(&Gpu, &Stream, Launch, DevPtr<I>, DevPtr<I>, DevPtr<O>, u32) -> Res<()>,
    ) -> Res<Vec<O>> {
        let n = a.len();
        let ws = self.lease()?;
        let (mut da, mut db) = (ws.buffer::<I>(n)?, ws.buffer::<I>(n)?);
        ws.upload(&mut da, a)?;
        ws.upload(&mut db, b)?;
        let dout = ws.buffer::<O>(per_input * n)?;
        kernel(
            &self.gpu,
            &ws.stream,
            Launch::over(n, 128),
            da.ptr(),
            db.ptr(),
            dout.ptr(),
            n as u32,
        )?;
        let mut host = vec![O::ZERO; per_input * n];
        dout.download(&mut host, &ws.stream)?;
        ws.synchronize("test kernel")?;
        Ok(host)
    }
}

impl Drop for CudaEngine {
    fn drop(&mut self) {
        let _ = self.gpu.enter();
        if let Ok(mut c) = self.cache.lock() {
            c.keys.clear();
            c.tables.clear();
        }
        if let Ok(mut w) = self.workspaces.lock() {
            w.clear();
        }
    }
}

impl ProveStartEngine for CudaEngine {
    fn name(&self) -> &str {
        &self.name
    }

    fn prove_start(
        &self,
        circuit: &PreparedCircuit,
        synthesized: Synthesized,
    ) -> Result<ProveStartOutput, KernelError> {
        self.prove_start_inner(circuit, synthesized)
    }
}

/// Which field `CudaEngine::field_op` tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldTest {
    Fr,
    Fq,
    Fq2,
}
