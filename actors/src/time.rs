//! The actors' one set of time conversions: durations as the API reports
//! them (milliseconds, rounded to the microsecond), wall-clock times as Unix
//! milliseconds, and monotonic instants placed on the wall clock.

use std::time::{Duration, Instant, SystemTime};

/// A duration in milliseconds, rounded to the microsecond.
pub fn ms(d: Duration) -> f64 {
    round_ms(d.as_secs_f64() * 1e3)
}

/// Rounds milliseconds to the microsecond: finer digits are noise in JSON.
pub fn round_ms(value: f64) -> f64 {
    (value * 1e3).round() / 1e3
}

/// Whole milliseconds since the Unix epoch (0 for a time before it).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The wall-clock time of a Unix millisecond count (as stored).
pub fn from_unix_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

/// The monotonic instant of a wall-clock time in the past (now if the clock
/// cannot go back that far), so that restored jobs keep their age.
pub fn instant_at(wall: SystemTime) -> Instant {
    let now = Instant::now();
    let age = SystemTime::now().duration_since(wall).unwrap_or_default();
    now.checked_sub(age).unwrap_or(now)
}

/// Maps instants to wall-clock time and back for the API: one reading of
/// both clocks, taken once, so every conversion agrees with every other.
#[derive(Clone, Copy)]
pub struct WallClock {
    /// The monotonic side of the reading.
    instant: Instant,
    /// The wall-clock side, in Unix milliseconds with a fraction.
    unix_ms: f64,
}

impl WallClock {
    /// Reads both clocks now.
    pub fn now() -> Self {
        let unix = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        Self { instant: Instant::now(), unix_ms: unix.as_secs_f64() * 1e3 }
    }

    /// The instant of the reading.
    pub fn instant(&self) -> Instant {
        self.instant
    }

    /// Unix milliseconds of an instant, rounded like [`ms`].
    pub fn unix_ms(&self, at: Instant) -> f64 {
        let offset = match at.checked_duration_since(self.instant) {
            Some(after) => after.as_secs_f64(),
            None => -(self.instant - at).as_secs_f64(),
        };
        round_ms(self.unix_ms + offset * 1e3)
    }

    /// The instant of Unix milliseconds (clamped to the reading if the
    /// monotonic clock cannot go back that far).
    pub fn instant_of(&self, unix_ms: f64) -> Instant {
        let offset = Duration::from_secs_f64((unix_ms - self.unix_ms).abs() / 1e3);
        if unix_ms >= self.unix_ms {
            self.instant + offset
        } else {
            self.instant.checked_sub(offset).unwrap_or(self.instant)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_ms_round_trips_through_the_stored_form() {
        let t = from_unix_ms(1_700_000_000_123);
        assert_eq!(unix_ms(t), 1_700_000_000_123);
        assert_eq!(unix_ms(SystemTime::UNIX_EPOCH - Duration::from_secs(1)), 0);
    }

    #[test]
    fn ms_rounds_to_the_microsecond() {
        assert_eq!(ms(Duration::from_nanos(1_234_567)), 1.235);
        assert_eq!(round_ms(0.0004), 0.0);
    }

    #[test]
    fn the_wall_clock_maps_instants_both_ways() {
        let clock = WallClock::now();
        let later = clock.instant() + Duration::from_millis(250);
        let unix = clock.unix_ms(later);
        assert!((unix - clock.unix_ms(clock.instant()) - 250.0).abs() < 0.002, "{unix}");
        let back = clock.instant_of(unix).duration_since(clock.instant());
        assert!(back.abs_diff(Duration::from_millis(250)) < Duration::from_micros(2), "{back:?}");
    }

    #[test]
    fn a_past_wall_time_is_an_earlier_instant() {
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        let age = Instant::now().duration_since(instant_at(hour_ago));
        assert!(age >= Duration::from_secs(3599), "{age:?}");
    }
}
