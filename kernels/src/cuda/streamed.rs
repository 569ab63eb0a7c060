//! Proving keys larger than the device's resident budget (16 to 24 GB cards
//! against a 32 GiB PoRep key's 47 GB of bases): the bases stay in pinned
//! host memory and pass through the device in chunks. A chunk's copy runs
//! on the workspace's copy stream while the previous chunk's kernels run on
//! its compute stream; two device buffers per query alternate, ordered by
//! events. Each chunk is an MSM of its own (its scalars sorted once for
//! every query that shares them: A, B1 and B2), and the MSM's value is the
//! sum of the chunks' values: the same group element as the resident MSM's,
//! so the same proof, bit for bit. A pass of several partitions (prove.rs)
//! runs every partition's MSMs on each chunk while it is on the device, so
//! the bases cross PCIe once per pass, not once per partition.

use rustacuda::event::Event;
use rustacuda::memory::DeviceCopy;
use rustacuda::stream::StreamWaitEventFlags;

use super::bases::{Fingerprint, KeyBases, Query};
use super::gpu::{
    driver, recorded, DBuf, DevFr, DevG1Affine, DevG2Affine, DevPtr, Gpu, Pinned, Res, Workspace,
};
use super::msm::{self, GroupResults, Results, ZeroOne, G1, G2};

/// The parts of a key's bases that its plan streams, in pinned host
/// memory, in the kernels' layout.
pub struct HostKey {
    /// A, B1, L, H (Query's order), each when streamed.
    g1: [Option<Pinned<DevG1Affine>>; 4],
    /// B's G2 query, when streamed (and the engine runs that MSM).
    b2: Option<Pinned<DevG2Affine>>,
    /// Which parts it holds (device_plan::PARTS order).
    pub parts: [bool; 5],
    /// Which key this is (see bases.rs).
    pub fingerprint: Fingerprint,
    /// Pinned bytes held, for the engine's host budget.
    pub bytes: u64,
}

impl HostKey {
    /// Copies the key's `parts` (device_plan::PARTS order; the last B's G2
    /// query) into new pinned memory (the context must be current).
    pub fn new(bases: &dyn KeyBases, parts: [bool; 5]) -> Res<Self> {
        let mut g1 = Vec::with_capacity(4);
        for q in Query::ALL {
            g1.push(match parts[q as usize] {
                true => Some(Pinned::new(bases.len(q), |start, out| bases.g1(q, start, out))?),
                false => None,
            });
        }
        let b2 = match parts[4] {
            true => Some(Pinned::new(bases.b2_len(), |start, out| bases.g2(start, out))?),
            false => None,
        };
        let g1: [Option<Pinned<DevG1Affine>>; 4] = g1.try_into().map_err(|_| ()).expect("four queries");
        let bytes =
            g1.iter().flatten().map(Pinned::bytes).sum::<u64>() + b2.as_ref().map_or(0, Pinned::bytes);
        Ok(Self { g1, b2, parts, fingerprint: bases.fingerprint(), bytes })
    }

    /// G1 query `q`, when streamed.
    pub fn query(&self, q: Query) -> Option<&[DevG1Affine]> {
        self.g1[q as usize].as_ref().map(Pinned::as_slice)
    }

    /// B's G2 query, when streamed.
    pub fn b2(&self) -> Option<&[DevG2Affine]> {
        self.b2.as_ref().map(Pinned::as_slice)
    }
}

/// Two device buffers that a query's chunks alternate between, and the
/// events that order them: a chunk's copy (copy stream) waits until the
/// kernels that read the buffer's previous chunk (compute stream) are done,
/// and those kernels wait for their chunk's copy.
struct Slots<A: DeviceCopy> {
    bufs: [DBuf<A>; 2],
    /// Recorded on the copy stream after a chunk's copy into the buffer.
    loaded: [Option<Event>; 2],
    /// Recorded on the compute stream after the kernels that read it.
    free: [Option<Event>; 2],
    /// The buffer the next chunk goes to.
    turn: usize,
}

impl<A: DeviceCopy> Slots<A> {
    fn new(ws: &Workspace, chunk: usize) -> Res<Self> {
        // The buffers may come from the workspace's free list, last used by
        // work still queued on the compute stream: the first copies wait
        // for it.
        Ok(Self {
            bufs: [ws.buffer(chunk)?, ws.buffer(chunk)?],
            loaded: [None, None],
            free: [Some(recorded(&ws.stream)?), Some(recorded(&ws.stream)?)],
            turn: 0,
        })
    }

    /// Queues `host`'s copy (pinned memory) into the next buffer; returns
    /// the buffer's index.
    fn load(&mut self, host: &[A], ws: &Workspace) -> Res<usize> {
        let k = self.turn;
        self.turn = 1 - k;
        if let Some(e) = self.free[k].take() {
            ws.copy.wait_event(e, StreamWaitEventFlags::DEFAULT).map_err(driver("cuStreamWaitEvent"))?;
        }
        self.bufs[k].copy_from_pinned(host, &ws.copy)?;
        self.loaded[k] = Some(recorded(&ws.copy)?);
        Ok(k)
    }

    /// The compute stream waits for buffer k's copy; its device address.
    fn take(&mut self, k: usize, ws: &Workspace) -> Res<DevPtr<A>> {
        if let Some(e) = self.loaded[k].take() {
            ws.stream.wait_event(e, StreamWaitEventFlags::DEFAULT).map_err(driver("cuStreamWaitEvent"))?;
        }
        Ok(self.bufs[k].ptr())
    }

    /// Buffer k may take the next chunk once the kernels queued so far on
    /// the compute stream are done.
    fn release(&mut self, k: usize, ws: &Workspace) -> Res<()> {
        self.free[k] = Some(recorded(&ws.stream)?);
        Ok(())
    }
}

/// A chunk's bases on the device: each G1 query's, and B's G2 query's.
type ChunkBases = (Vec<DevPtr<DevG1Affine>>, Option<DevPtr<DevG2Affine>>);

/// MSMs of n plain scalars at each of `scalars` (one set per partition of
/// a pass) against streamed bases, `chunk` points at a time: each of `g1`'s
/// host slices (its first n points) and `g2`'s. Every chunk crosses PCIe
/// once for all the sets; per chunk each set's scalars are sorted once for
/// all the queries. Results, per set, are queued on the compute stream.
#[allow(clippy::too_many_arguments)]
pub fn msm(
    gpu: &Gpu,
    ws: &Workspace,
    scalars: &[DevPtr<DevFr>],
    n: usize,
    rule: ZeroOne,
    chunk: usize,
    g1: &[&[DevG1Affine]],
    g2: Option<&[DevG2Affine]>,
) -> Res<Vec<GroupResults>> {
    let chunk = chunk.max(1);
    let parts = n.div_ceil(chunk);
    let width = chunk.min(n.max(1));
    let mut slots1 = Vec::new();
    for _ in g1 {
        slots1.push(Slots::<DevG1Affine>::new(ws, width)?);
    }
    let mut slots2 = match g2 {
        Some(_) => Some(Slots::<DevG2Affine>::new(ws, width)?),
        None => None,
    };
    let mut res = Vec::with_capacity(scalars.len());
    for _ in scalars {
        let res1 = (g1.iter().map(|_| Results::<G1>::new(ws, parts))).collect::<Res<Vec<_>>>()?;
        let res2 = g2.map(|_| Results::<G2>::new(ws, parts)).transpose()?;
        res.push((res1, res2));
    }
    for p in 0..parts {
        let lo = p * chunk;
        let len = chunk.min(n - lo);
        // The copies first: they run while the host waits in `plan` (which
        // reads back the 0/1 count) for the previous chunk's kernels.
        let mut loaded1 = Vec::with_capacity(g1.len());
        for (s, host) in slots1.iter_mut().zip(g1) {
            loaded1.push(s.load(&host[lo..lo + len], ws)?);
        }
        let loaded2 = match (&mut slots2, g2) {
            (Some(s), Some(host)) => Some(s.load(&host[lo..lo + len], ws)?),
            _ => None,
        };
        // The compute stream waits for the copies after the first set's
        // sort, which runs under them.
        let mut bases: Option<ChunkBases> = None;
        for (&set, (res1, res2)) in scalars.iter().zip(res.iter_mut()) {
            let plan = msm::plan(gpu, ws, set.offset(lo), len, rule)?;
            if bases.is_none() {
                let b1 = (slots1.iter_mut().zip(&loaded1))
                    .map(|(s, &k)| s.take(k, ws))
                    .collect::<Res<Vec<_>>>()?;
                let b2 = match (&mut slots2, loaded2) {
                    (Some(s), Some(k)) => Some(s.take(k, ws)?),
                    _ => None,
                };
                bases = Some((b1, b2));
            }
            let (bases1, bases2) = bases.as_ref().expect("taken above");
            for (r, &bases) in res1.iter_mut().zip(bases1) {
                r.accumulate(gpu, ws, &plan, bases)?;
            }
            if let (Some(r), Some(bases)) = (res2.as_mut(), *bases2) {
                r.accumulate(gpu, ws, &plan, bases)?;
            }
        }
        for (s, k) in slots1.iter_mut().zip(loaded1) {
            s.release(k, ws)?;
        }
        if let (Some(s), Some(k)) = (&mut slots2, loaded2) {
            s.release(k, ws)?;
        }
    }
    Ok(res)
}
