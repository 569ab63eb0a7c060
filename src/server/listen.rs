//! The HTTP step of a start: the actix-web application (the token gate,
//! JSON errors, the request counter) served over HTTP/1.1 on `listen`
//! (over TLS when set) and on the metrics-only listener. The server is put
//! together from actix-server and actix-http rather than actix-web's
//! `HttpServer` for one reason: each connection passes through
//! `Connection`, which gives actix-http's own bodiless refusals (400, 408,
//! 431) the JSON body every other error has and keeps a pipelined HEAD's
//! answer bodiless, and `HttpServer` offers no way to wrap a connection.
//! The settings are `HttpServer`'s (keep-alive 5 s, 1 s to close, backlog
//! 1024, TLS handshake 3 s, HTTP/1.1 only), but for the connections held
//! at once: `front::connection_share` over both workers, so that HTTP
//! clients cannot take gRPC's file descriptors.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::time::Duration;

use actix_http::body::MessageBody;
use actix_http::{HttpService, Request};
use actix_server::{GracefulShutdownSignal, Server};
use actix_service::{fn_service, map_config, IntoServiceFactory, ServiceFactory, ServiceFactoryExt};
use actix_tls::accept::rustls_0_23::{Acceptor, TlsStream};
use actix_web::dev::{AppConfig, Service, ServiceResponse};
use actix_web::middleware::{from_fn, ErrorHandlers};
use actix_web::rt::net::TcpStream;
use actix_web::{web, App};
use tokio::io::{AsyncRead, AsyncWrite};

use super::connection::Connection;
use super::ServerError;
use crate::auth::{Gates, Reached};
use crate::config::Config;
use crate::http::{self, AppState};

/// The HTTP server's worker threads.
const WORKERS: usize = 2;

/// Queued connections a listener holds before the kernel refuses more
/// (`HttpServer`'s default).
const BACKLOG: i32 = 1024;

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
    let app = move || {
        App::new()
            .app_data(state.clone())
            .app_data(gates.clone())
            .wrap(from_fn(http::gate::gate))
            .wrap(ErrorHandlers::new().default_handler(http::json_errors))
            .wrap_fn(|req, srv| {
                let route = req.match_pattern().unwrap_or_else(|| "unmatched".into());
                let call = srv.call(req);
                async move {
                    let res = call.await?;
                    crate::telemetry::HttpRequest { route: &route, status: res.status().as_u16() }.emit();
                    Ok(res)
                }
            })
            .wrap(from_fn(http::head_as_get))
            .configure(http::configure)
    };
    let listen_error = |source| ServerError::Listen { address: config.listen.clone(), source };
    // The API's and the metrics listener's connections together hold at
    // most their share of the file descriptors (gRPC has its own).
    let per_worker = crate::front::connection_share().div_ceil(WORKERS);
    let mut builder = Server::build()
        .workers(WORKERS)
        .max_concurrent_connections(per_worker)
        .disable_signals()
        .shutdown_timeout(5);
    let settings = Settings {
        head_timeout: Duration::from_secs(config.limits.header_read_timeout_s),
        shutdown: builder.graceful_shutdown_signal(),
    };
    let listeners = bind(&config.listen).map_err(listen_error)?;
    let addr = listeners.first().map(|(_, addr)| *addr).ok_or(ServerError::NoAddress)?;
    let tls_enabled = tls.is_some();
    // HTTP/1.1 is all these listeners speak (actix-web's http2 is not built).
    let tls = tls.map(|mut tls| {
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        tls
    });
    for (listener, addr) in listeners {
        let reached = Reached { addr, tls: tls_enabled };
        let (app, settings) = (app.clone(), settings.clone());
        builder = match tls.clone() {
            Some(tls) => builder.listen(format!("cuzk-https-{addr}"), listener, move || {
                let peer = |io: &TlsStream<TcpStream>| io.get_ref().0.peer_addr().ok();
                serve(tls_acceptor(tls.clone()), peer, app(), reached, &settings)
            }),
            None => builder.listen(format!("cuzk-http-{addr}"), listener, move || {
                serve(tcp(), tcp_peer, app(), reached, &settings)
            }),
        }
        .map_err(listen_error)?;
    }
    let metrics_addr = metrics_listener.as_ref().map(|(_, addr)| *addr);
    if let Some((listener, addr)) = metrics_listener {
        let reached = Reached { addr, tls: false };
        let (app, settings) = (app.clone(), settings.clone());
        builder = builder
            .listen(format!("cuzk-metrics-{addr}"), listener, move || {
                serve(tcp(), tcp_peer, app(), reached, &settings)
            })
            .map_err(|source| ServerError::Listen { address: format!("{addr} (metrics_listen)"), source })?;
    }
    let bound = Bound { addr, metrics_addr, tls: tls_enabled, grpc };
    Ok((builder.run(), bound))
}

/// What every listener's HTTP service shares.
#[derive(Clone)]
struct Settings {
    /// How long a connection's first request head may take (408 after).
    head_timeout: Duration,
    /// Fires when a graceful stop begins: kept-alive connections close.
    shutdown: GracefulShutdownSignal,
}

/// Plain TCP: the stream as accepted.
fn tcp() -> impl ServiceFactory<TcpStream, Config = (), Response = TcpStream, Error = (), InitError = ()> {
    fn_service(|io: TcpStream| async { Ok(io) })
}

/// The client of a plain connection.
fn tcp_peer(io: &TcpStream) -> Option<SocketAddr> {
    io.peer_addr().ok()
}

/// TLS (actix-tls's acceptor: 3 s for a handshake).
fn tls_acceptor(
    tls: rustls::ServerConfig,
) -> impl ServiceFactory<TcpStream, Config = (), Response = TlsStream<TcpStream>, Error = (), InitError = ()>
{
    Acceptor::new(tls).map_init_err(|_| ()).map_err(|_| ())
}

/// `app` served over HTTP/1.1 on each connection `accept` makes of a TCP
/// stream (the stream itself, or a TLS session over it), wrapped in
/// `Connection` and marked with the listener it reached; `peer` names the
/// client.
fn serve<A, T, I, S, B>(
    accept: A,
    peer: fn(&T) -> Option<SocketAddr>,
    app: I,
    reached: Reached,
    settings: &Settings,
) -> impl ServiceFactory<TcpStream, Config = (), Response = (), Error = (), InitError = ()>
where
    A: ServiceFactory<TcpStream, Config = (), Response = T, Error = (), InitError = ()>,
    T: AsyncRead + AsyncWrite + Unpin + 'static,
    I: IntoServiceFactory<S, Request>,
    S: ServiceFactory<
            Request,
            Config = AppConfig,
            Response = ServiceResponse<B>,
            Error = actix_web::Error,
            InitError = (),
        > + 'static,
    B: MessageBody + 'static,
{
    let shutdown = settings.shutdown.clone();
    let http = HttpService::build()
        .client_request_timeout(settings.head_timeout)
        .client_disconnect_timeout(Duration::from_secs(1))
        .local_addr(reached.addr)
        .graceful_shutdown_signal(move || {
            let shutdown = shutdown.clone();
            async move { shutdown.notified().await }
        })
        .on_connect_ext(move |_: &Connection<T>, data| {
            data.insert(reached);
        })
        // No code reads the application's config (the listener's facts are
        // the connection's `Reached`), so the default serves.
        .h1(map_config(app.into_factory(), |_| AppConfig::default()))
        .map_err(|_| ());
    accept
        .and_then(fn_service(move |io: T| async move {
            let client = peer(&io);
            Ok((Connection::new(io), client))
        }))
        .and_then(http)
}

/// Listeners on every address `listen` names, as actix-web binds them:
/// address reuse (a restart binds at once), `BACKLOG` queued connections.
fn bind(listen: &str) -> std::io::Result<Vec<(TcpListener, SocketAddr)>> {
    let mut bound = Vec::new();
    let mut last_error = None;
    for addr in listen.to_socket_addrs()? {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        let listening = socket
            .set_reuse_address(true)
            .and_then(|()| socket.bind(&addr.into()))
            .and_then(|()| socket.listen(BACKLOG));
        match listening {
            Ok(()) => {
                let listener = TcpListener::from(socket);
                let addr = listener.local_addr()?;
                bound.push((listener, addr));
            }
            Err(error) => last_error = Some(error),
        }
    }
    match (bound.is_empty(), last_error) {
        (true, Some(error)) => Err(error),
        (true, None) => Err(std::io::Error::other(format!("{listen} names no address"))),
        (false, _) => Ok(bound),
    }
}
