//! Tokens and tenants: submissions a tenant's own limit refused, critical
//! priorities lowered for callers that may not ask for them, and the
//! reloads of tokens and tenants on SIGHUP.

use cuzk_actors::telemetry::{counter, MetricDef};
use cuzk_actors::{JobId, Priority};
use cuzk_filecoin::Kind;

/// `cuzk_tenant_refusals_total`: submissions a tenant's own limit answered
/// 429, by tenant and limit, so an operator sees whose limits bind.
pub const TENANT_REFUSALS: MetricDef = counter(
    "cuzk_tenant_refusals_total",
    "requests",
    &["tenant", "reason"],
    "Submissions refused (429) by a tenant's own limit, by tenant (the configured ones) and reason (queue_full: its max_queued_jobs; rate_limited: its submit rate; parse_share: its share of the parse budget, limits.parse_share_per_tenant).",
);
/// `cuzk_priority_lowered_total`: critical jobs run at their kind's default
/// priority because the caller may not ask for critical.
pub const PRIORITY_LOWERED: MetricDef = counter(
    "cuzk_priority_lowered_total",
    "jobs",
    &["kind"],
    "Jobs submitted as critical by a caller without the critical scope, for a kind outside scheduler.critical_kinds, and run at the kind's default priority instead, by kind (the circuit's API name).",
);
/// `cuzk_token_reloads_total`: SIGHUP reloads of tokens and tenants, by
/// whether they took effect.
pub const TOKEN_RELOADS: MetricDef = counter(
    "cuzk_token_reloads_total",
    "reloads",
    &["outcome"],
    "Reloads of the tokens and tenants on SIGHUP, by outcome (ok; failed: the old ones stay).",
);

/// Starts the reload counter of both outcomes, and the lowered priorities
/// of every Filecoin kind, at zero (a tenant's refusal counters start when
/// it is configured: [`TenantsConfigured`]; a family's lowered priorities
/// with its first).
pub(super) fn start_at_zero() {
    for outcome in [TokensReloaded::OK, TokensReloaded::FAILED] {
        metrics::counter!(TOKEN_RELOADS.name, "outcome" => outcome).absolute(0);
    }
    for kind in Kind::ALL {
        metrics::counter!(PRIORITY_LOWERED.name, "kind" => kind.api_name()).absolute(0);
    }
}

/// A job asked for as critical by a caller that may not ask for it (no
/// critical scope, a kind outside `scheduler.critical_kinds`), made at a
/// lower priority.
pub struct PriorityLowered<'a> {
    /// The job whose priority was lowered.
    pub job: &'a JobId,
    /// Who asked: a configured tenant's name.
    pub tenant: &'a str,
    /// The job's circuit (a kind's API name, or a registered family's).
    pub kind: &'a str,
    /// What it runs at.
    pub to: Priority,
}

impl PriorityLowered<'_> {
    /// Logs the lowering and counts it by kind.
    pub fn emit(&self) {
        log::info!(
            "job {} ({}) of tenant {}: priority critical lowered to {}: the caller lacks the critical scope and {} is not in scheduler.critical_kinds",
            self.job,
            self.kind,
            self.tenant,
            self.to.as_str(),
            self.kind
        );
        metrics::counter!(PRIORITY_LOWERED.name, "kind" => self.kind.to_string()).increment(1);
    }
}

/// Why a tenant's own limit refused a submission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenantLimit {
    /// Its unfinished jobs reached its `max_queued_jobs`.
    QueueFull,
    /// Its submit-rate bucket was empty.
    RateLimited,
    /// Its submissions being read and parsed held its share of the parse
    /// budget (`limits.parse_share_per_tenant`).
    ParseShare,
}

impl TenantLimit {
    /// Every limit, for starting each tenant's counters at zero.
    pub const ALL: [TenantLimit; 3] =
        [TenantLimit::QueueFull, TenantLimit::RateLimited, TenantLimit::ParseShare];

    /// The metric's `reason` label for this limit.
    pub fn as_str(self) -> &'static str {
        match self {
            TenantLimit::QueueFull => "queue_full",
            TenantLimit::RateLimited => "rate_limited",
            TenantLimit::ParseShare => "parse_share",
        }
    }
}

/// The tenants the configuration names (on start and after each reload):
/// their refusal counters start at zero. Counters already counting keep
/// their counts, so a reload resets nothing.
pub struct TenantsConfigured<'a> {
    /// The tenant names the configuration holds now.
    pub tenants: &'a [&'a str],
}

impl TenantsConfigured<'_> {
    /// Starts each tenant's refusal counters, of every limit, at zero.
    pub fn emit(&self) {
        for tenant in self.tenants {
            for reason in TenantLimit::ALL {
                metrics::counter!(TENANT_REFUSALS.name, "tenant" => tenant.to_string(), "reason" => reason.as_str())
                    .increment(0);
            }
        }
    }
}

/// A submission answered 429 by its tenant's own limit.
pub struct TenantRefused<'a> {
    /// Whose limit refused it: a configured tenant's name (a label, so never a
    /// token).
    pub tenant: &'a str,
    /// Which limit.
    pub reason: TenantLimit,
}

impl TenantRefused<'_> {
    /// Logs the refusal (at debug level) and counts it.
    pub fn emit(&self) {
        log::debug!("tenant {}: submission refused ({})", self.tenant, self.reason.as_str());
        metrics::counter!(TENANT_REFUSALS.name, "tenant" => self.tenant.to_string(), "reason" => self.reason.as_str())
            .increment(1);
    }
}

/// The tokens were read again on SIGHUP: `Ok(tokens now in force)`, or why
/// the reload failed (the previous tokens stay in force).
pub struct TokensReloaded<'a> {
    /// The tokens now in force, or why the reload failed.
    pub outcome: Result<usize, &'a dyn std::error::Error>,
}

impl TokensReloaded<'_> {
    const OK: &'static str = "ok";
    const FAILED: &'static str = "failed";

    /// Logs the reload's outcome and counts it.
    pub fn emit(&self) {
        let outcome = match self.outcome {
            Ok(tokens) => {
                log::info!("SIGHUP: tokens and tenants reloaded ({tokens} tokens)");
                Self::OK
            }
            Err(error) => {
                log::error!("SIGHUP: reload failed, the previous tokens stay in force: {error}");
                Self::FAILED
            }
        };
        metrics::counter!(TOKEN_RELOADS.name, "outcome" => outcome).increment(1);
    }
}
