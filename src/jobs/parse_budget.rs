//! The parse budget: the memory that submissions being read and parsed may
//! hold at once, counted before the work. A submission's share is its
//! estimated peak for the bytes it holds (their count times
//! [`PARSE_PEAK_FACTOR`], plus [`PARSE_SLACK_BYTES`]): reserved for what
//! has arrived when it is admitted (nothing, for an HTTP body not yet read;
//! all of it, for a gRPC message, which arrives whole) and grown as each
//! further piece arrives, so a declared length costs nothing until its
//! bytes come. A share is held while the body arrives and is parsed, and
//! returned when its [`ParsePermit`] drops. When the bytes or the number of
//! requests would pass the limits (`limits.parse_budget_bytes`,
//! `limits.max_parsing_requests`), an HTTP submission is refused at once
//! with a retry hint, before its body is read; a gRPC message, whose memory
//! is held already, waits its turn for at most `limits.parse_wait_s`
//! (`reserve_waiting`), so that a burst of calls is parsed, not refused.
//!
//! Urgent submissions keep a reserve: room for
//! `limits.urgent_parsing_requests` bodies of at most
//! `limits.urgent_body_bytes` (a WinningPoSt's is a few hundred KB), in
//! bytes and in requests, that larger bodies cannot take. A body's class is
//! known before it is read (its declared length, or the body limit when it
//! declares none), so bulk bodies that stall or arrive slowly hold at most
//! the rest, and a WinningPoSt still finds its place.
//!
//! Each tenant holds at most its share of its class's ceiling
//! (`limits.parse_share_per_tenant`, half by default, in requests and in
//! bytes; never less than one request and one of the class's largest
//! bodies): a tenant whose bodies stall, or that sends a burst, is refused
//! (HTTP 429) or waits (gRPC) at its share, and the rest stays for the
//! others. Anonymous callers are a tenant like any other. The operator's
//! own submissions (a caller with the admin scope, and every caller of a
//! daemon without tokens, where there is no other tenant) are held to no
//! share: the shares keep tenants from each other, not from the operator.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_actors::Tenant;
use serde::Serialize;
use tokio::sync::Notify;

use crate::config::{tenant_share, ConfigError, Limits};

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

/// What the budget and its permits share.
#[derive(Debug, Default)]
struct Shared {
    /// The bytes and requests reserved now.
    in_use: Mutex<InUse>,
    /// Told whenever a permit returns its share, so that a message waiting
    /// for a place (`reserve_waiting`) tries again at once.
    freed: Notify,
}

/// What live permits hold: all of them, or one tenant's.
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    /// Sum of the permits' estimates.
    bytes: u64,
    /// Permits.
    requests: usize,
}

/// The bytes and requests reserved now.
#[derive(Debug, Default)]
struct InUse {
    /// Every live permit's.
    all: Held,
    /// Each tenant's that holds a permit (an entry goes with its last
    /// permit, so there are at most as many as live permits).
    by_tenant: HashMap<Tenant, Held>,
}

impl InUse {
    /// `tenant`'s holding, nothing when it holds no permit.
    fn tenant(&self, tenant: &Tenant) -> Held {
        self.by_tenant.get(tenant).copied().unwrap_or_default()
    }

    /// `more` held, by every permit and by `tenant`'s when it has one.
    fn add(&mut self, tenant: Option<&Tenant>, more: Held) {
        self.all.bytes += more.bytes;
        self.all.requests += more.requests;
        if let Some(tenant) = tenant {
            let mine = self.by_tenant.entry(tenant.clone()).or_default();
            mine.bytes += more.bytes;
            mine.requests += more.requests;
        }
    }

    /// `less` returned; a tenant that holds nothing more is forgotten.
    fn remove(&mut self, tenant: Option<&Tenant>, less: Held) {
        self.all.bytes -= less.bytes;
        self.all.requests -= less.requests;
        if let Some(tenant) = tenant {
            if let Some(mine) = self.by_tenant.get_mut(tenant) {
                mine.bytes -= less.bytes;
                mine.requests -= less.requests;
                if mine.requests == 0 {
                    self.by_tenant.remove(tenant);
                }
            }
        }
    }
}

/// What one class of body may hold, with every other submission's share,
/// and what one tenant's submissions may hold of it.
#[derive(Clone, Copy, Debug)]
struct Ceiling {
    /// Bytes of all live permits together.
    bytes: u64,
    /// Live permits together.
    requests: usize,
    /// Bytes of one tenant's live permits together.
    tenant_bytes: u64,
    /// One tenant's live permits together.
    tenant_requests: usize,
    /// The bulk bodies' ceiling, below an urgent reserve: refusals say so.
    bulk: bool,
}

impl Ceiling {
    /// The class's ceiling of `bytes` and `requests`, with `share` of each
    /// for one tenant, never less than one request and the estimate of the
    /// class's `largest` body; refused when `share` is no fraction.
    fn new(bytes: u64, requests: usize, share: f64, largest: u64, bulk: bool) -> Result<Self, ConfigError> {
        let tenant_requests = tenant_share("parse_share_per_tenant", share, requests)?;
        let tenant_bytes = ((bytes as f64 * share) as u64).clamp(largest.min(bytes), bytes);
        Ok(Self { bytes, requests, tenant_bytes, tenant_requests, bulk })
    }

    /// Whether a permit of `tenant`'s (none: held to no share) may hold the
    /// estimate `needed` of its `received` bytes, beside what every permit
    /// and the tenant's other permits hold: `held` is what the permit holds
    /// now, nothing for a new one (which takes a request too). The refusal
    /// if not.
    fn admits(
        &self,
        in_use: &InUse,
        tenant: Option<&Tenant>,
        held: Option<u64>,
        needed: u64,
        received: usize,
    ) -> Result<(), ParseBudgetFull> {
        let new = usize::from(held.is_none());
        let held = held.unwrap_or(0);
        let mine = tenant.map(|t| (t, in_use.tenant(t)));
        // A holding with this permit grown to `needed`.
        let grown = |holding: u64| (holding - held).saturating_add(needed.max(held));
        if in_use.all.requests + new > self.requests {
            return Err(ParseBudgetFull::Requests { limit: self.requests, bulk: self.bulk });
        }
        if let Some((tenant, _)) = mine.filter(|(_, mine)| mine.requests + new > self.tenant_requests) {
            let tenant = tenant.as_str().to_string();
            return Err(ParseBudgetFull::TenantRequests { tenant, limit: self.tenant_requests });
        }
        if grown(in_use.all.bytes) > self.bytes {
            let (in_use, limit, bulk) = (in_use.all.bytes - held, self.bytes, self.bulk);
            return Err(ParseBudgetFull::Bytes { body_bytes: received, needed, in_use, limit, bulk });
        }
        if let Some((tenant, mine)) = mine.filter(|(_, mine)| grown(mine.bytes) > self.tenant_bytes) {
            let (tenant, in_use, limit) = (tenant.as_str().to_string(), mine.bytes - held, self.tenant_bytes);
            return Err(ParseBudgetFull::TenantBytes { tenant, body_bytes: received, needed, in_use, limit });
        }
        Ok(())
    }
}

/// The budget every submission is admitted against (one per daemon).
#[derive(Debug)]
pub struct ParseBudget {
    /// What the live permits hold; each permit returns its share on drop.
    shared: Arc<Shared>,
    /// An urgent body's ceiling: `limits.parse_budget_bytes` and
    /// `limits.max_parsing_requests`, the whole budget.
    urgent: Ceiling,
    /// A bulk body's ceiling: the whole budget less the urgent reserve.
    bulk: Ceiling,
    /// `limits.urgent_body_bytes`: the largest body that is urgent.
    urgent_body_bytes: usize,
    /// `limits.parse_share_per_tenant`, for the status.
    share_per_tenant: f64,
}

/// One submission's share of the budget, returned when it drops.
#[derive(Debug)]
pub struct ParsePermit {
    /// The budget to give the share back to.
    shared: Arc<Shared>,
    /// Whose share it is, returned to that tenant's holding too; none for
    /// the operator's own, held to no share.
    tenant: Option<Tenant>,
    /// The share: the estimate of the bytes received so far.
    bytes: u64,
    /// What the share may grow to with the others': its class's ceiling.
    ceiling: Ceiling,
}

/// Why a submission was not admitted: the budget is full now.
#[derive(Debug, thiserror::Error)]
pub enum ParseBudgetFull {
    /// As many submissions as its class may hold (`limits.max_parsing_requests`,
    /// less `limits.urgent_parsing_requests` for a body over
    /// `limits.urgent_body_bytes`) are being read or parsed.
    #[error("{limit} requests are being read and parsed (limits.max_parsing_requests{reserve}); nothing was queued, retry shortly", reserve = if *.bulk { " less the places kept for urgent bodies, limits.urgent_parsing_requests" } else { "" })]
    Requests {
        /// The requests its class may hold.
        limit: usize,
        /// A bulk body, kept from the urgent reserve.
        bulk: bool,
    },
    /// The body's estimate does not fit what is left of the bytes.
    #[error(
        "reading and parsing {body_bytes} bytes of this body is estimated at {needed} bytes, and {in_use} of the {limit} it may share (limits.parse_budget_bytes{reserve}) are held by requests being parsed; nothing was queued, retry shortly",
        reserve = if *.bulk { ", less the urgent reserve" } else { "" }
    )]
    Bytes {
        /// The bytes received (an HTTP body's, when it stopped fitting).
        body_bytes: usize,
        /// Their estimate.
        needed: u64,
        /// What other submissions hold now.
        in_use: u64,
        /// The bytes its class may share.
        limit: u64,
        /// A bulk body, kept from the urgent reserve.
        bulk: bool,
    },
    /// The tenant holds as many of its class's places as its share.
    #[error("tenant {tenant:?} has {limit} requests being read and parsed, its share (limits.parse_share_per_tenant); nothing was queued, retry shortly")]
    TenantRequests {
        /// Whose share.
        tenant: String,
        /// The requests its share holds.
        limit: usize,
    },
    /// The body's estimate does not fit what is left of the tenant's share
    /// of the bytes.
    #[error(
        "reading and parsing {body_bytes} bytes of this body is estimated at {needed} bytes, and tenant {tenant:?}'s other requests being parsed hold {in_use} of the {limit} that are its share (limits.parse_share_per_tenant); nothing was queued, retry shortly"
    )]
    TenantBytes {
        /// Whose share.
        tenant: String,
        /// The bytes received.
        body_bytes: usize,
        /// Their estimate.
        needed: u64,
        /// What the tenant's other submissions hold now.
        in_use: u64,
        /// The tenant's share of its class's bytes.
        limit: u64,
    },
}

impl ParseBudgetFull {
    /// The tenant whose share refused it; none when the budget itself is
    /// full (every tenant's refusal then).
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Self::TenantRequests { tenant, .. } | Self::TenantBytes { tenant, .. } => Some(tenant),
            Self::Requests { .. } | Self::Bytes { .. } => None,
        }
    }
}

/// The parse budget as `/v1/status` shows it (`parsing`).
#[derive(Debug, Serialize)]
pub struct ParsingStatus {
    /// Bytes the submissions being read and parsed hold (their estimates).
    pub bytes_in_use: u64,
    /// Submissions being read and parsed.
    pub requests: usize,
    /// `limits.parse_budget_bytes` as applied.
    pub limit_bytes: u64,
    /// `limits.max_parsing_requests`.
    pub max_requests: usize,
    /// Bytes only urgent bodies may take.
    pub urgent_reserve_bytes: u64,
    /// Requests only urgent bodies may take (`limits.urgent_parsing_requests`).
    pub urgent_reserve_requests: usize,
    /// `limits.urgent_body_bytes`.
    pub urgent_body_bytes: usize,
    /// `limits.parse_share_per_tenant`: of each class's requests and bytes.
    pub share_per_tenant: f64,
    /// Tenants with a submission being read and parsed now.
    pub tenants: usize,
}

/// A body's estimated peak while it is read and parsed.
pub fn parse_estimate(body_bytes: usize) -> u64 {
    (body_bytes as u64).saturating_mul(PARSE_PEAK_FACTOR).saturating_add(PARSE_SLACK_BYTES)
}

impl ParseBudget {
    /// The budget `limits` configure; refused when a body of
    /// `limits.max_body_bytes` could never be admitted beside the urgent
    /// reserve, or when the reserve leaves bulk bodies no request.
    pub fn new(limits: &Limits) -> Result<Self, ConfigError> {
        let largest = parse_estimate(limits.max_body_bytes);
        let reserve_requests = limits.urgent_parsing_requests;
        let reserve_bytes = parse_estimate(limits.urgent_body_bytes).saturating_mul(reserve_requests as u64);
        let limit_bytes = limits
            .parse_budget_bytes
            .unwrap_or(DEFAULT_BUDGET_BYTES.max(largest.saturating_add(reserve_bytes)));
        let share = limits.parse_share_per_tenant;
        if limit_bytes.saturating_sub(reserve_bytes) < largest
            || limits.max_parsing_requests <= reserve_requests
        {
            return Err(ConfigError::ParseBudget {
                budget_bytes: limit_bytes,
                largest,
                max_body_bytes: limits.max_body_bytes,
                reserve_bytes,
                max_requests: limits.max_parsing_requests,
                reserve_requests,
            });
        }
        let requests = limits.max_parsing_requests;
        let urgent_largest = parse_estimate(limits.urgent_body_bytes);
        let urgent = Ceiling::new(limit_bytes, requests, share, urgent_largest, false)?;
        let bulk = Ceiling::new(
            limit_bytes - reserve_bytes,
            requests - reserve_requests,
            share,
            largest,
            reserve_requests > 0,
        )?;
        Ok(Self {
            shared: Arc::default(),
            urgent,
            bulk,
            urgent_body_bytes: limits.urgent_body_bytes,
            share_per_tenant: share,
        })
    }

    /// The ceiling of a body of at most `body_bytes`.
    fn ceiling(&self, body_bytes: usize) -> Ceiling {
        if body_bytes <= self.urgent_body_bytes {
            self.urgent
        } else {
            self.bulk
        }
    }

    /// The limit a body of at most `body_bytes` exceeds on its own, if it
    /// does: such a body is never admitted, however long it waits.
    pub fn never_admits(&self, body_bytes: usize) -> Option<u64> {
        let ceiling = self.ceiling(body_bytes).bytes;
        (parse_estimate(body_bytes) > ceiling).then_some(ceiling)
    }

    /// Reserves for `tenant` (none: the operator's own, held to no share)
    /// the estimate of the `received` bytes of a body of at most
    /// `body_bytes` (its declared length, or the body limit), or refuses
    /// when that does not fit now, in the budget or in the tenant's share.
    /// The share grows with [`ParsePermit::received`] as the rest arrives.
    pub fn reserve(
        &self,
        tenant: Option<&Tenant>,
        body_bytes: usize,
        received: usize,
    ) -> Result<ParsePermit, ParseBudgetFull> {
        let ceiling = self.ceiling(body_bytes);
        let needed = parse_estimate(received);
        let mut in_use = self.shared.in_use.lock().expect("the parse budget's lock");
        ceiling.admits(&in_use, tenant, None, needed, received)?;
        in_use.add(tenant, Held { bytes: needed, requests: 1 });
        Ok(ParsePermit { shared: self.shared.clone(), tenant: tenant.cloned(), bytes: needed, ceiling })
    }

    /// [`reserve`](Self::reserve) for a message that has arrived whole (a
    /// gRPC call's): when the budget is full now, waits for a share to be
    /// returned and tries again, for at most `wait`; then the last refusal.
    /// The message's memory is held whether it waits or is refused, so
    /// waiting costs nothing more, and a burst of calls (a WindowPoSt
    /// deadline's partitions, submitted at once) is parsed in turn instead
    /// of refused beyond the places.
    pub async fn reserve_waiting(
        &self,
        tenant: Option<&Tenant>,
        body_bytes: usize,
        wait: Duration,
    ) -> Result<ParsePermit, ParseBudgetFull> {
        // However large `limits.parse_wait_s` is set: no overflow, only a
        // wait that never ends before a share comes back.
        let deadline = Instant::now().checked_add(wait);
        loop {
            // Listening before trying: a share returned between the try and
            // the wait still wakes this waiter.
            let mut freed = std::pin::pin!(self.shared.freed.notified());
            freed.as_mut().enable();
            match self.reserve(tenant, body_bytes, body_bytes) {
                Ok(permit) => return Ok(permit),
                Err(full) => {
                    let left =
                        deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
                    if left.is_zero() || tokio::time::timeout(left, freed).await.is_err() {
                        return Err(full);
                    }
                }
            }
        }
    }

    /// The budget now, as `/v1/status` shows it.
    pub fn status(&self) -> ParsingStatus {
        let in_use = self.shared.in_use.lock().expect("the parse budget's lock");
        ParsingStatus {
            bytes_in_use: in_use.all.bytes,
            requests: in_use.all.requests,
            limit_bytes: self.urgent.bytes,
            max_requests: self.urgent.requests,
            urgent_reserve_bytes: self.urgent.bytes - self.bulk.bytes,
            urgent_reserve_requests: self.urgent.requests - self.bulk.requests,
            urgent_body_bytes: self.urgent_body_bytes,
            share_per_tenant: self.share_per_tenant,
            tenants: in_use.by_tenant.len(),
        }
    }
}

impl ParsePermit {
    /// Grows the share to the estimate of `received` bytes, the body's
    /// bytes so far, or refuses when that does not fit now (the body is
    /// then not read further, and the share it held is returned on drop).
    pub fn received(&mut self, received: usize) -> Result<(), ParseBudgetFull> {
        let needed = parse_estimate(received);
        let more = needed.saturating_sub(self.bytes);
        if more == 0 {
            return Ok(());
        }
        let mut in_use = self.shared.in_use.lock().expect("the parse budget's lock");
        self.ceiling.admits(&in_use, self.tenant.as_ref(), Some(self.bytes), needed, received)?;
        in_use.add(self.tenant.as_ref(), Held { bytes: more, requests: 0 });
        self.bytes = needed;
        Ok(())
    }
}

impl Drop for ParsePermit {
    fn drop(&mut self) {
        let mut in_use = self.shared.in_use.lock().expect("the parse budget's lock");
        in_use.remove(self.tenant.as_ref(), Held { bytes: self.bytes, requests: 1 });
        drop(in_use);
        self.shared.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_over_the_whole_budget_is_never_admitted_and_one_within_it_waits_its_turn() {
        let limits = Limits {
            max_body_bytes: 1 << 20,
            parse_budget_bytes: Some(32 << 20),
            urgent_parsing_requests: 0,
            parse_share_per_tenant: 1.0,
            ..Limits::default()
        };
        let budget = ParseBudget::new(&limits).unwrap();
        let a = Tenant("a".into());
        // 4 MiB: 40 MiB estimated, over the 32 MiB budget however empty it is.
        assert_eq!(budget.never_admits(4 << 20), Some(32 << 20));
        // 2 MiB: 24 MiB, admitted once, then full for now, not for good.
        assert_eq!(budget.never_admits(2 << 20), None);
        let held = budget.reserve(Some(&a), 2 << 20, 2 << 20).unwrap();
        assert!(matches!(budget.reserve(Some(&a), 2 << 20, 2 << 20), Err(ParseBudgetFull::Bytes { .. })));
        assert_eq!(budget.never_admits(2 << 20), None);
        drop(held);
        assert!(budget.reserve(Some(&a), 2 << 20, 2 << 20).is_ok());
    }

    #[test]
    fn a_message_that_arrived_waits_for_a_place_and_takes_the_first_returned() {
        let limits = Limits {
            max_body_bytes: 2 << 20,
            max_parsing_requests: 2,
            urgent_parsing_requests: 1,
            ..Limits::default()
        };
        let budget = ParseBudget::new(&limits).unwrap();
        let a = Tenant("a".into());
        actix_rt::System::new().block_on(async move {
            // The one place a bulk message (over 1 MiB) may take is held.
            let held = budget.reserve(Some(&a), 2 << 20, 2 << 20).unwrap();
            // Nothing returned within the wait: the refusal.
            let refused = budget.reserve_waiting(Some(&a), 2 << 20, Duration::from_millis(20)).await;
            assert!(
                matches!(refused, Err(ParseBudgetFull::Requests { limit: 1, bulk: true })),
                "{refused:?}"
            );
            // Any limits.parse_wait_s, u64::MAX seconds included, is a wait,
            // not an overflow.
            let endless = budget.reserve_waiting(Some(&a), 2 << 20, Duration::from_secs(u64::MAX));
            assert!(tokio::time::timeout(Duration::from_millis(1), endless).await.is_err());
            // A message waiting when the share is returned takes it: polled
            // once (it tries, finds the place held and waits), then the
            // share returned. A missed wakeup would wait out the 60 s and
            // end in the refusal.
            let mut waiting =
                std::pin::pin!(budget.reserve_waiting(Some(&a), 2 << 20, Duration::from_secs(60)));
            assert!(tokio::time::timeout(Duration::from_millis(1), waiting.as_mut()).await.is_err());
            drop(held);
            let permit = waiting.await.expect("the returned place");
            assert_eq!(budget.status().requests, 1);
            drop(permit);
        });
    }
}
