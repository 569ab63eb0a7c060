//! Thin layer over rustacuda: one context and the cuzk module per device,
//! typed device buffers and pointers, every kernel's launcher declared once
//! with its argument types, the per-call workspaces (stream, pinned staging,
//! pooled device buffers), and driver errors as `KernelError::Device`.

use std::ffi::{c_void, CString};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rustacuda::context::{Context, ContextFlags, ContextStack, CurrentContext, UnownedContext};
use rustacuda::device::Device;
use rustacuda::error::CudaError;
use rustacuda::event::{Event, EventFlags};
use rustacuda::memory::{
    AsyncCopyDestination, CopyDestination, DeviceBuffer, DeviceCopy, DevicePointer, DeviceSlice, LockedBuffer,
};
use rustacuda::module::Module;
use rustacuda::stream::{Stream, StreamFlags, StreamWaitEventFlags};

pub use super::launch_params::*;
use crate::{DeviceCause, DeviceError, KernelError};

/// The fatbin build.rs compiled from kernels/cuda (sm_80, sm_90, compute_90 PTX).
pub static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cuzk.fatbin"));

pub type Res<T> = Result<T, KernelError>;

/// Maps a driver error of `call` to `KernelError::Device`, keeping the code.
pub fn driver(call: &str) -> impl Fn(CudaError) -> KernelError + '_ {
    move |e| KernelError::Device(DeviceError { call: call.to_string(), cause: DeviceCause::Driver(e) })
}

static INIT: std::sync::OnceLock<Result<(), CudaError>> = std::sync::OnceLock::new();

/// cuInit, once per process.
pub fn init() -> Res<()> {
    let r = *INIT.get_or_init(|| rustacuda::init(rustacuda::CudaFlags::empty()));
    r.map_err(driver("cuInit"))
}

/// Declares the element types the kernels read and write: each is the
/// kernel's struct as an array of u64 words, sized by launch_params.rs
/// (cuzk.cu checks its structs against the same constants).
macro_rules! device_types {
    ($($(#[$doc:meta])* $name:ident = $words:ident;)*) => {$(
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name(pub [u64; $words]);
        // SAFETY: plain words, no pointers or drop glue.
        unsafe impl DeviceCopy for $name {}
        impl DeviceElement for $name {
            const WORDS: usize = $words;
            const ZERO: Self = $name([0; $words]);
        }
    )*};
}

/// An element type of a device buffer that is a fixed number of u64 words.
pub trait DeviceElement: DeviceCopy + Copy {
    /// u64 words per element.
    const WORDS: usize;
    /// The all-zero element, to fill host buffers that downloads overwrite.
    const ZERO: Self;

    /// Views whole elements' words as elements (the layout is the words').
    fn from_words(words: &[u64]) -> &[Self] {
        assert_eq!(words.len() % Self::WORDS, 0, "a whole number of elements");
        assert_eq!(std::mem::size_of::<Self>(), 8 * Self::WORDS);
        // SAFETY: every implementor is #[repr(transparent)] over [u64; WORDS]
        // (checked above), so it has u64's alignment and no padding.
        unsafe { std::slice::from_raw_parts(words.as_ptr() as *const Self, words.len() / Self::WORDS) }
    }

    /// The words of elements, to be written in place (a key's points
    /// decoded straight into a host buffer of the device's layout).
    fn as_words_mut(elements: &mut [Self]) -> &mut [u64] {
        assert_eq!(std::mem::size_of::<Self>(), 8 * Self::WORDS);
        // SAFETY: as in `from_words`: plain u64 words without padding, and
        // any words are a valid element.
        unsafe {
            std::slice::from_raw_parts_mut(elements.as_mut_ptr() as *mut u64, elements.len() * Self::WORDS)
        }
    }

    /// The words of elements.
    fn as_words(elements: &[Self]) -> &[u64] {
        assert_eq!(std::mem::size_of::<Self>(), 8 * Self::WORDS);
        // SAFETY: as in `from_words`: plain u64 words without padding.
        unsafe { std::slice::from_raw_parts(elements.as_ptr() as *const u64, elements.len() * Self::WORDS) }
    }
}

device_types! {
    /// An Fr element (Montgomery form as arkworks holds it, or plain after
    /// k_msm_from_mont).
    DevFr = FR_WORDS;
    /// An Fq element (Montgomery form); the field tests' type.
    DevFq = FQ_WORDS;
    /// An Fq2 element, c0 then c1; the field tests' type.
    DevFq2 = FQ2_WORDS;
    /// A G1 affine point, x then y; the identity is all zeros.
    DevG1Affine = G1_AFF_WORDS;
    /// A G1 Jacobian point (X, Y, Z); the identity has Z = 0.
    DevG1Jac = G1_JAC_WORDS;
    /// A G2 affine point over Fq2; the identity is all zeros.
    DevG2Affine = G2_AFF_WORDS;
    /// A G2 Jacobian point over Fq2.
    DevG2Jac = G2_JAC_WORDS;
    /// A term of the compiled matrices: its variable (low half) and
    /// coefficient index (high half); `r1cs::Flattened::term`.
    DevTerm = TERM_WORDS;
    /// Two row ends of the compiled matrices, the earlier in the low half;
    /// `r1cs::Flattened::end_pair`.
    DevRowEnds = ROW_ENDS_WORDS;
}

/// A device address of `T` elements, passed to a kernel as its `T*`
/// parameter (8 bytes, the same ABI). The type parameter is what makes a
/// launch with the wrong buffer fail to compile.
#[repr(transparent)]
pub struct DevPtr<T> {
    /// The device virtual address.
    addr: u64,
    /// The element type; `fn() -> T` keeps DevPtr Send + Sync for any T.
    _elem: PhantomData<fn() -> T>,
}

impl<T> Clone for DevPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevPtr<T> {}

impl<T> DevPtr<T> {
    /// The null pointer, for a kernel's optional array (`map ? map[i] : i`).
    pub fn null() -> Self {
        Self { addr: 0, _elem: PhantomData }
    }

    /// The address of element `i` after this one.
    pub fn offset(self, i: usize) -> Self {
        Self { addr: self.addr + (i * std::mem::size_of::<T>()) as u64, _elem: PhantomData }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl<T> Sealed for super::DevPtr<T> {}
}

/// A value a kernel takes as a parameter: `u32` or a typed device pointer.
/// Sealed, so that `usize`, `u64` or a host reference cannot be passed where
/// the kernel reads 4 or 8 bytes of something else.
pub trait KernelArg: sealed::Sealed {}
impl KernelArg for u32 {}
impl<T> KernelArg for DevPtr<T> {}

/// A launch's grid, block and dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Blocks in the (one-dimensional) grid; 0 launches nothing.
    pub grid: u32,
    /// Threads per block.
    pub block: u32,
    /// Bytes of dynamic shared memory per block.
    pub shared: u32,
}

impl Launch {
    /// `grid` blocks of `block` threads, no dynamic shared memory.
    pub fn new(grid: u32, block: u32) -> Self {
        Self { grid, block, shared: 0 }
    }

    /// Enough blocks of `block` threads for one thread per item of `n`.
    pub fn over(n: usize, block: u32) -> Self {
        Self::new(n.div_ceil(block as usize) as u32, block)
    }

    /// The same launch with `bytes` of dynamic shared memory per block.
    pub fn shared(self, bytes: u32) -> Self {
        Self { shared: bytes, ..self }
    }
}

/// A device's context and the loaded module. Contexts of the driver API may
/// be used from any thread once made current there; `enter` does that.
pub struct Gpu {
    /// The device, for its name and memory size.
    pub device: Device,
    /// Its ordinal, as the driver numbers devices.
    pub ordinal: usize,
    /// The owned context (None only while dropping).
    ctx: Option<Context>,
    /// The context as a handle that can be made current on any thread.
    unowned: UnownedContext,
    /// The cuzk module (None only while dropping, before the context goes).
    module: Option<Module>,
}

// SAFETY: a CUDA context and a module handle may be used from any thread;
// every entry point calls `enter` first so the context is current there.
unsafe impl Send for Gpu {}
unsafe impl Sync for Gpu {}

impl Gpu {
    pub fn new(ordinal: usize) -> Res<Self> {
        init()?;
        let device = Device::get_device(ordinal as u32).map_err(driver("cuDeviceGet"))?;
        let ctx = Context::create_and_push(ContextFlags::SCHED_AUTO | ContextFlags::MAP_HOST, device)
            .map_err(driver("cuCtxCreate"))?;
        let unowned = ctx.get_unowned();
        let module = Module::load_from_bytes(FATBIN).map_err(driver("loading the cuzk fatbin"));
        // Leave the context current nowhere in particular: callers `enter`.
        let _ = ContextStack::pop();
        let module = module?;
        Ok(Self { device, ordinal, ctx: Some(ctx), unowned, module: Some(module) })
    }

    /// The device's free and total memory as the driver reports them now
    /// (cuMemGetInfo; the context current on this thread).
    pub fn memory(&self) -> Res<(u64, u64)> {
        self.enter()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: two out-pointers to locals; the context is current.
        let code = unsafe { cuMemGetInfo_v2(&mut free, &mut total) };
        if code != 0 {
            return Err(DeviceError::engine("cuMemGetInfo", format!("CUDA error {code}")));
        }
        Ok((free as u64, total as u64))
    }

    /// Makes this device's context current on the calling thread.
    pub fn enter(&self) -> Res<()> {
        CurrentContext::set_current(&self.unowned).map_err(driver("cuCtxSetCurrent"))
    }

    /// Launches kernel `name`; `args` point at the argument values in the
    /// kernel's order. Only the launchers that `kernels!` declares call it,
    /// which is what keeps names, types and counts in one place.
    fn launch(&self, stream: &Stream, name: &str, l: Launch, args: &[*mut c_void]) -> Res<()> {
        if l.grid == 0 {
            return Ok(());
        }
        let cname = CString::new(name).expect("kernel names have no NUL");
        let module = self.module.as_ref().expect("module lives as long as the Gpu");
        let f = module.get_function(&cname).map_err(driver(&format!("finding kernel {name}")))?;
        unsafe { stream.launch(&f, l.grid, l.block, l.shared, args) }
            .map_err(driver(&format!("launching {name}")))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _ = self.enter();
        drop(self.module.take());
        drop(self.ctx.take());
    }
}

/// Declares each kernel of kernels/cuda/cuzk.cu once, with its parameters
/// in order and their types as the kernel declares them (`u32` for
/// `uint32_t`, `DevPtr<T>` for `T*`/`const T*`), as a method of [`Gpu`]
/// named as the kernel. A call with a wrong type or count does not compile.
macro_rules! kernels {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {
        impl Gpu {$(
            $(#[$doc])*
            #[allow(clippy::too_many_arguments)]
            pub fn $name(&self, stream: &Stream, launch: Launch, $($arg: $ty),*) -> Res<()> {
                fn arg<A: KernelArg>(a: &A) -> *mut c_void {
                    a as *const A as *mut c_void
                }
                self.launch(stream, stringify!($name), launch, &[$(arg(&$arg)),*])
            }
        )*}
    };
}

kernels! {
    /// Field-op test: out = op(a, b) (0 add, 1 sub, 2 mul, 3 sqr, 4 neg, 5 from_mont).
    fn test_fr_op(op: u32, a: DevPtr<DevFr>, b: DevPtr<DevFr>, out: DevPtr<DevFr>, n: u32);
    /// Field-op test over Fq (op 5: double).
    fn test_fq_op(op: u32, a: DevPtr<DevFq>, b: DevPtr<DevFq>, out: DevPtr<DevFq>, n: u32);
    /// Field-op test over Fq2 (op 5: double).
    fn test_fq2_op(op: u32, a: DevPtr<DevFq2>, b: DevPtr<DevFq2>, out: DevPtr<DevFq2>, n: u32);
    /// Curve test: out[3i..3i+3] = 2a, a + b (mixed), (a + b) + a.
    fn test_g1_ops(a: DevPtr<DevG1Affine>, b: DevPtr<DevG1Affine>, out: DevPtr<DevG1Jac>, n: u32);
    /// Curve test over G2.
    fn test_g2_ops(a: DevPtr<DevG2Affine>, b: DevPtr<DevG2Affine>, out: DevPtr<DevG2Jac>, n: u32);

    /// NTT stages p..p+s-1 in shared memory over 2^c columns (block
    /// max(2^(s+c-2), 1), 2^(s+c) * 32 bytes); `gather` reads bit-reversed
    /// positions; `scale_at` (NTT_SCALE_*) multiplies the loads or the
    /// stores of element i by lo[i mod 2^logl] * hi[i >> logl], or by lo[0]
    /// when hi is null.
    fn k_ntt_pass(input: DevPtr<DevFr>, out: DevPtr<DevFr>, tw: DevPtr<DevFr>, logn: u32, p: u32, s: u32, c: u32, gather: u32, lo: DevPtr<DevFr>, hi: DevPtr<DevFr>, logl: u32, scale_at: u32);
    /// a = (a * b - c) * z_inv[0], pointwise.
    fn k_h_pointwise(a: DevPtr<DevFr>, b: DevPtr<DevFr>, c: DevPtr<DevFr>, n: u32, z_inv: DevPtr<DevFr>);

    /// a, b, c of the domain's n rows from the compiled matrices and the
    /// assignment z, grid-stride (`nshared` coefficients copied to shared
    /// memory first); bad[0] lowered to each unsatisfied row.
    fn k_r1cs_eval(ends: DevPtr<DevRowEnds>, terms: DevPtr<DevTerm>, coeffs: DevPtr<DevFr>, nshared: u32, neg: u32, long_len: u32, z: DevPtr<DevFr>, m: u32, inputs: u32, n: u32, a: DevPtr<DevFr>, b: DevPtr<DevFr>, c: DevPtr<DevFr>, bad: DevPtr<u32>);
    /// The long rows' values, a warp each.
    fn k_r1cs_long(ends: DevPtr<DevRowEnds>, terms: DevPtr<DevTerm>, coeffs: DevPtr<DevFr>, neg: u32, z: DevPtr<DevFr>, m: u32, a: DevPtr<DevFr>, b: DevPtr<DevFr>, c: DevPtr<DevFr>, rows: DevPtr<u32>, count: u32);

    /// Montgomery scalars to plain integers (may alias).
    fn k_msm_from_mont(input: DevPtr<DevFr>, out: DevPtr<DevFr>, n: u32);
    /// out[i] = input[idx[i]].
    fn k_msm_gather(input: DevPtr<DevFr>, idx: DevPtr<u32>, out: DevPtr<DevFr>, n: u32);
    /// Bucket sizes of every window's signed digits.
    fn k_msm_histogram(scalars: DevPtr<DevFr>, n: u32, c: u32, nwin: u32, counts: DevPtr<u32>);
    /// Point indices (`map[i]`, or i where `map` is null) into their buckets' slots.
    fn k_msm_scatter(scalars: DevPtr<DevFr>, map: DevPtr<u32>, n: u32, c: u32, nwin: u32, cursor: DevPtr<u32>, list: DevPtr<u32>);
    /// counts[0] += scalars equal to 1, counts[1] += scalars neither 0 nor 1.
    fn k_msm_count_classes(scalars: DevPtr<DevFr>, n: u32, counts: DevPtr<u32>);
    /// The 0/1 split: indices of ones, other non-zero scalars and their
    /// indices compacted (blocks of MSM_SPLIT_ROUNDS * blockDim scalars).
    fn k_msm_split(scalars: DevPtr<DevFr>, n: u32, cursor: DevPtr<u32>, ones: DevPtr<u32>, others_idx: DevPtr<u32>, others: DevPtr<DevFr>);
    /// Scan phase 1: per-tile exclusive scan and tile totals (block SCAN_THREADS).
    fn k_scan_tiles(input: DevPtr<u32>, out: DevPtr<u32>, n: u32, sums: DevPtr<u32>);
    /// Scan phase 2: the tile totals, one block of SCAN_THREADS.
    fn k_scan_sums(sums: DevPtr<u32>, m: u32);
    /// Scan phase 3: each element plus its tile's offset.
    fn k_scan_add(out: DevPtr<u32>, n: u32, sums: DevPtr<u32>);
    /// Work items per bucket: ceil(cnt / k); need[0] set when some cnt > 1.
    fn k_msm_items(cnt: DevPtr<u32>, items: DevPtr<u32>, nb: u32, k: u32, need: DevPtr<u32>);
    /// G1 bucket level 0: items of k entries of the sorted point list.
    fn k_g1_level0(bases: DevPtr<DevG1Affine>, list: DevPtr<u32>, off: DevPtr<u32>, nb: u32, k: u32, items: u32, out: DevPtr<DevG1Jac>);
    /// G1: each bucket's partial sums after level 0 (heads folded in).
    fn k_g1_spans(pts: DevPtr<DevG1Jac>, off: DevPtr<u32>, nb: u32, k: u32, items: u32, off2: DevPtr<u32>, cnt2: DevPtr<u32>);
    /// G1 bucket level >= 1 over partial sums (a copy when `compact` and
    /// not need[0]).
    fn k_g1_level_n(input: DevPtr<DevG1Jac>, off: DevPtr<u32>, cnt: DevPtr<u32>, item_off: DevPtr<u32>, nb: u32, k: u32, compact: u32, need: DevPtr<u32>, out: DevPtr<DevG1Jac>);
    /// G1 weighted bucket sums per segment of MSM_SEG buckets.
    fn k_g1_segments(pts: DevPtr<DevG1Jac>, off: DevPtr<u32>, cnt: DevPtr<u32>, nbw: u32, nwin: u32, seg: DevPtr<DevG1Jac>);
    /// G1 window sums: block b sums points b * segs .. (b + 1) * segs (one
    /// block per window, or per slice of a window).
    fn k_g1_window_sum(seg: DevPtr<DevG1Jac>, segs: u32, out: DevPtr<DevG1Jac>);
    /// G2 bucket level 0.
    fn k_g2_level0(bases: DevPtr<DevG2Affine>, list: DevPtr<u32>, off: DevPtr<u32>, nb: u32, k: u32, items: u32, out: DevPtr<DevG2Jac>);
    /// G2 partial sums' spans.
    fn k_g2_spans(pts: DevPtr<DevG2Jac>, off: DevPtr<u32>, nb: u32, k: u32, items: u32, off2: DevPtr<u32>, cnt2: DevPtr<u32>);
    /// G2 bucket level >= 1 (as G1's).
    fn k_g2_level_n(input: DevPtr<DevG2Jac>, off: DevPtr<u32>, cnt: DevPtr<u32>, item_off: DevPtr<u32>, nb: u32, k: u32, compact: u32, need: DevPtr<u32>, out: DevPtr<DevG2Jac>);
    /// G2 segment sums.
    fn k_g2_segments(pts: DevPtr<DevG2Jac>, off: DevPtr<u32>, cnt: DevPtr<u32>, nbw: u32, nwin: u32, seg: DevPtr<DevG2Jac>);
    /// G2 window sums (as G1's).
    fn k_g2_window_sum(seg: DevPtr<DevG2Jac>, segs: u32, out: DevPtr<DevG2Jac>);

    /// Fixed-base products out[i] = sc[i] * G of n plain scalars from G's
    /// table of `nwin` windows of `c` bits (fixed_base.cuh).
    fn k_g1_fixed_base(sc: DevPtr<DevFr>, table: DevPtr<DevG1Affine>, c: u32, nwin: u32, n: u32, out: DevPtr<DevG1Jac>);
    /// n Jacobian points in affine form, `stride` threads, one inversion each.
    fn k_g1_to_affine(input: DevPtr<DevG1Jac>, out: DevPtr<DevG1Affine>, n: u32, stride: u32);
    /// G2's fixed-base products (as G1's).
    fn k_g2_fixed_base(sc: DevPtr<DevFr>, table: DevPtr<DevG2Affine>, c: u32, nwin: u32, n: u32, out: DevPtr<DevG2Jac>);
    /// G2's affine conversion (as G1's).
    fn k_g2_to_affine(input: DevPtr<DevG2Jac>, out: DevPtr<DevG2Affine>, n: u32, stride: u32);

    /// p[i] = v for i < n.
    fn k_fill_u32(p: DevPtr<u32>, n: u32, v: u32);
    /// dst[i] = src[i] for i < n.
    fn k_copy_u32(src: DevPtr<u32>, dst: DevPtr<u32>, n: u32);
}

/// Device memory as allocations hold it: u64 words, so that memory freed by
/// a buffer of one element type can serve another (every element type is
/// 4- or 8-byte aligned).
struct Words(DeviceBuffer<u64>);

// SAFETY: a device allocation is plain memory of the context, usable from
// any thread where the context is current (the engine enters it before
// every use); pooled allocations move between calls' threads.
unsafe impl Send for Words {}
unsafe impl Sync for Words {}

/// A workspace's idle allocations, reused on its stream.
type FreeList = Arc<Mutex<Vec<Words>>>;

/// Words that hold `len` elements of `T` (at least one, as the driver
/// allocates nothing for zero bytes).
fn words_for<T>(len: usize) -> usize {
    (len * std::mem::size_of::<T>()).div_ceil(8).max(1)
}

// The driver's memory report, which rustacuda does not wrap (libcuda is
// linked: build.rs).
extern "C" {
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> u32;
}

fn alloc_words(words: usize) -> Res<Words> {
    unsafe { DeviceBuffer::uninitialized(words) }
        .map(Words)
        .map_err(driver(&format!("cuMemAlloc of {} bytes", 8 * words)))
}

/// A device allocation of `len` elements of `T`: either owned (freed with
/// cuMemFree on drop, which waits for all queued work of the context: for
/// data that outlives a call, such as resident keys and tables) or taken
/// from a [`Workspace`] (back to its free list on drop, no driver call).
pub struct DBuf<T: DeviceCopy> {
    /// The memory (None only while dropping).
    mem: Option<Words>,
    /// Elements.
    len: usize,
    /// The workspace free list the memory returns to, when pooled.
    home: Option<FreeList>,
    /// The element type.
    _elem: PhantomData<T>,
}

// SAFETY: a device allocation is plain memory of the context; the engine
// makes the context current before touching or freeing it on any thread.
unsafe impl<T: DeviceCopy> Send for DBuf<T> {}
unsafe impl<T: DeviceCopy> Sync for DBuf<T> {}

impl<T: DeviceCopy> DBuf<T> {
    /// An owned allocation (cuMemAlloc now, cuMemFree on drop).
    pub fn new(len: usize) -> Res<Self> {
        Ok(Self::from_words(alloc_words(words_for::<T>(len))?, len, None))
    }
    fn from_words(mem: Words, len: usize, home: Option<FreeList>) -> Self {
        Self { mem: Some(mem), len, home, _elem: PhantomData }
    }
    fn mem(&self) -> &Words {
        self.mem.as_ref().expect("memory is held until drop")
    }
    pub fn bytes(&self) -> u64 {
        (self.len * std::mem::size_of::<T>()) as u64
    }
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Device address of the first element, as the kernels take it.
    pub fn ptr(&self) -> DevPtr<T> {
        DevPtr { addr: self.mem().0.as_ptr() as u64, _elem: PhantomData }
    }
    /// Device address of element `i`.
    pub fn ptr_at(&self, i: usize) -> DevPtr<T> {
        self.ptr().offset(i)
    }
    /// Copies the first `dst.len()` elements back (stream-ordered; synchronize
    /// the stream before reading `dst`).
    pub fn download(&self, dst: &mut [T], stream: &Stream) -> Res<()> {
        if dst.is_empty() {
            return Ok(());
        }
        assert!(dst.len() <= self.len, "a download within the buffer");
        // SAFETY: the allocation holds self.len elements of T (words_for) at
        // an 8-byte aligned address; the slice lives for this call only.
        let src: &DeviceSlice<T> =
            unsafe { DeviceSlice::from_raw_parts(DevicePointer::wrap(self.ptr().addr as *mut T), dst.len()) };
        unsafe { src.async_copy_to(dst, stream) }.map_err(driver("cuMemcpyDtoHAsync"))
    }
    /// Copies `src` (any host memory) to the first `src.len()` elements and
    /// waits for the copy (cuMemcpyHtoD): for data kept across calls.
    pub fn copy_from_host(&self, src: &[T]) -> Res<()> {
        self.copy_in(src, None)
    }
    /// Copies `src`, which must be pinned host memory (a `LockedBuffer`'s),
    /// to the first `src.len()` elements, stream-ordered and truly
    /// asynchronous: the caller keeps `src` alive and unchanged until the
    /// stream has passed the copy.
    pub fn copy_from_pinned(&self, src: &[T], stream: &Stream) -> Res<()> {
        self.copy_in(src, Some(stream))
    }
    /// `src` to the first `src.len()` elements: on `stream`, or waited for.
    fn copy_in(&self, src: &[T], stream: Option<&Stream>) -> Res<()> {
        if src.is_empty() {
            return Ok(());
        }
        assert!(src.len() <= self.len, "a copy within the buffer");
        // SAFETY: as in `download`; the device memory is this buffer's.
        let dst: &mut DeviceSlice<T> = unsafe {
            DeviceSlice::from_raw_parts_mut(DevicePointer::wrap(self.ptr().addr as *mut T), src.len())
        };
        match stream {
            // SAFETY: the caller keeps `src` (pinned) alive until the
            // stream has passed the copy.
            Some(stream) => unsafe { dst.async_copy_from(src, stream) }.map_err(driver("cuMemcpyHtoDAsync")),
            None => dst.copy_from(src).map_err(driver("cuMemcpyHtoD")),
        }
    }
}

impl<T: DeviceCopy> Drop for DBuf<T> {
    fn drop(&mut self) {
        let Some(mem) = self.mem.take() else { return };
        if let Some(Ok(mut free)) = self.home.as_ref().map(|h| h.lock()) {
            free.push(mem);
        }
        // Otherwise (owned, or a poisoned list) `mem` is freed here.
    }
}

/// What one call uses on the device, kept between calls: its stream, pinned
/// staging for uploads, and device allocations for reuse. A call leases a
/// workspace (`CudaEngine::lease`), which goes back to the engine's pool
/// only after its stream has finished; so every allocation in the free list
/// is either idle or last used by work queued on this same stream, and
/// handing it out again for later work on that stream is ordered after it.
/// Once warmed up, a call makes no cuMemAlloc and no cuMemFree (which
/// waits for all work of the context, so one worker's frees stalled the
/// other's).
pub struct Workspace {
    /// The call's stream, at the priority `rank` gives it.
    pub stream: Stream,
    /// The workspace's place in its engine's order of preference
    /// (`CudaEngine::lease_for`: rank 0 for urgent calls, normal ones from
    /// 1): the lower the rank, the higher the stream's priority, so of two
    /// calls on one device the lower-ranked one's kernels are scheduled
    /// first and it finishes first. Otherwise two calls that share the
    /// device fairly finish together and upload their next inputs
    /// together, with the device idle (docs/gpu.md, run 36).
    pub rank: usize,
    /// A second stream for copies that overlap the call's kernels: the
    /// chunks of a streamed key (`streamed.rs`), ordered against `stream`
    /// by events.
    pub copy: Stream,
    /// Pinned buffers every host-to-device copy goes through.
    staging: Mutex<Staging>,
    /// Idle allocations.
    free: FreeList,
    /// Whether buffers come from and return to the free list (false: each
    /// is allocated and freed, as in v1, for comparison).
    pool: bool,
    /// Device bytes the workspace has allocated and not freed (lent out or
    /// idle), and the most it ever held: a call's real footprint, which the
    /// engine's memory plan trusts over its estimate (device_plan.rs).
    held: AtomicU64,
    peak: AtomicU64,
}

// SAFETY: the stream and pinned buffers belong to the context, usable from
// any thread where it is current (the engine enters it before use).
unsafe impl Send for Workspace {}
unsafe impl Sync for Workspace {}

impl Workspace {
    /// A new workspace of the given rank (the context must be current).
    pub fn new(pool: bool, rank: usize) -> Res<Self> {
        // Lower numbers are greater priorities: rank 0 gets the greatest,
        // each further rank one step less, down to the least (the default).
        let range =
            CurrentContext::get_stream_priority_range().map_err(driver("cuCtxGetStreamPriorityRange"))?;
        let step = i32::try_from(rank).unwrap_or(i32::MAX);
        let priority = range.greatest.saturating_add(step).min(range.least);
        Ok(Self {
            stream: Stream::new(StreamFlags::NON_BLOCKING, Some(priority))
                .map_err(driver("cuStreamCreate"))?,
            rank,
            copy: Stream::new(StreamFlags::NON_BLOCKING, None).map_err(driver("cuStreamCreate"))?,
            staging: Mutex::new(Staging::new()?),
            free: Arc::new(Mutex::new(Vec::new())),
            pool,
            held: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        })
    }

    /// A buffer of `len` elements for work on this stream: the smallest idle
    /// allocation that holds it and is at most twice its size (so a small
    /// request does not keep a large allocation from a large one), else a
    /// new one. Its contents are undefined.
    pub fn buffer<T: DeviceCopy>(&self, len: usize) -> Res<DBuf<T>> {
        if !self.pool {
            return DBuf::new(len);
        }
        let words = words_for::<T>(len);
        let reused = {
            let mut free = self.free.lock().map_err(|e| DeviceError::engine("locking a workspace", e))?;
            let fit = free
                .iter()
                .enumerate()
                .filter(|(_, m)| m.0.len() >= words && m.0.len() / 2 <= words)
                .min_by_key(|(_, m)| m.0.len())
                .map(|(i, _)| i);
            fit.map(|i| free.swap_remove(i))
        };
        let mem = match reused {
            Some(m) => m,
            None => {
                let m = match alloc_words(words) {
                    Ok(m) => m,
                    // Out of device memory: return this workspace's idle
                    // allocations to the driver and try once more.
                    Err(_) => {
                        self.release()?;
                        alloc_words(words)?
                    }
                };
                let held = self.held.fetch_add(8 * words as u64, Ordering::Relaxed) + 8 * words as u64;
                self.peak.fetch_max(held, Ordering::Relaxed);
                m
            }
        };
        Ok(DBuf::from_words(mem, len, Some(self.free.clone())))
    }

    /// Frees the idle allocations (cuMemFree: waits for the context's work).
    pub fn release(&self) -> Res<()> {
        let idle = std::mem::take(
            &mut *self.free.lock().map_err(|e| DeviceError::engine("locking a workspace", e))?,
        );
        let bytes: u64 = idle.iter().map(|m| 8 * m.0.len() as u64).sum();
        drop(idle);
        self.held.fetch_sub(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// The most device memory this workspace has held at once (its pooled
    /// buffers, lent or idle).
    pub fn peak_bytes(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Bytes of device memory held idle.
    pub fn idle_bytes(&self) -> u64 {
        self.free.lock().map_or(0, |f| f.iter().map(|m| 8 * m.0.len() as u64).sum())
    }

    /// Copies `src` to `dst[..src.len()]` through the pinned staging buffers,
    /// stream-ordered; returns once the last chunk is queued (`src` may be
    /// dropped then).
    pub fn upload<T: DeviceElement>(&self, dst: &mut DBuf<T>, src: &[T]) -> Res<()> {
        self.upload_at(dst, 0, src)
    }

    /// As `upload`, to `dst[at..at + src.len()]`.
    pub fn upload_at<T: DeviceElement>(&self, dst: &mut DBuf<T>, at: usize, src: &[T]) -> Res<()> {
        self.upload_on(&self.stream, dst, at, src)
    }

    /// `src` to `dst[at..at + src.len()]` through the staging, on `stream`.
    fn upload_on<T: DeviceElement>(
        &self,
        stream: &Stream,
        dst: &mut DBuf<T>,
        at: usize,
        src: &[T],
    ) -> Res<()> {
        assert!(at + src.len() <= dst.len, "an upload within the buffer");
        let mut staging = self.staging.lock().map_err(|e| DeviceError::engine("locking a workspace", e))?;
        staging.upload(dst, at * T::WORDS, T::as_words(src), stream)
    }

    /// A new owned buffer holding `elements`, uploaded as by `upload`
    /// (synchronize before another stream reads it).
    pub fn upload_owned<T: DeviceElement>(&self, elements: &[T]) -> Res<DBuf<T>> {
        let mut buffer = DBuf::new(elements.len())?;
        self.upload(&mut buffer, elements)?;
        Ok(buffer)
    }

    /// A new owned buffer of `len` elements, filled range by range by
    /// `fill(start, out)` (elements `start..start + out.len()`; its error
    /// ends the upload) in host
    /// memory and uploaded as by `upload`, so that a large buffer (a 12.5 GB
    /// query of a key, 5.8 GB of compiled matrices' terms) never exists
    /// whole on the host in the device's layout.
    pub fn upload_filled<T: DeviceElement>(
        &self,
        len: usize,
        fill: impl Fn(usize, &mut [T]) -> Res<()>,
    ) -> Res<DBuf<T>> {
        let mut buf = DBuf::new(len)?;
        let mut host = vec![T::ZERO; UPLOAD_RANGE.min(len)];
        for start in (0..len).step_by(UPLOAD_RANGE) {
            let n = UPLOAD_RANGE.min(len - start);
            fill(start, &mut host[..n])?;
            self.upload_at(&mut buf, start, &host[..n])?;
        }
        Ok(buf)
    }

    /// As `upload`, queued on the copy stream (order it against the
    /// compute stream with `copy_after_compute` / `compute_after_copy`).
    pub fn upload_on_copy<T: DeviceElement>(&self, dst: &mut DBuf<T>, src: &[T]) -> Res<()> {
        self.upload_on(&self.copy, dst, 0, src)
    }

    /// Work queued next on the copy stream waits for the work queued so far
    /// on the compute stream.
    pub fn copy_after_compute(&self) -> Res<()> {
        self.copy
            .wait_event(recorded(&self.stream)?, StreamWaitEventFlags::DEFAULT)
            .map_err(driver("cuStreamWaitEvent"))
    }

    /// Work queued next on the compute stream waits for the work queued so
    /// far on the copy stream.
    pub fn compute_after_copy(&self) -> Res<()> {
        self.stream
            .wait_event(recorded(&self.copy)?, StreamWaitEventFlags::DEFAULT)
            .map_err(driver("cuStreamWaitEvent"))
    }

    /// Waits for the work queued on the stream.
    pub fn synchronize(&self, what: &str) -> Res<()> {
        self.stream.synchronize().map_err(driver(what))
    }
}

/// A new event recorded on `stream` now (a stream's wait consumes its
/// event in rustacuda, so orderings record fresh ones).
pub fn recorded(stream: &Stream) -> Res<Event> {
    let e = Event::new(EventFlags::DISABLE_TIMING).map_err(driver("cuEventCreate"))?;
    e.record(stream).map_err(driver("cuEventRecord"))?;
    Ok(e)
}

/// Two pinned host buffers for uploads: the host copies chunk i into one (in
/// parallel) while the DMA engine moves chunk i-1 from the other, so
/// pageable data reaches the device at close to pinned speed (about 55 GB/s
/// against 6 GB/s for a copy straight from pageable memory).
struct Staging {
    /// The two pinned buffers, STAGING_WORDS each.
    bufs: Vec<LockedBuffer<u64>>,
    /// Recorded after the copy out of the buffer of the same index.
    events: Vec<Event>,
    /// Which buffer the next chunk goes through.
    turn: usize,
}

/// Elements `Workspace::upload_filled` fills on the host at a time.
const UPLOAD_RANGE: usize = 1 << 20;

/// u64 words per staging buffer (32 MiB).
const STAGING_WORDS: usize = 1 << 22;

impl Staging {
    fn new() -> Res<Self> {
        let mut bufs = Vec::new();
        let mut events = Vec::new();
        for _ in 0..2 {
            bufs.push(
                unsafe { LockedBuffer::uninitialized(STAGING_WORDS) }.map_err(driver("cuMemAllocHost"))?,
            );
            events.push(Event::new(EventFlags::DISABLE_TIMING).map_err(driver("cuEventCreate"))?);
        }
        Ok(Self { bufs, events, turn: 0 })
    }

    /// Copies `src` words to `dst`'s memory from word `at` on, stream-ordered.
    fn upload<T: DeviceCopy>(
        &mut self,
        dst: &mut DBuf<T>,
        at: usize,
        src: &[u64],
        stream: &Stream,
    ) -> Res<()> {
        let mem = dst.mem.as_mut().expect("memory is held until drop");
        for (i, piece) in src.chunks(STAGING_WORDS).enumerate() {
            // Alternate across calls too, and always wait for the copy that
            // last read this buffer (an unrecorded event is complete).
            let k = self.turn;
            self.turn = 1 - self.turn;
            self.events[k].synchronize().map_err(driver("staging wait"))?;
            let buf = &mut self.bufs[k].as_mut_slice()[..piece.len()];
            buf.par_chunks_mut(1 << 15)
                .zip(piece.par_chunks(1 << 15))
                .for_each(|(d, s)| d.copy_from_slice(s));
            let off = at + i * STAGING_WORDS;
            let d: &mut DeviceSlice<u64> = &mut mem.0[off..off + piece.len()];
            unsafe { d.async_copy_from(&self.bufs[k].as_slice()[..piece.len()], stream) }
                .map_err(driver("cuMemcpyHtoDAsync"))?;
            self.events[k].record(stream).map_err(driver("cuEventRecord"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_step_by_their_element_size() {
        let p = DevPtr::<DevG2Jac> { addr: 4096, _elem: PhantomData };
        assert_eq!(p.offset(2).addr, 4096 + 2 * 8 * G2_JAC_WORDS as u64);
        let q = DevPtr::<u32> { addr: 4096, _elem: PhantomData };
        assert_eq!(q.offset(3).addr, 4096 + 12);
    }

    #[test]
    fn words_and_elements_view_the_same_memory() {
        let words: Vec<u64> = (0..2 * FQ_WORDS as u64).collect();
        let elems = DevFq::from_words(&words);
        assert_eq!(elems.len(), 2);
        assert_eq!(elems[1].0[0], FQ_WORDS as u64);
        assert_eq!(DevFq::as_words(elems), &words[..]);
    }

    #[test]
    #[should_panic(expected = "a whole number of elements")]
    fn a_partial_element_is_refused() {
        DevFr::from_words(&[1, 2, 3]);
    }

    #[test]
    fn launches_cover_every_item() {
        assert_eq!(Launch::over(1, 256).grid, 1);
        assert_eq!(Launch::over(256, 256).grid, 1);
        assert_eq!(Launch::over(257, 256).grid, 2);
        assert_eq!(Launch::over(0, 256).grid, 0);
        assert_eq!(Launch::new(4, 128).shared(64).shared, 64);
    }
}
