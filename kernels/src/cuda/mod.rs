//! The CUDA engine for prove_start (feature `cuda`).
//!
//! One [`CudaEngine`] per device, shared by that device's GPU workers: one
//! CUDA context (made current on each calling thread), a workspace leased
//! per call from a pool (streams, pinned staging, reused device buffers),
//! one device-memory plan per circuit (plan.rs over device_plan.rs: which
//! parts of its key stay resident, how many general calls hold a workspace
//! at once, how long passes over the streamed parts are), the resident
//! parts uploaded once and kept (LRU-evicted between circuits, an urgent
//! circuit's never), the streamed parts kept in pinned host memory and
//! passed through the device in chunks, a, b and c of a deferred partition
//! evaluated on the device from the circuit's compiled matrices (kept
//! resident like its key), H by seven NTTs on the device, the four G1 MSMs
//! and, with `g2_on_gpu`, B's G2 MSM. Kernels: kernels/cuda.

pub mod bases;
mod cache;
// Fixed-base multiplication of the setup's generators (cuzk-filecoin's
// GPU setup engine).
pub mod fixed_base;
pub mod gpu;
// Random points and scalars for cuzk-bench's GPU benchmark and kernels' own
// GPU tests; not the daemon's (feature `bench-internals`).
#[cfg(feature = "bench-internals")]
pub mod inputs;
mod launch_params;
pub mod msm;
pub mod ntt;
mod passes;
mod plan;
mod prove;
pub mod r1cs;
mod spans;
mod streamed;

// Public for the benchmark, which computes the kernel-active fraction from
// `kernel_spans` with the engine's own arithmetic.
#[cfg(feature = "bench-internals")]
pub use spans::newly_covered;
#[cfg(not(feature = "bench-internals"))]
use spans::newly_covered;

use std::sync::Mutex;
use std::time::Duration;

use rustacuda::device::Device;
use rustacuda::event::{Event, EventFlags};
use rustacuda::stream::{Stream, StreamFlags};

use crate::groth16::{PreparedCircuit, ProveStartEngine, ProveStartOutput, Synthesized, Urgency};
use crate::r1cs::Matrices;
use crate::{device_plan, DeviceError, Fr, G1Affine, G2Affine, KernelError};
use bases::SourceBases;
use cache::Cache;
use gpu::{
    driver, DBuf, DevFq, DevFq2, DevFr, DevG1Affine, DevG2Affine, DevPtr, DeviceElement, Gpu, Launch, Res,
    Workspace,
};
use msm::{MsmGroup, Results, ZeroOne, G1, G2};
use passes::Passes;

/// A CUDA device as the driver reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Its ordinal, as the driver numbers devices.
    pub ordinal: usize,
    /// Its name ("NVIDIA H100 80GB HBM3").
    pub name: String,
    /// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it.
    pub uuid: String,
    /// Its memory, in bytes.
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
        let uuid = format!("GPU-{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]);
        let total_memory = d.total_memory().map_err(driver("cuDeviceTotalMem"))? as u64;
        out.push(DeviceInfo { ordinal: ordinal as usize, name, uuid, total_memory });
    }
    Ok(out)
}

/// Engine options.
#[derive(Clone, Debug)]
pub struct CudaOptions {
    /// Run B's G2 MSM on the GPU (else `b2_acc` is `None` and the finalizer
    /// does it on the CPU).
    pub g2_on_gpu: bool,
    /// Most device bytes the engine's memory plan hands out; `None`: what
    /// the device has free once the engine's context exists. A cap for a
    /// card shared with other programs, or to try a smaller card's plan.
    pub memory_limit: Option<u64>,
    /// Most device bytes a circuit's fixed bytes and resident key parts may
    /// take; `None`: whatever the plan leaves beside the workspaces. Parts
    /// beyond it stream (a test's way to force streaming).
    pub resident_budget: Option<u64>,
    /// General workers calling the engine at once (the daemon's
    /// `workers_per_device`): the plan's slots are at most this many.
    pub general_calls: usize,
    /// Critical-lane workers (`critical_workers_per_device`): each gets a
    /// workspace of the largest urgent call's peak, reserved.
    pub urgent_calls: usize,
    /// Reuse device buffers from the calls' workspaces; false: allocate and
    /// free every temporary buffer (cuMemFree synchronizes the context), as
    /// v1 did, for comparison. Streams and pinned staging are kept either way.
    pub pool: bool,
    /// Bytes of pinned host memory the streamed keys (those larger than
    /// the resident budget) may take; `None`: half the host's memory.
    pub pinned_budget: Option<u64>,
    /// Points per chunk of a streamed key (each query's chunk in flight
    /// takes two device buffers of this many bases).
    pub stream_chunk: usize,
    /// Most partitions in one pass over a key's streamed parts (passes.rs);
    /// 1: each call streams them itself. Each partition of a pass holds its
    /// scalars on the device until the pass ends (about 14 GB at the 32 GiB
    /// shape), in the first call's workspace: the plan makes passes only as
    /// long as the device holds.
    pub pass_partitions: usize,
    /// How long a pass over a streamed key waits for more calls after its
    /// first call's upload and H step, while it has room (see passes.rs).
    pub pass_wait: Duration,
}

/// The default `stream_chunk`: 2^23 points, 0.8 GB of G1 and 1.6 GB of G2
/// bases per buffer; large enough that a chunk's fixed costs (its sort and
/// window reduction) are a few percent of its bucket work.
pub const STREAM_CHUNK: usize = 1 << 23;

impl Default for CudaOptions {
    fn default() -> Self {
        Self {
            g2_on_gpu: true,
            memory_limit: None,
            resident_budget: None,
            general_calls: 2,
            urgent_calls: 1,
            pool: true,
            pinned_budget: None,
            stream_chunk: STREAM_CHUNK,
            pass_partitions: 2,
            pass_wait: Duration::ZERO,
        }
    }
}

/// prove_start on one CUDA device: its context, resident keys and tables, workspaces and memory
/// plan.
pub struct CudaEngine {
    /// Recorded when the engine started: the origin of `kernel_spans`.
    /// Declared before `gpu`, so it is destroyed before the context.
    epoch: Epoch,
    gpu: Gpu,
    options: CudaOptions,
    /// Device bytes the memory plan hands out (`memory_limit`, or the free
    /// memory at start): the room of entries no plan covers too.
    usable: u64,
    /// The pinned budget in bytes (host memory).
    pinned_budget: u64,
    name: String,
    cache: Mutex<Cache>,
    /// Every circuit's device-memory plan (plan.rs).
    plans: Mutex<plan::Plans>,
    /// Holds a general call until one of its plan's slots is free.
    gate: plan::Gate,
    /// Workspaces of finished calls (one per call that ran concurrently)
    /// and the ranks of those leased now.
    workspaces: Mutex<Workspaces>,
    /// The latest calls' kernel spans (ms since `epoch`), at most
    /// MAX_SPANS, for the device's kernel-active fraction.
    spans: Mutex<std::collections::VecDeque<(f64, f64)>>,
    /// Passes over streamed keys still taking calls.
    passes: std::sync::Arc<Passes>,
}

/// An engine's workspaces between calls, and which ranks are taken.
#[derive(Default)]
struct Workspaces {
    /// Finished calls' workspaces, ready for the next call.
    idle: Vec<Workspace>,
    /// Ranks of the workspaces leased now.
    leased: Vec<usize>,
}

/// The lowest rank a call of this urgency takes: rank 0, the greatest
/// priority, is kept for urgent calls, so that one of them never waits
/// behind a normal call that happened to hold rank 0.
fn first_rank(urgency: Urgency) -> usize {
    match urgency {
        Urgency::Urgent => 0,
        Urgency::Normal => 1,
    }
}

impl Workspaces {
    /// The idle workspace of the lowest rank from `from` on, or, when there
    /// is none, the lowest rank from `from` on that no workspace holds, for
    /// a new one (a workspace lost to a failed stream leaves its rank free).
    /// Either way the rank is leased until `give_back`.
    fn take(&mut self, from: usize) -> Result<Workspace, usize> {
        let best = (self.idle.iter().enumerate())
            .filter(|(_, w)| w.rank >= from)
            .min_by_key(|(_, w)| w.rank)
            .map(|(i, _)| i);
        let held = |r: &usize| self.leased.contains(r) || self.idle.iter().any(|w| w.rank == *r);
        let taken = match best {
            Some(i) => Ok(self.idle.swap_remove(i)),
            // Of these, at least one is not held.
            None => {
                Err((from..=from + self.leased.len() + self.idle.len()).find(|r| !held(r)).unwrap_or(from))
            }
        };
        self.leased.push(taken.as_ref().map_or_else(|&r| r, |w| w.rank));
        taken
    }

    /// Ends the lease of `rank`; the workspace goes back to the idle ones
    /// unless it was lost.
    fn give_back(&mut self, rank: usize, ws: Option<Workspace>) {
        self.leased.retain(|&r| r != rank);
        self.idle.extend(ws);
    }
}

/// Drops `x` on a thread of its own, so that freeing it does not delay the
/// caller, who joins the thread where the memory must be back; here if no
/// thread can be started (the failed spawn drops it).
fn free_elsewhere<T: Send + 'static>(x: T) -> Option<std::thread::JoinHandle<()>> {
    (std::thread::Builder::new().name("cuzk-free".into())).spawn(move || drop(x)).ok()
}

/// Device bytes kept out of the plan for the driver's own allocations
/// (streams, events, the kernels' local memory as calls come).
const DRIVER_MARGIN: u64 = 512 << 20;

/// Kernel spans an engine keeps (16 bytes each).
const MAX_SPANS: usize = 4096;

/// An event recorded once at the engine's start and only read afterwards.
struct Epoch(Event);

// SAFETY: the event is recorded in `CudaEngine::new` and afterwards only
// passed to cuEventElapsedTime, which any thread with the context current
// may call.
unsafe impl Send for Epoch {}
unsafe impl Sync for Epoch {}

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
        let rank = ws.rank;
        let finished = ws.stream.synchronize().is_ok() && ws.copy.synchronize().is_ok();
        if let Ok(mut pool) = self.engine.workspaces.lock() {
            pool.give_back(rank, finished.then_some(ws));
        }
    }
}

impl CudaEngine {
    /// The engine of device `device_ordinal`, its module loaded and its workspaces made.
    pub fn new(device_ordinal: usize, options: CudaOptions) -> Result<Self, KernelError> {
        let gpu = Gpu::new(device_ordinal)?;
        // What the driver leaves once the context and the kernels' module
        // are loaded, less a margin for the driver's own allocations as
        // streams and events come (cuMemGetInfo).
        let (free, _) = gpu.memory()?;
        let usable = free.saturating_sub(DRIVER_MARGIN).min(options.memory_limit.unwrap_or(u64::MAX));
        let device = device_plan::Device {
            usable,
            general: options.general_calls.max(1),
            urgent: options.urgent_calls,
            pass_limit: options.pass_partitions.max(1),
            resident_limit: options.resident_budget.unwrap_or(u64::MAX),
        };
        let pinned_budget =
            options.pinned_budget.unwrap_or_else(|| crate::host::physical_memory().unwrap_or(128 << 30) / 2);
        let dev_name = gpu.device.name().unwrap_or_else(|_| "?".into());
        gpu.enter()?;
        let epoch = Event::new(EventFlags::DEFAULT).map_err(driver("cuEventCreate"))?;
        {
            let s = Stream::new(StreamFlags::NON_BLOCKING, None).map_err(driver("cuStreamCreate"))?;
            epoch.record(&s).map_err(driver("cuEventRecord"))?;
            s.synchronize().map_err(driver("cuStreamSynchronize"))?;
        }
        Ok(Self {
            gpu,
            options,
            usable,
            pinned_budget,
            name: format!("cuda:{device_ordinal} ({dev_name})"),
            cache: Mutex::new(Cache::new()),
            plans: Mutex::new(plan::Plans::new(device)),
            gate: plan::Gate::default(),
            workspaces: Mutex::new(Workspaces::default()),
            epoch: Epoch(epoch),
            spans: Mutex::new(std::collections::VecDeque::new()),
            passes: Default::default(),
        })
    }

    /// A workspace for one normal call (the context current on this
    /// thread); see `lease_for`.
    pub fn lease(&self) -> Res<Lease<'_>> {
        self.lease_for(Urgency::Normal)
    }

    /// A workspace for one call of this urgency: the idle one of the lowest
    /// rank open to it, so the call's kernels get the greatest stream
    /// priority not held by a call in flight (rank 0 only for urgent calls).
    pub fn lease_for(&self, urgency: Urgency) -> Res<Lease<'_>> {
        self.gpu.enter()?;
        let taken = self
            .workspaces
            .lock()
            .map_err(|e| DeviceError::engine("locking the workspaces", e))?
            .take(first_rank(urgency));
        let ws = match taken {
            Ok(ws) => ws,
            Err(rank) => Workspace::new(self.options.pool, rank).inspect_err(|_| {
                if let Ok(mut pool) = self.workspaces.lock() {
                    pool.give_back(rank, None);
                }
            })?,
        };
        Ok(Lease { engine: self, ws: Some(ws) })
    }

    /// Frees the idle device buffers of the pooled workspaces (cuMemFree:
    /// waits for the context's work).
    pub fn release_pooled(&self) {
        if let Ok(pool) = self.workspaces.lock() {
            for ws in pool.idle.iter() {
                let _ = ws.release();
            }
        }
    }

    /// Device bytes held idle by the pooled workspaces.
    pub fn pooled_bytes(&self) -> u64 {
        self.workspaces.lock().map_or(0, |v| v.idle.iter().map(|w| w.idle_bytes()).sum())
    }

    /// Keeps a call's kernel span and returns how much of it (ms) no kept
    /// span covers: the call's share of the device's kernel-active time.
    /// The calls that overlap it are among the kept ones (a device runs a
    /// few at a time, and MAX_SPANS are kept).
    fn keep_span(&self, span: Option<(f64, f64)>) -> Option<f64> {
        let (span, mut spans) = (span?, self.spans.lock().ok()?);
        let share = newly_covered(spans.iter(), span);
        if spans.len() == MAX_SPANS {
            spans.pop_front();
        }
        spans.push_back(span);
        Some(share)
    }

    /// The kernel spans of the latest prove_start calls (at most 4096), in
    /// ms on the device's clock since the engine started: from the end of
    /// a call's upload to the end of its last MSM, as CUDA events on its
    /// stream saw them. Their union over a saturated run, against its
    /// length, is the device's kernel-active fraction (the benchmark's; a
    /// call's host round trips inside its span, the 0/1 counts' reads,
    /// count as active).
    pub fn kernel_spans(&self) -> Vec<(f64, f64)> {
        self.spans.lock().map_or(Vec::new(), |s| s.iter().copied().collect())
    }

    /// The device's context and kernels.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The options the engine was made with.
    pub fn options(&self) -> &CudaOptions {
        &self.options
    }

    // ---- building blocks, for tests and benchmarks ----

    /// Uploads G1 bases (resident until dropped).
    pub fn upload_g1(&self, points: &[G1Affine]) -> Res<DBuf<DevG1Affine>> {
        self.upload(&G1::to_device(points))
    }

    /// `points` on the device, in the kernels' layout (waited for).
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

    /// The first `n` elements of `buf`, back on the host (waited for).
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
        let mut results = Results::<G>::new(&ws, 1)?;
        results.accumulate(gpu, &ws, &plan, bases.ptr())?;
        let fetched = results.fetch(&ws.stream)?;
        ws.synchronize("msm")?;
        Ok(fetched.value())
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
        self.ntt_device_with(data, &scratch, n, inverse, coset).map(|_| ())
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
        t.ntt(&self.gpu, &ws.stream, data.ptr(), scratch.ptr(), inverse, coset)?;
        stop.record(&ws.stream).map_err(driver("cuEventRecord"))?;
        ws.synchronize("ntt")?;
        let ms = stop.elapsed_time_f32(&start).map_err(driver("cuEventElapsedTime"))?;
        Ok(ms as f64)
    }

    /// a, b and c of the assignment `z` (on the device, Montgomery form, as
    /// `upload_fr` leaves it) by `matrices`, into `abc` (three buffers of
    /// at least `domain_size`), as `Matrices::evaluate` computes them on the
    /// host: the matrices kept under `circuit_id` as prove_start keeps a
    /// circuit's (uploaded on first use) where `place` says. Returns the
    /// evaluation's time on the stream in ms (CUDA events: the launches
    /// alone), or the first row that does not hold as
    /// `KernelError::Unsatisfied`. For the tests and the benchmark.
    pub fn evaluate_device(
        &self,
        circuit_id: &str,
        matrices: &Matrices,
        place: device_plan::Place,
        z: &DBuf<DevFr>,
        abc: &[DBuf<DevFr>; 3],
        domain_size: usize,
    ) -> Res<f64> {
        matrices.check_assignment(z.len(), domain_size)?;
        if abc.iter().any(|v| v.len() < domain_size) {
            return Err(KernelError::Synthesis(format!(
                "a, b, c buffers shorter than the domain of {domain_size}"
            )));
        }
        let ws = self.lease()?;
        let device = self.device_matrices(circuit_id, matrices, &ws, self.usable, place)?;
        self.gpu.enter()?;
        let ev = || Event::new(EventFlags::DEFAULT).map_err(driver("cuEventCreate"));
        let (start, stop) = (ev()?, ev()?);
        let bad = ws.buffer::<u32>(1)?;
        start.record(&ws.stream).map_err(driver("cuEventRecord"))?;
        let out = [abc[0].ptr(), abc[1].ptr(), abc[2].ptr()];
        device.evaluate(&self.gpu, &ws, z.ptr(), out, domain_size, bad.ptr())?;
        stop.record(&ws.stream).map_err(driver("cuEventRecord"))?;
        let mut first = [u32::MAX];
        bad.download(&mut first, &ws.stream)?;
        ws.synchronize("evaluating compiled matrices")?;
        if first[0] != u32::MAX {
            return Err(KernelError::Unsatisfied(first[0] as usize));
        }
        let ms = stop.elapsed_time_f32(&start).map_err(driver("cuEventElapsedTime"))?;
        Ok(ms as f64)
    }

    /// Runs a field test kernel on the words of n elements of a and b:
    /// op 0 add, 1 sub, 2 mul, 3 sqr, 4 neg, 5 from_mont (Fr) or double (Fq,
    /// Fq2). Returns the words of the n results.
    pub fn field_op(&self, field: FieldTest, op: u32, a: &[u64], b: &[u64]) -> Res<Vec<u64>> {
        match field {
            FieldTest::Fr => self
                .field_test(a, b, |g, st, l, x, y, o: DevPtr<DevFr>, n| g.test_fr_op(st, l, op, x, y, o, n)),
            FieldTest::Fq => self
                .field_test(a, b, |g, st, l, x, y, o: DevPtr<DevFq>, n| g.test_fq_op(st, l, op, x, y, o, n)),
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
        kernel(&self.gpu, &ws.stream, Launch::over(n, 128), da.ptr(), db.ptr(), dout.ptr(), n as u32)?;
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
            c.clear();
        }
        if let Ok(mut w) = self.workspaces.lock() {
            w.idle.clear();
        }
    }
}

impl ProveStartEngine for CudaEngine {
    fn name(&self) -> &str {
        &self.name
    }

    fn evaluates_on_device(&self) -> bool {
        true
    }

    /// Keys go to the device (or pinned memory) range by range; B's G2
    /// query must then be multiplied on the device too, or the finalizer
    /// would read it whole from the key's source on every proof.
    fn reads_key_by_range(&self) -> bool {
        self.options.g2_on_gpu
    }

    fn prove_start(
        &self,
        circuit: &PreparedCircuit,
        synthesized: Synthesized,
    ) -> Result<ProveStartOutput, KernelError> {
        self.prove_start_as(circuit, synthesized, Urgency::Normal)
    }

    fn prove_start_as(
        &self,
        circuit: &PreparedCircuit,
        synthesized: Synthesized,
        urgency: Urgency,
    ) -> Result<ProveStartOutput, KernelError> {
        with_bases(circuit, |bases| self.prove_start_with(circuit, bases, synthesized, urgency))
    }

    fn warm(&self, circuit: &PreparedCircuit, urgency: Urgency) -> Result<(), KernelError> {
        with_bases(circuit, |bases| self.warm_with(circuit, bases, urgency))
    }

    fn host_bytes(&self) -> u64 {
        self.pinned_bytes()
    }

    fn memory_report(&self) -> Option<device_plan::MemoryReport> {
        self.plans_report()
    }
}

/// Runs `f` with `circuit`'s bases: its key, or its key source read by
/// range.
fn with_bases<T>(circuit: &PreparedCircuit, f: impl FnOnce(&dyn bases::KeyBases) -> T) -> T {
    match &circuit.key_source {
        None => f(&circuit.pk),
        Some(source) => f(&SourceBases { source: source.as_ref(), head: &circuit.pk }),
    }
}

/// Which field `CudaEngine::field_op` tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldTest {
    /// The scalar field.
    Fr,
    /// The base field.
    Fq,
    /// The base field's quadratic extension (G2's coordinates).
    Fq2,
}

#[cfg(test)]
mod tests {
    use super::{first_rank, Urgency, Workspaces};

    #[test]
    fn new_workspaces_take_the_lowest_rank_no_workspace_holds() {
        let mut pool = Workspaces::default();
        let normal = first_rank(Urgency::Normal);
        // Nothing idle: new workspaces of ranks 1, 2, 3 in turn for normal
        // calls; rank 0 stays free for an urgent one.
        let ranks: Vec<Option<usize>> = (0..3).map(|_| pool.take(normal).err()).collect();
        assert_eq!(ranks, [Some(1), Some(2), Some(3)]);
        assert_eq!(pool.take(first_rank(Urgency::Urgent)).err(), Some(0));
        // Rank 2's workspace was lost (a failed stream): its rank is the
        // next new one's, not 4.
        pool.give_back(2, None);
        assert_eq!(pool.take(normal).err(), Some(2));
        // With rank 0 free, a second urgent call while none is idle gets the
        // lowest rank free, and normal calls still start at 1.
        pool.give_back(0, None);
        pool.give_back(1, None);
        assert_eq!(pool.take(normal).err(), Some(1));
        assert_eq!(pool.take(first_rank(Urgency::Urgent)).err(), Some(0));
        assert_eq!(pool.take(first_rank(Urgency::Urgent)).err(), Some(4));
    }
}
