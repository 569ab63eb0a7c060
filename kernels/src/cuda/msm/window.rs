//! The window plan: the width c of the signed windows for n scalars, how
//! many windows hold a halved scalar, and the results' layout that follows
//! (`Shape`: the window sums, then the sum of the ones), which the host's
//! Horner step reads.

/// Smallest window width: the `CUZK_MSM_C` override is clamped to it, and
/// it bounds the number of window sums.
const MIN_C: u32 = 4;

/// Result slots an MSM may write (window sums of the narrowest window, plus
/// the sum of the ones): callers reserve this many per MSM.
pub const OUT_SLOTS: usize = (255 / MIN_C + 1) as usize + 1;

/// A sweep's override of a plan choice: the environment variable `name` as
/// a number, if it is one.
pub(super) fn sweep_override(name: &str) -> Option<u32> {
    std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok())
}

/// Window size for n points (override: CUZK_MSM_C).
pub fn window_bits(n: usize) -> u32 {
    if let Some(c) = sweep_override("CUZK_MSM_C") {
        return c.clamp(MIN_C, 24);
    }
    // Measured on the H200 (docs/gpu.md, runs 41-42; random scalars): 20
    // bits from 1.5 x 2^26 points (a 32 GiB PoRep's H: 2^27 - 1), where 13
    // windows beat 15 of 17 bits (G1: 973 against 998 ms at 2^27); 17 bits
    // from 2^23 (15 windows: 507 against 520 ms for 16 bits at 2^26, 133.0
    // against 133.9 at 2^24); 16 from 2^21 (G2 at 2^22: 113.0 against
    // 116.3 ms for 15 bits, where G1 gains 1.4% from 15: one plan serves
    // both groups, and G2 is the one near its target); 15 below (17
    // windows: G1 12.0 against 13.1 ms at 2^20). 15 and 17 divide 255
    // (msm.cuh: halved scalars need c * nwin >= 255).
    if n >= 3 << 25 {
        return 20;
    }
    if n >= 1 << 23 {
        return 17;
    }
    if n >= 1 << 21 {
        return 16;
    }
    let log = usize::BITS - n.max(1).leading_zeros();
    (log.saturating_sub(4)).clamp(6, 15)
}

/// What an MSM's results are: `nwin` window sums in 2^c, then the sum of the
/// ones when `ones`. Outlives the plan (the host combines after the download).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Window width in bits; the host's Horner step doubles c times per window.
    pub c: u32,
    /// Window sums written (0 when no scalar goes through the buckets).
    pub nwin: u32,
    /// Whether slot `nwin` holds the sum of the points whose scalar is 1.
    pub ones: bool,
}

impl Shape {
    /// Slots written, at most OUT_SLOTS.
    pub fn outputs(&self) -> usize {
        self.nwin as usize + self.ones as usize
    }
}
