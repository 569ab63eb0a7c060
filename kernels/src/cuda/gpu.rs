//! Thin layer over rustacuda: one context and the cuzk module per device,
//! device buffers, kernel launches, and the error mapping to
//! `KernelError::Device`.

use std::ffi::{c_void, CString};

use rayon::prelude::*;
use rustacuda::context::{Context, ContextFlags, ContextStack, CurrentContext, UnownedContext};
use rustacuda::device::Device;
use rustacuda::error::CudaError;
use rustacuda::event::{Event, EventFlags};
use rustacuda::memory::{
    AsyncCopyDestination, DeviceBuffer, DeviceCopy, DeviceSlice, LockedBuffer,
};
use rustacuda::module::Module;
use rustacuda::stream::{Stream, StreamFlags};

use crate::KernelError;

/// The fatbin build.rs compiled from kernels/cuda (sm_80, sm_90, compute_90 PTX).
pub static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cuzk.fatbin"));

pub type Res<T> = Result<T, KernelError>;

pub fn dev_err(what: &str) -> impl Fn(CudaError) -> KernelError + '_ {
    move |e| KernelError::Device(format!("{what}: {e:?}"))
}

static INIT: std::sync::OnceLock<Result<(), CudaError>> = std::sync::OnceLock::new();

/// cuInit, once per process.
pub fn init() -> Res<()> {
    match INIT.get_or_init(|| rustacuda::init(rustacuda::CudaFlags::empty())) {
        Ok(()) => Ok(()),
        Err(e) => Err(KernelError::Device(format!(
            "CUDA driver init failed: {e:?}"
        ))),
    }
}

/// A device's context and the loaded module. Contexts of the driver API may
/// be used from any thread once made current there; `enter` does that.
pub struct Gpu {
    pub device: Device,
    pub ordinal: usize,
    ctx: Option<Context>,
    unowned: UnownedContext,
    module: Option<Module>,
}

// SAFETY: a CUDA context and a module handle may be used from any thread;
// every entry point calls `enter` first so the context is current there.
unsafe impl Send for Gpu {}
unsafe impl Sync for Gpu {}

impl Gpu {
    pub fn new(ordinal: usize) -> Res<Self> {
        init()?;
        let device = Device::get_device(ordinal as u32).map_err(dev_err("cuDeviceGet"))?;
        let ctx =
            Context::create_and_push(ContextFlags::SCHED_AUTO | ContextFlags::MAP_HOST, device)
                .map_err(dev_err("cuCtxCreate"))?;
        let unowned = ctx.get_unowned();
        let module = Module::load_from_bytes(FATBIN).map_err(dev_err("loading the cuzk fatbin"));
        // Leave the context current nowhere in particular: callers `enter`.
        let _ = ContextStack::pop();
        let module = module?;
        Ok(Self {
            device,
            ordinal,
            ctx: Some(ctx),
            unowned,
            module: Some(module),
        })
    }

    /// Makes this device's context current on the calling thread.
    pub fn enter(&self) -> Res<()> {
        CurrentContext::set_current(&self.unowned).map_err(dev_err("cuCtxSetCurrent"))
    }

    pub fn stream(&self) -> Res<Stream> {
        Stream::new(StreamFlags::NON_BLOCKING, None).map_err(dev_err("cuStreamCreate"))
    }

    /// Launches `name` with the given grid and block; `args` are pointers to
    /// the argument values (see `args!`).
    pub fn launch(
        &self,
        stream: &Stream,
        name: &str,
        grid: u32,
        block: u32,
        shared: u32,
        args: &[*mut c_void],
    ) -> Res<()> {
        if grid == 0 {
            return Ok(());
        }
        let cname = CString::new(name).expect("kernel names have no NUL");
        let module = self
            .module
            .as_ref()
            .expect("module lives as long as the Gpu");
        let f = module
            .get_function(&cname)
            .map_err(|e| KernelError::Device(format!("kernel {name} not in module: {e:?}")))?;
        unsafe { stream.launch(&f, grid, block, shared, args) }
            .map_err(|e| KernelError::Device(format!("launching {name}: {e:?}")))
    }

    pub fn mem_info(&self) -> Res<(usize, usize)> {
        self.enter()?;
        let mut free = 0usize;
        let mut total = 0usize;
        let r = unsafe { cuda_driver_sys::cuMemGetInfo_v2(&mut free, &mut total) };
        if r != cuda_driver_sys::cudaError_enum::CUDA_SUCCESS {
            return Err(KernelError::Device(format!("cuMemGetInfo: {r:?}")));
        }
        Ok((free, total))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _ = self.enter();
        drop(self.module.take());
        drop(self.ctx.take());
    }
}

/// Pointers to kernel argument values, in order.
#[macro_export]
macro_rules! cuda_args {
    ($($a:expr),* $(,)?) => {
        [$(&$a as *const _ as *mut ::std::ffi::c_void),*]
    };
}

/// A device allocation of `len` elements of `T`.
pub struct DBuf<T: DeviceCopy> {
    pub buf: DeviceBuffer<T>,
}

// SAFETY: a device allocation is plain memory of the context; the engine
// makes the context current before touching or freeing it on any thread.
unsafe impl<T: DeviceCopy> Send for DBuf<T> {}
unsafe impl<T: DeviceCopy> Sync for DBuf<T> {}

impl<T: DeviceCopy> DBuf<T> {
    pub fn new(len: usize) -> Res<Self> {
        let len = len.max(1);
        let buf = unsafe { DeviceBuffer::uninitialized(len) }.map_err(|e| {
            KernelError::Device(format!(
                "cuMemAlloc of {} bytes: {e:?}",
                len * std::mem::size_of::<T>()
            ))
        })?;
        Ok(Self { buf })
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn bytes(&self) -> u64 {
        (self.buf.len() * std::mem::size_of::<T>()) as u64
    }
    /// Device address of element `i` (as the kernels take it).
    pub fn ptr(&self) -> u64 {
        self.buf.as_ptr() as u64
    }
    pub fn ptr_at(&self, i: usize) -> u64 {
        self.ptr() + (i * std::mem::size_of::<T>()) as u64
    }
    /// Copies `src` to the start of the buffer (stream-ordered).
    pub fn upload(&mut self, src: &[T], stream: &Stream) -> Res<()> {
        if src.is_empty() {
            return Ok(());
        }
        let dst: &mut DeviceSlice<T> = &mut self.buf[..src.len()];
        unsafe { dst.async_copy_from(src, stream) }.map_err(dev_err("cuMemcpyHtoDAsync"))
    }
    /// Copies the first `dst.len()` elements back (stream-ordered; synchronize
    /// the stream before reading `dst`).
    pub fn download(&self, dst: &mut [T], stream: &Stream) -> Res<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let src: &DeviceSlice<T> = &self.buf[..dst.len()];
        unsafe { src.async_copy_to(dst, stream) }.map_err(dev_err("cuMemcpyDtoHAsync"))
    }
}

pub fn blocks(n: usize, threads: u32) -> u32 {
    n.div_ceil(threads as usize) as u32
}

/// Two pinned host buffers for uploads: the host copies chunk i into one
/// (in parallel) while the DMA engine moves chunk i-1 from the other, so
/// pageable data reaches the device at close to pinned speed.
pub struct Staging {
    bufs: Vec<LockedBuffer<u64>>,
    events: Vec<Event>,
    turn: usize,
}

// SAFETY: pinned host memory and events belong to the context, usable from
// any thread where it is current (the engine enters it before use).
unsafe impl Send for Staging {}

pub const STAGING_WORDS: usize = 4 << 20; // 32 MiB per buffer

impl Staging {
    pub fn new() -> Res<Self> {
        let mut bufs = Vec::new();
        let mut events = Vec::new();
        for _ in 0..2 {
            bufs.push(
                unsafe { LockedBuffer::uninitialized(STAGING_WORDS) }
                    .map_err(dev_err("cuMemAllocHost"))?,
            );
            events.push(Event::new(EventFlags::DISABLE_TIMING).map_err(dev_err("cuEventCreate"))?);
        }
        Ok(Self {
            bufs,
            events,
            turn: 0,
        })
    }

    /// Copies `src` to `dst[..src.len()]` through the pinned buffers,
    /// stream-ordered; returns once the last chunk is queued (the buffers
    /// must not be reused before `finish`).
    pub fn upload(&mut self, dst: &mut DBuf<u64>, src: &[u64], stream: &Stream) -> Res<()> {
        for (i, piece) in src.chunks(STAGING_WORDS).enumerate() {
            // Alternate across calls too, and always wait for the copy that
            // last read this buffer (an unrecorded event is complete).
            let k = self.turn;
            self.turn = 1 - self.turn;
            self.events[k]
                .synchronize()
                .map_err(dev_err("staging wait"))?;
            let buf = &mut self.bufs[k].as_mut_slice()[..piece.len()];
            buf.par_chunks_mut(1 << 15)
                .zip(piece.par_chunks(1 << 15))
                .for_each(|(d, s)| d.copy_from_slice(s));
            let off = i * STAGING_WORDS;
            let d: &mut DeviceSlice<u64> = &mut dst.buf[off..off + piece.len()];
            unsafe { d.async_copy_from(&self.bufs[k].as_slice()[..piece.len()], stream) }
                .map_err(dev_err("cuMemcpyHtoDAsync"))?;
            self.events[k]
                .record(stream)
                .map_err(dev_err("cuEventRecord"))?;
        }
        Ok(())
    }

    /// Waits until both buffers are free again.
    pub fn finish(&self) -> Res<()> {
        for e in &self.events {
            e.synchronize().map_err(dev_err("staging wait"))?;
        }
        Ok(())
    }
}
