//! Where a proving key's bases come from, in the kernels' layout. The engine
//! takes them range by range: into the staging buffers when the key is
//! uploaded to stay resident, into pinned host memory when it is streamed
//! (`streamed.rs`), so no query is ever converted whole (one query of a
//! 32 GiB PoRep key is 12.5 GB). The daemon's sources are the circuit's
//! `ProvingKey` and, for a key it does not hold decoded, the circuit's
//! [`KeySource`] (its parameter file: [`SourceBases`]); cuzk-bench's 32
//! GiB-shaped key (its `TiledKey`, bench/src/gpu/partitions.rs) is another.
//! Neither of the last two exists in arkworks' form: that would take 50 GB
//! of host memory.

use super::gpu::{DevG1Affine, DevG2Affine, DeviceElement, Res};
use super::launch_params::{G1_AFF_WORDS, G2_AFF_WORDS};
use super::msm::{MsmGroup, G1, G2};
pub use crate::key_source::Query;
use crate::key_source::{KeySource, G1_WORDS, G2_WORDS};
use crate::{Bls12_381, G1Affine};
use ark_groth16::ProvingKey;

/// What identifies a key: its query lengths (A, B, L, H) and two of its
/// points. A circuit_id reused for a different key (a new setup) is noticed
/// and re-uploaded instead of proving with stale bases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// Lengths of the A, B1, L and H queries.
    pub lens: [usize; 4],
    /// Two points of the key, as the kernels hold them.
    pub points: Vec<DevG1Affine>,
}

/// A proving key's bases, in the kernels' layout, by range.
pub trait KeyBases: Sync {
    /// Points in G1 query `q`.
    fn len(&self, q: Query) -> usize;
    /// Points in B's G2 query (as many as B's G1 query).
    fn b2_len(&self) -> usize {
        self.len(Query::B1)
    }
    /// Identifies the key.
    fn fingerprint(&self) -> Fingerprint;
    /// Writes points `start..start + out.len()` of G1 query `q`; fails when
    /// they cannot be read.
    fn g1(&self, q: Query, start: usize, out: &mut [DevG1Affine]) -> Res<()>;
    /// Writes points `start..start + out.len()` of B's G2 query.
    fn g2(&self, start: usize, out: &mut [DevG2Affine]) -> Res<()>;
    /// Bytes of the G1 queries and, when `with_b2`, B's G2 query.
    fn bytes(&self, with_b2: bool) -> u64 {
        let g1: usize = Query::ALL.iter().map(|&q| self.len(q)).sum();
        let g2 = if with_b2 { self.b2_len() } else { 0 };
        (g1 * std::mem::size_of::<DevG1Affine>() + g2 * std::mem::size_of::<DevG2Affine>()) as u64
    }
}

fn g1_query(pk: &ProvingKey<Bls12_381>, q: Query) -> &[G1Affine] {
    match q {
        Query::A => &pk.a_query,
        Query::B1 => &pk.b_g1_query,
        Query::L => &pk.l_query,
        Query::H => &pk.h_query,
    }
}

/// A key's identity from its lengths and the two points every key of a
/// setup has apart (delta and beta in G1).
fn fingerprint_of(lens: [usize; 4], pk: &ProvingKey<Bls12_381>) -> Fingerprint {
    Fingerprint { lens, points: G1::to_device(&[pk.delta_g1, pk.beta_g1]) }
}

impl KeyBases for ProvingKey<Bls12_381> {
    fn len(&self, q: Query) -> usize {
        g1_query(self, q).len()
    }
    fn b2_len(&self) -> usize {
        self.b_g2_query.len()
    }
    fn fingerprint(&self) -> Fingerprint {
        fingerprint_of(Query::ALL.map(|q| self.len(q)), self)
    }
    fn g1(&self, q: Query, start: usize, out: &mut [DevG1Affine]) -> Res<()> {
        G1::write_device(&g1_query(self, q)[start..start + out.len()], out);
        Ok(())
    }
    fn g2(&self, start: usize, out: &mut [DevG2Affine]) -> Res<()> {
        G2::write_device(&self.b_g2_query[start..start + out.len()], out);
        Ok(())
    }
}

/// A key whose queries stay in a [`KeySource`] (a parameter file), with the
/// points the finalizer needs on the host (`head`); each range is read and
/// written in the kernels' layout as the engine takes it, so the key never
/// exists decoded on the host.
pub struct SourceBases<'a> {
    /// The queries, read range by range.
    pub source: &'a dyn KeySource,
    /// The key's head: its verifying key and each query's first point.
    pub head: &'a ProvingKey<Bls12_381>,
}

impl KeyBases for SourceBases<'_> {
    fn len(&self, q: Query) -> usize {
        self.source.len(q)
    }
    fn b2_len(&self) -> usize {
        self.source.b2_len()
    }
    fn fingerprint(&self) -> Fingerprint {
        fingerprint_of(Query::ALL.map(|q| self.len(q)), self.head)
    }
    fn g1(&self, q: Query, start: usize, out: &mut [DevG1Affine]) -> Res<()> {
        self.source.g1_words(q, start, DevG1Affine::as_words_mut(out))
    }
    fn g2(&self, start: usize, out: &mut [DevG2Affine]) -> Res<()> {
        self.source.g2_words(start, DevG2Affine::as_words_mut(out))
    }
}

// The layout a source writes (`key_source::g1_words`) is the kernels'.
const _: () = assert!(G1_AFF_WORDS == G1_WORDS && G2_AFF_WORDS == G2_WORDS);
