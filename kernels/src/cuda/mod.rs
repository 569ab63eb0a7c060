//! The CUDA engine for prove_start (feature `cuda`).
//!
//! One [`CudaEngine`] per device, shared by that device's GPU workers: one
//! CUDA context (made current on each calling thread), a stream per call,
//! the proving-key bases of each circuit uploaded once and kept resident
//! (LRU-evicted against a memory budget), H by seven NTTs on the device, the
//! four G1 MSMs and, with `g2_on_gpu`, B's G2 MSM. Kernels: kernels/cuda.

pub mod bench;
pub mod gpu;
pub mod msm;
pub mod ntt;
pub mod testutil;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustacuda::device::Device;
use rustacuda::event::{Event, EventFlags};
use rustacuda::stream::Stream;

use crate::cuda_args;
use crate::groth16::{
    PhaseTiming, PreparedCircuit, ProveStartEngine, ProveStartOutput, Synthesized,
};
use crate::{Fr, G1Affine, G1Projective, G2Affine, G2Projective, KernelError};
use gpu::{dev_err, DBuf, Gpu, Res};
use msm::{Group, G1_AFF_WORDS, G2_AFF_WORDS};
use ntt::NttTables;

/// A CUDA device as the driver reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it.
    pub uuid: String,
    pub total_memory: u64,
}

/// The CUDA devices present (an error when the driver cannot be loaded or
/// initialized; an empty list when it reports none).
pub fn detect_devices() -> Result<Vec<DeviceInfo>, KernelError> {
    gpu::init()?;
    let n = Device::num_devices().map_err(dev_err("cuDeviceGetCount"))?;
    let mut out = Vec::new();
    for ordinal in 0..n {
        let d = Device::get_device(ordinal).map_err(dev_err("cuDeviceGet"))?;
        let name = d.name().map_err(dev_err("cuDeviceGetName"))?;
        let u = d.uuid().map_err(dev_err("cuDeviceGetUuid"))?;
        let h = hex::encode(u);
        let uuid = format!(
            "GPU-{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        );
        let total_memory = d.total_memory().map_err(dev_err("cuDeviceTotalMem"))? as u64;
        out.push(DeviceInfo {
            ordinal: ordinal as usize,
            name,
            uuid,
            total_memory,
        });
    }
    Ok(out)
}

/// Engine options.
#[derive(Clone, Debug)]
pub struct CudaOptions {
    /// Run B's G2 MSM on the GPU (else `b2_acc` is `None` and the finalizer
    /// does it on the CPU).
    pub g2_on_gpu: bool,
    /// Bytes of device memory the resident proving keys may take; `None`:
    /// 60% of the device's memory (the rest is for the per-proof buffers).
    pub resident_budget: Option<u64>,
}

impl Default for CudaOptions {
    fn default() -> Self {
        Self {
            g2_on_gpu: true,
            resident_budget: None,
        }
    }
}

/// A circuit's bases on the device.
struct ResidentKey {
    a: DBuf<u64>,
    b1: DBuf<u64>,
    l: DBuf<u64>,
    h: DBuf<u64>,
    b2: Option<DBuf<u64>>,
    a_len: usize,
    l_len: usize,
    h_len: usize,
    /// Identifies the key: lengths and delta_g1. A circuit_id reused for a
    /// different key (a new setup) re-uploads instead of proving with stale bases.
    fingerprint: (usize, usize, usize, usize, Vec<u64>),
    bytes: u64,
}

fn fingerprint(circuit: &PreparedCircuit) -> (usize, usize, usize, usize, Vec<u64>) {
    let pk = &circuit.pk;
    (
        pk.a_query.len(),
        pk.b_g1_query.len(),
        pk.l_query.len(),
        pk.h_query.len(),
        msm::g1_to_words(&[pk.delta_g1, pk.beta_g1]),
    )
}

struct Cache {
    keys: HashMap<String, (Arc<ResidentKey>, u64)>,
    tables: HashMap<usize, (Arc<NttTables>, u64)>,
    tick: u64,
}

impl Cache {
    fn bytes(&self) -> u64 {
        self.keys.values().map(|(k, _)| k.bytes).sum::<u64>()
            + self.tables.values().map(|(t, _)| t.bytes()).sum::<u64>()
    }
}

pub struct CudaEngine {
    gpu: Gpu,
    options: CudaOptions,
    budget: u64,
    name: String,
    cache: Mutex<Cache>,
    /// Pinned staging buffers, one set per concurrent call.
    staging: Mutex<Vec<gpu::Staging>>,
}

impl CudaEngine {
    pub fn new(device_ordinal: usize, options: CudaOptions) -> Result<Self, KernelError> {
        let gpu = Gpu::new(device_ordinal)?;
        let total = gpu
            .device
            .total_memory()
            .map_err(dev_err("cuDeviceTotalMem"))? as u64;
        let budget = options.resident_budget.unwrap_or(total / 10 * 6);
        let dev_name = gpu.device.name().unwrap_or_else(|_| "?".into());
        Ok(Self {
            gpu,
            options,
            budget,
            name: format!("cuda:{device_ordinal} ({dev_name})"),
            cache: Mutex::new(Cache {
                keys: HashMap::new(),
                tables: HashMap::new(),
                tick: 0,
            }),
            staging: Mutex::new(Vec::new()),
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn options(&self) -> &CudaOptions {
        &self.options
    }

    /// Device bytes held by resident proving keys and NTT tables.
    pub fn resident_bytes(&self) -> u64 {
        self.cache.lock().map(|c| c.bytes()).unwrap_or(0)
    }

    /// Drops the resident data of a circuit (e.g. when its shape is retired).
    pub fn evict(&self, circuit_id: &str) {
        if self.gpu.enter().is_ok() {
            if let Ok(mut c) = self.cache.lock() {
                c.keys.remove(circuit_id);
            }
        }
    }

    /// Evicts least recently used entries not in use until `need` more bytes fit.
    fn make_room(&self, cache: &mut Cache, need: u64) -> Res<()> {
        while cache.bytes() + need > self.budget {
            let victim_key = cache
                .keys
                .iter()
                .filter(|(_, (k, _))| Arc::strong_count(k) == 1)
                .min_by_key(|(_, (_, t))| *t)
                .map(|(id, (_, t))| (id.clone(), *t));
            let victim_table = cache
                .tables
                .iter()
                .filter(|(_, (k, _))| Arc::strong_count(k) == 1)
                .min_by_key(|(_, (_, t))| *t)
                .map(|(n, (_, t))| (*n, *t));
            match (victim_key, victim_table) {
                (Some((id, tk)), Some((_, tt))) if tk <= tt => {
                    cache.keys.remove(&id);
                }
                (_, Some((n, _))) => {
                    cache.tables.remove(&n);
                }
                (Some((id, _)), None) => {
                    cache.keys.remove(&id);
                }
                (None, None) => {
                    return Err(KernelError::Device(format!(
                    "resident budget of {} bytes exhausted: {} bytes in use, {need} more needed",
                    self.budget,
                    cache.bytes()
                )))
                }
            }
        }
        Ok(())
    }

    /// NTT tables for size n, resident.
    pub fn tables(&self, n: usize) -> Res<Arc<NttTables>> {
        self.gpu.enter()?;
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| KernelError::Device("engine cache poisoned".into()))?;
        cache.tick += 1;
        let tick = cache.tick;
        if let Some((t, used)) = cache.tables.get_mut(&n) {
            *used = tick;
            return Ok(t.clone());
        }
        let need = (n as u64) * 32 + (1 << 16);
        self.make_room(&mut cache, need)?;
        let t = Arc::new(NttTables::new(&self.gpu, n)?);
        cache.tables.insert(n, (t.clone(), tick));
        Ok(t)
    }

    fn resident(&self, circuit: &PreparedCircuit) -> Res<Arc<ResidentKey>> {
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| KernelError::Device("engine cache poisoned".into()))?;
        cache.tick += 1;
        let tick = cache.tick;
        let fp = fingerprint(circuit);
        if let Some((k, used)) = cache.keys.get_mut(&circuit.circuit_id) {
            let has_b2 = k.b2.is_some();
            if k.fingerprint == fp && (has_b2 || !self.options.g2_on_gpu) {
                *used = tick;
                return Ok(k.clone());
            }
        }
        let pk = &circuit.pk;
        let with_b2 = self.options.g2_on_gpu;
        let g1 = (pk.a_query.len() + pk.b_g1_query.len() + pk.l_query.len() + pk.h_query.len())
            * G1_AFF_WORDS
            * 8;
        let g2 = if with_b2 {
            pk.b_g2_query.len() * G2_AFF_WORDS * 8
        } else {
            0
        };
        let need = (g1 + g2) as u64;
        cache.keys.remove(&circuit.circuit_id);
        self.make_room(&mut cache, need)?;
        let stream = self.gpu.stream()?;
        let up_g1 = |pts: &[G1Affine]| -> Res<DBuf<u64>> {
            let words = msm::g1_to_words(pts);
            let mut b = DBuf::new(words.len())?;
            b.upload(&words, &stream)?;
            stream.synchronize().map_err(dev_err("uploading bases"))?;
            Ok(b)
        };
        let a = up_g1(&pk.a_query)?;
        let b1 = up_g1(&pk.b_g1_query)?;
        let l = up_g1(&pk.l_query)?;
        let h = up_g1(&pk.h_query)?;
        let b2 = if with_b2 {
            let words = msm::g2_to_words(&pk.b_g2_query);
            let mut b = DBuf::new(words.len())?;
            b.upload(&words, &stream)?;
            stream.synchronize().map_err(dev_err("uploading bases"))?;
            Some(b)
        } else {
            None
        };
        let bytes =
            a.bytes() + b1.bytes() + l.bytes() + h.bytes() + b2.as_ref().map_or(0, |b| b.bytes());
        let key = Arc::new(ResidentKey {
            a,
            b1,
            l,
            h,
            b2,
            a_len: pk.a_query.len(),
            l_len: pk.l_query.len(),
            h_len: pk.h_query.len(),
            fingerprint: fp,
            bytes,
        });
        cache
            .keys
            .insert(circuit.circuit_id.clone(), (key.clone(), tick));
        Ok(key)
    }

    fn prove_start_inner(
        &self,
        circuit: &PreparedCircuit,
        syn: Synthesized,
    ) -> Res<ProveStartOutput> {
        self.gpu.enter()?;
        let gpu = &self.gpu;
        let n = circuit.domain_size;
        if syn.a.len() != n || syn.b.len() != n || syn.c.len() != n {
            return Err(KernelError::Device(format!(
                "a, b, c have {}, {}, {} elements; the domain has {n}",
                syn.a.len(),
                syn.b.len(),
                syn.c.len()
            )));
        }
        let key = self.resident(circuit)?;
        let tables = self.tables(n)?;
        self.gpu.enter()?;
        let stream = gpu.stream()?;
        let ev = || Event::new(EventFlags::DEFAULT).map_err(dev_err("cuEventCreate"));
        let mut marks: Vec<(&'static str, Event)> = Vec::new();
        let start = ev()?;
        start.record(&stream).map_err(dev_err("cuEventRecord"))?;
        let mark = |marks: &mut Vec<(&'static str, Event)>, name: &'static str| -> Res<()> {
            let e = ev()?;
            e.record(&stream).map_err(dev_err("cuEventRecord"))?;
            marks.push((name, e));
            Ok(())
        };

        // upload
        let freed_bytes = syn.abc_bytes();
        let Synthesized {
            a,
            b,
            c,
            assignment,
            num_inputs,
        } = syn;
        let mut da = DBuf::<u64>::new(n * 4)?;
        let mut db = DBuf::<u64>::new(n * 4)?;
        let mut dc = DBuf::<u64>::new(n * 4)?;
        let m = assignment.len();
        let mut dz = DBuf::<u64>::new(m * 4)?;
        let staged = self.staging.lock().ok().and_then(|mut v| v.pop());
        let mut staging = match staged {
            Some(s) => s,
            None => gpu::Staging::new()?,
        };
        let up = (|| -> Res<()> {
            staging.upload(&mut da, msm::fr_words(&a), &stream)?;
            staging.upload(&mut db, msm::fr_words(&b), &stream)?;
            staging.upload(&mut dc, msm::fr_words(&c), &stream)?;
            staging.upload(&mut dz, msm::fr_words(&assignment), &stream)?;
            staging.finish()
        })();
        if let Ok(mut v) = self.staging.lock() {
            v.push(staging);
        }
        up?;
        msm::from_mont(gpu, &stream, dz.ptr(), dz.ptr(), m)?;
        mark(&mut marks, "upload")?;

        // H
        let scratch = DBuf::<u64>::new(n * 4)?;
        tables.compute_h(gpu, &stream, da.ptr(), db.ptr(), dc.ptr(), scratch.ptr())?;
        mark(&mut marks, "ntt")?;
        stream.synchronize().map_err(dev_err("NTT"))?;
        drop((a, b, c, db, dc, scratch));

        let nw1 = |len: usize| msm::window_words(len, Group::G1);
        let h_len = key.h_len.min(n);
        let l_len = key.l_len.min(m - num_inputs);
        let z_len = key.a_len.min(m) - 1;
        let out = DBuf::<u64>::new(
            nw1(h_len) + nw1(l_len) + 2 * nw1(z_len) + msm::window_words(z_len, Group::G2),
        )?;
        let o_h = out.ptr();
        let o_l = out.ptr_at(nw1(h_len));
        let o_a = out.ptr_at(nw1(h_len) + nw1(l_len));
        let o_b1 = out.ptr_at(nw1(h_len) + nw1(l_len) + nw1(z_len));
        let o_b2 = out.ptr_at(nw1(h_len) + nw1(l_len) + 2 * nw1(z_len));

        msm::from_mont(gpu, &stream, da.ptr(), da.ptr(), h_len)?;
        let plan_h = msm::plan(gpu, &stream, da.ptr(), h_len)?;
        msm::accumulate(gpu, &stream, &plan_h, Group::G1, key.h.ptr(), o_h)?;
        let c_h = plan_h.c;
        drop(plan_h);
        drop(da);
        mark(&mut marks, "msm_h")?;

        let plan_l = msm::plan(gpu, &stream, dz.ptr_at(num_inputs * 4), l_len)?;
        msm::accumulate(gpu, &stream, &plan_l, Group::G1, key.l.ptr(), o_l)?;
        let c_l = plan_l.c;
        drop(plan_l);
        mark(&mut marks, "msm_l")?;

        let plan_z = msm::plan(gpu, &stream, dz.ptr_at(4), z_len)?;
        msm::accumulate(
            gpu,
            &stream,
            &plan_z,
            Group::G1,
            key.a.ptr_at(G1_AFF_WORDS),
            o_a,
        )?;
        mark(&mut marks, "msm_a")?;
        msm::accumulate(
            gpu,
            &stream,
            &plan_z,
            Group::G1,
            key.b1.ptr_at(G1_AFF_WORDS),
            o_b1,
        )?;
        mark(&mut marks, "msm_b1")?;
        if let Some(b2) = &key.b2 {
            msm::accumulate(
                gpu,
                &stream,
                &plan_z,
                Group::G2,
                b2.ptr_at(G2_AFF_WORDS),
                o_b2,
            )?;
            mark(&mut marks, "msm_b2")?;
        }
        let c_z = plan_z.c;
        drop(plan_z);
        drop(dz);

        let mut host = vec![0u64; out.len()];
        out.download(&mut host, &stream)?;
        mark(&mut marks, "download")?;
        stream.synchronize().map_err(dev_err("prove_start"))?;
        drop(out);

        let h_acc = msm::combine_g1(&host[..nw1(h_len)], c_h);
        let l_acc = msm::combine_g1(&host[nw1(h_len)..nw1(h_len) + nw1(l_len)], c_l);
        let base = nw1(h_len) + nw1(l_len);
        let a_acc = msm::combine_g1(&host[base..base + nw1(z_len)], c_z);
        let b1_acc = msm::combine_g1(&host[base + nw1(z_len)..base + 2 * nw1(z_len)], c_z);
        let b2_acc = key.b2.as_ref().map(|_| {
            let o = base + 2 * nw1(z_len);
            msm::combine_g2(&host[o..o + msm::window_words(z_len, Group::G2)], c_z)
        });

        let mut phases = Vec::new();
        let mut prev = &start;
        for (name, e) in &marks {
            let ms = e
                .elapsed_time_f32(prev)
                .map_err(dev_err("cuEventElapsedTime"))?;
            phases.push(PhaseTiming {
                phase: name,
                duration: Duration::from_secs_f64(ms as f64 / 1e3),
            });
            prev = e;
        }
        Ok(ProveStartOutput {
            a_acc,
            b1_acc,
            l_acc,
            h_acc,
            b2_acc,
            assignment,
            num_inputs,
            freed_bytes,
            phases,
        })
    }

    // ---- building blocks, for tests and benchmarks ----

    /// Uploads G1 bases (resident until dropped).
    pub fn upload_g1(&self, points: &[G1Affine]) -> Res<DBuf<u64>> {
        self.upload_words(&msm::g1_to_words(points))
    }

    pub fn upload_g2(&self, points: &[G2Affine]) -> Res<DBuf<u64>> {
        self.upload_words(&msm::g2_to_words(points))
    }

    /// Uploads field elements (Montgomery form, as arkworks holds them).
    pub fn upload_fr(&self, s: &[Fr]) -> Res<DBuf<u64>> {
        self.upload_words(msm::fr_words(s))
    }

    /// Copies words to a new device buffer and waits for the copy.
    fn upload_words(&self, words: &[u64]) -> Res<DBuf<u64>> {
        self.gpu.enter()?;
        let mut buffer = DBuf::new(words.len())?;
        let stream = self.gpu.stream()?;
        buffer.upload(words, &stream)?;
        stream.synchronize().map_err(dev_err("upload"))?;
        Ok(buffer)
    }

    pub fn download_fr(&self, buf: &DBuf<u64>, n: usize) -> Res<Vec<Fr>> {
        self.gpu.enter()?;
        let mut w = vec![0u64; n * 4];
        let st = self.gpu.stream()?;
        buf.download(&mut w, &st)?;
        st.synchronize().map_err(dev_err("download"))?;
        Ok(w.chunks(4)
            .map(|c| ark_ff::Fp::new_unchecked(ark_ff::BigInt([c[0], c[1], c[2], c[3]])))
            .collect())
    }

    /// MSM of device-resident bases and scalars (Montgomery Fr, n of each).
    /// Synchronous; includes the scalars' conversion and the bucket sort.
    pub fn msm_g1_device(
        &self,
        bases: &DBuf<u64>,
        scalars: &DBuf<u64>,
        n: usize,
    ) -> Res<G1Projective> {
        let (w, c) = self.msm_device(bases.ptr(), scalars.ptr(), n, Group::G1)?;
        Ok(msm::combine_g1(&w, c))
    }

    pub fn msm_g2_device(
        &self,
        bases: &DBuf<u64>,
        scalars: &DBuf<u64>,
        n: usize,
    ) -> Res<G2Projective> {
        let (w, c) = self.msm_device(bases.ptr(), scalars.ptr(), n, Group::G2)?;
        Ok(msm::combine_g2(&w, c))
    }

    fn msm_device(&self, bases: u64, scalars: u64, n: usize, group: Group) -> Res<(Vec<u64>, u32)> {
        self.gpu.enter()?;
        let gpu = &self.gpu;
        let stream = gpu.stream()?;
        let plain = DBuf::<u64>::new(n * 4)?;
        msm::from_mont(gpu, &stream, scalars, plain.ptr(), n)?;
        let plan = msm::plan(gpu, &stream, plain.ptr(), n)?;
        let words = msm::window_words(n, group);
        let out = DBuf::<u64>::new(words)?;
        msm::accumulate(gpu, &stream, &plan, group, bases, out.ptr())?;
        let mut host = vec![0u64; words];
        out.download(&mut host, &stream)?;
        stream.synchronize().map_err(dev_err("msm"))?;
        Ok((host, plan.c))
    }

    /// One-shot MSMs from host data (tests).
    pub fn msm_g1(&self, bases: &[G1Affine], scalars: &[Fr]) -> Res<G1Projective> {
        let n = bases.len().min(scalars.len());
        let b = self.upload_g1(&bases[..n])?;
        let s = self.upload_fr(&scalars[..n])?;
        self.msm_g1_device(&b, &s, n)
    }

    pub fn msm_g2(&self, bases: &[G2Affine], scalars: &[Fr]) -> Res<G2Projective> {
        let n = bases.len().min(scalars.len());
        let b = self.upload_g2(&bases[..n])?;
        let s = self.upload_fr(&scalars[..n])?;
        self.msm_g2_device(&b, &s, n)
    }

    /// In-place NTT of device data of size n (a power of two).
    pub fn ntt_device(&self, data: &DBuf<u64>, n: usize, inverse: bool, coset: bool) -> Res<()> {
        self.gpu.enter()?;
        let scratch = DBuf::<u64>::new(n * 4)?;
        self.ntt_device_with(data, &scratch, n, inverse, coset)
    }

    /// As `ntt_device`, with a caller-held scratch buffer of n elements.
    pub fn ntt_device_with(
        &self,
        data: &DBuf<u64>,
        scratch: &DBuf<u64>,
        n: usize,
        inverse: bool,
        coset: bool,
    ) -> Res<()> {
        let t = self.tables(n)?;
        self.gpu.enter()?;
        let stream = self.gpu.stream()?;
        if inverse {
            t.ifft(&self.gpu, &stream, data.ptr(), scratch.ptr(), coset)?;
        } else {
            t.fft(&self.gpu, &stream, data.ptr(), scratch.ptr(), coset)?;
        }
        stream.synchronize().map_err(dev_err("ntt"))
    }

    /// Runs a test kernel: `kernel(op, a, b, out, n)` over words.
    pub fn field_op(
        &self,
        kernel: &str,
        op: u32,
        a: &[u64],
        b: &[u64],
        words_per: usize,
    ) -> Res<Vec<u64>> {
        self.gpu.enter()?;
        let n = a.len() / words_per;
        let st = self.gpu.stream()?;
        let mut da = DBuf::new(a.len())?;
        let mut db = DBuf::new(b.len())?;
        let out_words = if kernel.starts_with("test_g") {
            3 * n * (words_per * 3 / 2)
        } else {
            a.len()
        };
        let dout = DBuf::<u64>::new(out_words)?;
        da.upload(a, &st)?;
        db.upload(b, &st)?;
        let (pa, pb, po, n32) = (da.ptr(), db.ptr(), dout.ptr(), n as u32);
        if kernel.starts_with("test_g") {
            self.gpu.launch(
                &st,
                kernel,
                gpu::blocks(n, 64),
                64,
                0,
                &cuda_args![pa, pb, po, n32],
            )?;
        } else {
            self.gpu.launch(
                &st,
                kernel,
                gpu::blocks(n, 128),
                128,
                0,
                &cuda_args![op, pa, pb, po, n32],
            )?;
        }
        let mut host = vec![0u64; out_words];
        dout.download(&mut host, &st)?;
        st.synchronize().map_err(dev_err(kernel))?;
        Ok(host)
    }

    /// Synchronize a throwaway stream (for timing helpers).
    pub fn stream(&self) -> Res<Stream> {
        self.gpu.enter()?;
        self.gpu.stream()
    }
}

impl Drop for CudaEngine {
    fn drop(&mut self) {
        let _ = self.gpu.enter();
        if let Ok(mut c) = self.cache.lock() {
            c.keys.clear();
            c.tables.clear();
        }
        if let Ok(mut s) = self.staging.lock() {
            s.clear();
        }
    }
}

impl ProveStartEngine for CudaEngine {
    fn name(&self) -> &str {
        &self.name
    }

    fn prove_start(
        &self,
        circuit: &PreparedCircuit,
        synthesized: Synthesized,
    ) -> Result<ProveStartOutput, KernelError> {
        self.prove_start_inner(circuit, synthesized)
    }
}

pub use msm::{g1_from_jac, g2_from_jac, G1_JAC_WORDS as G1_JAC, G2_JAC_WORDS as G2_JAC};
