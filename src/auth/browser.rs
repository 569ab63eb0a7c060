//! The browser guard of a daemon without tokens on loopback, where reaching
//! it is the only credential: a request a proxy forwarded names a client
//! elsewhere; a `Host` that is no name of this daemon is a DNS-rebinding
//! page's; a state-changing request from another origin is a cross-site
//! page's (CSRF). docs/security.md describes both attacks.

use super::request::{HttpAsk, Verb};

/// Why the guard refuses `ask`, or None; `allowed`: the host names this
/// daemon answers to.
pub fn refusal(ask: &HttpAsk, allowed: &[String]) -> Option<String> {
    // Probes through a proxy learn nothing but that the daemon runs.
    let probe = matches!(ask.path, "/healthz" | "/readyz");
    let proxied = ask.forwarded_by.filter(|_| !probe).map(|header| {
        format!(
            "this request came through a proxy ({header} header): without tokens the daemon serves only \
             clients on its own host; configure tokens (docs/security.md, Behind a proxy)"
        )
    });
    proxied.or_else(|| foreign_host(ask, allowed))
}

/// Why a request from a browser is refused: its `Host` is not a name of
/// this daemon (DNS rebinding), or, for a request that changes state, its
/// `Origin` is another site or another service of this host (CSRF): its
/// scheme, host and port must be this daemon's, as the request reached it.
fn foreign_host(ask: &HttpAsk, allowed: &[String]) -> Option<String> {
    let known = |host: &str| allowed.iter().any(|a| a.eq_ignore_ascii_case(host));
    let host = ask.host;
    if !host.is_empty() && !known(authority_parts(host).0) {
        return Some(format!(
            "Host {host:?} is not a name of this daemon (a DNS-rebinding guard without tokens); add it to auth.allowed_hosts"
        ));
    }
    match ask.origin {
        Some(origin) if ask.verb != Verb::Read => {
            let scheme = if ask.reached.is_some_and(|r| r.tls) { "https" } else { "http" };
            // The port the client reached: the Host header's, else the listener's.
            let port = match authority_parts(host) {
                (_, Some(port)) => parse_port(port, scheme),
                (_, None) if !host.is_empty() => default_port(scheme),
                (_, None) => ask.reached.map(|r| r.addr.port()),
            };
            let same_origin = origin.split_once("://").is_some_and(|(origin_scheme, authority)| {
                let (name, origin_port) = authority_parts(authority);
                let origin_port =
                    origin_port.map_or(default_port(origin_scheme), |p| parse_port(p, origin_scheme));
                origin_scheme.eq_ignore_ascii_case(scheme)
                    && known(name)
                    && port.is_some()
                    && origin_port == port
            });
            (!same_origin).then(|| {
                format!("a request from origin {origin:?} may not change state (a CSRF guard without tokens)")
            })
        }
        _ => None,
    }
}

/// The name and the port (None: not given) of a `Host` header or an
/// origin's authority, the brackets of an IPv6 address removed.
fn authority_parts(authority: &str) -> (&str, Option<&str>) {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        let (name, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (name, after.strip_prefix(':'));
    }
    match authority.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => (name, Some(port)),
        _ => (authority, None),
    }
}

/// A port as given; an empty one is the scheme's default (RFC 3986), text
/// that is no port is None, which matches nothing.
fn parse_port(port: &str, scheme: &str) -> Option<u16> {
    if port.is_empty() {
        default_port(scheme)
    } else {
        port.parse().ok()
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme.to_ascii_lowercase().as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_into_name_and_port() {
        assert_eq!(authority_parts("localhost:9820"), ("localhost", Some("9820")));
        assert_eq!(authority_parts("[::1]:9820"), ("::1", Some("9820")));
        assert_eq!(authority_parts("[::1]"), ("::1", None));
        assert_eq!(authority_parts("cuzk.lan"), ("cuzk.lan", None));
        assert_eq!(parse_port("", "https"), Some(443));
        assert_eq!(parse_port("99999", "http"), None);
        assert_eq!(default_port("ftp"), None);
    }
}
