//! The per-call workspaces: a call's stream at its priority, a copy stream
//! beside it, pinned staging for uploads, and the device buffers it keeps
//! for reuse.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use rustacuda::context::CurrentContext;
use rustacuda::event::{Event, EventFlags};
use rustacuda::memory::{AsyncCopyDestination, DeviceCopy, DeviceSlice, LockedBuffer};
use rustacuda::stream::{Stream, StreamFlags, StreamWaitEventFlags};

use super::driver::{driver, Res};
use super::memory::{alloc_words, words_for, DBuf, DeviceElement, FreeList};
use crate::DeviceError;

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
        assert!(at + src.len() <= dst.len(), "an upload within the buffer");
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
        let mem = dst.words_mut();
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
            let d: &mut DeviceSlice<u64> = &mut mem[off..off + piece.len()];
            unsafe { d.async_copy_from(&self.bufs[k].as_slice()[..piece.len()], stream) }
                .map_err(driver("cuMemcpyHtoDAsync"))?;
            self.events[k].record(stream).map_err(driver("cuEventRecord"))?;
        }
        Ok(())
    }
}
