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
        // A fetch is answered by its owner at once, over two round trips: one still unanswered
        // after twice a loss's patience was lost, whatever the switch's sums are doing.
        let retry = 2 * self.loss_patience();
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
            let key = if self.plan.mode == Mode::Host {
                (u, u32::MAX, c)
            } else {
                (u, v, c)
            };
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
                // Asked for, and the reply may still come.
                Some((t, _)) if self.now < t => t,
                _ => {
                    // After two requests went unanswered, each further one doubles the wait
                    // for the next (up to 64 times): when the reply is merely queued at a busy
                    // owner, asking again at the same pace would only lengthen that queue. Not
                    // from the first: at 5% loss a reply lost once or twice is common, and
                    // doubling then cost SwitchGNN a third of its time on Cora.
                    let times = asked_before.map_or(0, |(_, n)| n + 1);
                    let doublings = times.saturating_sub(2).min(6);
                    let t = self.now + retry.saturating_mul(1 << doublings);
                    self.requested.insert(key, (t, times));
                    self.send_fetch(b, u, v, c);
                    t
                }
            };
            next_due = [next_due, Some(due)].into_iter().flatten().min();
        }
        // (A round cleared the deadline first; an overflow's fetch adds to it.)
        self.fetch_due = [self.fetch_due, next_due].into_iter().flatten().min();
    }

    /// Ask `u`'s owner, through the switch, for `u`'s chunk `c` (for destination `v`).
    pub(super) fn send_fetch(&mut self, block: u16, u: u32, v: u32, c: u8) {
        let mut r = self.header(PacketType::Fetch);
        r.flags.fetch = true;
        r.src = u;
        r.dst = v;
        r.block = block;
        r.chunk = c;
        self.recovery.push_repr(Address::Switch, &r, &[]);
        self.stats.fetches_sent += 1;
    }
}
