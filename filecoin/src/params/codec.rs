//! Byte layout of `.params` and `.vk` files: reading them memory-mapped into
//! arkworks points (decoded in parallel, section by section, so a caller can
//! convert one query at a time), and writing them, streamed, in the same layout.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use ark_bls12_381::{G1Affine, G2Affine};
use ark_ec::short_weierstrass::{Affine, SWCurveConfig};
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize, Compress, Validate};
use memmap2::Mmap;
use rayon::prelude::*;

use super::{Parameters, VerifyingKey};
use crate::Error;

const G1_BYTES: usize = 96;
const G2_BYTES: usize = 192;
/// The five queries after the verifying key, in file order.
pub(super) const SECTIONS: [(&str, usize); 5] =
    [("h", G1_BYTES), ("l", G1_BYTES), ("a", G1_BYTES), ("b_g1", G1_BYTES), ("b_g2", G2_BYTES)];

/// How many points each query of a parameter file holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryCounts {
    /// One per public input, ONE included.
    pub ic: usize,
    /// m − 1, m the NTT domain size.
    pub h: usize,
    /// One per aux variable.
    pub l: usize,
    /// Every input plus the A-dense aux variables.
    pub a: usize,
    /// The B-dense variables (b_g2 has the same count).
    pub b_g1: usize,
    /// B's G2 query: as many as `b_g1`.
    pub b_g2: usize,
}

impl QueryCounts {
    /// The file size these counts give.
    pub fn file_bytes(&self) -> u64 {
        let g1 = self.h + self.l + self.a + self.b_g1;
        (vk_bytes(self.ic) + 5 * 4 + g1 * G1_BYTES + self.b_g2 * G2_BYTES) as u64
    }
}

fn vk_bytes(ic: usize) -> usize {
    3 * G1_BYTES + 3 * G2_BYTES + 4 + ic * G1_BYTES
}

/// Where one query's points lie in the mapped file.
#[derive(Clone, Copy, Debug)]
pub(super) struct Section {
    /// Byte offset of the first point (after the count).
    pub(super) offset: usize,
    /// Points in the query.
    pub(super) count: usize,
}

/// A `.params` file mapped into memory: the verifying key decoded, the queries
/// located and decoded on demand.
pub struct MappedParams {
    /// For error messages.
    path: PathBuf,
    /// The file's bytes; the mapping lives as long as this value.
    map: Mmap,
    /// Decoded at open: small, and every user needs it.
    pub vk: VerifyingKey,
    /// h, l, a, b_g1, b_g2 in file order.
    sections: [Section; 5],
}

impl MappedParams {
    /// Maps the file and checks that its counts account for every byte.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: parameter files are written once and not modified while mapped;
        // a concurrent writer is outside filecoin-proofs' conventions too.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let (vk, mut offset) = decode_vk(&map).map_err(|reason| malformed(path, reason))?;
        let mut sections = [Section { offset: 0, count: 0 }; 5];
        for (section, (name, size)) in sections.iter_mut().zip(SECTIONS) {
            let count = read_count(&map, offset)
                .ok_or_else(|| malformed(path, format!("file ends before the {name} count")))?;
            offset += 4;
            let end = offset + count * size;
            if end > map.len() {
                return Err(malformed(path, format!("{name} holds {count} points but the file ends first")));
            }
            *section = Section { offset, count };
            offset = end;
        }
        if offset != map.len() {
            return Err(malformed(path, format!("{} bytes after the last query", map.len() - offset)));
        }
        Ok(MappedParams { path: path.to_path_buf(), map, vk, sections })
    }

    /// Points of each query, and the verifying key's inputs.
    pub fn counts(&self) -> QueryCounts {
        let [h, l, a, b_g1, b_g2] = self.sections.map(|s| s.count);
        QueryCounts { ic: self.vk.ic.len(), h, l, a, b_g1, b_g2 }
    }

    /// The H query, decoded.
    pub fn h(&self) -> Result<Vec<G1Affine>, Error> {
        self.g1(0)
    }

    /// The L query, decoded.
    pub fn l(&self) -> Result<Vec<G1Affine>, Error> {
        self.g1(1)
    }

    /// The A query, decoded.
    pub fn a(&self) -> Result<Vec<G1Affine>, Error> {
        self.g1(2)
    }

    /// B's G1 query, decoded.
    pub fn b_g1(&self) -> Result<Vec<G1Affine>, Error> {
        self.g1(3)
    }

    /// B's G2 query, decoded.
    pub fn b_g2(&self) -> Result<Vec<G2Affine>, Error> {
        let s = self.sections[4];
        decode_points(&self.map[s.offset..s.offset + s.count * G2_BYTES], G2_BYTES)
            .map_err(|reason| malformed(&self.path, format!("b_g2: {reason}")))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where each query's points lie (h, l, a, b_g1, b_g2).
    pub(super) fn sections(&self) -> [Section; 5] {
        self.sections
    }

    /// A's first point (ONE's: A holds every input), decoded; None when the
    /// query is empty.
    pub fn first_a(&self) -> Result<Option<G1Affine>, Error> {
        self.first(2, G1_BYTES)
    }

    /// The first points of B's G1 and G2 queries, decoded; None when they
    /// are empty.
    pub fn first_b(&self) -> Result<Option<(G1Affine, G2Affine)>, Error> {
        Ok(self.first(3, G1_BYTES)?.zip(self.first(4, G2_BYTES)?))
    }

    fn first<C: SWCurveConfig>(&self, index: usize, size: usize) -> Result<Option<Affine<C>>, Error> {
        let s = self.sections[index];
        if s.count == 0 {
            return Ok(None);
        }
        let points = decode_points(&self.map[s.offset..s.offset + size], size)
            .map_err(|reason| malformed(&self.path, format!("{}: {reason}", SECTIONS[index].0)))?;
        Ok(points.first().copied())
    }

    /// Every query decoded.
    pub fn load(&self) -> Result<Parameters, Error> {
        Ok(Parameters {
            vk: self.vk.clone(),
            h: self.h()?,
            l: self.l()?,
            a: self.a()?,
            b_g1: self.b_g1()?,
            b_g2: self.b_g2()?,
        })
    }

    fn g1(&self, index: usize) -> Result<Vec<G1Affine>, Error> {
        let s = self.sections[index];
        decode_points(&self.map[s.offset..s.offset + s.count * G1_BYTES], G1_BYTES)
            .map_err(|reason| malformed(&self.path, format!("{}: {reason}", SECTIONS[index].0)))
    }
}

fn malformed(path: &Path, reason: impl Into<String>) -> Error {
    Error::Malformed { path: path.to_path_buf(), reason: reason.into() }
}

fn read_count(bytes: &[u8], offset: usize) -> Option<usize> {
    let raw = bytes.get(offset..offset + 4)?;
    Some(u32::from_be_bytes(raw.try_into().ok()?) as usize)
}

/// Decodes points of `size` bytes each, in parallel.
fn decode_points<C: SWCurveConfig>(bytes: &[u8], size: usize) -> Result<Vec<Affine<C>>, String> {
    let mut points = vec![Affine::<C>::identity(); bytes.len() / size];
    decode_into(bytes, size, 0, points.par_iter_mut(), |p, out| *out = p)?;
    Ok(points)
}

/// Decodes points of `size` bytes each, in parallel, handing each to
/// `put` with its place in `out` (one per point: an arkworks point, or a
/// point's words in the kernels' layout); `first` numbers the first point
/// in errors. Like bellperson's reader (which filecoin-proofs calls
/// unchecked), it rejects points at infinity and points off the curve, but
/// skips the costly subgroup check.
pub(super) fn decode_into<C: SWCurveConfig, O: IndexedParallelIterator>(
    bytes: &[u8],
    size: usize,
    first: usize,
    out: O,
    put: impl Fn(Affine<C>, O::Item) + Sync + Send,
) -> Result<(), String> {
    bytes.par_chunks_exact(size).zip(out).enumerate().try_for_each(|(i, (chunk, out))| {
        let p = Affine::<C>::deserialize_with_mode(chunk, Compress::No, Validate::No)
            .map_err(|e| format!("point {}: {e}", first + i))?;
        if p.infinity {
            return Err(format!("point {} is at infinity", first + i));
        }
        if !p.is_on_curve() {
            return Err(format!("point {} is not on the curve", first + i));
        }
        put(p, out);
        Ok(())
    })
}

/// Decodes the verifying key at the start of `bytes`; returns it and its length.
/// Its few points get the full check (on the curve, in the subgroup).
fn decode_vk(bytes: &[u8]) -> Result<(VerifyingKey, usize), String> {
    fn point<P: CanonicalDeserialize>(bytes: &[u8], at: &mut usize, size: usize) -> Result<P, String> {
        let chunk = bytes.get(*at..*at + size).ok_or("file ends inside the verifying key")?;
        *at += size;
        P::deserialize_with_mode(chunk, Compress::No, Validate::Yes)
            .map_err(|e| format!("verifying key point: {e}"))
    }
    let mut at = 0;
    let alpha_g1 = point(bytes, &mut at, G1_BYTES)?;
    let beta_g1 = point(bytes, &mut at, G1_BYTES)?;
    let beta_g2 = point(bytes, &mut at, G2_BYTES)?;
    let gamma_g2 = point(bytes, &mut at, G2_BYTES)?;
    let delta_g1 = point(bytes, &mut at, G1_BYTES)?;
    let delta_g2 = point(bytes, &mut at, G2_BYTES)?;
    let count = read_count(bytes, at).ok_or("file ends before the ic count")?;
    at += 4;
    let ic = (0..count).map(|_| point(bytes, &mut at, G1_BYTES)).collect::<Result<Vec<G1Affine>, _>>()?;
    Ok((VerifyingKey { alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2, ic }, at))
}

fn encode_vk(vk: &VerifyingKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(vk_bytes(vk.ic.len()));
    encode_into(&vk.alpha_g1, &mut out);
    encode_into(&vk.beta_g1, &mut out);
    encode_into(&vk.beta_g2, &mut out);
    encode_into(&vk.gamma_g2, &mut out);
    encode_into(&vk.delta_g1, &mut out);
    encode_into(&vk.delta_g2, &mut out);
    out.extend_from_slice(&(vk.ic.len() as u32).to_be_bytes());
    for p in &vk.ic {
        encode_into(p, &mut out);
    }
    out
}

fn encode_into<P: CanonicalSerialize>(p: &P, out: &mut Vec<u8>) {
    p.serialize_with_mode(out, Compress::No).expect("writing to a Vec cannot fail");
}

/// Reads a `.vk` file.
pub fn read_vk(path: &Path) -> Result<VerifyingKey, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let (vk, len) = decode_vk(&bytes).map_err(|reason| malformed(path, reason))?;
    if len != bytes.len() {
        return Err(malformed(path, "bytes after the verifying key"));
    }
    Ok(vk)
}

/// Writes a `.vk` file.
pub fn write_vk(path: &Path, vk: &VerifyingKey) -> Result<(), Error> {
    std::fs::write(path, encode_vk(vk)).map_err(|e| Error::io(path, e))
}

/// Streams a `.params` file: the verifying key, then the five queries in file
/// order, each announced with its count and filled in as many slices as the
/// caller likes, so a query never has to be in memory whole.
pub struct ParamsWriter {
    /// For error messages.
    path: PathBuf,
    /// Large buffer: the file is written in slices of up to 2^18 points.
    out: BufWriter<File>,
    /// Queries begun so far (at most five).
    sections: usize,
    /// Points the current query still expects.
    remaining: usize,
}

impl ParamsWriter {
    /// A new parameter file at `path`, its verifying key written first.
    pub fn create(path: &Path, vk: &VerifyingKey) -> Result<Self, Error> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        let mut out = BufWriter::with_capacity(8 << 20, file);
        out.write_all(&encode_vk(vk)).map_err(|e| Error::io(path, e))?;
        Ok(ParamsWriter { path: path.to_path_buf(), out, sections: 0, remaining: 0 })
    }

    /// Starts the next query, announcing `count` points.
    pub fn begin(&mut self, count: usize) -> Result<(), Error> {
        self.check_complete()?;
        if self.sections == SECTIONS.len() {
            return Err(malformed(&self.path, "a sixth query"));
        }
        let count32 = u32::try_from(count)
            .map_err(|_| malformed(&self.path, format!("{count} points exceed a u32 count")))?;
        self.sections += 1;
        self.remaining = count;
        self.out.write_all(&count32.to_be_bytes()).map_err(|e| Error::io(&self.path, e))
    }

    /// Appends points to the current query (G1 for h, l, a, b_g1; G2 for b_g2).
    pub fn points<P: CanonicalSerialize + Sync>(&mut self, points: &[P]) -> Result<(), Error> {
        let size = SECTIONS[self.sections.saturating_sub(1)].1;
        let wrong_group = points.first().is_some_and(|p| p.serialized_size(Compress::No) != size);
        if self.sections == 0 || points.len() > self.remaining || wrong_group {
            return Err(malformed(&self.path, "points beyond the announced count or of the wrong group"));
        }
        let mut bytes = vec![0u8; points.len() * size];
        bytes.par_chunks_exact_mut(size).zip(points.par_iter()).for_each(|(chunk, p)| {
            p.serialize_with_mode(chunk, Compress::No).expect("the chunk has the point's size");
        });
        self.remaining -= points.len();
        self.out.write_all(&bytes).map_err(|e| Error::io(&self.path, e))
    }

    /// Checks that all five queries were written in full and flushes the file.
    pub fn finish(mut self) -> Result<(), Error> {
        self.check_complete()?;
        if self.sections != SECTIONS.len() {
            return Err(malformed(&self.path, format!("only {} queries written", self.sections)));
        }
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        self.out.get_ref().sync_all().map_err(|e| Error::io(&self.path, e))
    }

    fn check_complete(&self) -> Result<(), Error> {
        if self.remaining != 0 {
            return Err(malformed(
                &self.path,
                format!("query {} is {} points short", self.sections, self.remaining),
            ));
        }
        Ok(())
    }
}
