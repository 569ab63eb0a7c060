//! Where a proving key's bases come from, in the kernels' layout. The engine
//! takes them range by range: into the staging buffers when the key is
//! uploaded to stay resident, into pinned host memory when it is streamed
//! (`streamed.rs`), so no query is ever converted whole (one query of a
//! 32 GiB PoRep key is 12.5 GB). The daemon's source is the circuit's
//! `ProvingKey`; cuzk-bench's 32 GiB-shaped key (its `TiledKey`, bench/src/gpu/
//! partitions.rs) is another, which never exists in arkworks' form: that
//! would take 50 GB of host memory.

use super::gpu::{DevG1Affine, DevG2Affine};
use super::msm::{MsmGroup, G1, G2};
use crate::{Bls12_381, G1Affine};
use ark_groth16::ProvingKey;

/// A G1 query of a proving key (B's G2 query has its own accessors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    A,
    B1,
    L,
    H,
}

impl Query {
    /// The G1 queries in the order keys hold them (and `Query as usize`).
    pub const ALL: [Query; 4] = [Query::A, Query::B1, Query::L, Query::H];
}

/// What identifies a key: its query lengths (A, B, L, H) and two of its
/// points. A circuit_id reused for a different key (a new setup) is noticed
/// and re-uploaded instead of proving with stale bases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub lens: [usize; 4],
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
    /// Writes points `start..start + out.len()` of G1 query `q`.
    fn g1(&self, q: Query, start: usize, out: &mut [DevG1Affine]);
    /// Writes points `start..start + out.len()` of B's G2 query.
    fn g2(&self, start: usize, out: &mut [DevG2Affine]);
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

impl KeyBases for ProvingKey<Bls12_381> {
    fn len(&self, q: Query) -> usize {
        g1_query(self, q).len()
    }
    fn b2_len(&self) -> usize {
        self.b_g2_query.len()
    }
    fn fingerprint(&self) -> Fingerprint {
        Fingerprint {
            lens: Query::ALL.map(|q| self.len(q)),
            points: G1::to_device(&[self.delta_g1, self.beta_g1]),
        }
    }
    fn g1(&self, q: Query, start: usize, out: &mut [DevG1Affine]) {
        G1::write_device(&g1_query(self, q)[start..start + out.len()], out);
    }
    fn g2(&self, start: usize, out: &mut [DevG2Affine]) {
        G2::write_device(&self.b_g2_query[start..start + out.len()], out);
    }
}
