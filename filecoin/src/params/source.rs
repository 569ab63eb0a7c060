//! A `.params` file as a key source: the engines that read keys by range
//! (the CUDA engine) take the points straight from the file, decoded range
//! by range as they upload them, so that the daemon never holds a large key
//! decoded on the host (a 32 GiB PoRep key is 47 GB on disk, 50 GB decoded).
//! The file is read with positioned reads, not through the mapping: pages of
//! a mapping a process touched count in its resident set until they are
//! reclaimed, which would put the key back in the daemon's peak.
//!
//! Engines take a query's ranges in order, so while one range is decoded
//! and uploaded the next one's bytes are read on threads of their own
//! (`Ahead`): the disk and the cores work at once, and the read is the
//! floor, not the sum (docs/benchmarks.md, call D: 0.75 GB/s when each
//! range was read, then decoded, then uploaded in turn). Two byte buffers
//! of a range circulate between the reader and the decoder, so no range
//! allocates.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ark_bls12_381::{G1Affine, G2Affine};
use ark_ec::short_weierstrass::{Affine, SWCurveConfig};
use cuzk_kernels::key_source::{g1_words, g2_words, KeySource, Query, G1_WORDS, G2_WORDS};
use cuzk_kernels::KernelError;
use rayon::prelude::*;

use super::codec::{decode_into, MappedParams, Section, SECTIONS};
use crate::Error;

/// Bytes one positioned read takes.
const READ_BYTES: usize = 8 << 20;

/// Threads reading one range's chunks at once: enough to keep a disk's
/// queue full, apart from the pool that decodes (a reader blocked on the
/// disk must not hold a decoding thread).
const READERS: usize = 8;

/// The queries of one `.params` file, in the layout the prover pairs them
/// with: B's queries, when ONE is not B-dense, start with the identity that
/// bellperson does not store (`b_lead`).
pub struct QueryFile {
    /// For errors.
    path: PathBuf,
    /// Open for positioned reads, shared by the readers (and the thread
    /// reading ahead).
    file: Arc<File>,
    /// h, l, a, b_g1, b_g2 in file order (`MappedParams`'s).
    sections: [Section; 5],
    /// B's queries start with an identity point the file does not hold.
    b_lead: bool,
    /// The range after the last one read, being read now.
    ahead: Mutex<Option<Ahead>>,
    /// A range's byte buffer already decoded, for the next read ahead.
    spare: Mutex<Vec<u8>>,
}

/// Bytes of one range read on threads of their own.
struct Ahead {
    /// The range's byte offset and length in the file.
    span: (u64, usize),
    /// Ends with the bytes, or the read's error.
    read: JoinHandle<io::Result<Vec<u8>>>,
}

/// Fills `bytes` from `file` at `offset`, READ_BYTES at a time on up to
/// READERS threads.
fn read_range(file: &File, offset: u64, bytes: &mut [u8]) -> io::Result<()> {
    let chunks: Vec<&mut [u8]> = bytes.chunks_mut(READ_BYTES).collect();
    let readers = READERS.min(chunks.len()).max(1);
    let mut lanes: Vec<Vec<(usize, &mut [u8])>> = (0..readers).map(|_| Vec::new()).collect();
    for (i, chunk) in chunks.into_iter().enumerate() {
        lanes[i % readers].push((i, chunk));
    }
    std::thread::scope(|s| {
        let lanes: Vec<_> = lanes
            .into_iter()
            .map(|lane| {
                s.spawn(move || {
                    lane.into_iter().try_for_each(|(i, chunk)| {
                        file.read_exact_at(chunk, offset + (i * READ_BYTES) as u64)
                    })
                })
            })
            .collect();
        lanes
            .into_iter()
            .try_for_each(|lane| lane.join().unwrap_or_else(|_| Err(io::Error::other("a reader panicked"))))
    })
}

impl QueryFile {
    /// The queries of the file `params` mapped, left in it and read by
    /// range (`b_lead`: B's queries start with the identity bellperson does
    /// not store, as when ONE is not B-dense).
    pub fn open(params: &MappedParams, b_lead: bool) -> Result<Self, Error> {
        let path = params.path();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Arc::new(file),
            sections: params.sections(),
            b_lead,
            ahead: Mutex::new(None),
            spare: Mutex::new(Vec::new()),
        })
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

    /// The bytes `span` of the file: those read ahead when they are the
    /// ones asked for, else read now. The range after it in the same
    /// section (`next`, bytes) starts being read before this returns.
    fn bytes(&self, span: (u64, usize), next: Option<(u64, usize)>) -> io::Result<Vec<u8>> {
        let ahead = self.ahead.lock().map_err(|_| io::Error::other("read-ahead lock poisoned"))?.take();
        // A read ahead of other bytes (another caller, or a jump) is
        // waited for, so at most one runs; its buffer is reused.
        let early = ahead.map(|a| (a.span == span, a.read.join()));
        let (mut bytes, found) = match early {
            Some((true, Ok(Ok(bytes)))) => (bytes, true),
            Some((_, Ok(Ok(bytes)))) => (bytes, false),
            _ => (Vec::new(), false),
        };
        if !found {
            bytes.resize(span.1, 0);
            read_range(&self.file, span.0, &mut bytes)?;
        }
        if let Some(next) = next {
            let mut buffer =
                std::mem::take(&mut *self.spare.lock().map_err(|_| io::Error::other("spare lock poisoned"))?);
            let file = self.file.clone();
            let read = std::thread::Builder::new().name("cuzk-key-read".into()).spawn(move || {
                buffer.resize(next.1, 0);
                read_range(&file, next.0, &mut buffer).map(|()| buffer)
            });
            // No thread for it: the next range is read when asked for.
            if let (Ok(read), Ok(mut ahead)) = (read, self.ahead.lock()) {
                *ahead = Some(Ahead { span: next, read });
            }
        }
        Ok(bytes)
    }

    /// Reads `n` points of section `s` from point `start` on (B's lead
    /// counted) and hands their bytes to `decode` with the first point's
    /// number in the file and whether the caller's first point is the lead
    /// identity the file lacks (then the bytes hold `n - 1` points).
    fn read(
        &self,
        s: usize,
        start: usize,
        n: usize,
        decode: impl FnOnce(&[u8], usize, bool) -> Result<(), String>,
    ) -> Result<(), KernelError> {
        let (name, size) = SECTIONS[s];
        let lead = self.lead(s);
        let count = self.sections[s].count;
        let fail = |reason: String| KernelError::Key(format!("{}: {name}: {reason}", self.path.display()));
        if start + n > count + lead {
            return Err(fail(format!("points {start}..{} of {}", start + n, count + lead)));
        }
        let at_lead = start == 0 && lead == 1 && n > 0;
        let first = start.saturating_sub(lead);
        let points = n - usize::from(at_lead);
        let at = |point: usize| (self.sections[s].offset + point * size) as u64;
        let end = first + points;
        let next = (end < count && points > 0).then(|| (at(end), n.min(count - end) * size));
        let bytes = self.bytes((at(first), points * size), next).map_err(|e| fail(e.to_string()))?;
        let decoded = decode(&bytes, first, at_lead).map_err(fail);
        // Kept for the read after next while the section goes on; at its
        // end both buffers are freed (a loaded circuit keeps its source).
        if let (Some(_), Ok(mut spare)) = (next, self.spare.lock()) {
            *spare = bytes;
        }
        decoded
    }

    /// Points of section `s` from `start` into `out`, arkworks points.
    fn points<C: SWCurveConfig>(
        &self,
        s: usize,
        start: usize,
        out: &mut [Affine<C>],
    ) -> Result<(), KernelError> {
        self.read(s, start, out.len(), |bytes, first, at_lead| {
            let out = match out.split_first_mut() {
                Some((lead, rest)) if at_lead => {
                    *lead = Affine::<C>::identity();
                    rest
                }
                _ => out,
            };
            decode_into(bytes, SECTIONS[s].1, first, out.par_iter_mut(), |p, o| *o = p)
        })
    }

    /// Points of section `s` from `start` into `out`, `words` words a
    /// point in the kernels' layout (`put` writes one).
    fn words<C: SWCurveConfig>(
        &self,
        s: usize,
        start: usize,
        out: &mut [u64],
        words: usize,
        put: impl Fn(&Affine<C>, &mut [u64]) + Sync + Send,
    ) -> Result<(), KernelError> {
        self.read(s, start, out.len() / words, |bytes, first, at_lead| {
            let out = match at_lead {
                true => {
                    out[..words].fill(0);
                    &mut out[words..]
                }
                false => out,
            };
            decode_into(bytes, SECTIONS[s].1, first, out.par_chunks_exact_mut(words), |p, o| put(&p, o))
        })
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
        self.points(Self::section(q), start, out)
    }
    fn g2(&self, start: usize, out: &mut [G2Affine]) -> Result<(), KernelError> {
        self.points(4, start, out)
    }
    fn g1_words(&self, q: Query, start: usize, out: &mut [u64]) -> Result<(), KernelError> {
        self.words(Self::section(q), start, out, G1_WORDS, g1_words)
    }
    fn g2_words(&self, start: usize, out: &mut [u64]) -> Result<(), KernelError> {
        self.words(4, start, out, G2_WORDS, g2_words)
    }
}
