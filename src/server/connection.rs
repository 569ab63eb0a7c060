//! A client's connection as the HTTP/1 dispatcher sees it: bytes pass both
//! ways untouched, except the answers actix-http writes on its own when it
//! cannot hand a request to the application (a request line or header it
//! cannot parse: 400; too many or too large headers: 431; a head that does
//! not arrive in time: 408). Those come with an empty body and no hook
//! (actix-http 3 has none), so this wrapper gives them the `{"error": ...}`
//! body every other refusal has, on its way to the socket.
//!
//! And a HEAD is answered without a body however it is pipelined:
//! actix-http frames an answer by the method of the request it decoded
//! last, so a request decoded behind a HEAD before the HEAD's answer was
//! encoded gave that answer the GET's body. The wrapper follows the
//! framing of both directions (`framing.rs`) and, once a HEAD request has
//! been read, hands the dispatcher nothing more until the HEAD's answer
//! head has been written; the bytes read past it wait in the wrapper. Were
//! the framing lost (a malformed request, which actix-http refuses and
//! closes on), the wrapper stops following and holds nothing.
//!
//! How it knows them: the dispatcher encodes such an answer, head only, as
//! the last thing before it closes the connection, so it is the tail of
//! the buffer it asks to write, and it says `content-length: 0` with an
//! error status. The application never sends that: every error of ours
//! carries a JSON body (`http::json_errors`), and no body of ours (JSON,
//! metrics text, the UI's files) ends in a blank line after a status line. The wrapper keeps at most one
//! rewritten answer (a few hundred bytes) per connection.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::framing::{Requests, Responses};
use crate::http::error::ErrorBody;

/// The longest bodiless answer head looked for at a write's end; actix-http's
/// are about 110 bytes (status line, content-length, connection, date).
const MAX_BARE_HEAD: usize = 512;

/// A connection's stream with the dispatcher's bodiless refusals rewritten.
pub struct Connection<T> {
    /// The socket, or the TLS stream over it.
    inner: T,
    /// A rewritten refusal not yet all written to `inner`: the dispatcher
    /// was told it was written, so it goes out before anything else.
    staged: Vec<u8>,
    /// How much of `staged` `inner` has taken.
    sent: usize,
    /// The requests read, followed to find where each HEAD ends.
    requests: Requests,
    /// The answers written, followed to tell when a HEAD's head is out.
    responses: Responses,
    /// A HEAD (its number among the requests) whose answer has not been
    /// written: nothing more is handed to the dispatcher until it is.
    awaiting: Option<u64>,
    /// Bytes read past that HEAD, handed over once its answer is written.
    held: Vec<u8>,
    /// The dispatcher's read, parked while a HEAD's answer is awaited.
    reader: Option<Waker>,
}

impl<T> Connection<T> {
    /// `inner` as the dispatcher will use it.
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            staged: Vec::new(),
            sent: 0,
            requests: Requests::default(),
            responses: Responses::default(),
            awaiting: None,
            held: Vec::new(),
            reader: None,
        }
    }

    /// Follows the bytes a read just added to `buf` (from `before` on): if
    /// a HEAD request ends within them, what follows it is taken back into
    /// `held`, and reads wait for the HEAD's answer.
    fn follow_read(&mut self, buf: &mut ReadBuf<'_>, before: usize) {
        if self.requests.lost() || self.responses.lost() {
            return;
        }
        let read = &buf.filled()[before..];
        if let Some(end) = self.requests.feed(read) {
            let rest = read[end..].to_vec();
            self.held.splice(0..0, rest);
            buf.set_filled(before + end);
            self.awaiting = Some(self.requests.seen - 1);
        }
    }

    /// Follows the bytes `inner` took of a write; once the awaited HEAD's
    /// answer head is among them (or the framing is lost), reads resume.
    fn follow_write(&mut self, written: &[u8]) {
        self.responses.feed(written, &mut self.requests);
        let answered = self.awaiting.is_some_and(|head| self.responses.seen > head);
        if answered || self.responses.lost() {
            self.awaiting = None;
            if let Some(reader) = self.reader.take() {
                reader.wake();
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> Connection<T> {
    /// Writes what is left of `staged`; ready once it is all out.
    fn poll_staged(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.staged.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.staged[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.staged = Vec::new();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Connection<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.awaiting.is_some() {
            this.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let before = buf.filled().len();
        if this.held.is_empty() {
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        } else {
            let n = this.held.len().min(buf.remaining());
            buf.put_slice(&this.held[..n]);
            this.held.drain(..n);
        }
        this.follow_read(buf, before);
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Connection<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_staged(cx))?;
        let Some(bare) = bare_refusal(buf) else {
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
            this.follow_write(&buf[..n]);
            return Poll::Ready(Ok(n));
        };
        if bare.start > 0 {
            // What comes before the refusal first; the dispatcher hands the
            // rest again, the refusal still at its end.
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &buf[..bare.start]))?;
            this.follow_write(&buf[..n]);
            return Poll::Ready(Ok(n));
        }
        this.follow_write(buf);
        this.staged = answer(bare.status, buf);
        // The refusal is taken: the dispatcher flushes next, which writes
        // whatever `inner` did not take now (and a pending write has
        // registered the waker).
        if let Poll::Ready(Err(error)) = this.poll_staged(cx) {
            return Poll::Ready(Err(error));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_staged(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_staged(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// A bodiless error answer at the end of a write.
#[derive(Debug, PartialEq, Eq)]
struct Bare {
    /// Where its status line starts in the write.
    start: usize,
    /// Its status code.
    status: u16,
}

/// The bodiless error answer `buf` ends with, if it ends with one: a
/// complete response head from a status line to the blank line that ends
/// the buffer, with a 4xx or 5xx status and `content-length: 0`.
fn bare_refusal(buf: &[u8]) -> Option<Bare> {
    if !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    // The last status line is the head's (it may follow a body directly).
    let start = (buf.len().saturating_sub(MAX_BARE_HEAD)..buf.len())
        .rev()
        .find(|&i| buf[i..].starts_with(b"HTTP/1."))?;
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(&buf[start..]) {
        Ok(httparse::Status::Complete(n)) if n == buf.len() - start => {}
        _ => return None,
    }
    let status = response.code.filter(|&code| code >= 400)?;
    let empty = response
        .headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("content-length") && h.value.trim_ascii() == b"0");
    empty.then_some(Bare { start, status })
}

/// The answer with its JSON body: `head`'s status line and headers, the
/// length changed and the type added, then `{"error": ...}`.
fn answer(status: u16, head: &[u8]) -> Vec<u8> {
    let body = ErrorBody::encoded(reason(status));
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n").filter(|line| !line.is_empty());
    let mut out = String::new();
    out.push_str(lines.next().unwrap_or("HTTP/1.1 400 Bad Request"));
    out.push_str("\r\n");
    for line in lines {
        let name = line.split(':').next().unwrap_or("").trim();
        if !name.eq_ignore_ascii_case("content-length") && !name.eq_ignore_ascii_case("content-type") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str(&format!("content-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// Why actix-http refused, by the status it chose.
fn reason(status: u16) -> &'static str {
    match status {
        400 => "the request is not valid HTTP/1.1 (a malformed request line, header or body framing); the connection is closed",
        408 => "the request's head did not arrive within limits.header_read_timeout_s; the connection is closed",
        431 => "the request's headers exceed the HTTP layer's limits (at most 96 headers, 128 KiB read without the end of the head); the connection is closed",
        _ => "the HTTP layer could not serve this connection; it is closed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BARE_400: &[u8] =
        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\ndate: Thu, 03 Dec 2026 17:10:41 GMT\r\n\r\n";
    const OK: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-length: 15\r\ncontent-type: application/json\r\ndate: Thu, 03 Dec 2026 17:10:44 GMT\r\n\r\n{\"status\":\"ok\"}";

    #[test]
    fn finds_the_refusal_alone_and_after_pipelined_answers() {
        assert_eq!(bare_refusal(BARE_400), Some(Bare { start: 0, status: 400 }));
        let after = [OK, OK, BARE_400].concat();
        assert_eq!(bare_refusal(&after), Some(Bare { start: 2 * OK.len(), status: 400 }));
    }

    #[test]
    fn leaves_answers_with_bodies_and_successes() {
        assert_eq!(bare_refusal(OK), None);
        // An error of the application's own: a JSON body, never empty.
        let app = b"HTTP/1.1 404 Not Found\r\ncontent-length: 17\r\ncontent-type: application/json\r\n\r\n{\"error\":\"gone\"}";
        assert_eq!(bare_refusal(app), None);
        // A bodiless success (a 204, a HEAD's answer) is not a refusal.
        assert_eq!(bare_refusal(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"), None);
        // Only part of a head (the dispatcher had more to write).
        assert_eq!(bare_refusal(&BARE_400[..40]), None);
        // A refusal's head followed by more than the blank line.
        assert_eq!(bare_refusal(&[BARE_400, b"{}\r\n\r\n"].concat()), None);
    }

    #[test]
    fn the_answer_keeps_the_head_and_carries_the_reason() {
        let bytes = answer(
            431,
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut response = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(head) = response.parse(&bytes).expect("a valid head") else {
            panic!("an incomplete head");
        };
        assert_eq!(response.code, Some(431));
        let header = |name: &str| {
            response.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value.to_vec())
        };
        assert_eq!(header("connection"), Some(b"close".to_vec()));
        assert_eq!(header("content-type"), Some(b"application/json".to_vec()));
        let body = &bytes[head..];
        assert_eq!(header("content-length"), Some(body.len().to_string().into_bytes()));
        let json: serde_json::Value = serde_json::from_slice(body).expect("a JSON body");
        assert!(json["error"].as_str().is_some_and(|e| e.contains("96 headers")), "{json}");
    }
}
