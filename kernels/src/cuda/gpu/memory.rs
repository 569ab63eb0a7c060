//! Typed device memory: the element types the kernels read and write (each
//! a fixed number of u64 words), typed device pointers as the kernels take
//! them, device buffers, owned or pooled by a workspace, and pinned host
//! memory, which the device copies from at full speed or reads in place.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use rustacuda::memory::{
    AsyncCopyDestination, CopyDestination, DeviceBuffer, DeviceCopy, DevicePointer, DeviceSlice, LockedBuffer,
};
use rustacuda::stream::Stream;

use super::driver::{driver, Res};
use crate::cuda::launch_params::*;

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

/// Device memory as allocations hold it: u64 words, so that memory freed by
/// a buffer of one element type can serve another (every element type is
/// 4- or 8-byte aligned).
pub(super) struct Words(pub(super) DeviceBuffer<u64>);

// SAFETY: a device allocation is plain memory of the context, usable from
// any thread where the context is current (the engine enters it before
// every use); pooled allocations move between calls' threads.
unsafe impl Send for Words {}
unsafe impl Sync for Words {}

/// A workspace's idle allocations, reused on its stream.
pub(super) type FreeList = Arc<Mutex<Vec<Words>>>;

/// Words that hold `len` elements of `T` (at least one, as the driver
/// allocates nothing for zero bytes).
pub(super) fn words_for<T>(len: usize) -> usize {
    (len * std::mem::size_of::<T>()).div_ceil(8).max(1)
}

pub(super) fn alloc_words(words: usize) -> Res<Words> {
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
    pub(super) fn from_words(mem: Words, len: usize, home: Option<FreeList>) -> Self {
        Self { mem: Some(mem), len, home, _elem: PhantomData }
    }
    fn mem(&self) -> &Words {
        self.mem.as_ref().expect("memory is held until drop")
    }
    /// The allocation's words, for a workspace's staged upload.
    pub(super) fn words_mut(&mut self) -> &mut DeviceBuffer<u64> {
        &mut self.mem.as_mut().expect("memory is held until drop").0
    }
    /// Bytes of the elements (the allocation may be larger).
    pub fn bytes(&self) -> u64 {
        (self.len * std::mem::size_of::<T>()) as u64
    }
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer holds no element.
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

// The device address of mapped pinned host memory, which rustacuda does
// not wrap (libcuda is linked: build.rs).
extern "C" {
    fn cuMemHostGetDevicePointer_v2(dptr: *mut u64, host: *mut std::ffi::c_void, flags: u32) -> u32;
}

/// Host elements written range by range into pinned host memory at a time
/// (bounds a fill's working set).
const FILL_RANGE: usize = 1 << 22;

/// Pinned host memory holding `len` elements (none allocated when empty:
/// the driver refuses zero bytes): the source of truly asynchronous copies
/// (a streamed key's chunks), and memory the kernels can read in place
/// across PCIe (`device_ptr`: the engine's contexts map pinned memory).
pub struct Pinned<T: DeviceCopy> {
    /// The allocation (cuMemAllocHost), None when empty.
    buf: Option<LockedBuffer<T>>,
}

// SAFETY: pinned host memory is plain memory, readable from any thread; a
// `Pinned` is written only while it is made, then only read.
unsafe impl<T: DeviceCopy> Send for Pinned<T> {}
unsafe impl<T: DeviceCopy> Sync for Pinned<T> {}

impl<T: DeviceCopy> Pinned<T> {
    /// Allocates (cuMemAllocHost) and fills range by range: `fill(start,
    /// out)` writes elements start.. of `out`'s length.
    pub fn new(len: usize, fill: impl Fn(usize, &mut [T]) -> Res<()>) -> Res<Self> {
        if len == 0 {
            return Ok(Self { buf: None });
        }
        // SAFETY: every element is written by `fill` below before any read.
        let mut buf = unsafe { LockedBuffer::<T>::uninitialized(len) }
            .map_err(driver(&format!("cuMemAllocHost of {len} elements")))?;
        for (i, range) in buf.as_mut_slice().chunks_mut(FILL_RANGE).enumerate() {
            fill(i * FILL_RANGE, range)?;
        }
        Ok(Self { buf: Some(buf) })
    }

    /// The elements, on the host.
    pub fn as_slice(&self) -> &[T] {
        self.buf.as_ref().map_or(&[], |b| b.as_slice())
    }

    /// Bytes of the elements.
    pub fn bytes(&self) -> u64 {
        std::mem::size_of_val(self.as_slice()) as u64
    }

    /// The address at which a kernel of the current context reads the
    /// elements in place, each access crossing PCIe (the null pointer when
    /// empty).
    pub fn device_ptr(&self) -> Res<DevPtr<T>> {
        let Some(buf) = self.buf.as_ref() else { return Ok(DevPtr::null()) };
        let mut addr = 0u64;
        // SAFETY: an out-pointer to a local and a pinned allocation that
        // lives as long as `self`; the engine's context is current.
        let code =
            unsafe { cuMemHostGetDevicePointer_v2(&mut addr, buf.as_ptr() as *mut std::ffi::c_void, 0) };
        if code != 0 {
            return Err(crate::DeviceError::engine(
                "cuMemHostGetDevicePointer",
                format!("CUDA error {code}"),
            ));
        }
        Ok(DevPtr { addr, _elem: PhantomData })
    }
}

/// Elements a kernel reads, where the device-memory plan put them: in
/// device memory, or in pinned host memory read in place across PCIe (on
/// cards too small to hold them beside a call, issue 37).
pub enum Readable<T: DeviceCopy> {
    /// In device memory.
    Device(DBuf<T>),
    /// In pinned host memory, at the device address it is mapped at.
    Host(Pinned<T>, DevPtr<T>),
}

impl<T: DeviceCopy> Readable<T> {
    /// The elements' address as the kernels take it.
    pub fn ptr(&self) -> DevPtr<T> {
        match self {
            Readable::Device(b) => b.ptr(),
            Readable::Host(_, p) => *p,
        }
    }
    /// Device bytes held.
    pub fn device_bytes(&self) -> u64 {
        match self {
            Readable::Device(b) => b.bytes(),
            Readable::Host(..) => 0,
        }
    }
    /// Pinned host bytes held.
    pub fn host_bytes(&self) -> u64 {
        match self {
            Readable::Device(_) => 0,
            Readable::Host(p, _) => p.bytes(),
        }
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
}
