//! HTTP/1.1 message framing, followed byte by byte on both sides of a
//! connection (`connection.rs`), so that a HEAD's answer is encoded as a
//! HEAD's: actix-http decides whether an answer carries its body by the
//! method of the request it decoded last, so a HEAD pipelined with a
//! request behind it got its GET's body, which broke the framing of every
//! answer after it. `Requests` finds where each request ends (and whether
//! it is a HEAD); `Responses` where each answer's head is complete.
//! Neither copies a body: only heads (bounded) and chunk-size lines are
//! kept while they arrive.

use std::collections::VecDeque;

/// The longest request or answer head followed: actix-http refuses a
/// request head over 128 KiB (431) and writes none that long. A longer
/// one stops the following (`Lost`).
const MAX_HEAD: usize = 132 * 1024;
/// The longest chunk-size line (with extensions) followed.
const MAX_CHUNK_LINE: usize = 4096;

/// Where a stream of messages is.
#[derive(Debug)]
enum Part {
    /// In a head, the bytes so far.
    Head(Vec<u8>),
    /// In a body of known length: the bytes left.
    Body(u64),
    /// In a chunked body.
    Chunked(Chunked),
    /// Framing that cannot be followed (a malformed head, a body until the
    /// connection closes): nothing more is followed.
    Lost,
}

/// Where a chunked body is.
#[derive(Debug)]
enum Chunked {
    /// In a chunk-size line, the bytes so far.
    Size(Vec<u8>),
    /// In a chunk's data: the bytes left, then its CRLF.
    Data(u64),
    /// In the trailer section: the bytes of the current line so far (an
    /// empty line ends the body).
    Trailer(Vec<u8>),
}

/// How a message's head frames its body.
enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

impl Part {
    fn start() -> Self {
        Part::Head(Vec::new())
    }

    /// Where a message is once its head, framed so (None: a head that does
    /// not parse), is complete.
    fn after_head(framing: Option<Framing>) -> Self {
        match framing {
            Some(Framing::None) | Some(Framing::Length(0)) => Part::start(),
            Some(Framing::Length(n)) => Part::Body(n),
            Some(Framing::Chunked) => Part::Chunked(Chunked::Size(Vec::new())),
            Some(Framing::UntilClose) | None => Part::Lost,
        }
    }

    /// Takes a head's bytes from the front of `bytes`: how many, and the
    /// head once it is complete (the next part is then the caller's to
    /// set). A head over `MAX_HEAD` loses the framing.
    fn head(&mut self, bytes: &[u8]) -> (usize, Option<Vec<u8>>) {
        let Part::Head(head) = self else { return (0, None) };
        match head_of(head, bytes) {
            None => {
                *self = Part::Lost;
                (bytes.len(), None)
            }
            Some((taken, false)) => (taken, None),
            Some((taken, true)) => (taken, Some(std::mem::take(head))),
        }
    }

    /// Takes bytes of a body (or a chunked body's framing) from the front of
    /// `bytes`; answers how many, and whether the body ended there.
    fn body(&mut self, bytes: &[u8]) -> (usize, bool) {
        match self {
            Part::Body(left) => {
                let n = (*left).min(bytes.len() as u64) as usize;
                *left -= n as u64;
                (n, *left == 0)
            }
            Part::Chunked(chunked) => match chunked.feed(bytes) {
                Some(step) => step,
                None => {
                    *self = Part::Lost;
                    (bytes.len(), false)
                }
            },
            Part::Head(_) | Part::Lost => (0, false),
        }
    }
}

impl Chunked {
    /// Takes the chunked body's bytes from the front of `bytes`: how many,
    /// and whether the body ended; None for a malformed body.
    fn feed(&mut self, bytes: &[u8]) -> Option<(usize, bool)> {
        let mut used = 0;
        while used < bytes.len() {
            let rest = &bytes[used..];
            match self {
                Chunked::Size(line) => {
                    let (taken, done) = line_of(line, rest, MAX_CHUNK_LINE)?;
                    used += taken;
                    if done {
                        let text = std::str::from_utf8(line).ok()?;
                        let size = text.split(';').next()?.trim();
                        let size = u64::from_str_radix(size, 16).ok()?;
                        *self = match size {
                            0 => Chunked::Trailer(Vec::new()),
                            // The data, then its CRLF.
                            n => Chunked::Data(n.checked_add(2)?),
                        };
                    }
                }
                Chunked::Data(left) => {
                    let n = (*left).min(rest.len() as u64) as usize;
                    *left -= n as u64;
                    used += n;
                    if *left == 0 {
                        *self = Chunked::Size(Vec::new());
                    }
                }
                Chunked::Trailer(line) => {
                    let (taken, done) = line_of(line, rest, MAX_CHUNK_LINE)?;
                    used += taken;
                    if done {
                        if line.is_empty() {
                            return Some((used, true));
                        }
                        line.clear();
                    }
                }
            }
        }
        Some((used, false))
    }
}

/// Appends to `line` the bytes of `rest` up to a CRLF: how many were taken
/// (the CRLF included), and whether the line ended (`line` then holds it
/// without the CRLF); None for a line over `max`.
fn line_of(line: &mut Vec<u8>, rest: &[u8], max: usize) -> Option<(usize, bool)> {
    let taken = match rest.iter().position(|&b| b == b'\n') {
        Some(at) => at + 1,
        None => rest.len(),
    };
    line.extend_from_slice(&rest[..taken]);
    if line.len() > max {
        return None;
    }
    if line.ends_with(b"\n") {
        line.pop();
        if line.ends_with(b"\r") {
            line.pop();
        }
        return Some((taken, true));
    }
    Some((taken, false))
}

/// Appends to a head the bytes of `rest` up to its blank line: how many
/// were taken, and whether the head is complete; None for a head over
/// `MAX_HEAD`.
fn head_of(head: &mut Vec<u8>, rest: &[u8]) -> Option<(usize, bool)> {
    // The blank line may straddle the previous call's bytes.
    let from = head.len().saturating_sub(3);
    head.extend_from_slice(rest);
    let end = head[from..].windows(4).position(|w| w == b"\r\n\r\n").map(|at| from + at + 4);
    match end {
        Some(end) => {
            let taken = rest.len() - (head.len() - end);
            head.truncate(end);
            Some((taken, true))
        }
        None if head.len() > MAX_HEAD => None,
        None => Some((rest.len(), false)),
    }
}

/// A head's framing, from its headers (RFC 9112 6.3: chunked wins over a
/// length).
fn framing(headers: &[httparse::Header<'_>]) -> Option<Framing> {
    let named = |name: &'static str| headers.iter().filter(move |h| h.name.eq_ignore_ascii_case(name));
    if named("transfer-encoding").any(|h| h.value.to_ascii_lowercase().ends_with(b"chunked")) {
        return Some(Framing::Chunked);
    }
    match named("content-length").next() {
        Some(h) => std::str::from_utf8(h.value).ok()?.trim().parse().ok().map(Framing::Length),
        None => Some(Framing::None),
    }
}

/// The requests a client sent, followed in order.
#[derive(Debug)]
pub struct Requests {
    part: Part,
    /// Requests whose head was complete, counted from 0.
    pub seen: u64,
    /// Whether each request whose answer has not been followed yet is a
    /// HEAD, oldest first (`Responses` takes them).
    pub heads: VecDeque<bool>,
}

impl Default for Requests {
    fn default() -> Self {
        Self { part: Part::start(), seen: 0, heads: VecDeque::new() }
    }
}

impl Requests {
    /// Follows `bytes` up to the end of a HEAD request: Some(the offset
    /// just after it) when one ends within them, with the rest not
    /// followed yet; None when all were followed (or framing was lost).
    pub fn feed(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut used = 0;
        while used < bytes.len() {
            let rest = &bytes[used..];
            match self.part {
                Part::Lost => return None,
                Part::Head(_) => {
                    let (taken, head) = self.part.head(rest);
                    used += taken;
                    let Some(head) = head else { continue };
                    let mut headers = [httparse::EMPTY_HEADER; 128];
                    let mut request = httparse::Request::new(&mut headers);
                    let (is_head, framing) = match request.parse(&head) {
                        Ok(httparse::Status::Complete(_)) => {
                            (request.method == Some("HEAD"), framing(request.headers))
                        }
                        _ => (false, None),
                    };
                    self.seen += 1;
                    self.heads.push_back(is_head);
                    self.part = Part::after_head(framing);
                    if is_head && matches!(self.part, Part::Head(_)) {
                        return Some(used);
                    }
                }
                Part::Body(_) | Part::Chunked(_) => {
                    let (taken, ended) = self.part.body(rest);
                    used += taken;
                    if ended {
                        self.part = Part::start();
                        if self.heads.back() == Some(&true) {
                            return Some(used);
                        }
                    }
                }
            }
        }
        None
    }

    /// Whether framing was lost: nothing more can be told of these requests.
    pub fn lost(&self) -> bool {
        matches!(self.part, Part::Lost)
    }
}

/// The answers written to a client, followed in order; each answers the
/// oldest request `Requests` saw and this has not matched yet.
#[derive(Debug)]
pub struct Responses {
    part: Part,
    /// Final answers whose head was complete, counted from 0.
    pub seen: u64,
}

impl Default for Responses {
    fn default() -> Self {
        Self { part: Part::start(), seen: 0 }
    }
}

impl Responses {
    /// Follows all of `bytes`; `requests` says which answers are a HEAD's
    /// (they carry no body).
    pub fn feed(&mut self, bytes: &[u8], requests: &mut Requests) {
        let mut used = 0;
        while used < bytes.len() {
            let rest = &bytes[used..];
            match self.part {
                Part::Lost => return,
                Part::Head(_) => {
                    let (taken, head) = self.part.head(rest);
                    used += taken;
                    let Some(head) = head else { continue };
                    let mut headers = [httparse::EMPTY_HEADER; 128];
                    let mut response = httparse::Response::new(&mut headers);
                    let (code, framing) = match response.parse(&head) {
                        Ok(httparse::Status::Complete(_)) => {
                            (response.code.unwrap_or(0), framing(response.headers))
                        }
                        _ => (0, None),
                    };
                    // An interim answer (100 Continue) is not the request's answer.
                    if (100..200).contains(&code) {
                        continue;
                    }
                    self.seen += 1;
                    let answers_head = requests.heads.pop_front().unwrap_or(false);
                    let framing = match code {
                        _ if answers_head => Some(Framing::None),
                        204 | 304 => Some(Framing::None),
                        0 => None,
                        _ => match framing {
                            Some(Framing::None) => Some(Framing::UntilClose),
                            other => other,
                        },
                    };
                    self.part = Part::after_head(framing);
                }
                Part::Body(_) | Part::Chunked(_) => {
                    let (taken, ended) = self.part.body(rest);
                    used += taken;
                    if ended {
                        self.part = Part::start();
                    }
                }
            }
        }
    }

    /// Whether framing was lost: nothing more can be told of these answers.
    pub fn lost(&self) -> bool {
        matches!(self.part, Part::Lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_request_ends_where_its_head_does_and_others_after_their_bodies() {
        let mut requests = Requests::default();
        let pipelined =
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nHEAD /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.1\r\n\r\n";
        let head_end = pipelined.windows(6).position(|w| w == b"GET /c").unwrap();
        assert_eq!(requests.feed(pipelined), Some(head_end));
        assert_eq!(
            (requests.seen, requests.heads.iter().copied().collect::<Vec<_>>()),
            (2, vec![false, true])
        );
        assert_eq!(requests.feed(&pipelined[head_end..]), None);
        assert_eq!(requests.seen, 3);
        // A body of either framing is skipped, byte by byte too.
        let mut requests = Requests::default();
        let bodies = b"POST /j HTTP/1.1\r\nContent-Length: 5\r\n\r\nHEAD POST /k HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nTrailer: 1\r\n\r\nHEAD /m HTTP/1.1\r\n\r\n";
        let found: Vec<usize> =
            (0..bodies.len()).filter(|&i| requests.feed(&bodies[i..i + 1]).is_some()).collect();
        assert_eq!(found, vec![bodies.len() - 1]);
        assert_eq!(requests.heads.iter().copied().collect::<Vec<_>>(), vec![false, false, true]);
        assert!(!requests.lost());
        // A malformed chunk size loses the framing.
        let mut requests = Requests::default();
        requests.feed(b"POST /j HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        assert!(requests.lost());
    }

    #[test]
    fn answers_are_counted_past_their_bodies_and_a_heads_has_none() {
        let mut requests = Requests::default();
        requests.feed(b"GET /a HTTP/1.1\r\n\r\n");
        requests.feed(b"HEAD /b HTTP/1.1\r\n\r\n");
        requests.feed(b"GET /c HTTP/1.1\r\n\r\n");
        let mut responses = Responses::default();
        let answers = [
            &b"HTTP/1.1 100 Continue\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nHTTP",
            b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\nHTTP\r\n0\r\n\r\n",
        ]
        .concat();
        for byte in answers.chunks(1) {
            responses.feed(byte, &mut requests);
        }
        assert_eq!(responses.seen, 3);
        assert!(!responses.lost() && requests.heads.is_empty());
    }
}
