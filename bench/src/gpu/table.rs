//! The GPU benchmark's result table: each line printed on stderr as it
//! comes (a long run shows progress) and kept for the table the command
//! prints at the end, and the median its rows report.

use std::fmt::Write as _;

/// The median of the values (the mean of the middle two for an even count).
pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A result line: on stderr as it comes, and into the returned table.
pub(super) fn line(out: &mut String, s: String) {
    eprintln!("{s}");
    let _ = writeln!(out, "{s}");
}
