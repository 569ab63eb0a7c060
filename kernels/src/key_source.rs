//! A proving key whose large queries are not held decoded on the host: the
//! engines that read a key range by range (the CUDA engine, uploading it to
//! its device or to pinned memory) take the points from a [`KeySource`]
//! instead of the circuit's `ProvingKey`, whose queries then hold only their
//! first point (what the finalizer adds without a multiplication). A 32 GiB
//! PoRep key is 50 GB decoded: held on the host beside its copy on the
//! device, it was most of the daemon's peak (docs/benchmarks.md, the 32 GiB
//! end to end). The daemon's source is the `.params` file itself
//! (cuzk-filecoin's `params::QueryFile`), read again if the device ever
//! evicts the key.

use crate::{G1Affine, G2Affine, KernelError};

/// u64 words of a G1 point in the kernels' layout: x then y, six
/// little-endian words each in Montgomery form (arkworks' own
/// representation, so no arithmetic converts it); the identity all zeros.
pub const G1_WORDS: usize = 12;
/// u64 words of a G2 point in the kernels' layout: x.c0, x.c1, y.c0, y.c1.
pub const G2_WORDS: usize = 24;

/// Writes `p` in the kernels' layout into `out` (G1_WORDS words).
pub fn g1_words(p: &G1Affine, out: &mut [u64]) {
    out.fill(0);
    if !p.infinity {
        out[..6].copy_from_slice(&p.x.0 .0);
        out[6..12].copy_from_slice(&p.y.0 .0);
    }
}

/// Writes `p` in the kernels' layout into `out` (G2_WORDS words).
pub fn g2_words(p: &G2Affine, out: &mut [u64]) {
    out.fill(0);
    if !p.infinity {
        for (i, f) in [p.x.c0, p.x.c1, p.y.c0, p.y.c1].iter().enumerate() {
            out[i * 6..(i + 1) * 6].copy_from_slice(&f.0 .0);
        }
    }
}

/// A G1 query of a proving key (B's G2 query has its own accessors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    /// The A query.
    A,
    /// B's G1 query.
    B1,
    /// The L query (one point per witness variable).
    L,
    /// The H query.
    H,
}

impl Query {
    /// The G1 queries in the order keys hold them (and `Query as usize`).
    pub const ALL: [Query; 4] = [Query::A, Query::B1, Query::L, Query::H];
}

/// A key's queries, point by point as arkworks' `ProvingKey` would hold
/// them (the A and B queries' first point pairs with the constant one).
pub trait KeySource: Send + Sync {
    /// Points in G1 query `q`.
    fn len(&self, q: Query) -> usize;
    /// Points in B's G2 query (as many as B's G1 query).
    fn b2_len(&self) -> usize {
        self.len(Query::B1)
    }
    /// Writes points `start..start + out.len()` of G1 query `q`; fails when
    /// they cannot be read or are not points of the curve.
    fn g1(&self, q: Query, start: usize, out: &mut [G1Affine]) -> Result<(), KernelError>;
    /// Writes points `start..start + out.len()` of B's G2 query.
    fn g2(&self, start: usize, out: &mut [G2Affine]) -> Result<(), KernelError>;
    /// As `g1`, in the kernels' layout (`out.len() / G1_WORDS` points):
    /// what an engine uploads. A source that decodes points can write them
    /// there at once, without a vector of arkworks points in between.
    fn g1_words(&self, q: Query, start: usize, out: &mut [u64]) -> Result<(), KernelError> {
        let mut points = vec![G1Affine::default(); out.len() / G1_WORDS];
        self.g1(q, start, &mut points)?;
        points.iter().zip(out.chunks_exact_mut(G1_WORDS)).for_each(|(p, o)| g1_words(p, o));
        Ok(())
    }
    /// As `g2`, in the kernels' layout (`out.len() / G2_WORDS` points).
    fn g2_words(&self, start: usize, out: &mut [u64]) -> Result<(), KernelError> {
        let mut points = vec![G2Affine::default(); out.len() / G2_WORDS];
        self.g2(start, &mut points)?;
        points.iter().zip(out.chunks_exact_mut(G2_WORDS)).for_each(|(p, o)| g2_words(p, o));
        Ok(())
    }
}

/// Reads `len` points in ranges of `range` through `read` into one vector:
/// what a consumer that needs a whole query on the host (the finalizer's G2
/// MSM when the engine did not run it) does with a source.
pub fn read_all<P: Clone + Default>(
    len: usize,
    range: usize,
    read: impl Fn(usize, &mut [P]) -> Result<(), KernelError>,
) -> Result<Vec<P>, KernelError> {
    let mut out = vec![P::default(); len];
    for (i, chunk) in out.chunks_mut(range.max(1)).enumerate() {
        read(i * range.max(1), chunk)?;
    }
    Ok(out)
}
