//! The token gate in front of the service, on a call's headers alone: the
//! method (from the path) names the scope it needs, the `authorization`
//! header the token, and a call the gate refuses is answered before a byte
//! of its message is read, so a wrong token costs nothing of a large
//! message. An admitted call carries its `Caller` in the request's
//! extensions to the handler (`service.rs`).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::codegen::{http, BoxFuture, Service};

use super::error::token_status;
use super::service::code_name;
use crate::auth::{bearer_token, Gates, Scope};
use crate::telemetry::{GrpcCall, GrpcNotProved};

/// The service's methods, as the path's last segment names them, and the
/// scope each needs (as its HTTP counterpart does).
const METHODS: [(&str, Scope); 8] = [
    ("SubmitProof", Scope::Submit),
    ("AwaitProof", Scope::Read),
    ("Prove", Scope::Submit),
    ("CancelProof", Scope::Submit),
    ("GetStatus", Scope::Read),
    ("GetMetrics", Scope::Read),
    ("PreloadSRS", Scope::Admin),
    ("EvictSRS", Scope::Admin),
];

/// `inner` (tonic's generated server) behind the token gate.
#[derive(Clone)]
pub struct Admit<S> {
    pub inner: S,
    /// The gates in force (SIGHUP replaces them).
    pub gates: Arc<Gates>,
    /// The listener's reach is the credential (a unix socket or loopback).
    pub trusted: bool,
}

impl<S, B> Service<http::Request<B>> for Admit<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let name = request.uri().path().rsplit('/').next().unwrap_or_default();
        // A method the service lacks goes on: tonic answers UNIMPLEMENTED.
        let Some(&(method, needed)) = METHODS.iter().find(|(m, _)| *m == name) else {
            return Box::pin(self.inner.call(request));
        };
        let presented =
            request.headers().get("authorization").and_then(|v| v.to_str().ok()).and_then(bearer_token);
        match self.gates.current().grpc_caller(presented, needed, self.trusted) {
            Ok(caller) => {
                request.extensions_mut().insert(caller);
                Box::pin(self.inner.call(request))
            }
            Err(refusal) => {
                let status = token_status(refusal);
                let code = code_name(status.code());
                GrpcCall { method, code, result: "none" }.emit();
                let subject = "a call refused from its headers";
                GrpcNotProved { method, subject, code, reason: status.message() }.emit();
                Box::pin(std::future::ready(Ok(status.into_http())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{parse_token_entry, AuthConfig, Gate};
    use crate::tenants::Caller;

    /// The service behind the gate: answers OK with the caller's tenant in
    /// a header, so a test sees whether the call reached it and as whom.
    #[derive(Clone)]
    struct Reached;

    impl<B> Service<http::Request<B>> for Reached {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = BoxFuture<Self::Response, Self::Error>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<B>) -> Self::Future {
            let tenant = request.extensions().get::<Caller>().and_then(|c| c.tenant.clone());
            let mut response = http::Response::new(Body::default());
            let name = tenant.map_or("none".to_string(), |t| t.as_str().to_string());
            response.headers_mut().insert("reached-as", name.parse().unwrap());
            Box::pin(std::future::ready(Ok(response)))
        }
    }

    /// A body nothing can read: the gate decides without one.
    struct Unread;

    fn call(trusted: bool, method: &str, token: Option<&str>) -> http::Response<Body> {
        let entry = parse_token_entry("acme-submit-0123456789@acme:submit").unwrap();
        let gate = Gate::new(&mut AuthConfig { tokens: vec![entry], ..AuthConfig::default() }, "127.0.0.1:0");
        let mut admit = Admit { inner: Reached, gates: Arc::new(Gates::new(gate.unwrap())), trusted };
        let mut request = http::Request::new(Unread);
        *request.uri_mut() = format!("/cuzk.v1.ProvingEngine/{method}").parse().unwrap();
        if let Some(token) = token {
            request.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        let answered = admit.call(request);
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(answered).unwrap()
    }

    fn grpc_status(response: &http::Response<Body>) -> Option<&str> {
        response.headers().get("grpc-status").map(|v| v.to_str().unwrap())
    }

    #[test]
    fn a_call_the_token_gate_refuses_is_answered_from_its_headers() {
        // A wrong token: UNAUTHENTICATED (16), the message never read.
        let refused = call(true, "Prove", Some("wrong-0123456789abcdef"));
        assert_eq!(grpc_status(&refused), Some("16"));
        assert!(refused.headers().get("reached-as").is_none());
        // Off loopback a read needs a token too.
        assert_eq!(grpc_status(&call(false, "GetStatus", None)), Some("16"));
        // The token's tenant reaches the handler.
        let admitted = call(false, "Prove", Some("acme-submit-0123456789"));
        assert_eq!(admitted.headers().get("reached-as").unwrap(), "acme");
        // A submit token lacks admin: PERMISSION_DENIED (7).
        assert_eq!(grpc_status(&call(false, "EvictSRS", Some("acme-submit-0123456789"))), Some("7"));
        // On loopback a tokenless call is the default tenant's.
        assert_eq!(call(true, "Prove", None).headers().get("reached-as").unwrap(), "default");
        // An unknown method goes on to tonic's UNIMPLEMENTED, untouched.
        assert_eq!(call(false, "Nope", None).headers().get("reached-as").unwrap(), "none");
    }
}
