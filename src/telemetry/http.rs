//! HTTP requests served, by route pattern and status.

use cuzk_actors::telemetry::{counter, MetricDef};

pub const HTTP_REQUESTS: MetricDef = counter(
    "cuzk_http_requests_total",
    "requests",
    &["route", "status"],
    "HTTP requests served, by route pattern and status code.",
);

pub struct HttpRequest<'a> {
    pub route: &'a str,
    pub status: u16,
}

impl HttpRequest<'_> {
    pub fn emit(&self) {
        metrics::counter!(HTTP_REQUESTS.name, "route" => self.route.to_string(), "status" => self.status.to_string())
            .increment(1);
    }
}
