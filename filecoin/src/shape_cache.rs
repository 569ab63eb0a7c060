//! Compiled circuit shapes kept on disk between starts. Recording the blank
//! 32 GiB PoRep circuit for its matrices and densities takes about two
//! minutes on one core and gives 9 GB that never change for a cache id; a
//! daemon that restarts reads them back in seconds instead (the original
//! daemon: 46.9 s to extract, 9.2 s to load). The file is written once,
//! under a temporary name and renamed, and checked whole when read (its
//! counts, every index by `Matrices::from_parts`, a CRC-32 of every byte): a
//! damaged or foreign file is removed and the shape recorded again, never
//! used.
//!
//! Layout (little-endian): the magic, the cache id, the counts, the
//! coefficient table (32-byte canonical field elements), per matrix its row
//! ends (u64) and terms (u32 variable, u32 coefficient index), the three
//! density vectors (one byte per variable), then the CRC-32 of all of that.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use cuzk_kernels::r1cs::{Matrices, Term};
use cuzk_kernels::Fr;
use rayon::prelude::*;

use crate::record::{Densities, Shape};

/// Names the format; a new layout takes a new magic.
const MAGIC: &[u8; 8] = b"CUZKSHP1";

/// Elements converted per read or write of a large array.
const CHUNK: usize = 1 << 23;

/// Where compiled shapes are kept, and whether there is room for one more.
pub struct ShapeCache<'a> {
    /// The directory of `<cache id>.shape` files.
    pub dir: &'a Path,
    /// Whether `bytes` more may be written to `dir`: the daemon keeps its
    /// data directory's free-space floor for its job store.
    pub room: &'a (dyn Fn(u64) -> bool + Sync),
}

/// Why a cached shape was not used.
#[derive(Debug, thiserror::Error)]
enum Unusable {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Format(String),
}

fn format(reason: impl Into<String>) -> Unusable {
    Unusable::Format(reason.into())
}

impl ShapeCache<'_> {
    /// The file of `cache_id`'s shape.
    pub fn path(&self, cache_id: &str) -> PathBuf {
        self.dir.join(format!("{cache_id}.shape"))
    }

    /// `cache_id`'s shape as written by [`ShapeCache::store`]; None when
    /// there is none, or when the file is damaged or another's (then it is
    /// removed, so the shape recorded next replaces it).
    pub fn load(&self, cache_id: &str) -> Option<Shape> {
        let path = self.path(cache_id);
        let file = File::open(&path).ok()?;
        let started = Instant::now();
        match read_shape(file, cache_id) {
            Ok(shape) => {
                log::info!("{}: compiled shape read in {:.1?}", path.display(), started.elapsed());
                Some(shape)
            }
            Err(why) => {
                log::warn!("{}: not used ({why}); removing it, the shape is recorded again", path.display());
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Writes `shape` for the next start, when there is room; a failure is
    /// logged and leaves no file (the cache only saves time).
    pub fn store(&self, cache_id: &str, shape: &Shape) {
        let path = self.path(cache_id);
        let bytes = shape_bytes(cache_id, shape);
        if let Err(e) = std::fs::create_dir_all(self.dir) {
            log::warn!("{}: not written: {e}", path.display());
            return;
        }
        if !(self.room)(bytes) {
            log::warn!(
                "{}: not written: {bytes} bytes would leave its filesystem under the free-space floor",
                path.display()
            );
            return;
        }
        let started = Instant::now();
        let temporary = path.with_extension("shape.partial");
        let written = File::create(&temporary)
            .and_then(|file| write_shape(file, cache_id, shape))
            .and_then(|()| std::fs::rename(&temporary, &path));
        match written {
            Ok(()) => log::info!(
                "{}: compiled shape written ({bytes} bytes) in {:.1?}",
                path.display(),
                started.elapsed()
            ),
            Err(e) => {
                log::warn!("{}: not written: {e}", path.display());
                let _ = std::fs::remove_file(&temporary);
            }
        }
    }
}

/// The file's length for `shape`.
fn shape_bytes(cache_id: &str, shape: &Shape) -> u64 {
    let m = &shape.matrices;
    let rows: usize = (0..3).map(|k| 16 + m.parts(k).0.len() * 8 + m.parts(k).1.len() * 8).sum();
    let d = &shape.densities;
    let densities = 24 + d.a_aux.len() + d.b_input.len() + d.b_aux.len();
    (MAGIC.len() + 8 + cache_id.len() + 32 + m.coeffs().len() * 32 + rows + densities + 4) as u64
}

/// A writer that keeps the CRC-32 of what went through it.
struct Checked<W> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Checked<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.crc.update(bytes);
        self.inner.write_all(bytes)
    }

    fn count(&mut self, n: usize) -> std::io::Result<()> {
        self.put(&(n as u64).to_le_bytes())
    }

    /// `items` as their count then `size` bytes each, converted a chunk at
    /// a time in parallel.
    fn array<T: Sync>(
        &mut self,
        items: &[T],
        size: usize,
        encode: impl Fn(&T, &mut [u8]) + Sync,
    ) -> std::io::Result<()> {
        self.count(items.len())?;
        let mut buf = vec![0u8; CHUNK.min(items.len()) * size];
        for chunk in items.chunks(CHUNK) {
            let out = &mut buf[..chunk.len() * size];
            out.par_chunks_mut(size).zip(chunk.par_iter()).for_each(|(o, item)| encode(item, o));
            self.put(out)?;
        }
        Ok(())
    }
}

fn write_shape(file: File, cache_id: &str, shape: &Shape) -> std::io::Result<()> {
    let mut w = Checked { inner: BufWriter::with_capacity(1 << 22, file), crc: crc32fast::Hasher::new() };
    w.put(MAGIC)?;
    w.count(cache_id.len())?;
    w.put(cache_id.as_bytes())?;
    let m = &shape.matrices;
    for n in [m.num_inputs(), m.num_aux(), shape.constraints] {
        w.count(n)?;
    }
    w.array(m.coeffs(), 32, |c, o| c.serialize_uncompressed(o).expect("32 bytes hold a field element"))?;
    for k in 0..3 {
        let (ends, terms) = m.parts(k);
        w.array(ends, 8, |e, o| o.copy_from_slice(&e.to_le_bytes()))?;
        w.array(terms, 8, |t, o| {
            o[..4].copy_from_slice(&t.var.to_le_bytes());
            o[4..].copy_from_slice(&t.coeff.to_le_bytes());
        })?;
    }
    let d = &shape.densities;
    for bits in [&d.a_aux, &d.b_input, &d.b_aux] {
        w.array(bits, 1, |b, o| o[0] = u8::from(*b))?;
    }
    let crc = w.crc.clone().finalize();
    w.inner.write_all(&crc.to_le_bytes())?;
    let file = w.inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

/// A reader that keeps the CRC-32 of what came through it.
struct Verified<R> {
    inner: R,
    crc: crc32fast::Hasher,
}

impl<R: Read> Verified<R> {
    fn take(&mut self, out: &mut [u8]) -> Result<(), Unusable> {
        self.inner.read_exact(out)?;
        self.crc.update(out);
        Ok(())
    }

    fn count(&mut self, limit: u64, what: &str) -> Result<usize, Unusable> {
        let mut raw = [0u8; 8];
        self.take(&mut raw)?;
        let n = u64::from_le_bytes(raw);
        if n > limit {
            return Err(format(format!("{what}: {n} is more than the {limit} this shape can have")));
        }
        Ok(n as usize)
    }

    /// An array written by `Checked::array`, of at most `limit` items.
    fn array<T: Send + Clone + Default>(
        &mut self,
        limit: u64,
        what: &str,
        size: usize,
        decode: impl Fn(&[u8]) -> Result<T, Unusable> + Sync,
    ) -> Result<Vec<T>, Unusable> {
        let n = self.count(limit, what)?;
        let mut items = vec![T::default(); n];
        let mut buf = vec![0u8; CHUNK.min(n) * size];
        for chunk in items.chunks_mut(CHUNK) {
            let raw = &mut buf[..chunk.len() * size];
            self.take(raw)?;
            chunk
                .par_iter_mut()
                .zip(raw.par_chunks(size))
                .try_for_each(|(item, bytes)| decode(bytes).map(|v| *item = v))?;
        }
        Ok(items)
    }
}

fn read_shape(file: File, cache_id: &str) -> Result<Shape, Unusable> {
    // Bounds from the file's own length: no count read from a damaged file
    // can ask for more memory than the file could fill.
    let len = file.metadata()?.len();
    let mut r = Verified { inner: BufReader::with_capacity(1 << 22, file), crc: crc32fast::Hasher::new() };
    let mut magic = [0u8; 8];
    r.take(&mut magic)?;
    if &magic != MAGIC {
        return Err(format("not a compiled shape of this version"));
    }
    let id_len = r.count(len, "cache id")?;
    let mut id = vec![0u8; id_len];
    r.take(&mut id)?;
    if id != cache_id.as_bytes() {
        return Err(format(format!("written for {:?}", String::from_utf8_lossy(&id))));
    }
    let [num_inputs, num_aux, constraints] = [(); 3].map(|()| r.count(len, "counts"));
    let (num_inputs, num_aux, constraints) = (num_inputs?, num_aux?, constraints?);
    let coeffs = r.array(len / 32, "coefficients", 32, |b| {
        Fr::deserialize_uncompressed(b).map_err(|e| format(format!("coefficient: {e}")))
    })?;
    let mut parts = Vec::with_capacity(3);
    for _ in 0..3 {
        let ends =
            r.array(len / 8, "row ends", 8, |b| Ok(u64::from_le_bytes(b.try_into().expect("8 bytes"))))?;
        let terms = r.array(len / 8, "terms", 8, |b| {
            Ok(Term {
                var: u32::from_le_bytes(b[..4].try_into().expect("4 bytes")),
                coeff: u32::from_le_bytes(b[4..].try_into().expect("4 bytes")),
            })
        })?;
        parts.push((ends, terms));
    }
    let bits = |r: &mut Verified<_>| r.array(len, "densities", 1, |b| Ok(b[0] != 0));
    let densities = Densities { a_aux: bits(&mut r)?, b_input: bits(&mut r)?, b_aux: bits(&mut r)? };
    let computed = r.crc.clone().finalize();
    let mut stored = [0u8; 4];
    r.inner.read_exact(&mut stored)?;
    if u32::from_le_bytes(stored) != computed {
        return Err(format("its checksum does not match its contents"));
    }
    if r.inner.read(&mut [0u8; 1])? != 0 {
        return Err(format("bytes after the checksum"));
    }
    let parts: [(Vec<u64>, Vec<Term>); 3] = parts.try_into().map_err(|_| format("three matrices"))?;
    let matrices =
        Matrices::from_parts(num_inputs, num_aux, coeffs, parts).map_err(|e| format(e.to_string()))?;
    if densities.a_aux.len() != num_aux
        || densities.b_aux.len() != num_aux
        || densities.b_input.len() != num_inputs
    {
        return Err(format("densities of other counts than the matrices'"));
    }
    if matrices.num_constraints() != constraints {
        return Err(format("a constraint count other than the matrices' rows"));
    }
    Ok(Shape { matrices, constraints, densities })
}
