//! Thin layer over rustacuda: one context and the cuzk module per device,
//! and every kernel's launcher declared once with its argument types.
//! Beside it, by role: the driver's entry and errors (`gpu/driver.rs`),
//! typed device memory (`gpu/memory.rs`) and the per-call workspaces
//! (`gpu/workspace.rs`), each re-exported here.

mod driver;
mod memory;
mod workspace;

use std::ffi::{c_void, CString};

use rustacuda::context::{Context, ContextFlags, ContextStack, CurrentContext, UnownedContext};
use rustacuda::device::Device;
use rustacuda::module::Module;
use rustacuda::stream::Stream;

pub use super::launch_params::*;
use crate::DeviceError;
pub use driver::{driver, init, Res};
pub use memory::{
    DBuf, DevFq, DevFq2, DevFr, DevG1Affine, DevG1Jac, DevG2Affine, DevG2Jac, DevPtr, DevRowEnds, DevTerm,
    DeviceElement, Pinned, Readable,
};
pub use workspace::{recorded, Workspace};

/// The fatbin build.rs compiled from kernels/cuda (sm_80, sm_90, compute_90 PTX).
pub static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cuzk.fatbin"));

// The driver's memory report, which rustacuda does not wrap (libcuda is
// linked: build.rs).
extern "C" {
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> u32;
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
    /// The device `ordinal`'s context, with the cuzk module loaded into it.
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
    fn k_ntt_pass(input: DevPtr<DevFr>, out: DevPtr<DevFr>, tw: DevPtr<DevFr>, inverse: u32, logn: u32, p: u32, s: u32, c: u32, gather: u32, lo: DevPtr<DevFr>, hi: DevPtr<DevFr>, logl: u32, scale_at: u32);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_cover_every_item() {
        assert_eq!(Launch::over(1, 256).grid, 1);
        assert_eq!(Launch::over(256, 256).grid, 1);
        assert_eq!(Launch::over(257, 256).grid, 2);
        assert_eq!(Launch::over(0, 256).grid, 0);
        assert_eq!(Launch::new(4, 128).shared(64).shared, 64);
    }
}
