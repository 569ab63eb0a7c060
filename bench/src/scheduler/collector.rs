//! The benchmark's own actor: subscribed to the daemon's worker monitor, it
//! keeps a copy of every finished GPU worker span until the run takes them.

use actix::prelude::*;
use cuzk_actors::messages::SpanFinished;

/// Receives a copy of every finished GPU worker span from the monitor.
#[derive(Default)]
pub(super) struct SpanCollector {
    /// Spans received since the last `TakeSpans`.
    spans: Vec<SpanFinished>,
}

impl Actor for SpanCollector {
    type Context = Context<Self>;
}

impl Handler<SpanFinished> for SpanCollector {
    type Result = ();

    fn handle(&mut self, span: SpanFinished, _: &mut Context<Self>) {
        self.spans.push(span);
    }
}

/// Hands over every span collected so far.
#[derive(Message)]
#[rtype(result = "Vec<SpanFinished>")]
pub(super) struct TakeSpans;

impl Handler<TakeSpans> for SpanCollector {
    type Result = MessageResult<TakeSpans>;

    fn handle(&mut self, _: TakeSpans, _: &mut Context<Self>) -> Self::Result {
        MessageResult(std::mem::take(&mut self.spans))
    }
}
