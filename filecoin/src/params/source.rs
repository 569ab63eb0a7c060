//! A `.params` file as a key source: the engines that read keys by range
//! (the CUDA engine) take the points straight from the file, decoded range
//! by range as they upload them, so that the daemon never holds a large key
//! decoded on the host (a 32 GiB PoRep key is 47 GB on disk, 50 GB decoded).
//! The file is read with positioned reads, not through the mapping: pages of
//! a mapping a process touched count in its resident set until they are
//! reclaimed, which would put the key back in the daemon's peak.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use ark_bls12_381::{G1Affine, G2Affine};
use ark_ec::short_weierstrass::{Affine, SWCurveConfig};
use cuzk_kernels::key_source::{KeySource, Query};
use cuzk_kernels::KernelError;
use rayon::prelude::*;

use super::codec::{decode_into, MappedParams, Section, SECTIONS};
use crate::Error;

/// Bytes one positioned read takes; the reads of a range run in parallel.
const READ_BYTES: usize = 8 << 20;

/// The queries of one `.params` file, in the layout the prover pairs them
/// with: B's queries, when ONE is not B-dense, start with the identity that
/// bellperson does not store (`b_lead`).
pub struct QueryFile {
    /// For errors.
    path: PathBuf,
    /// Open for positioned reads, shared by the parallel readers.
    file: File,
    /// h, l, a, b_g1, b_g2 in file order (`MappedParams`'s).
    sections: [Section; 5],
    /// B's queries start with an identity point the file does not hold.
    b_lead: bool,
}

impl QueryFile {
    /// The queries of the file `params` mapped, left in it and read by
    /// range (`b_lead`: B's queries start with the identity bellperson does
    /// not store, as when ONE is not B-dense).
    pub fn open(params: &MappedParams, b_lead: bool) -> Result<Self, Error> {
        let path = params.path();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(Self { path: path.to_path_buf(), file, sections: params.sections(), b_lead })
    }

    /// The file section of G1 query `q` (`SECTIONS`' order).
    fn section(q: Query) -> usize {
        match q {
            Query::H => 0,
            Query::L => 1,
            Query::A => 2,
            Query::B1 => 3,
        }
    }

    /// Whether section `s`'s query starts with the identity the file lacks.
    fn lead(&self, s: usize) -> usize {
        usize::from(self.b_lead && s >= 3)
    }

    /// Points `start..start + out.len()` of section `s`, decoded.
    fn read<C: SWCurveConfig>(&self, s: usize, start: usize, out: &mut [Affine<C>]) -> Result<(), KernelError> {
        let (name, size) = SECTIONS[s];
        let lead = self.lead(s);
        let fail = |reason: String| KernelError::Key(format!("{}: {name}: {reason}", self.path.display()));
        if start + out.len() > self.sections[s].count + lead {
            return Err(fail(format!("points {start}..{} of {}", start + out.len(), self.sections[s].count + lead)));
        }
        // The identity bellperson leaves out comes first; the file's points follow.
        let out = match (start, lead) {
            (0, 1) if !out.is_empty() => {
                out[0] = Affine::<C>::identity();
                &mut out[1..]
            }
            _ => out,
        };
        let first = start.saturating_sub(lead);
        let offset = self.sections[s].offset + first * size;
        let mut bytes = vec![0u8; out.len() * size];
        bytes
            .par_chunks_mut(READ_BYTES)
            .enumerate()
            .try_for_each(|(i, chunk)| self.file.read_exact_at(chunk, (offset + i * READ_BYTES) as u64))
            .map_err(|e| fail(e.to_string()))?;
        decode_into(&bytes, size, first, out).map_err(fail)
    }
}

impl KeySource for QueryFile {
    fn len(&self, q: Query) -> usize {
        let s = Self::section(q);
        self.sections[s].count + self.lead(s)
    }
    fn b2_len(&self) -> usize {
        self.sections[4].count + self.lead(4)
    }
    fn g1(&self, q: Query, start: usize, out: &mut [G1Affine]) -> Result<(), KernelError> {
        self.read(Self::section(q), start, out)
    }
    fn g2(&self, start: usize, out: &mut [G2Affine]) -> Result<(), KernelError> {
        self.read(4, start, out)
    }
}
