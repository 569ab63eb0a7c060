//! Wall-clock time as the API and the job store write it: Unix milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix milliseconds (0 if the clock is before 1970).
pub fn now_unix_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1e3
}
