//! The connections a gRPC listener holds open, bounded so that nobody can
//! starve it: at most `front::connection_share` in all (a quarter of the
//! process's file descriptors: the HTTP API has its own quarter, the store
//! and the parameter files keep the rest), and at
//! most `MAX_PER_PEER` from one remote address (loopback is one address
//! for every local client, Curio included, so it is bounded by the total
//! alone). A connection over either bound is closed as soon as it is
//! accepted; one that sends no HTTP/2 preface within `listen.rs`'s deadline
//! gives its place back.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Connections one remote address may hold open: a Curio node opens one.
pub const MAX_PER_PEER: usize = 64;

/// A listener's open connections.
pub struct Peers {
    /// The total's bound.
    limit: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    /// By remote address, loopback and unix-socket clients left out.
    by_peer: HashMap<IpAddr, usize>,
}

/// Why a connection was closed unserved.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Crowded {
    #[error("{0} gRPC connections are open on this listener (a quarter of the file limit)")]
    Total(usize),
    #[error("{MAX_PER_PEER} gRPC connections from {0} are open")]
    Peer(IpAddr),
}

/// One connection's place, given back when it drops.
pub struct Place {
    peers: Arc<Peers>,
    peer: Option<IpAddr>,
}

impl Peers {
    /// Bounded by the process's file limit now (`front::connection_share`).
    pub fn new() -> Self {
        Self::with_limit(crate::front::connection_share())
    }

    fn with_limit(limit: usize) -> Self {
        Self { limit, open: Mutex::default() }
    }

    /// A place for a connection from `peer` (None: a unix socket's client).
    pub fn admit(self: &Arc<Self>, peer: Option<IpAddr>) -> Result<Place, Crowded> {
        // Counts only: a panic elsewhere left them whole.
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.total >= self.limit {
            return Err(Crowded::Total(self.limit));
        }
        let peer = peer.filter(|ip| !ip.is_loopback());
        if let Some(ip) = peer {
            let count = open.by_peer.entry(ip).or_default();
            if *count >= MAX_PER_PEER {
                return Err(Crowded::Peer(ip));
            }
            *count += 1;
        }
        open.total += 1;
        Ok(Place { peers: self.clone(), peer })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self.peers.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total -= 1;
        if let Some(ip) = self.peer {
            if let Some(count) = open.by_peer.get_mut(&ip) {
                *count -= 1;
                if *count == 0 {
                    open.by_peer.remove(&ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_peer_cannot_take_the_listener_and_places_come_back() {
        let peers = Arc::new(Peers::with_limit(MAX_PER_PEER + 2));
        let squatter: IpAddr = "192.0.2.7".parse().unwrap();
        let held: Vec<_> = (0..MAX_PER_PEER).map(|_| peers.admit(Some(squatter)).unwrap()).collect();
        assert_eq!(peers.admit(Some(squatter)).err(), Some(Crowded::Peer(squatter)));
        // Another address, and a unix-socket client, still get theirs.
        let other = peers.admit(Some("192.0.2.8".parse().unwrap())).unwrap();
        let local = peers.admit(None).unwrap();
        // The total is reached: even loopback waits for a place.
        assert_eq!(
            peers.admit(Some("127.0.0.1".parse().unwrap())).err(),
            Some(Crowded::Total(MAX_PER_PEER + 2))
        );
        drop((held, other, local));
        assert!(peers.admit(Some(squatter)).is_ok());
    }
}
