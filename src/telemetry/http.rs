//! HTTP requests served, by route pattern and status.

use cuzk_actors::telemetry::{counter, MetricDef};

/// `cuzk_http_requests_total`: HTTP answers by route and status, the API's
/// traffic and error rates.
pub const HTTP_REQUESTS: MetricDef = counter(
    "cuzk_http_requests_total",
    "requests",
    &["route", "status"],
    "HTTP requests served, by route pattern and status code.",
);

/// Starts the count of accepted submissions at zero, so that the request
/// panels have a series before the first request is answered (a scrape is
/// counted once it is answered, after its own text was rendered).
pub(super) fn start_at_zero() {
    metrics::counter!(HTTP_REQUESTS.name, "route" => "/v1/jobs", "status" => "202").absolute(0);
}

/// An HTTP request was answered.
pub struct HttpRequest<'a> {
    /// The route pattern it matched (`unmatched` if none): never the path,
    /// which may hold ids.
    pub route: &'a str,
    /// The status code answered.
    pub status: u16,
}

impl HttpRequest<'_> {
    /// Counts the request.
    pub fn emit(&self) {
        metrics::counter!(HTTP_REQUESTS.name, "route" => self.route.to_string(), "status" => self.status.to_string())
            .increment(1);
    }
}
