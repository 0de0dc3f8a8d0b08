//! Recovery: fetching the contributions that did not arrive, from the cache or their owners.

use super::receive::Raw;
use super::{Engine, SendStrategy};
use crate::node::{Address, Nanos};
use crate::plan::Mode;
use crate::wire::PacketType;

/// Which of the missing contributions a fetch round may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask {
    /// Any, new or asked for before (a round after the quiet deadline).
    Any,
    /// Only those asked for before whose replies are overdue (a round at the refetch deadline).
    Again,
}

/// A contribution fetched in this block: when it may be asked for again, how often it was
/// asked for before the latest request, and when that request left (`None` while it waits
/// in this worker's queue: then it is not due, however long it waits — on a slow uplink,
/// asking again for what has not even left only lengthens the queue).
#[derive(Debug, Clone, Copy)]
pub(super) struct Asked {
    pub(super) due: Nanos,
    pub(super) times: u32,
    pub(super) sent: Option<Nanos>,
}

impl<S: SendStrategy> Engine<S> {
    /// Fetch the contributions listed (source, destination, chunk): from the cache when they
    /// are there, else from their owners — among the first `budget` of them not in the cache,
    /// those not asked for recently (with [`Ask::Again`], only those asked for before).
    pub(super) fn fetch(&mut self, wants: Vec<(u32, u32, u8)>, mut budget: usize, ask: Ask) {
        let Some(b) = self.current_block() else {
            return;
        };
        // In the host exchange one raw copy serves every local neighbour: ask once.
        let mut asked = std::collections::HashSet::new();
        // A fetch is answered by its owner at once: one unanswered for longer than the
        // fetches' round trips take was lost, whatever the switch's sums are doing.
        let retry = self.refetch_wait();
        // The next time an unanswered fetch falls due (see `refetch_deadline`).
        let mut next_due: Option<Nanos> = None;
        for (u, v, c) in wants {
            if self.plan.mode == Mode::Host && !asked.insert((u, c)) {
                continue;
            }
            if let Some(values) = self.cache.get(&(u, c)) {
                self.stats.cache_hits += 1;
                if let Some(r) = self.receiver.as_mut() {
                    let raw = Raw {
                        u,
                        v,
                        c: usize::from(c),
                        values,
                        overflow: false,
                    };
                    r.on_raw(raw, &mut self.output, &mut self.stats);
                }
                continue;
            }
            // Ask again only when an earlier request had time to be answered: repeating
            // requests whose replies are merely queued would feed a storm.
            let key = self.fetch_key(u, v, c);
            // What is not in the cache spends the round's budget, asked again or not: a round
            // looks at no more than its share of the network's backlog.
            let asked_before = self.requested.get(&key).copied();
            if ask == Ask::Again && asked_before.is_none() {
                continue;
            }
            if budget == 0 {
                // Cut short: what is left is asked for once this round's requests had time.
                next_due = [next_due, Some(self.now + retry)]
                    .into_iter()
                    .flatten()
                    .min();
                continue;
            }
            budget -= 1;
            let due = match asked_before {
                // Still in this worker's queue: due once it has left (`fetch_left`).
                Some(Asked { sent: None, .. }) => continue,
                // Asked for, and the reply may still come.
                Some(a) if self.now < a.due => a.due,
                _ => {
                    let times = asked_before.map_or(0, |a| a.times + 1);
                    self.requested.insert(
                        key,
                        Asked {
                            due: Nanos::MAX,
                            times,
                            sent: None,
                        },
                    );
                    self.send_fetch(b, u, v, c);
                    // Due once it has left (`fetch_left`).
                    continue;
                }
            };
            next_due = [next_due, Some(due)].into_iter().flatten().min();
        }
        // (A round cleared the deadline first; an overflow's fetch adds to it.)
        self.fetch_due = [self.fetch_due, next_due].into_iter().flatten().min();
    }

    /// A packet of the recovery queue left: when it is one of this worker's fetches, its
    /// wait for the reply starts now. After two requests for one contribution went
    /// unanswered, each further one doubles that wait (up to 64 times): when the reply is
    /// merely queued at a busy owner, asking again at the same pace would only lengthen that
    /// queue. Not from the first: at 5% loss a reply lost once or twice is common, and
    /// doubling then cost SwitchGNN a third of its time on Cora.
    pub(super) fn fetch_left(&mut self, bytes: &[u8]) {
        let Ok(packet) = crate::wire::Packet::new_checked(bytes) else {
            return;
        };
        if packet.packet_type() != PacketType::Fetch as u8 {
            return;
        }
        let Ok(r) = crate::wire::Repr::parse(&packet) else {
            return;
        };
        let key = self.fetch_key(r.src, r.dst, r.chunk);
        let wait = self.refetch_wait();
        let now = self.now;
        let Some(a) = self.requested.get_mut(&key) else {
            return;
        };
        if a.sent.is_some() {
            return;
        }
        a.sent = Some(now);
        a.due = now.saturating_add(wait.saturating_mul(1 << Self::doublings(a.times)));
        self.fetch_due = Some(self.fetch_due.map_or(a.due, |d| d.min(a.due)));
    }

    /// The key a fetch of `u`'s chunk `c` for destination `v` is kept under: in the host
    /// exchange one raw copy serves every destination.
    fn fetch_key(&self, u: u32, v: u32, c: u8) -> (u32, u32, u8) {
        if self.plan.mode == Mode::Host {
            (u, u32::MAX, c)
        } else {
            (u, v, c)
        }
    }

    /// A fetch reply for `(u, v, c)` arrived: its round trip, when it answers the first
    /// request (a later one's reply may answer an earlier request: Karn's rule).
    pub(super) fn sample_fetch(&mut self, u: u32, v: u32, c: u8) {
        let key = self.fetch_key(u, v, c);
        let Some(Asked {
            times: 0,
            sent: Some(sent),
            ..
        }) = self.requested.get(&key).copied()
        else {
            return;
        };
        if sent > self.now {
            return;
        }
        let first = self.fetch_rtt.srtt().is_none();
        self.fetch_rtt.sample(self.now - sent);
        if first {
            // The first requests out so far were given the wait for when nothing is
            // measured (`refetch_wait`): now there is a measure, and they are due by it.
            // (Not those asked for again: after an outage, the measure of the first reply
            // would have every stale request repeated at once.)
            let wait = self.refetch_wait();
            let mut next: Option<Nanos> = None;
            for a in self.requested.values_mut() {
                if let (Some(sent), 0) = (a.sent, a.times) {
                    a.due = sent.saturating_add(wait);
                    next = Some(next.map_or(a.due, |d| d.min(a.due)));
                }
            }
            if let Some(next) = next {
                self.fetch_due = Some(self.fetch_due.map_or(next, |d| d.min(next)));
            }
        }
    }

    /// How often the wait for a reply doubles after `times` earlier requests went
    /// unanswered (see `fetch_left`).
    fn doublings(times: u32) -> u32 {
        times.saturating_sub(2).min(6)
    }

    /// Ask `u`'s owner, through the switch, for `u`'s chunk `c` (for destination `v`).
    pub(super) fn send_fetch(&mut self, block: u16, u: u32, v: u32, c: u8) {
        let mut r = self.header(PacketType::Fetch);
        r.flags.fetch = true;
        r.src = u;
        r.dst = v;
        r.block = block;
        r.chunk = c;
        tracing::trace!(rank = self.cfg.rank, now = self.now, u, v, c, "fetch sent");
        self.recovery.push_repr(Address::Switch, &r, &[]);
        self.stats.fetches_sent += 1;
    }
}
