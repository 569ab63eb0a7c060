//! Starting actors whose addresses must exist before the actors do (the
//! actors reference each other), each on the thread its role needs.

use actix::dev::channel::{channel, AddressReceiver};
use actix::{Actor, Addr, ArbiterHandle, Context};

/// An address whose actor is not running yet. Messages sent to it queue up
/// and are handled once [`Pending::start_on`] runs the actor.
pub struct Pending<A: Actor<Context = Context<A>>> {
    receiver: AddressReceiver<A>,
}

/// A bounded mailbox and its address.
pub fn mailbox<A: Actor<Context = Context<A>>>(capacity: usize) -> (Addr<A>, Pending<A>) {
    let (sender, receiver) = channel(capacity);
    (Addr::new(sender), Pending { receiver })
}

impl<A: Actor<Context = Context<A>> + Send> Pending<A> {
    /// Runs `actor` on the given arbiter (an event loop on its own thread).
    pub fn start_on(self, arbiter: &ArbiterHandle, actor: A) {
        let receiver = self.receiver;
        arbiter.spawn_fn(move || {
            let ctx = Context::with_receiver(receiver);
            actix_rt::spawn(ctx.into_future(actor));
        });
    }
}
