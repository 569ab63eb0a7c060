//! Kernel spans, ms on a device's clock: how much of one no other covers.
//! The engine credits each call with that share of the device's
//! kernel-active time (`ProveStartOutput::device_active`); the GPU
//! benchmark sums the shares of a run's spans (feature `bench-internals`).

/// How much of `span` (start, end) none of `others` covers: its share of
/// their union once all of them are counted, in whatever order.
pub fn newly_covered<'s>(others: impl IntoIterator<Item = &'s (f64, f64)>, (a, b): (f64, f64)) -> f64 {
    let mut cut: Vec<(f64, f64)> =
        (others.into_iter()).map(|&(x, y)| (x.max(a), y.min(b))).filter(|(x, y)| x < y).collect();
    cut.sort_by(|p, q| p.0.total_cmp(&q.0));
    let (mut covered, mut end) = (0.0, a);
    for (x, y) in cut {
        if y > end {
            covered += y - x.max(end);
            end = y;
        }
    }
    (b - a).max(0.0) - covered
}

#[cfg(test)]
mod tests {
    use super::newly_covered;

    #[test]
    fn a_span_counts_only_what_no_other_covers() {
        let kept = [(0.0, 4.0), (6.0, 8.0), (7.0, 9.0)];
        // [2, 10] minus [2, 4] and [6, 9]: [4, 6] and [9, 10], 3 ms.
        assert_eq!(newly_covered(&kept, (2.0, 10.0)), 3.0);
        assert_eq!(newly_covered(&kept, (1.0, 3.0)), 0.0);
        assert_eq!(newly_covered(&[], (1.0, 3.0)), 2.0);
        // Shares in any order add up to the union (0-9 with a gap 4-6: 7).
        let total: f64 = (0..kept.len()).map(|i| newly_covered(&kept[..i], kept[i])).sum();
        assert_eq!(total, 7.0);
    }
}
