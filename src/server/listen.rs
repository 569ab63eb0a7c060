//! The HTTP step of a start: the actix-web server around the handlers (the
//! token gate, JSON errors, the request counter), bound to `listen` and,
//! when set, to the metrics-only listener.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use actix_web::dev::{Server, Service};
use actix_web::middleware::{from_fn, ErrorHandlers};
use actix_web::{web, App, HttpServer};

use super::ServerError;
use crate::auth::Gates;
use crate::config::Config;
use crate::http::{self, AppState};

/// Where a built server listens.
#[derive(Clone)]
pub(super) struct Bound {
    /// The API's address, as bound (a port 0 resolved).
    pub addr: SocketAddr,
    /// The metrics-only listener's address, when `metrics_listen` is set.
    pub metrics_addr: Option<SocketAddr>,
    /// Whether `addr` speaks TLS.
    pub tls: bool,
    /// The gRPC listener's address, when `grpc.listen` is set.
    pub grpc: Option<String>,
}

/// The HTTP server, bound and not yet serving: the API on `config.listen`
/// (over TLS when `tls` is given) and the metrics listener the settings
/// step bound, if any; `grpc` is the gRPC service's address, for `Bound`.
pub(super) fn http_server(
    config: &Config,
    state: web::Data<AppState>,
    gates: web::Data<Gates>,
    tls: Option<rustls::ServerConfig>,
    metrics_listener: Option<(TcpListener, SocketAddr)>,
    grpc: Option<String>,
) -> Result<(Server, Bound), ServerError> {
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(gates.clone())
            .wrap(from_fn(crate::auth::gate))
            .wrap(ErrorHandlers::new().default_handler(http::json_errors))
            .wrap_fn(|req, srv| {
                let route = req.match_pattern().unwrap_or_else(|| "unmatched".into());
                let call = srv.call(req);
                async move {
                    let res = call.await?;
                    crate::telemetry::HttpRequest {
                        route: &route,
                        status: res.status().as_u16(),
                    }
                    .emit();
                    Ok(res)
                }
            })
            .wrap(from_fn(http::head_as_get))
            .configure(http::configure)
    })
    .workers(2)
    .client_request_timeout(Duration::from_secs(config.limits.header_read_timeout_s))
    .disable_signals()
    .shutdown_timeout(5);
    let listen_error = |source| ServerError::Listen {
        address: config.listen.clone(),
        source,
    };
    let tls_enabled = tls.is_some();
    let server = match tls {
        Some(tls) => server.bind_rustls_0_23(&config.listen, tls),
        None => server.bind(&config.listen),
    }
    .map_err(listen_error)?;
    let addr = *server.addrs().first().ok_or(ServerError::NoAddress)?;
    let metrics_addr = metrics_listener.as_ref().map(|(_, addr)| *addr);
    let server = match metrics_listener {
        Some((listener, addr)) => server.listen(listener).map_err(|source| ServerError::Listen {
            address: format!("{addr} (metrics_listen)"),
            source,
        })?,
        None => server,
    };
    let bound = Bound {
        addr,
        metrics_addr,
        tls: tls_enabled,
        grpc,
    };
    Ok((server.run(), bound))
}
