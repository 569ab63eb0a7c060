//! Where gRPC listens and how its connections are served. `grpc.listen` is
//! a TCP `host:port` or `unix:///path` (Curio's `[Cuzk] Address` forms).
//! A unix socket's directory is created (mode 0700) if missing, a stale
//! socket file (one nobody answers on) is removed, and the socket is made
//! mode 0660, so its group is who may call. On loopback or a unix socket
//! calls are plaintext and need no token; elsewhere the listener speaks TLS (`[tls]`) and calls
//! need a token, unless `--insecure` (Curio speaks plaintext without
//! credentials: a private network only). docs/security.md, docs/curio.md.
//!
//! Connections are served by hyper's HTTP/2 server on arbiters (a thread
//! and runtime each) of their own, 2 to 4 beside the accepting one and the
//! HTTP API's workers: each connection and each call is a task, spread
//! over them in turn (so a large message being decoded never holds up a
//! small call), and a call waiting on a job costs its future and its
//! stream, no thread. A connection is accepted within the listener's bounds
//! (`peers.rs`) and must send its HTTP/2 preface within 10 s (after a TLS
//! handshake within 10 s), so silent connections cannot pile up.

use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http2;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio_rustls::TlsAcceptor;

use super::admit::Admit;
use super::peers::{self, Peers};
use super::proto::proving_engine_server::ProvingEngineServer;
use super::service::ProvingService;

/// What serves each connection: the service behind the token gate.
type Server = Admit<ProvingEngineServer<ProvingService>>;

/// The most threads serving gRPC calls (at least 2, at most the cores).
const MAX_THREADS: usize = 4;
/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may take to send the HTTP/2 preface (after its
/// TLS handshake) before it is closed: one that never does holds a file
/// descriptor and a place for nothing.
const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);
/// The client preface every HTTP/2 connection opens with (RFC 9113, 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Streams a connection may hold beyond the waiting calls (status and
/// metrics calls while every waiting place is taken).
const EXTRA_STREAMS: u32 = 64;
/// An idle connection is pinged this often; one that does not answer
/// within `PING_TIMEOUT` is closed, ending its calls (a Curio host that
/// vanished without closing its connection cancels its jobs).
const PING_INTERVAL: Duration = Duration::from_secs(60);
const PING_TIMEOUT: Duration = Duration::from_secs(20);

/// Why the gRPC listener did not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The address does not resolve.
    #[error(transparent)]
    Address(#[from] crate::auth::AuthError),
    /// Refused before anything starts: plaintext or no tokens off loopback.
    #[error(
        "refusing gRPC on {listen} (grpc.listen): off loopback it needs [tls] (cert and key) and API tokens, \
         or --insecure. Curio speaks plaintext without credentials: give it a unix socket \
         (unix:///run/cuzk/cuzk.sock) or a loopback address, or pass --insecure on a private network (docs/curio.md)"
    )]
    Unguarded {
        /// The address as configured.
        listen: String,
    },
    /// The address could not be bound (in use, no permission, a bad socket path).
    #[error("cannot listen on {address} (grpc.listen): {source}")]
    Io {
        /// The address as configured.
        address: String,
        /// What binding it answered.
        source: io::Error,
    },
}

/// A bound listener, not yet serving.
pub struct GrpcListener {
    socket: Socket,
    /// Set off loopback when `[tls]` is configured.
    tls: Option<TlsAcceptor>,
    /// Where it listens: `host:port` as bound (port 0 resolved) or
    /// `unix:///path`.
    pub address: String,
    /// The listener's reach is the credential (a unix socket or loopback):
    /// calls without a token are the `default` tenant's.
    pub trusted: bool,
}

enum Socket {
    Tcp(std::net::TcpListener),
    Unix { listener: std::os::unix::net::UnixListener, path: PathBuf },
}

/// Binds `listen` by the rules above. `tls`: the API's rustls config, if
/// `[tls]` is set; `tokens`: whether any API token is configured.
pub fn bind(
    listen: &str,
    tls: Option<&rustls::ServerConfig>,
    tokens: bool,
    insecure: bool,
) -> Result<GrpcListener, ListenError> {
    let io_error = |source| ListenError::Io { address: listen.to_string(), source };
    if let Some(path) = listen.strip_prefix("unix://").or_else(|| listen.strip_prefix("unix:")) {
        let path = PathBuf::from(path);
        let listener = bind_unix(&path).map_err(io_error)?;
        let address = format!("unix://{}", path.display());
        return Ok(GrpcListener {
            socket: Socket::Unix { listener, path },
            tls: None,
            address,
            trusted: true,
        });
    }
    let loopback = crate::auth::is_loopback(listen)?;
    if !loopback && !insecure && (tls.is_none() || !tokens) {
        return Err(ListenError::Unguarded { listen: listen.to_string() });
    }
    let listener = std::net::TcpListener::bind(listen).map_err(io_error)?;
    listener.set_nonblocking(true).map_err(io_error)?;
    let address = listener.local_addr().map_err(io_error)?.to_string();
    let tls = match (loopback, tls) {
        (false, Some(config)) => {
            let mut config = config.clone();
            config.alpn_protocols = vec![b"h2".to_vec()];
            Some(TlsAcceptor::from(Arc::new(config)))
        }
        _ => None,
    };
    if !loopback && tls.is_none() {
        log::warn!("--insecure: gRPC on {address} accepts plaintext calls");
    }
    Ok(GrpcListener { socket: Socket::Tcp(listener), tls, address, trusted: loopback })
}

/// The socket at `path`, its directory made and a stale socket file
/// removed; any other file there is left alone and refused.
fn bind_unix(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    if let Some(dir) = path.parent() {
        // 0700 whatever the umask (the umask only takes bits away): a
        // directory made here is the daemon user's alone; one the operator
        // made (0750 for the socket's group) is left as it is.
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "another process answers on this socket",
                ));
            }
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a file that is not a socket is in the way",
            ))
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The gRPC server running on its arbiters.
pub struct GrpcServer {
    /// The accepting one first, then the pool that serves connections and
    /// calls.
    arbiters: Vec<actix_rt::Arbiter>,
    /// The unix socket's file, removed on stop.
    socket_file: Option<PathBuf>,
}

impl GrpcListener {
    /// Serves `service` until `stop`; messages up to `max_message_bytes`
    /// each way, and on one connection up to `max_streams` calls at once.
    pub fn serve(self, service: ProvingService, max_message_bytes: usize, max_streams: usize) -> GrpcServer {
        let (gates, trusted) = (service.state.gates.clone(), service.state.trusted);
        let inner = ProvingEngineServer::new(service)
            .max_decoding_message_size(max_message_bytes)
            .max_encoding_message_size(max_message_bytes);
        let server = Admit { inner, gates, trusted };
        let streams = u32::try_from(max_streams).unwrap_or(u32::MAX).saturating_add(EXTRA_STREAMS);
        let socket_file = match &self.socket {
            Socket::Unix { path, .. } => Some(path.clone()),
            Socket::Tcp(_) => None,
        };
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, MAX_THREADS));
        let arbiters: Vec<_> = (0..=threads).map(|_| actix_rt::Arbiter::new()).collect();
        let pool =
            Pool { arbiters: arbiters[1..].iter().map(|a| a.handle()).collect(), next: Arc::default() };
        let (socket, tls, address) = (self.socket, self.tls, self.address);
        arbiters[0].spawn(async move {
            if let Err(error) = accept(socket, tls, server, streams, pool).await {
                log::error!("gRPC on {address} stopped accepting: {error}");
            }
        });
        GrpcServer { arbiters, socket_file }
    }
}

impl GrpcServer {
    /// Stops serving: connections close and calls end where they are (their
    /// jobs are durable and go on).
    pub fn stop(self) {
        for arbiter in &self.arbiters {
            arbiter.stop();
        }
        if let Some(path) = &self.socket_file {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The arbiters (a thread and runtime each) that serve connections and
/// calls, taken in turn: hyper runs each call (its message's decoding, its
/// handler) as a task of its own, and this spreads those tasks over the
/// threads, so one call decoding a large message never holds up another's
/// small one, on the same connection or not.
#[derive(Clone)]
struct Pool {
    arbiters: Arc<[actix_rt::ArbiterHandle]>,
    next: Arc<std::sync::atomic::AtomicUsize>,
}

impl Pool {
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let turn = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % self.arbiters.len();
        self.arbiters[turn].spawn(task);
    }
}

impl<F> hyper::rt::Executor<F> for Pool
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, task: F) {
        self.spawn(async move {
            task.await;
        });
    }
}

/// Accepts connections until the server stops, each within the
/// listener's bounds (`peers.rs`).
async fn accept(
    socket: Socket,
    tls: Option<TlsAcceptor>,
    server: Server,
    streams: u32,
    pool: Pool,
) -> io::Result<()> {
    let peers = Arc::new(Peers::new());
    match socket {
        Socket::Tcp(listener) => {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            loop {
                let Some((stream, address)) = accepted(listener.accept().await).await else { continue };
                let Some(place) = placed(&peers, Some(address.ip())) else { continue };
                let (server, tls, executor) = (server.clone(), tls.clone(), pool.clone());
                pool.spawn(async move {
                    match tls {
                        Some(tls) => {
                            match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                                Ok(Ok(stream)) => connection(stream, server, streams, executor).await,
                                Ok(Err(error)) => log::debug!("gRPC: TLS handshake failed: {error}"),
                                Err(_) => log::debug!("gRPC: TLS handshake timed out"),
                            }
                        }
                        None => connection(stream, server, streams, executor).await,
                    }
                    drop(place);
                });
            }
        }
        Socket::Unix { listener, .. } => {
            let listener = tokio::net::UnixListener::from_std(listener)?;
            loop {
                let Some((stream, _)) = accepted(listener.accept().await).await else { continue };
                let Some(place) = placed(&peers, None) else { continue };
                let (server, executor) = (server.clone(), pool.clone());
                pool.spawn(async move {
                    connection(stream, server, streams, executor).await;
                    drop(place);
                });
            }
        }
    }
}

/// The accepted stream and its address, or None after a failed accept (out
/// of file descriptors, a connection reset while queued): logged, and the
/// loop pauses briefly rather than spin.
async fn accepted<S, A>(result: io::Result<(S, A)>) -> Option<(S, A)> {
    match result {
        Ok(accepted) => Some(accepted),
        Err(error) => {
            log::warn!("gRPC: accepting a connection failed: {error}");
            tokio::time::sleep(Duration::from_millis(100)).await;
            None
        }
    }
}

/// The place of a connection from `peer`, or None: it is closed unserved
/// (logged at debug: a flood of them must not flood the log too).
fn placed(peers: &Arc<Peers>, peer: Option<std::net::IpAddr>) -> Option<peers::Place> {
    peers.admit(peer).map_err(|crowded| log::debug!("gRPC: a connection closed unserved: {crowded}")).ok()
}

/// Serves one HTTP/2 connection until it closes; one that does not open
/// with the HTTP/2 preface within `PREFACE_TIMEOUT` is closed unserved.
async fn connection<IO>(mut io: IO, server: Server, streams: u32, executor: Pool)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut preface = [0u8; PREFACE.len()];
    match tokio::time::timeout(PREFACE_TIMEOUT, io.read_exact(&mut preface)).await {
        Ok(Ok(_)) if preface == *PREFACE => {}
        Ok(Ok(_)) => return log::debug!("gRPC: a connection did not open with the HTTP/2 preface"),
        Ok(Err(error)) => return log::debug!("gRPC: a connection ended before its preface: {error}"),
        Err(_) => return log::debug!("gRPC: no HTTP/2 preface within {PREFACE_TIMEOUT:?}: closed"),
    }
    let served = http2::Builder::new(executor)
        .timer(TokioTimer::new())
        .max_concurrent_streams(streams)
        // Large inputs (a 32 GiB PoRep's C1 is about 67 MB) over links with
        // some latency: the window grows with the measured bandwidth.
        .adaptive_window(true)
        .keep_alive_interval(PING_INTERVAL)
        .keep_alive_timeout(PING_TIMEOUT)
        .serve_connection(TokioIo::new(Rewound { preface, read: 0, io }), TowerToHyperService::new(server))
        .await;
    if let Err(error) = served {
        log::debug!("gRPC: connection ended: {error}");
    }
}

/// A connection whose preface was read here: hyper reads it again first,
/// then the rest of the stream.
struct Rewound<IO> {
    preface: [u8; PREFACE.len()],
    /// Of the preface, the bytes hyper has read.
    read: usize,
    io: IO,
}

impl<IO: AsyncRead + Unpin> AsyncRead for Rewound<IO> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = &mut *self;
        if this.read < this.preface.len() {
            let rest = &this.preface[this.read..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.read += n;
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Rewound<IO> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_directory_made_here_is_the_daemon_users_alone_whatever_the_umask() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("run/cuzk/cuzk.sock");
        // The umask is the process's: set to 000 only around the bind.
        // SAFETY: umask has no memory-safety preconditions.
        let old = unsafe { libc::umask(0) };
        let bound = bind_unix(&path);
        unsafe { libc::umask(old) };
        drop(bound.unwrap());
        for dir in [root.path().join("run"), root.path().join("run/cuzk")] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
        let socket = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(socket, 0o660);
    }
}
