//! Host side of the constraint evaluation (kernels in cuda/r1cs.cuh): a
//! circuit's compiled matrices in `r1cs::Flattened`'s layout, kept beside
//! its key (cache.rs) where the device-memory plan puts them (on the
//! device, uploaded once per circuit, or in pinned host memory that the
//! kernels read across PCIe on cards too small for them), and the launches
//! that turn a partition's assignment, already on the device, into its a, b
//! and c there, so that a, b and c never exist on the host and only the
//! assignment crosses PCIe (4.2 GB of 17.1 GB at 32 GiB PoRep).

use rayon::prelude::*;

use super::gpu::{
    DBuf, DevFr, DevPtr, DevRowEnds, DevTerm, Gpu, Launch, Pinned, Readable, Res, Workspace, R1CS_THREADS,
};
use super::msm::fr_dev;
use crate::device_plan::Place;
use crate::r1cs::{Flattened, Matrices};

/// Most blocks of the evaluation: each block copies the shared coefficients
/// once and strides over the rows, 2^27 rows in 256 rows per thread.
const MAX_BLOCKS: usize = 2048;
/// Coefficients a block keeps in shared memory (8 KiB): one, minus one and
/// the powers of two a bit packing uses; a larger table's others are read
/// through the cache.
const SHARED_COEFFS: usize = 256;
/// Rows of more terms are summed by a warp each: a thread's row holds its
/// warp as long as its longest row, and rows average about two terms.
pub const LONG_ROW: u32 = 32;

/// A circuit's compiled matrices as the evaluation reads them: the row
/// ends and terms (all but a few kilobytes) where the plan put them, the
/// coefficients and the long rows on the device.
pub struct DeviceMatrices {
    /// Row ends, two to a word (`Flattened::end_pair`).
    ends: Readable<DevRowEnds>,
    /// The terms (`Flattened::term`).
    terms: Readable<DevTerm>,
    /// The coefficient table, Montgomery form.
    coeffs: DBuf<DevFr>,
    /// The rows a warp sums (`Flattened::long_rows`).
    long_rows: DBuf<u32>,
    /// The length above which a row is in `long_rows`.
    long_len: u32,
    /// Index of minus one in `coeffs`, or u32::MAX.
    minus_one: u32,
    /// Rows per matrix.
    rows: usize,
    /// Inputs: the input constraints (A = x_i) after the last row.
    inputs: usize,
    /// Identifies the matrices (`Matrices::fingerprint`).
    pub fingerprint: u64,
    /// Where the ends and terms lie.
    pub place: Place,
    /// Device bytes held, for the resident budget.
    pub bytes: u64,
    /// Pinned host bytes held (the ends and terms on the host).
    pub pinned: u64,
}

impl DeviceMatrices {
    /// The layout, its ends and terms copied to the device through `ws`
    /// or written into pinned host memory, as `place` says (waits for the
    /// copies: other calls' streams read them).
    pub fn upload(flat: &Flattened, fingerprint: u64, ws: &Workspace, place: Place) -> Res<Self> {
        let fill_ends = |start, out: &mut [DevRowEnds]| {
            (out.par_iter_mut().enumerate()).for_each(|(j, o)| *o = DevRowEnds([flat.end_pair(start + j)]));
            Ok(())
        };
        let fill_terms = |start, out: &mut [DevTerm]| {
            (out.par_iter_mut().enumerate()).for_each(|(j, o)| *o = DevTerm([flat.term(start + j)]));
            Ok(())
        };
        let (ends, terms) = match place {
            Place::Device => (
                Readable::Device(ws.upload_filled(flat.end_words(), fill_ends)?),
                Readable::Device(ws.upload_filled(flat.terms(), fill_terms)?),
            ),
            Place::Host => (mapped(flat.end_words(), fill_ends)?, mapped(flat.terms(), fill_terms)?),
        };
        let coeffs = ws.upload_owned(fr_dev(flat.coeffs()))?;
        let long_rows = DBuf::new(flat.long_rows().len())?;
        long_rows.copy_from_host(flat.long_rows())?;
        ws.synchronize("uploading compiled matrices")?;
        let pinned = ends.host_bytes() + terms.host_bytes();
        let bytes = ends.device_bytes() + terms.device_bytes() + coeffs.bytes() + long_rows.bytes();
        Ok(Self {
            ends,
            terms,
            coeffs,
            long_rows,
            long_len: flat.long_len(),
            minus_one: flat.minus_one(),
            rows: flat.rows(),
            inputs: flat.inputs(),
            fingerprint,
            place,
            bytes,
            pinned,
        })
    }

    /// Queues on the workspace's stream a, b and c (n elements each, the
    /// domain) of the assignment `z` (Montgomery form, as uploaded, the
    /// matrices' variables): every row, the input constraints, zeros after; `bad` (one u32) ends at the first unsatisfied row, u32::MAX
    /// when every row holds. The caller has checked the sizes
    /// (`Matrices::check_assignment`).
    pub fn evaluate(
        &self,
        gpu: &Gpu,
        ws: &Workspace,
        z: DevPtr<DevFr>,
        [a, b, c]: [DevPtr<DevFr>; 3],
        n: usize,
        bad: DevPtr<u32>,
    ) -> Res<()> {
        let stream = &ws.stream;
        let (m, neg) = (self.rows as u32, self.minus_one);
        gpu.k_fill_u32(stream, Launch::new(1, 32), bad, 1, u32::MAX)?;
        let long = self.long_rows.len();
        let (ends, terms, coeffs) = (self.ends.ptr(), self.terms.ptr(), self.coeffs.ptr());
        let rows = self.long_rows.ptr();
        let warps = Launch::over(32 * long, R1CS_THREADS);
        gpu.k_r1cs_long(stream, warps, ends, terms, coeffs, neg, z, m, a, b, c, rows, long as u32)?;
        let shared = self.coeffs.len().min(SHARED_COEFFS);
        let grid = n.div_ceil(R1CS_THREADS as usize).clamp(1, MAX_BLOCKS) as u32;
        let bytes = shared * std::mem::size_of::<DevFr>();
        let l = Launch::new(grid, R1CS_THREADS).shared(bytes as u32);
        gpu.k_r1cs_eval(
            stream,
            l,
            ends,
            terms,
            coeffs,
            shared as u32,
            neg,
            self.long_len,
            z,
            m,
            self.inputs as u32,
            n as u32,
            a,
            b,
            c,
            bad,
        )
    }
}

/// `len` elements written by `fill` into pinned host memory, at the
/// address the kernels read them from.
fn mapped<T: rustacuda::memory::DeviceCopy>(
    len: usize,
    fill: impl Fn(usize, &mut [T]) -> Res<()>,
) -> Res<Readable<T>> {
    let host = Pinned::new(len, fill)?;
    let ptr = host.device_ptr()?;
    Ok(Readable::Host(host, ptr))
}

/// Bytes the evaluation moves at domain n, the model its time is predicted
/// from (docs/gpu.md): per term 8 bytes and its gathered 32-byte value (an
/// upper bound: neighbouring terms often share a value in the cache), per
/// row of each matrix a 4-byte end, and the 3n elements of a, b and c
/// written.
pub fn traffic(matrices: &Matrices, n: usize) -> u64 {
    let terms: usize = (0..3).map(|k| matrices.num_terms(k)).sum();
    (40 * terms + 12 * matrices.num_constraints() + 96 * n) as u64
}
