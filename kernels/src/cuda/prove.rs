//! prove_start on the device for one partition or a pass of several: each
//! partition's a, b, c uploaded and H computed by seven NTTs, then the
//! MSMs. With a resident key the partitions' MSMs simply follow each other;
//! with a streamed key every chunk of bases crosses PCIe once for all of
//! them (issue 12 item 4: the original's cross-sector batching), which is
//! what makes a pass of two cheaper than two calls. Which calls share a pass
//! is passes.rs's business; this file proves the partitions it is given.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustacuda::event::{Event, EventFlags};
use rustacuda::stream::Stream;

use super::bases::{KeyBases, Query};
use super::cache::Loaded;
use super::gpu::{driver, DBuf, DevFr, DevG1Affine, DevPtr, Res, Workspace};
use super::msm::{self, GroupResults, Results, ZeroOne, G1, G2};
use super::ntt::NttTables;
use super::r1cs::DeviceMatrices;
use super::{free_elsewhere, streamed, CudaEngine};
use crate::device_plan::{Place, Plan};
use crate::groth16::{compiled, Abc, PhaseTiming, PreparedCircuit, ProveStartOutput, Selection, Synthesized};
use crate::{DeviceError, Fr, KernelError};

/// What a pass returns: the pass's own failure, or each partition's output
/// or its own failure (a partition whose witness does not satisfy its
/// circuit, found by the device's evaluation, fails alone).
pub(super) type PassOutputs = Res<Vec<Res<ProveStartOutput>>>;

/// One partition of a pass between its H step and its MSMs.
struct Part {
    /// The assignment, plain (L's scalars, and A's and B's without a
    /// selection).
    z: DBuf<DevFr>,
    /// The assignment on the host, for prove_finish: whole when it does
    /// B's G2 MSM on the CPU, else only the constant one and the public
    /// inputs.
    assignment: Vec<Fr>,
    num_inputs: usize,
    /// Bytes of a, b, c, freed on `freeing`'s thread (with the rest of the
    /// assignment when `assignment` keeps only its public part).
    freed_bytes: u64,
    freeing: Option<std::thread::JoinHandle<()>>,
    /// Where the device's evaluation of a, b and c leaves the first row
    /// that does not hold (u32::MAX when all do), read after the pass's
    /// downloads; None when a, b and c came from the host, which checked
    /// them.
    bad: Option<DBuf<u32>>,
    /// The compiled matrices that evaluation reads, held (not evicted)
    /// until the pass has passed it.
    _matrices: Option<Arc<DeviceMatrices>>,
}

/// Whether a partition's inputs fit the circuit's domain (a, b and c, or
/// the assignment its compiled matrices take) and its assignment holds its
/// public inputs.
pub(super) fn check(circuit: &PreparedCircuit, syn: &Synthesized) -> Res<()> {
    let n = circuit.domain_size;
    match &syn.abc {
        Abc::Host { a, b, c } if a.len() != n || b.len() != n || c.len() != n => {
            return Err(KernelError::Synthesis(format!(
                "a, b, c have {}, {}, {} elements; the domain has {n}",
                a.len(),
                b.len(),
                c.len()
            )))
        }
        Abc::Host { .. } => {}
        Abc::Deferred => compiled(circuit)?.check_assignment(syn.assignment.len(), n)?,
    }
    if syn.num_inputs > syn.assignment.len() {
        return Err(KernelError::Synthesis(format!(
            "{} public inputs (the constant one included) in an assignment of {}",
            syn.num_inputs,
            syn.assignment.len()
        )));
    }
    Ok(())
}

impl CudaEngine {
    /// Loads `circuit`'s key (resident, or into pinned memory when it is
    /// streamed), NTT tables, selections and compiled matrices as its first
    /// call would, without proving: what a preload does ahead of the jobs.
    /// The circuit's device-memory plan is made first (and the warm
    /// refused, naming the setting, when the device cannot hold the
    /// circuit); `urgency` says whether its calls are the critical lane's.
    pub(super) fn warm_with(
        &self,
        circuit: &PreparedCircuit,
        bases: &dyn KeyBases,
        urgency: crate::groth16::Urgency,
    ) -> Res<()> {
        self.gpu.enter()?;
        let (plan, _) = self.plan_for(circuit, bases, urgency, true)?;
        // The urgent rank's workspace as well (its streams and pinned
        // staging; buffers come with its first call): otherwise a critical
        // call's first lease makes it while bulk partitions load the device
        // and the host.
        drop(self.lease_for(crate::groth16::Urgency::Urgent)?);
        let ws = self.lease_for(crate::groth16::Urgency::Normal)?;
        let room = plan.cache_room();
        self.key(&circuit.circuit_id, bases, &ws, &plan)?;
        self.tables_within(circuit.domain_size, &ws, room)?;
        self.selections(&circuit.circuit_id, &circuit.a_selection, &circuit.b_selection, room)?;
        if circuit.matrices.num_constraints() > 0 {
            self.device_matrices(&circuit.circuit_id, &circuit.matrices, &ws, room, plan.matrices)?;
        }
        Ok(())
    }

    /// prove_start for the partitions `first` and those `more` hands over
    /// (asked after every H step until it returns none), all of the same
    /// circuit, their MSMs in one pass over the key's bases; the outputs in
    /// that order. Each output carries the pass's phases (summed over its
    /// partitions) and an equal share of its kernel-active time. `more` is
    /// told the first partition's assignment length and public inputs
    /// count: every partition it hands over must have the same, and pass
    /// `check`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prove_pass(
        &self,
        circuit: &PreparedCircuit,
        bases: &dyn KeyBases,
        first: Synthesized,
        urgency: crate::groth16::Urgency,
        (plan, urgent): (&Plan, bool),
        more: &mut dyn FnMut(usize, usize) -> Vec<Synthesized>,
    ) -> PassOutputs {
        let began = Instant::now();
        self.gpu.enter()?;
        check(circuit, &first)?;
        // A call of a general circuit waits for one of its plan's slots (an
        // urgent circuit's calls have the lane's reserved workspaces);
        // declared first, so given back last, once the lease has waited for
        // its streams.
        let _slot = match urgent {
            false => Some(self.gate.enter(plan.slots)?),
            true => None,
        };
        // Declared before the lease, so dropped after it: on an early return
        // the lease waits for both streams before a streamed key's pinned
        // memory (possibly no longer in the cache) can be freed under a copy.
        let key: Loaded;
        let ws = self.lease_for(urgency)?;
        let leased = began.elapsed();
        let stream = &ws.stream;
        let room = plan.cache_room();
        key = self.key(&circuit.circuit_id, bases, &ws, plan)?;
        let tables = self.tables_within(circuit.domain_size, &ws, room)?;
        let (a_sel, b_sel) = (&circuit.a_selection, &circuit.b_selection);
        let selections = self.selections(&circuit.circuit_id, a_sel, b_sel, room)?;
        let variables = first.assignment.len().saturating_sub(1);
        if let Some(s) = selections.as_ref().filter(|s| s.limit > variables) {
            return Err(KernelError::Synthesis(format!(
                "the circuit's A or B query selects variable {} after the constant one; the assignment has {variables}",
                s.limit - 1
            )));
        }
        self.gpu.enter()?;
        let mut marks = Marks::new(stream)?;
        // The host's time before the stream's first phase, by what it went
        // to: the workspace, then the key, tables, selections found (or
        // loaded) on the device.
        let host = [("lease", leased), ("resident", began.elapsed() - leased)];

        // Each partition's H coefficients, apart from the rest: they go back
        // to the workspace once H's MSMs are queued.
        let (m, num_inputs) = (first.assignment.len(), first.num_inputs);
        let (part, h) = self.h_step(circuit, &ws, &tables, first, (room, plan.matrices), &mut marks)?;
        let (mut parts, mut hs) = (vec![part], vec![h]);
        loop {
            let joined = more(m, num_inputs);
            if joined.is_empty() {
                break;
            }
            for syn in joined {
                let (part, h) = self.h_step(circuit, &ws, &tables, syn, (room, plan.matrices), &mut marks)?;
                parts.push(part);
                hs.push(h);
            }
        }

        let h_len = bases.len(Query::H).min(circuit.domain_size);
        let l_len = bases.len(Query::L).min(m - num_inputs);
        // A's and B's scalars: the assignment after the constant one when the
        // key holds every variable, else the selected entries (Filecoin's
        // keys), gathered on the device from the plain assignment by the
        // circuit's resident index lists (a few ms; on the host, with the
        // upload, 0.3 s at 2^26 that a streamed key's H chunks could not
        // hide: run 45).
        let mut sels = Vec::with_capacity(parts.len());
        let lists =
            [selections.as_ref().and_then(|s| s.a.as_ref()), selections.as_ref().and_then(|s| s.b.as_ref())];
        let chosen = [&circuit.a_selection, &circuit.b_selection];
        for p in &parts {
            let mut sel = [None, None];
            for ((out, selection), list) in sel.iter_mut().zip(chosen).zip(lists) {
                *out = self.selection_buffer(selection, variables, &ws)?;
                if let (Some((buf, len)), Some(list)) = (out.as_ref(), list) {
                    let (gpu, z) = (&self.gpu, p.z.ptr_at(1));
                    msm::gather(gpu, &ws, z, list.ptr(), buf.ptr(), *len)?;
                }
            }
            sels.push(sel);
        }

        let mut h_scalars = Vec::with_capacity(hs.len());
        for h in &hs {
            msm::from_mont(&self.gpu, &ws, h.ptr(), h.ptr(), h_len)?;
            h_scalars.push(h.ptr());
        }
        let h_q = [(Query::H, "msm_h")];
        let h = self.msms(&ws, &key, &h_scalars, h_len, &h_q, None, &mut marks)?;
        drop(hs);

        // Per partition: A's and B's scalars and counts.
        let scalars = |which: usize, q: Query| -> Vec<(DevPtr<DevFr>, usize)> {
            (parts.iter().zip(&sels))
                .map(|(p, sel)| match &sel[which] {
                    Some((buf, len)) => (buf.ptr(), *len),
                    None => (p.z.ptr_at(1), bases.len(q).min(m) - 1),
                })
                .collect()
        };
        let (a_sc, b_sc) = (scalars(0, Query::A), scalars(1, Query::B1));
        let (a_len, b_len) = (a_sc[0].1, b_sc[0].1);
        let ptrs = |v: &[(DevPtr<DevFr>, usize)]| v.iter().map(|s| s.0).collect::<Vec<_>>();
        let l_scalars: Vec<_> = parts.iter().map(|p| p.z.ptr_at(num_inputs)).collect();
        let l_q = [(Query::L, "msm_l")];
        let l = self.msms(&ws, &key, &l_scalars, l_len, &l_q, None, &mut marks)?;
        // With every variable in both, A and B sort the same scalars once
        // (phase msm_a includes that sort).
        let (a_q, b_q) = ((Query::A, "msm_a"), (Query::B1, "msm_b1"));
        let b2 = self.options.g2_on_gpu.then_some("msm_b2");
        let shared = sels.iter().all(|s| s[0].is_none() && s[1].is_none()) && a_len == b_len;
        let ab: Vec<GroupResults> = if shared {
            self.msms(&ws, &key, &ptrs(&a_sc), a_len, &[a_q, b_q], b2, &mut marks)?
        } else {
            let a = self.msms(&ws, &key, &ptrs(&a_sc), a_len, &[a_q], None, &mut marks)?;
            let b = self.msms(&ws, &key, &ptrs(&b_sc), b_len, &[b_q], b2, &mut marks)?;
            (a.into_iter().zip(b))
                .map(|((mut a1, _), (b1, b2))| {
                    a1.extend(b1);
                    (a1, b2)
                })
                .collect()
        };
        drop(sels);

        let mut fetched = Vec::with_capacity(parts.len());
        for ((mut h, mut l), (mut ab, b2)) in h.into_iter().zip(l).zip(ab) {
            let (b1, a) = (ab.pop().expect("B1"), ab.pop().expect("A"));
            let g1 = [h.0.pop().expect("H"), l.0.pop().expect("L"), a, b1];
            let g1 = g1.map(|r| r.fetch(stream));
            let [h, l, a, b1] = g1;
            fetched.push(([h?, l?, a?, b1?], b2.map(|r| r.fetch(stream)).transpose()?));
        }
        let mut unsatisfied = vec![u32::MAX; parts.len()];
        for (p, host) in parts.iter().zip(unsatisfied.chunks_mut(1)) {
            if let Some(bad) = &p.bad {
                bad.download(host, stream)?;
            }
        }
        marks.mark("download")?;
        stream.synchronize().map_err(driver("prove_start"))?;
        // A call alone measures a call's workspace: the plan trusts it over
        // its estimate when it is more.
        if parts.len() == 1 {
            self.measured(&circuit.circuit_id, ws.peak_bytes());
        }

        let phases: Vec<PhaseTiming> = (host.into_iter())
            .map(|(phase, duration)| PhaseTiming { phase, duration })
            .chain(marks.phases()?)
            .collect();
        let active_ms = self.keep_span(marks.kernel_span(&self.epoch.0)?);
        let share = active_ms.map(|ms| ms.max(0.0) / 1e3 / parts.len() as f64);
        self.passes.count(parts.len());
        let mut outputs = Vec::with_capacity(parts.len());
        for ((p, (g1, g2)), bad) in parts.into_iter().zip(fetched).zip(unsatisfied) {
            // The stage reports a, b, c as freed (`freed_bytes`), which the
            // daemon's memory budget then hands out again: they must be gone.
            if let Some(thread) = p.freeing {
                let _ = thread.join();
            }
            if bad != u32::MAX {
                outputs.push(Err(KernelError::Unsatisfied(bad as usize)));
                continue;
            }
            let [h_acc, l_acc, a_acc, b1_acc] = g1.map(|f| f.value());
            outputs.push(Ok(ProveStartOutput {
                a_acc,
                b1_acc,
                l_acc,
                h_acc,
                b2_acc: g2.map(|f| f.value()),
                assignment: p.assignment,
                num_inputs: p.num_inputs,
                freed_bytes: p.freed_bytes,
                phases: phases.clone(),
                device_active: share.map(Duration::from_secs_f64),
            }));
        }
        Ok(outputs)
    }

    /// One partition's upload and H step, queued on the workspace; returns
    /// the partition and H's coefficients (H's MSM scalars once out of
    /// Montgomery form). `(room, place)`: the plan's cache room and where
    /// it puts the compiled matrices of a deferred partition.
    fn h_step(
        &self,
        circuit: &PreparedCircuit,
        ws: &Workspace,
        tables: &NttTables,
        syn: Synthesized,
        (room, place): (u64, Place),
        marks: &mut Marks,
    ) -> Res<(Part, DBuf<DevFr>)> {
        let (gpu, stream, n) = (&self.gpu, &ws.stream, tables.n);
        let freed_bytes = syn.abc_bytes();
        let Synthesized { abc, assignment, num_inputs } = syn;
        let m = assignment.len();
        let mut da = ws.buffer::<DevFr>(n)?;
        let mut db = ws.buffer::<DevFr>(n)?;
        let mut dc = ws.buffer::<DevFr>(n)?;
        let mut dz = ws.buffer::<DevFr>(m)?;
        let scratch = ws.buffer::<DevFr>(n)?;
        // The copies wait first for the work queued so far on the compute
        // stream, whose memory these buffers may have been.
        ws.copy_after_compute()?;
        let (bad, matrices) = match &abc {
            // a goes up on the compute stream; b, c and the witness on the
            // copy stream, each under the NTTs of the inputs before it (the
            // host's staging copies pace the uploads, which overlap kernels,
            // not each other).
            Abc::Host { a, b, c } => {
                ws.upload(&mut da, msm::fr_dev(a))?;
                marks.mark("upload")?;
                tables.to_coset(gpu, stream, da.ptr(), scratch.ptr())?;
                for (buf, host) in [(&mut db, b), (&mut dc, c)] {
                    ws.upload_on_copy(buf, msm::fr_dev(host))?;
                    ws.compute_after_copy()?;
                    tables.to_coset(gpu, stream, buf.ptr(), scratch.ptr())?;
                }
                ws.upload_on_copy(&mut dz, msm::fr_dev(&assignment))?;
                (None, None)
            }
            // Only the assignment goes up; a, b and c are the circuit's
            // matrices, kept on the device, times it.
            Abc::Deferred => {
                let matrices =
                    self.device_matrices(&circuit.circuit_id, compiled(circuit)?, ws, room, place)?;
                ws.upload(&mut dz, msm::fr_dev(&assignment))?;
                marks.mark("upload")?;
                let bad = ws.buffer::<u32>(1)?;
                let abc = [da.ptr(), db.ptr(), dc.ptr()];
                matrices.evaluate(gpu, ws, dz.ptr(), abc, n, bad.ptr())?;
                marks.mark("evaluate")?;
                for buf in [&da, &db, &dc] {
                    tables.to_coset(gpu, stream, buf.ptr(), scratch.ptr())?;
                }
                (Some(bad), Some(matrices))
            }
        };
        // The host's a, b, c are in the staging's hands now, and so is the
        // assignment, of which prove_finish needs only the public part when
        // B's G2 MSM runs here. Returning 13 GB (a 32 GiB PoRep's a, b, c)
        // to the system takes a few hundred ms, which on this thread would
        // hold back H's MSM (docs/gpu.md, run 39); the assignment's 4 GB,
        // dropped by whoever drops the output, held back the proof.
        let (assignment, rest) = if self.options.g2_on_gpu {
            (assignment[..num_inputs].to_vec(), Some(assignment))
        } else {
            (assignment, None)
        };
        let freeing = free_elsewhere((abc, rest));
        tables.h_from_cosets(gpu, stream, da.ptr(), db.ptr(), dc.ptr(), scratch.ptr())?;
        ws.compute_after_copy()?;
        msm::from_mont(gpu, ws, dz.ptr(), dz.ptr(), m)?;
        marks.mark("ntt")?;
        // db, dc and scratch go back to the workspace here: later buffers
        // reuse them after the NTT, in stream order.
        let part = Part { z: dz, assignment, num_inputs, freed_bytes, freeing, bad, _matrices: matrices };
        Ok((part, da))
    }

    /// MSMs of n plain scalars at each of `scalars` (one set per partition)
    /// against the key's G1 queries `g1` and, when `b2` names its phase, B's
    /// G2 query: those the plan keeps on the device with one bucket sort
    /// per set shared by all of them, those it streams chunk by chunk, each
    /// chunk serving every set (one sort per chunk and set). A and B's
    /// bases start at their second point (the first pairs with the
    /// constant one, in prove_finish). Results, per set, in `g1`'s order,
    /// are queued on the workspace's stream; each resident MSM's phase is
    /// marked after it, the streamed ones advance together: one phase, the
    /// last one named.
    #[allow(clippy::too_many_arguments)]
    fn msms(
        &self,
        ws: &Workspace,
        key: &Loaded,
        scalars: &[DevPtr<DevFr>],
        n: usize,
        g1: &[(Query, &'static str)],
        b2: Option<&'static str>,
        marks: &mut Marks,
    ) -> Res<Vec<GroupResults>> {
        let first = |q: Query| usize::from(matches!(q, Query::A | Query::B1));
        let rule = ZeroOne::Auto;
        let (resident, streamed): (Vec<_>, Vec<_>) =
            g1.iter().partition(|&&(q, _)| key.device_query(q).is_some());
        let b2_resident = b2.and(key.device_b2());
        let b2_streamed = b2.filter(|_| b2_resident.is_none());
        // The resident MSMs, one sort per set.
        let mut on_device = Vec::with_capacity(scalars.len());
        if !resident.is_empty() || b2_resident.is_some() {
            for &s in scalars {
                let plan = msm::plan(&self.gpu, ws, s, n, rule)?;
                let mut res1 = Vec::new();
                for &&(q, phase) in &resident {
                    let bases = key.device_query(q).expect("resident");
                    let mut r = Results::<G1>::new(ws, 1)?;
                    r.accumulate(&self.gpu, ws, &plan, bases.ptr_at(first(q)))?;
                    marks.mark(phase)?;
                    res1.push(r);
                }
                let res2 = match (b2_resident, b2) {
                    (Some(bases), Some(phase)) => {
                        let mut r = Results::<G2>::new(ws, 1)?;
                        r.accumulate(&self.gpu, ws, &plan, bases.ptr_at(1))?;
                        marks.mark(phase)?;
                        Some(r)
                    }
                    _ => None,
                };
                on_device.push((res1, res2));
            }
        }
        // The streamed MSMs, every set on each chunk.
        let mut from_host = Vec::new();
        if !streamed.is_empty() || b2_streamed.is_some() {
            let host = key.host.as_ref().ok_or_else(|| {
                DeviceError::engine(
                    "streaming a key's parts",
                    "the plan streams parts the engine holds nowhere",
                )
            })?;
            let part = |q: Query| host.query(q).map(|b| &b[first(q)..]);
            let hosts = (streamed.iter()).map(|&&(q, _)| part(q)).collect::<Option<Vec<&[DevG1Affine]>>>();
            let host2 = b2_streamed.and(host.b2()).map(|b| &b[1..]);
            let (Some(hosts), true) = (hosts, b2_streamed.is_none() || host2.is_some()) else {
                return Err(DeviceError::engine(
                    "streaming a key's parts",
                    "a streamed part is missing from pinned memory",
                ));
            };
            let chunk = self.options.stream_chunk;
            from_host = streamed::msm(&self.gpu, ws, scalars, n, rule, chunk, &hosts, host2)?;
            let last = b2_streamed.or(streamed.last().map(|&&(_, phase)| phase));
            marks.mark(last.unwrap_or("msm"))?;
        }
        // Per set, the results back in `g1`'s order.
        let mut on_device = on_device.into_iter();
        let mut from_host = from_host.into_iter();
        let mut out = Vec::with_capacity(scalars.len());
        for _ in scalars {
            let (mut dev1, dev2) = on_device.next().unwrap_or_default();
            let (mut host1, host2) = from_host.next().unwrap_or_default();
            let (mut dev1, mut host1) = (dev1.drain(..), host1.drain(..));
            let res1 = (g1.iter())
                .map(|&(q, _)| match key.device_query(q) {
                    Some(_) => dev1.next(),
                    None => host1.next(),
                })
                .collect::<Option<Vec<_>>>()
                .expect("one result per query");
            out.push((res1, dev2.or(host2)));
        }
        Ok(out)
    }

    /// A device buffer for a query's gathered scalars and their count;
    /// `None` when the query takes the whole assignment (already on the
    /// device).
    fn selection_buffer(
        &self,
        selection: &Selection,
        variables: usize,
        ws: &Workspace,
    ) -> Res<Option<(DBuf<DevFr>, usize)>> {
        if *selection == Selection::All {
            return Ok(None);
        }
        let len = selection.len(variables);
        Ok(Some((ws.buffer::<DevFr>(len)?, len)))
    }
}

/// CUDA events recorded on a call's stream between its phases.
pub(super) struct Marks<'s> {
    stream: &'s Stream,
    start: Event,
    marks: Vec<(&'static str, Event)>,
}

impl<'s> Marks<'s> {
    fn new(stream: &'s Stream) -> Res<Self> {
        let start = Event::new(EventFlags::DEFAULT).map_err(driver("cuEventCreate"))?;
        start.record(stream).map_err(driver("cuEventRecord"))?;
        Ok(Self { stream, start, marks: Vec::new() })
    }

    /// Ends phase `name` at this point of the stream.
    fn mark(&mut self, name: &'static str) -> Res<()> {
        let e = Event::new(EventFlags::DEFAULT).map_err(driver("cuEventCreate"))?;
        e.record(self.stream).map_err(driver("cuEventRecord"))?;
        self.marks.push((name, e));
        Ok(())
    }

    /// From the end of the first upload to the end of the last MSM, in ms
    /// since `epoch` (after the stream has passed them).
    fn kernel_span(&self, epoch: &Event) -> Res<Option<(f64, f64)>> {
        let at = |e: &Event| -> Res<f64> {
            Ok(e.elapsed_time_f32(epoch).map_err(driver("cuEventElapsedTime"))? as f64)
        };
        let first = self.marks.iter().find(|(n, _)| *n == "upload");
        let last = self.marks.iter().rev().find(|(n, _)| n.starts_with("msm"));
        match (first, last) {
            (Some((_, a)), Some((_, b))) => Ok(Some((at(a)?, at(b)?))),
            _ => Ok(None),
        }
    }

    /// Each phase's time on the stream (after the stream has passed them),
    /// in the order phases first ended; a phase marked more than once (one
    /// per partition of a pass) is the sum of its stretches.
    fn phases(&self) -> Res<Vec<PhaseTiming>> {
        let mut prev = &self.start;
        let mut out: Vec<PhaseTiming> = Vec::new();
        for (name, e) in &self.marks {
            let ms = e.elapsed_time_f32(prev).map_err(driver("cuEventElapsedTime"))?;
            let d = Duration::from_secs_f64(ms as f64 / 1e3);
            match out.iter_mut().find(|p| p.phase == *name) {
                Some(p) => p.duration += d,
                None => out.push(PhaseTiming { phase: name, duration: d }),
            }
            prev = e;
        }
        Ok(out)
    }
}
