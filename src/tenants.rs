//! Tenants on the HTTP side: who a request comes from (`Caller`, which the
//! gate leaves in the request's extensions), each tenant's limits as
//! configured, and the token buckets that hold tenants to their submit
//! rates. The tracker counts each tenant's unfinished jobs itself.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use cuzk_actors::{Tenant, TenantScope};
use serde::{Deserialize, Serialize};

/// `[auth.tenants.NAME]` and `[auth.tenant_defaults]`: one tenant's limits.
/// Zero means no limit of that kind (the daemon-wide ones still hold).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TenantLimits {
    /// Unfinished jobs of the tenant at which its submissions are answered
    /// 429 (`limits.max_queued_jobs` bounds all tenants together).
    pub max_queued_jobs: usize,
    /// Submissions per second the tenant may make on average.
    pub submit_rate_per_s: f64,
    /// Submissions it may make at once after a quiet spell (0: the rate
    /// rounded up, at least 1).
    pub submit_burst: u32,
}

impl TenantLimits {
    fn burst(&self) -> f64 {
        match self.submit_burst {
            0 => self.submit_rate_per_s.ceil().max(1.0),
            n => n as f64,
        }
    }

    /// The limits as configured for `tenant` (a name, or the section that
    /// holds them), checked.
    pub fn check(&self, tenant: &str) -> Result<(), TenantError> {
        if !self.submit_rate_per_s.is_finite() || self.submit_rate_per_s < 0.0 {
            return Err(TenantError::SubmitRate { tenant: tenant.to_string() });
        }
        Ok(())
    }
}

/// Why a tenant's name or limits are refused; the configuration names the
/// tenant, so fixing it is the operator's.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum TenantError {
    /// A name that is empty, longer than 64 bytes or not plain ASCII.
    #[error("tenant {0:?}: a tenant name is 1 to 64 characters of A-Z a-z 0-9 - _ .")]
    Name(String),
    /// A submit rate that is negative or not a number.
    #[error("tenant {tenant:?}: submit_rate_per_s must be a number of at least 0")]
    SubmitRate {
        /// The tenant (or `tenant_defaults`) whose rate it is.
        tenant: String,
    },
}

/// A tenant name: it appears in logs and as a metric label, so it is short
/// and plain.
pub fn check_tenant_name(name: &str) -> Result<(), TenantError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    if name.is_empty() || name.len() > 64 || !name.chars().all(plain) {
        return Err(TenantError::Name(name.to_string()));
    }
    Ok(())
}

/// Who sent a request, as the gate resolved it.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The tenant it acts for; None for a request without a token where
    /// reads are open (`read_requires_token = false`), which may read a job
    /// whose id it holds but sees no other tenant's job ids in listings.
    pub tenant: Option<Tenant>,
    /// The `admin` scope (or the daemon without tokens): sees, reads and
    /// cancels every tenant's jobs.
    pub admin: bool,
    /// The `critical` scope: it may ask for priority critical on any kind
    /// (others are lowered outside `scheduler.critical_kinds`).
    pub critical: bool,
    /// Its tenant's limits as configured when the token was checked.
    pub limits: TenantLimits,
}

impl Caller {
    /// Whose jobs the caller may read and cancel by id.
    pub fn jobs(&self) -> TenantScope {
        match &self.tenant {
            Some(tenant) if !self.admin => TenantScope::Only(tenant.clone()),
            _ => TenantScope::All,
        }
    }
}

/// One tenant's bucket: submissions it may still make at once.
struct Bucket {
    /// Fractional submissions in the bucket, up to the burst.
    tokens: f64,
    /// When `tokens` was last refilled.
    at: Instant,
}

/// The submit-rate buckets, one per tenant with a rate (tenants are named by
/// the configuration, so the map stays small). They outlive a token reload,
/// which changes a tenant's rate but does not refill its bucket.
#[derive(Default)]
pub struct SubmitRates {
    buckets: Mutex<HashMap<Tenant, Bucket>>,
}

impl SubmitRates {
    /// Takes one submission from the tenant's bucket: Ok, or Err(whole
    /// seconds until the bucket holds one again, at least 1).
    pub fn take(&self, tenant: &Tenant, limits: &TenantLimits, now: Instant) -> Result<(), u64> {
        let rate = limits.submit_rate_per_s;
        if rate <= 0.0 {
            return Ok(());
        }
        let burst = limits.burst();
        // A poisoned lock only means another request panicked mid-update;
        // a bucket is valid in any state.
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.entry(tenant.clone()).or_insert(Bucket { tokens: burst, at: now });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        Err((((1.0 - bucket.tokens) / rate).ceil() as u64).max(1))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let rates = SubmitRates::default();
        let tenant = Tenant("acme".into());
        let limits = TenantLimits { submit_rate_per_s: 0.5, submit_burst: 2, ..TenantLimits::default() };
        let t0 = Instant::now();
        assert_eq!(rates.take(&tenant, &limits, t0), Ok(()));
        assert_eq!(rates.take(&tenant, &limits, t0), Ok(()));
        // Empty: one more submission is 2 s away at 0.5 per second.
        assert_eq!(rates.take(&tenant, &limits, t0), Err(2));
        assert_eq!(rates.take(&tenant, &limits, t0 + Duration::from_secs(1)), Err(1));
        assert_eq!(rates.take(&tenant, &limits, t0 + Duration::from_secs(2)), Ok(()));
        // Another tenant has its own bucket; no rate, no bucket.
        assert_eq!(rates.take(&Tenant("other".into()), &limits, t0), Ok(()));
        assert_eq!(rates.take(&tenant, &TenantLimits::default(), t0), Ok(()));
    }

    #[test]
    fn the_default_burst_is_the_rate_rounded_up() {
        let limits = |rate| TenantLimits { submit_rate_per_s: rate, ..TenantLimits::default() };
        assert_eq!(limits(0.2).burst(), 1.0);
        assert_eq!(limits(2.5).burst(), 3.0);
        let refused = Err(TenantError::SubmitRate { tenant: "t".into() });
        assert_eq!(limits(-1.0).check("t"), refused);
        assert_eq!(limits(f64::NAN).check("t"), refused);
        assert_eq!(limits(0.0).check("t"), Ok(()));
    }

    #[test]
    fn tenant_names_are_plain() {
        assert!(check_tenant_name("acme-1.prod_eu").is_ok());
        for bad in ["", "a b", "a:b", "a@b", "é", &"x".repeat(65)] {
            assert_eq!(check_tenant_name(bad), Err(TenantError::Name(bad.to_string())));
        }
    }
}
