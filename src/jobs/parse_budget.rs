//! The parse budget: the memory that submissions being read and parsed may
//! hold at once, counted before the work. A front end reserves a body's
//! estimated peak (its length times [`PARSE_PEAK_FACTOR`], plus
//! [`PARSE_SLACK_BYTES`]) before it reads the body (HTTP, from the declared
//! length) or parses it (gRPC, whose message is already read); the
//! reservation is held while the body arrives and is parsed, and returned
//! when its [`ParsePermit`] drops, so a body that stalls just short of its
//! end holds its share and no more. When the bytes or the number of
//! requests would pass the limits (`limits.parse_budget_bytes`,
//! `limits.max_parsing_requests`), the submission is refused at once with a
//! retry hint: nothing waits in a queue.

use std::sync::{Arc, Mutex};

use crate::config::{ConfigError, Limits};

/// A submission's peak while it is read and parsed, as a multiple of its
/// body: the body (with the read buffer's spare capacity), its compact
/// canonical copy and the transient buffers that build it, the fields'
/// own text, and a Filecoin input's typed form or a family input's JSON
/// tree (itself held to `job_input::TREE_FACTOR` times its text). The
/// hostile test (`case_intake`) measures a request's peak against it.
pub const PARSE_PEAK_FACTOR: u64 = 8;

/// What a submission may hold beyond its factor, whatever its size: the
/// JSON tree allowance of a small input (`job_input::TREE_SLACK_BYTES`) and
/// the parse's fixed costs.
pub const PARSE_SLACK_BYTES: u64 = 8 << 20;

/// `limits.parse_budget_bytes` unset: 2 GiB of a 24 GB host, fifteen
/// bodies of the default 16 MiB limit at once.
const DEFAULT_BUDGET_BYTES: u64 = 2 << 30;

/// The bytes and requests reserved now.
#[derive(Debug, Default)]
struct InUse {
    /// Sum of the live permits' estimates.
    bytes: u64,
    /// Live permits.
    requests: usize,
}

/// The budget every submission is admitted against (one per daemon).
#[derive(Debug)]
pub struct ParseBudget {
    /// What the live permits hold; each permit returns its share on drop.
    in_use: Arc<Mutex<InUse>>,
    /// `limits.parse_budget_bytes`.
    limit_bytes: u64,
    /// `limits.max_parsing_requests`.
    max_requests: usize,
}

/// One submission's share of the budget, returned when it drops.
#[derive(Debug)]
pub struct ParsePermit {
    /// The budget to give the share back to.
    in_use: Arc<Mutex<InUse>>,
    /// The share: the estimate reserved.
    bytes: u64,
}

/// Why a submission was not admitted: the budget is full now.
#[derive(Debug, thiserror::Error)]
pub enum ParseBudgetFull {
    /// As many submissions as `limits.max_parsing_requests` are being read
    /// or parsed.
    #[error("{limit} requests are being read and parsed (limits.max_parsing_requests); nothing was queued, retry shortly")]
    Requests {
        /// `limits.max_parsing_requests`.
        limit: usize,
    },
    /// The body's estimate does not fit what is left of the bytes.
    #[error(
        "reading and parsing this {body_bytes}-byte body is estimated at {needed} bytes, and {in_use} of limits.parse_budget_bytes ({limit}) are held by requests being parsed; nothing was queued, retry shortly"
    )]
    Bytes {
        /// The body's length (declared, or the body limit when undeclared).
        body_bytes: usize,
        /// Its estimate.
        needed: u64,
        /// What other submissions hold now.
        in_use: u64,
        /// `limits.parse_budget_bytes`.
        limit: u64,
    },
}

/// A body's estimated peak while it is read and parsed.
pub fn parse_estimate(body_bytes: usize) -> u64 {
    (body_bytes as u64).saturating_mul(PARSE_PEAK_FACTOR).saturating_add(PARSE_SLACK_BYTES)
}

impl ParseBudget {
    /// The budget `limits` configure; refused when a body of
    /// `limits.max_body_bytes` could never be admitted.
    pub fn new(limits: &Limits) -> Result<Self, ConfigError> {
        let largest = parse_estimate(limits.max_body_bytes);
        let limit_bytes = limits.parse_budget_bytes.unwrap_or(DEFAULT_BUDGET_BYTES.max(largest));
        if limit_bytes < largest || limits.max_parsing_requests == 0 {
            return Err(ConfigError::ParseBudget {
                budget_bytes: limit_bytes,
                largest,
                max_body_bytes: limits.max_body_bytes,
                max_requests: limits.max_parsing_requests,
            });
        }
        Ok(Self { in_use: Arc::default(), limit_bytes, max_requests: limits.max_parsing_requests })
    }

    /// The limit a `body_bytes` body's estimate exceeds on its own, if it
    /// does: such a body is never admitted, however long it waits.
    pub fn never_admits(&self, body_bytes: usize) -> Option<u64> {
        (parse_estimate(body_bytes) > self.limit_bytes).then_some(self.limit_bytes)
    }

    /// Reserves the estimate of a `body_bytes` body, or refuses when it
    /// does not fit now.
    pub fn reserve(&self, body_bytes: usize) -> Result<ParsePermit, ParseBudgetFull> {
        let needed = parse_estimate(body_bytes);
        let mut in_use = self.in_use.lock().expect("the parse budget's lock");
        if in_use.requests >= self.max_requests {
            return Err(ParseBudgetFull::Requests { limit: self.max_requests });
        }
        if in_use.bytes.saturating_add(needed) > self.limit_bytes {
            return Err(ParseBudgetFull::Bytes {
                body_bytes,
                needed,
                in_use: in_use.bytes,
                limit: self.limit_bytes,
            });
        }
        in_use.bytes += needed;
        in_use.requests += 1;
        Ok(ParsePermit { in_use: self.in_use.clone(), bytes: needed })
    }

    /// Bytes and requests reserved now.
    pub fn in_use(&self) -> (u64, usize) {
        let in_use = self.in_use.lock().expect("the parse budget's lock");
        (in_use.bytes, in_use.requests)
    }
}

impl Drop for ParsePermit {
    fn drop(&mut self) {
        let mut in_use = self.in_use.lock().expect("the parse budget's lock");
        in_use.bytes -= self.bytes;
        in_use.requests -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_over_the_whole_budget_is_never_admitted_and_one_within_it_waits_its_turn() {
        let limits =
            Limits { max_body_bytes: 1 << 20, parse_budget_bytes: Some(32 << 20), ..Limits::default() };
        let budget = ParseBudget::new(&limits).unwrap();
        // 4 MiB: 40 MiB estimated, over the 32 MiB budget however empty it is.
        assert_eq!(budget.never_admits(4 << 20), Some(32 << 20));
        // 2 MiB: 24 MiB, admitted once, then full for now, not for good.
        assert_eq!(budget.never_admits(2 << 20), None);
        let held = budget.reserve(2 << 20).unwrap();
        assert!(matches!(budget.reserve(2 << 20), Err(ParseBudgetFull::Bytes { .. })));
        assert_eq!(budget.never_admits(2 << 20), None);
        drop(held);
        assert!(budget.reserve(2 << 20).is_ok());
    }
}
