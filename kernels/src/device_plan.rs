//! One plan for a device's memory (issue 37): from what the card can give
//! and how many calls run on it at once, which parts of a circuit's proving
//! key stay resident and which stream from pinned host memory, where the
//! circuit's compiled matrices lie, how many general calls may hold a
//! workspace at once, and how many partitions share a pass over the
//! streamed parts. The CUDA engine makes a circuit's plan
//! when the circuit is warmed (the preload) or first proved, logs it and
//! reports it for `/v1/status`; a device too small for the circuit even
//! with its whole key streamed is refused then, naming the setting, instead
//! of failing its partitions one by one.
//!
//! Pure arithmetic over byte counts, so that the choices for 16 to 141 GB
//! cards are tested without one. The counts come from the circuit's shape
//! ([`Counts`]); a call's workspace is estimated from the same buffers
//! prove_start asks for ([`Needs::from_counts`]) and, once a call has run,
//! replaced by the peak the engine measured, whichever is larger.

use serde::Serialize;

/// A key's parts in the order plans list them: the four G1 queries as the
/// engine's keys hold them (A, B1, L, H: `key_source::Query`), then B's G2
/// query.
pub const PARTS: [&str; 5] = ["a", "b_g1", "l", "h", "b_g2"];

/// Bytes of a G1 base and of a G2 base in the kernels' layout (affine,
/// Montgomery words).
const G1_BYTES: u64 = 96;
const G2_BYTES: u64 = 192;
/// Bytes of a field element (Fr) on the device.
const FR_BYTES: u64 = 32;
/// Bytes of a G1 bucket partial (XYZZ coordinates) in the MSM's levels.
const JAC_BYTES: u64 = 192;
/// Slack in a call's estimate for the small buffers it does not list (the
/// scans' sums, the results, the 0/1 split's indices): measured calls are
/// what the plan trusts once it has them.
const CALL_SLACK: u64 = 256 << 20;
/// Device bytes per scalar of the 0/1 split at its largest (every scalar
/// neither 0 nor 1): the compacted scalar and its index.
const SPLIT_BYTES: u64 = 32 + 4;

/// A circuit's shape as its proving key and domain give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// The evaluation domain (a power of two): H's scalars and the NTTs.
    pub domain: usize,
    /// The assignment's length, the constant one and the inputs included.
    pub assignment: usize,
    /// Points of each key part, [`PARTS`] order (b_g2 zero when B's G2 MSM
    /// runs on the host).
    pub points: [usize; 5],
    /// Scalars gathered for A and for B when their queries select only some
    /// variables (zero when a query takes the whole assignment).
    pub gathered: [usize; 2],
    /// Device bytes of the circuit's NTT tables and A and B selections:
    /// what stays resident whatever the key does.
    pub fixed: u64,
    /// Bytes of the circuit's compiled matrices (zero when its a, b and c
    /// come from the host): on the device, or read in place from pinned
    /// host memory where the device cannot hold them ([`Place`]).
    pub matrices: u64,
    /// Points per chunk of a streamed part (`CudaOptions::stream_chunk`).
    pub chunk: usize,
}

/// What one circuit needs of a device's memory, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Needs {
    /// The key's parts, [`PARTS`] order.
    pub key: [u64; 5],
    /// NTT tables and selections.
    pub fixed: u64,
    /// The compiled matrices.
    pub matrices: u64,
    /// One call's workspace at its peak with the key resident (or part of
    /// it: the resident parts' MSMs sort all their scalars at once).
    pub call: u64,
    /// One call's workspace at its peak with the whole key streamed: the
    /// MSMs sort a chunk's scalars at a time, so H's MSM, the largest
    /// part of `call` (12 GB at 32 GiB PoRep), shrinks to a chunk's.
    pub streamed_call: u64,
    /// What a call adds when parts stream: two chunk buffers for each
    /// streamed query of a group that shares its scalars (A and B1's G1
    /// and B's G2 at most).
    pub stream: u64,
    /// What each further partition of a pass adds to the pass's first
    /// call: its scalars (H's, the assignment, A's and B's gathered).
    pub pass_member: u64,
    /// Whether `call` is a peak a call of the circuit measured (or the
    /// estimate, when that was more). Until one has, general calls run one
    /// at a time: an estimate below the real peak then costs a wait, not a
    /// partition failed for device memory (the 32 GiB WindowPoSt's first
    /// call held 37.3 GB against 33.7 estimated, and the H200 had planned
    /// two calls at once on the estimate).
    pub measured: bool,
}

impl Needs {
    /// The needs of a circuit of these counts. A call's peak: the H step's
    /// a, b, c, the NTT's scratch and the assignment; gathered scalars of
    /// fewer than half the domain's (longer ones reuse a buffer the H step
    /// freed: a workspace hands a freed buffer to any request of at least
    /// half its size); H's MSM, the largest, its bucket list (a u32 per
    /// scalar and window) and two levels of bucket partials (level 0's
    /// items and one slot per bucket, then one slot per bucket). With the
    /// whole key streamed, one chunk's MSM and its 0/1 split in place of
    /// H's.
    pub fn from_counts(c: &Counts) -> Needs {
        let (n, m) = (c.domain as u64, c.assignment as u64);
        let h_step = FR_BYTES * (4 * n + m);
        let gathered: u64 =
            (c.gathered.iter()).filter(|&&g| (g as u64) < n / 2).map(|&g| FR_BYTES * g as u64).sum();
        let base = h_step + gathered + CALL_SLACK;
        let chunk_scalars = c.chunk.min(c.domain);
        let key = [0, 1, 2, 3, 4].map(|i| {
            let per = if i == 4 { G2_BYTES } else { G1_BYTES };
            per * c.points[i] as u64
        });
        let chunk = c.chunk as u64;
        let b2 = if c.points[4] > 0 { 2 * chunk * G2_BYTES } else { 0 };
        Needs {
            key,
            fixed: c.fixed,
            matrices: c.matrices,
            call: base + msm_bytes(c.domain),
            streamed_call: base + msm_bytes(chunk_scalars) + SPLIT_BYTES * chunk_scalars as u64,
            stream: 2 * 2 * chunk * G1_BYTES + b2,
            pass_member: FR_BYTES * (n + m + c.gathered.iter().sum::<usize>() as u64),
            measured: false,
        }
    }

    fn key_bytes(&self) -> u64 {
        self.key.iter().sum()
    }

    /// One call's workspace with the `resident` parts on the device:
    /// `streamed_call` when none is, else `call`.
    pub fn call_for(&self, resident: [bool; 5]) -> u64 {
        match resident_bytes(self, resident) {
            0 => self.streamed_call,
            _ => self.call,
        }
    }
}

/// Device bytes of an MSM's bucket list and bucket partials at n scalars
/// (the window rule of `cuda::msm::window_bits`, repeated here so that the
/// plan builds without CUDA; a test there checks the two agree).
fn msm_bytes(n: usize) -> u64 {
    let c = plan_window_bits(n) as u64;
    let nwin = 255u64.div_ceil(c);
    let nb = nwin << (c - 1);
    let entries = n as u64 * nwin;
    let items = entries.div_ceil(128);
    4 * entries + JAC_BYTES * (items + 2 * nb)
}

/// The MSM's window width in bits for n scalars (cuda::msm::window_bits
/// without its sweep override).
pub fn plan_window_bits(n: usize) -> u32 {
    match n {
        n if n >= 3 << 25 => 20,
        n if n >= 1 << 23 => 17,
        n if n >= 1 << 21 => 16,
        n => (usize::BITS - n.max(1).leading_zeros()).saturating_sub(4).clamp(6, 15),
    }
}

/// A device as the plan sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Device {
    /// Bytes the plan may hand out: the card's free memory once the
    /// engine's context exists, or `[cuda] memory_limit_bytes` if lower.
    pub usable: u64,
    /// General workers calling the device (`scheduler.workers_per_device`).
    pub general: usize,
    /// Critical-lane workers (`scheduler.critical_workers_per_device`).
    pub urgent: usize,
    /// Most partitions one pass over streamed parts may hold
    /// (`cuda.pass_partitions`).
    pub pass_limit: usize,
    /// Most bytes the circuit's fixed bytes and resident key parts may take
    /// (`cuda.resident_budget_bytes`; `u64::MAX` when unset): parts beyond
    /// it stream even where the device could hold them.
    pub resident_limit: u64,
}

/// What a device keeps aside for its urgent circuits (the critical lane's
/// kinds, WinningPoSt by default) while another circuit runs: their keys
/// and fixed bytes, resident for good, and a workspace per lane worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Reserve {
    /// Keys, fixed bytes and matrices of the urgent circuits other than
    /// the one planned.
    pub circuits: u64,
    /// The lane's workspaces: one per critical worker, each the largest
    /// urgent call's peak.
    pub lane: u64,
}

impl Reserve {
    /// The reserve beside a circuit: `others` are the urgent circuits'
    /// needs other than its own, `lane_call` the largest urgent call's peak
    /// (its own included when it is urgent).
    pub fn new(device: &Device, others: &[Needs], lane_call: u64) -> Reserve {
        Reserve {
            circuits: others.iter().map(|n| n.fixed + n.matrices + n.key_bytes()).sum(),
            lane: device.urgent as u64 * lane_call,
        }
    }

    fn total(&self) -> u64 {
        self.circuits + self.lane
    }
}

/// Where a circuit's compiled matrices lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    /// In device memory: the evaluation reads them at the device's
    /// bandwidth.
    Device,
    /// In pinned host memory, which the evaluation kernels read in place
    /// across PCIe (7.4 GB per partition at 32 GiB PoRep): only where the
    /// circuit could not run with them on the device.
    Host,
}

/// A circuit's plan on one device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Which key parts stay on the device, [`PARTS`] order; the others
    /// stream from pinned host memory.
    pub resident: [bool; 5],
    /// Where the compiled matrices lie.
    pub matrices: Place,
    /// General calls that may hold a workspace on the device at once; a
    /// further call waits for one to end (its `lease` phase).
    pub slots: usize,
    /// Partitions one pass over the streamed parts may hold (1 when none
    /// streams).
    pub pass: usize,
    /// One call's workspace under this plan ([`Needs::call_for`]).
    pub call: u64,
    /// The bytes behind the choice.
    pub usable: u64,
    /// What the device keeps aside for its urgent circuits.
    pub reserve: Reserve,
    /// The circuit's needs the plan was made from.
    pub needs: Needs,
    /// Device bytes the general calls' workspaces take at once (their
    /// chunk buffers and the pass's further partitions included).
    pub workspaces: u64,
    /// Device bytes at the plan's peak: reserve, fixed, the matrices on
    /// the device, resident parts and the workspaces.
    pub device_bytes: u64,
    /// Pinned host bytes the streamed parts take.
    pub pinned_bytes: u64,
}

impl Plan {
    /// Whether any part of the key streams.
    pub fn streams(&self) -> bool {
        self.resident.iter().zip(self.needs.key).any(|(&r, b)| !r && b > 0)
    }

    /// Device bytes the engine's cache of resident entries (keys, tables,
    /// matrices, selections, the urgent circuits' among them) may hold
    /// while this circuit runs: all but the workspaces.
    pub fn cache_room(&self) -> u64 {
        self.usable - self.reserve.lane - self.workspaces
    }

    /// Device bytes the resident parts of the key take.
    pub fn resident_key_bytes(&self) -> u64 {
        resident_bytes(&self.needs, self.resident)
    }

    /// Pinned host bytes the plan holds: the streamed parts and the
    /// matrices when they lie on the host.
    pub fn host_bytes(&self) -> u64 {
        self.pinned_bytes + if self.matrices == Place::Host { self.needs.matrices } else { 0 }
    }

    /// One line for the log.
    pub fn describe(&self) -> String {
        let parts = |keep: bool| {
            let names: Vec<&str> = (PARTS.iter().zip(self.resident).zip(self.needs.key))
                .filter(|((_, r), b)| *r == keep && *b > 0)
                .map(|((name, _), _)| *name)
                .collect();
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(",")
            }
        };
        let gb = |b: u64| b as f64 / 1e9;
        let matrices = match self.matrices {
            _ if self.needs.matrices == 0 => String::new(),
            Place::Device => format!(", matrices {:.1} GB on the device", gb(self.needs.matrices)),
            Place::Host => {
                format!(", matrices {:.1} GB read from pinned host memory", gb(self.needs.matrices))
            }
        };
        format!(
            "resident {} ({:.1} GB), streamed {} ({:.1} GB pinned); {} general call(s) at once of {:.1} GB each ({}), passes of {}; fixed {:.1} GB{matrices}, urgent reserve {:.1} GB; {:.1} of {:.1} GB planned",
            parts(true),
            gb(self.resident_key_bytes()),
            parts(false),
            gb(self.pinned_bytes),
            self.slots,
            gb(self.call),
            if self.needs.measured { "measured" } else { "estimated: one at a time until a call measures it" },
            self.pass,
            gb(self.needs.fixed),
            gb(self.reserve.total()),
            gb(self.device_bytes),
            gb(self.usable),
        )
    }
}

/// What `/v1/status` shows of a device's memory: the device as planned and
/// each circuit's plan.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryReport {
    /// The device as the plans see it.
    pub device: Device,
    /// Each circuit planned on it.
    pub circuits: Vec<CircuitReport>,
}

/// One circuit's plan on a device, and what its calls measured.
#[derive(Clone, Debug, Serialize)]
pub struct CircuitReport {
    /// The circuit planned.
    pub circuit_id: String,
    /// Whether it runs urgent (the critical lane's kinds): its memory is reserved beside every
    /// other circuit's.
    pub urgent: bool,
    /// The largest workspace one of its calls held, measured (0: none yet).
    pub measured_call_bytes: u64,
    /// Its plan.
    pub plan: Plan,
}

/// Why a circuit cannot run on a device.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the device cannot hold this circuit even with its whole key streamed and its matrices on the host: it needs {need} bytes (fixed {fixed}, one streamed call {call}, urgent reserve {reserve}) of {usable} usable; raise [cuda] memory_limit_bytes if it is set below the card's memory, lower scheduler.critical_workers_per_device, or use a card with more memory"
)]
pub struct TooSmall {
    /// Bytes the circuit needs at least: fixed, one streamed call and the reserve.
    pub need: u64,
    /// Its NTT tables and selections.
    pub fixed: u64,
    /// One call's workspace with the whole key streamed.
    pub call: u64,
    /// The urgent circuits' reserve beside it.
    pub reserve: u64,
    /// What the device can give.
    pub usable: u64,
}

fn resident_bytes(needs: &Needs, resident: [bool; 5]) -> u64 {
    needs.key.iter().zip(resident).filter(|(_, r)| *r).map(|(b, _)| b).sum()
}

/// The plan for a circuit of `needs` on `device` beside `reserve`.
///
/// The whole key resident is the fastest way to prove, so it comes first,
/// with as many general calls at once as fit (at least one; one alone until
/// a call has measured the peak, [`Needs::measured`]). Otherwise the
/// key's parts are split: the largest set of parts that fits beside one
/// general call and its chunk buffers stays resident, the rest streams
/// (each chunk crossing PCIe once per pass), and what is left makes passes
/// longer, up to `pass_limit`. The compiled matrices stay on the device
/// unless they are what keeps the circuit from running at all: then the
/// evaluation reads them from pinned host memory ([`Place::Host`]). A
/// circuit whose fixed bytes, one streamed call and the reserve do not fit
/// is refused.
pub fn plan(device: &Device, needs: &Needs, reserve: Reserve) -> Result<Plan, TooSmall> {
    plan_with(device, needs, reserve, Place::Device)
        .or_else(|_| plan_with(device, needs, reserve, Place::Host))
}

/// [`plan`] with the matrices where `matrices` says.
fn plan_with(device: &Device, needs: &Needs, reserve: Reserve, matrices: Place) -> Result<Plan, TooSmall> {
    let key = needs.key_bytes();
    let fixed = needs.fixed + if matrices == Place::Device { needs.matrices } else { 0 };
    let avail = device.usable.checked_sub(reserve.total() + fixed);
    let stream_for = |resident: [bool; 5]| match resident_bytes(needs, resident) == key {
        true => 0,
        false => needs.stream,
    };
    let make = |resident: [bool; 5], slots: usize, pass: usize| {
        let call = needs.call_for(resident);
        let workspaces = slots as u64 * (call + stream_for(resident)) + (pass as u64 - 1) * needs.pass_member;
        let kept = resident_bytes(needs, resident);
        Plan {
            resident,
            matrices,
            slots,
            pass,
            call,
            usable: device.usable,
            reserve,
            needs: *needs,
            workspaces,
            device_bytes: reserve.total() + fixed + kept + workspaces,
            pinned_bytes: key - kept,
        }
    };
    let refused = || TooSmall {
        need: reserve.total() + fixed + needs.streamed_call + needs.stream,
        fixed,
        call: needs.streamed_call + needs.stream,
        reserve: reserve.total(),
        usable: device.usable,
    };
    let avail = avail.ok_or_else(refused)?;
    let cap = device.resident_limit.saturating_sub(fixed);
    let general = if needs.measured { device.general.max(1) } else { 1 };
    if let Some(slots) = (1..=general).rev().find(|&s| key <= cap && key + s as u64 * needs.call <= avail) {
        return Ok(make([true; 5], slots, 1));
    }
    // The set of parts with the most bytes that fits beside one call of
    // its own (32 sets; none resident, the smallest call, fits if any does).
    let beside = |r: [bool; 5]| resident_bytes(needs, r) + needs.call_for(r) + needs.stream;
    let resident = (0u32..32)
        .map(|bits| [0, 1, 2, 3, 4].map(|i| bits & (1 << i) != 0))
        .filter(|r| resident_bytes(needs, *r) <= cap && beside(*r) <= avail)
        .max_by_key(|r| resident_bytes(needs, *r))
        .ok_or_else(refused)?;
    let left = avail - beside(resident);
    let more = left.checked_div(needs.pass_member).unwrap_or(0) as usize;
    let pass = (1 + more).clamp(1, device.pass_limit.max(1));
    Ok(make(resident, 1, pass))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1_000_000_000;
    const GIB: u64 = 1 << 30;

    /// Points per chunk of a streamed part (the engine's default).
    const CHUNK: usize = 1 << 23;

    /// A shape from its constraint-system counts, as the Filecoin circuits
    /// give them: inputs (the constant one included), aux, the A- and
    /// B-dense variables, the constraints (the domain is the next power of
    /// two above constraints plus inputs). Fixed bytes: the NTT's twiddle
    /// table (half an element per domain point) and selections (a u32 per
    /// gathered scalar); the compiled matrices: about 5.6 terms of 8 bytes
    /// per constraint (the 32 GiB PoRep's 722 M terms over 130 M rows) and
    /// a u32 end per row and matrix.
    fn shape(inputs: usize, aux: usize, a_dense: usize, b_dense: usize, constraints: usize) -> Counts {
        let domain = (constraints + inputs).next_power_of_two();
        let terms = constraints as u64 * 56 / 10;
        Counts {
            domain,
            assignment: inputs + aux,
            points: [inputs + a_dense, b_dense, aux, domain - 1, b_dense],
            gathered: [a_dense + inputs - 1, b_dense],
            fixed: 32 * (domain / 2 + 1) as u64 + 4 * (a_dense + b_dense) as u64,
            matrices: 8 * terms + 12 * constraints as u64,
            chunk: CHUNK,
        }
    }

    /// The 32 GiB PoRep partition: 130,278,869 constraints, 130,169,893
    /// aux (docs/filecoin.md); A and B densities that give the key's
    /// 47.37 GB measured on the device.
    fn porep_32() -> Counts {
        shape(328, 130_169_893, 129_700_000, 33_130_000, 130_278_869)
    }
    /// 64 GiB: one more tree level per challenge; its key measured
    /// 47.6 GB, 0.5% more than the 32 GiB one (docs/benchmarks.md).
    fn porep_64() -> Counts {
        shape(328, 130_800_000, 130_300_000, 33_300_000, 130_900_000)
    }
    /// A 32 GiB WindowPoSt partition (2,349 sectors, about 125 M
    /// constraints; 2 KiB densities: A 0.76, B 0.72 of aux).
    fn window_32() -> Counts {
        shape(23_491, 126_000_000, 95_800_000, 90_700_000, 125_000_000)
    }
    fn window_64() -> Counts {
        shape(23_491, 131_000_000, 99_600_000, 94_300_000, 130_000_000)
    }
    /// A 32 GiB SnapDeals partition (about 81 M constraints; 2 KiB
    /// densities: A 0.996, B 0.26 of aux).
    fn snap_32() -> Counts {
        shape(5, 81_000_000, 80_700_000, 21_100_000, 81_100_000)
    }
    fn snap_64() -> Counts {
        shape(5, 84_000_000, 83_700_000, 21_900_000, 84_100_000)
    }
    /// A 32 GiB WinningPoSt (about 3.5 M constraints).
    fn winning_32() -> Counts {
        shape(133, 3_540_000, 2_680_000, 2_580_000, 3_500_000)
    }
    fn winning_64() -> Counts {
        shape(133, 3_700_000, 2_800_000, 2_700_000, 3_660_000)
    }

    /// The devices of the issue, their usable bytes as a context leaves
    /// them (about 0.6 GB less than the card), and the default workers.
    fn device(usable: u64) -> Device {
        Device { usable, general: 2, urgent: 1, pass_limit: 2, resident_limit: u64::MAX }
    }
    const H200: u64 = 150_100_000_000;
    const H100: u64 = 84_900_000_000;

    /// A circuit's needs once a call has measured its peak at the
    /// estimate.
    fn measured(counts: &Counts) -> Needs {
        Needs { measured: true, ..Needs::from_counts(counts) }
    }

    /// The plan beside the default lane (WinningPoSt preloaded as the
    /// urgent circuit) once a call has measured the estimate.
    fn planned(usable: u64, counts: Counts) -> Result<Plan, TooSmall> {
        let d = device(usable);
        let winning = measured(&winning_32());
        plan(&d, &measured(&counts), Reserve::new(&d, &[winning], winning.call))
    }

    /// Every plan fits its device and holds what it says.
    fn consistent(p: &Plan) {
        assert!(p.device_bytes <= p.usable, "{}", p.describe());
        assert_eq!(p.resident_key_bytes() + p.pinned_bytes, p.needs.key.iter().sum::<u64>());
        assert!(p.slots >= 1 && p.pass >= 1);
        assert_eq!(p.streams(), p.pinned_bytes > 0);
    }

    #[test]
    fn the_32_gib_porep_estimate_is_the_shape_the_device_measured() {
        let n = Needs::from_counts(&porep_32());
        // The key: 47,373,896,256 bytes on the device (issue 37's H100 run).
        let key: u64 = n.key.iter().sum();
        assert!(key.abs_diff(47_373_896_256) < GB / 10, "{key}");
        // The twiddle table (2.1 GB at 2^27; tables per stage and
        // direction took 8.6 GB, the H100 run's failed request) and the
        // selections (0.65 GB).
        assert!(n.fixed > 2_700_000_000 && n.fixed < 2_900_000_000, "{}", n.fixed);
        // The compiled matrices: 7.4 GB on the device (docs/gpu.md).
        assert!(n.matrices.abs_diff(7_400_000_000) < GB / 2, "{}", n.matrices);
        // A call: the H step's five buffers of about 4.3 GB, B's gathered
        // scalars and H's MSM: between 25 and 40 GB.
        assert!(n.call > 25 * GB && n.call < 40 * GB, "{}", n.call);
    }

    #[test]
    fn an_h200_keeps_the_32_gib_porep_key_resident() {
        let p = planned(H200, porep_32()).expect("runnable");
        consistent(&p);
        assert_eq!(p.resident, [true; 5], "{}", p.describe());
        assert_eq!((p.pinned_bytes, p.pass), (0, 1));
    }

    #[test]
    fn an_80_gb_h100_runs_the_32_gib_porep_with_part_of_its_key_streamed() {
        // Main at 527be02 made the whole key resident here and every
        // partition failed for the NTT tables beside it.
        let p = planned(H100, porep_32()).expect("runnable on an 80 GB H100");
        eprintln!("32 GiB PoRep on an 80 GB H100: {}", p.describe());
        consistent(&p);
        assert!(p.streams(), "{}", p.describe());
        assert!(p.resident_key_bytes() > 10 * GB, "{}", p.describe());
        assert_eq!(p.slots, 1);
        // The host holds only the streamed parts, not the whole key.
        assert!(p.pinned_bytes < 40 * GB, "{}", p.describe());
    }

    #[test]
    fn cards_of_16_and_24_gb_are_refused_at_32_gib_naming_the_setting() {
        for usable in [16 * GIB, 24 * GIB] {
            let e = planned(usable, porep_32()).expect_err("too small");
            assert!(e.need > usable && e.usable == usable);
            assert!(e.to_string().contains("[cuda] memory_limit_bytes"), "{e}");
        }
    }

    #[test]
    fn every_kind_at_32_and_64_gib_on_each_card() {
        let kinds = [
            ("porep 32", porep_32()),
            ("porep 64", porep_64()),
            ("window 32", window_32()),
            ("window 64", window_64()),
            ("snap 32", snap_32()),
            ("snap 64", snap_64()),
            ("winning 32", winning_32()),
            ("winning 64", winning_64()),
        ];
        for (name, counts) in kinds {
            for usable in [16 * GIB, 24 * GIB, H100, H200] {
                let needs = Needs::from_counts(&counts);
                match planned(usable, counts) {
                    Ok(p) => {
                        consistent(&p);
                        // Nothing streams that the device could have kept:
                        // the bytes left before passes took them are less
                        // than any streamed part.
                        // (Keeping a first part costs the larger call.)
                        let left = p.usable - p.device_bytes + (p.pass as u64 - 1) * needs.pass_member;
                        let first = needs.call - needs.call_for(p.resident);
                        for (i, &r) in p.resident.iter().enumerate() {
                            assert!(r || needs.key[i] + first > left, "{name} {usable}: {}", p.describe());
                        }
                    }
                    // Refused only where even one streamed call cannot fit.
                    Err(e) => assert!(e.need > usable, "{name} {usable}: {e}"),
                }
            }
            // Every kind runs on the 80 GB H100 and on the H200.
            for usable in [H100, H200] {
                planned(usable, counts).unwrap_or_else(|e| panic!("{name} on {usable}: {e}"));
            }
        }
        // A WinningPoSt, small, runs whole-resident with both general calls
        // on every card.
        for usable in [16 * GIB, 24 * GIB, H100, H200] {
            let p = planned(usable, winning_32()).expect("winning fits");
            assert_eq!((p.resident, p.slots), ([true; 5], 2), "{}", p.describe());
        }
    }

    #[test]
    fn the_matrices_leave_the_device_only_where_the_circuit_cannot_run_with_them() {
        let needs = measured(&porep_32());
        // Where the whole key fits, or part of it streams, they stay.
        for usable in [H100, H200] {
            let p = planned(usable, porep_32()).unwrap();
            assert_eq!(p.matrices, Place::Device, "{}", p.describe());
            assert_eq!(p.host_bytes(), p.pinned_bytes);
        }
        // The least a device needs with the matrices on the host is what
        // a smaller one is told; there the plan runs, the whole key
        // streamed, and the host holds the matrices beside the key.
        let floor = planned(16 * GIB, porep_32()).unwrap_err().need;
        let p = planned(floor, porep_32()).unwrap();
        consistent(&p);
        assert_eq!((p.matrices, p.resident), (Place::Host, [false; 5]), "{}", p.describe());
        assert_eq!(p.host_bytes(), p.pinned_bytes + needs.matrices);
        assert!(p.describe().contains("read from pinned host memory"), "{}", p.describe());
        assert!(planned(floor - 1, porep_32()).is_err());
        // With the matrices' bytes more, they are on the device again.
        let p = planned(floor + needs.matrices, porep_32()).unwrap();
        assert_eq!(p.matrices, Place::Device, "{}", p.describe());
        let p = planned(floor + needs.matrices - 1, porep_32()).unwrap();
        assert_eq!(p.matrices, Place::Host, "{}", p.describe());
        // A 40 GB card (about 41.5 GB usable) runs it with the matrices
        // on the host; a 48 GB one (about 47.2 GB) keeps them.
        let (card_40, card_48) = (41_500_000_000, 47_200_000_000);
        assert!(floor <= card_40 && floor + needs.matrices > card_40, "floor {floor}");
        assert_eq!(planned(card_48, porep_32()).unwrap().matrices, Place::Device);
    }

    #[test]
    fn general_calls_run_one_at_a_time_until_a_call_is_measured() {
        // The 32 GiB WindowPoSt on the H200: two calls at once on the
        // estimate (33.7 GB each measured 37.3 GB on the H100: two of those
        // and the key overrun the device by about 5 GB).
        let d = device(H200);
        let winning = measured(&winning_32());
        let reserve = Reserve::new(&d, &[winning], winning.call);
        let estimate = Needs::from_counts(&window_32());
        let first = plan(&d, &estimate, reserve).unwrap();
        assert_eq!((first.resident, first.slots), ([true; 5], 1), "{}", first.describe());
        assert!(first.describe().contains("one at a time until a call measures it"), "{}", first.describe());
        // Measured at the estimate: the slots the device holds.
        let same = plan(&d, &Needs { measured: true, ..estimate }, reserve).unwrap();
        assert_eq!(same.slots, 2, "{}", same.describe());
        // Measured at the H100's 37.3 GB: two calls still fit beside the
        // key (148.4 of 150.1 GB, since the twiddle table is 2.1 GB and
        // not 8.6); at 39 GB only one does.
        let real = Needs { call: 37_300_000_000, measured: true, ..estimate };
        let p = plan(&d, &real, reserve).unwrap();
        consistent(&p);
        assert_eq!(p.slots, 2, "{}", p.describe());
        let p = plan(&d, &Needs { call: 39_000_000_000, ..real }, reserve).unwrap();
        consistent(&p);
        assert_eq!(p.slots, 1, "{}", p.describe());
    }

    #[test]
    fn the_slots_shrink_before_the_key_streams() {
        let needs = measured(&porep_32());
        let key: u64 = needs.key.iter().sum();
        // Room for the key and one call, not two: one slot, all resident.
        let usable = needs.fixed + needs.matrices + key + needs.call + needs.call / 2;
        let p = plan(&device(usable), &needs, Reserve::default()).unwrap();
        assert_eq!((p.resident, p.slots), ([true; 5], 1));
        // Room for two: both.
        let p = plan(&device(usable + needs.call), &needs, Reserve::default()).unwrap();
        assert_eq!(p.slots, 2);
    }

    #[test]
    fn the_largest_set_of_parts_that_fits_stays() {
        let needs = Needs::from_counts(&porep_32());
        let [a, b1, l, h, _b2] = needs.key;
        // Room beside one streamed call for H and L and half of B1, the
        // smallest part: no set of parts lies between H and L's bytes and
        // that.
        let usable = needs.fixed + needs.matrices + needs.call + needs.stream + h + l + b1 / 2;
        let p = plan(&device(usable), &needs, Reserve::default()).unwrap();
        consistent(&p);
        assert!(p.resident[2] && p.resident[3] && !p.resident[0] && a > b1, "{}", p.describe());
        assert_eq!(p.pass, 1, "half of B1's bytes hold no second partition's scalars");
    }

    #[test]
    fn a_resident_limit_streams_what_it_leaves_out() {
        let needs = Needs::from_counts(&porep_32());
        let [_a, _b1, _l, h, _b2] = needs.key;
        let limited = Device { resident_limit: needs.fixed + needs.matrices + h, ..device(H200) };
        let p = plan(&limited, &needs, Reserve::default()).unwrap();
        consistent(&p);
        assert_eq!(p.resident_key_bytes(), h, "{}", p.describe());
        // The passes take what the limit left of the device, up to
        // pass_limit: a pass member's scalars (13.7 GB) would fit beside a
        // resident part of that size, so without a limit the part stays
        // instead (the_largest_set_of_parts_that_fits_stays).
        assert_eq!(p.pass, 2);
        let one = Device { pass_limit: 1, ..limited };
        assert_eq!(plan(&one, &needs, Reserve::default()).unwrap().pass, 1);
    }

    #[test]
    fn the_urgent_reserve_comes_first() {
        let needs = Needs::from_counts(&porep_32());
        let key: u64 = needs.key.iter().sum();
        let usable = needs.fixed + needs.matrices + key + needs.call;
        let alone = plan(&device(usable), &needs, Reserve::default()).unwrap();
        assert_eq!(alone.resident, [true; 5]);
        let winning = Needs::from_counts(&winning_32());
        let reserve = Reserve::new(&device(usable), &[winning], winning.call);
        assert!(reserve.lane == winning.call && reserve.circuits > 0);
        let beside = plan(&device(usable), &needs, reserve).unwrap();
        assert!(beside.streams(), "the lane's bytes push part of the key out: {}", beside.describe());
        consistent(&beside);
    }
}
