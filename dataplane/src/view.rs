//! One worker's view of an exchange plan: the rows its engine reads, nothing more.
//!
//! The switch needs the whole plan; a worker's engine reads only
//! - in every mode but the pre-aggregated ones ([`crate::plan::Mode::pre_aggregated`]), its
//!   own rows (what it sends, what it receives and their sources) and the rows of their
//!   in-block neighbours (where its copies go, which sources it may fetch), whose own slot
//!   lists it never reads;
//! - in those, its own destinations with every contributing worker and every
//!   partial's sources (what its host way fetches), the destinations it sends partials for
//!   with its own pair only, and the multicast senders that are its own or feed its
//!   destinations — in [`crate::plan::Mode::HostHybrid`] its own senders with every row they
//!   go to (the receiving workers of its raw copies), and those rows; in
//!   [`crate::plan::Mode::HostTwoLevel`] also the pairs of its rack's proxies that its
//!   vertices feed, whole (it names its share by them).
//!
//! [`ExchangePlan::for_worker`] keeps exactly that, renumbering table rows (vertex order is
//! kept, so every list stays sorted). Summed over workers the views hold about twice the plan's
//! per-edge entries, so each worker holds about `2/W` of it instead of all of it. Block count,
//! owners, width and mode are unchanged, so the wire limits a worker checks are the plan's. What
//! a view cannot give is a whole-plan figure: the checksum a worker presents at join (the
//! caller keeps the whole plan's) and [`ExchangePlan::most_contributions`].

use crate::plan::{ExchangePlan, Mode, Multicast, Partials, PlanBlock};
use crate::table::BlockTable;

impl ExchangePlan {
    /// Worker `rank`'s view of the plan. See the module docs.
    pub fn for_worker(&self, rank: u16) -> ExchangePlan {
        ExchangePlan {
            mode: self.mode,
            width: self.width,
            workers: self.workers,
            owner: self.owner.clone(),
            blocks: self
                .blocks
                .iter()
                .map(|b| view_block(self, b, rank))
                .collect(),
        }
    }
}

fn view_block(plan: &ExchangePlan, b: &PlanBlock, rank: u16) -> PlanBlock {
    let t = &b.table;
    let me = u32::from(rank);
    let reduce = plan.mode.pre_aggregated();
    // A switch's view of a reduce block has no sources to hand on (engines refuse it anyway).
    let sources = reduce && b.partials.known();
    let n = t.len();
    let mut keep = vec![false; n];
    for row in 0..n {
        if t.workers[row] == me {
            keep[row] = true;
            if !reduce {
                for &s in t.row(row) {
                    keep[s as usize] = true;
                }
            }
        } else if reduce && b.feeding_pair(row, rank, &plan.owner, plan.mode).is_some() {
            keep[row] = true;
        }
    }
    // The host hybrid's raw copies go from their sender to the owners of their rows: its own
    // senders' rows are kept whole.
    let sends_rows = plan.mode == Mode::HostHybrid;
    let m = &b.multicast;
    let own_sender = |i: usize| plan.owner[m.vertices[i] as usize] == rank;
    if sends_rows {
        for i in (0..m.len()).filter(|&i| own_sender(i)) {
            for &r in m.rows_of(i) {
                keep[r as usize] = true;
            }
        }
    }
    // The host two-level exchange: a pair of its rack's proxy that this worker's vertices feed
    // (it sends the proxy its share, named by the pair's vertices).
    let two_level = plan.mode == Mode::HostTwoLevel && sources;
    let feeds = |p: usize| {
        two_level
            && b.partials
                .of(p)
                .iter()
                .any(|&u| plan.owner[u as usize] == rank)
    };
    let mut index = vec![u32::MAX; n];
    let mut kept = 0u32;
    for row in 0..n {
        if keep[row] {
            index[row] = kept;
            kept += 1;
        }
    }
    let mut table = BlockTable {
        vertices: Vec::with_capacity(kept as usize),
        workers: Vec::with_capacity(kept as usize),
        expected: Vec::with_capacity(kept as usize),
        offsets: Vec::with_capacity(kept as usize + 1),
        slots: Vec::new(),
    };
    let mut partials = Partials::default();
    if sources {
        partials.starts.push(0);
    }
    table.offsets.push(0);
    for row in (0..n).filter(|&r| keep[r]) {
        table.vertices.push(t.vertices[row]);
        table.workers.push(t.workers[row]);
        table.expected.push(t.expected[row]);
        let own = t.workers[row] == me;
        let first_pair = t.offsets[row] as usize;
        for (j, &s) in t.row(row).iter().enumerate() {
            if reduce {
                // Slots are contributing workers: all of them for an own destination (the
                // receiver counts and fetches them), only this worker's pair otherwise.
                if own || s == me || feeds(first_pair + j) {
                    table.slots.push(s);
                    if sources {
                        let of = b.partials.of(first_pair + j);
                        partials.sources.extend_from_slice(of);
                        partials.starts.push(partials.sources.len() as u64);
                    }
                }
            } else if own {
                // Slots are rows of in-block neighbours, all kept.
                table.slots.push(index[s as usize]);
            }
        }
        table.offsets.push(table.slots.len() as u64);
    }
    let order = b
        .order
        .iter()
        .filter(|&&row| keep[row as usize])
        .map(|&row| index[row as usize])
        .collect();
    let mut multicast = Multicast::default();
    if !m.is_empty() {
        multicast.offsets.push(0);
        for i in 0..m.len() {
            let u = m.vertices[i];
            let whole = sends_rows && own_sender(i);
            let rows = m
                .rows_of(i)
                .iter()
                .filter(|&&r| whole || t.workers[r as usize] == me)
                .map(|&r| index[r as usize]);
            let before = multicast.rows.len();
            multicast.rows.extend(rows);
            if own_sender(i) || multicast.rows.len() > before {
                multicast.vertices.push(u);
                multicast.offsets.push(multicast.rows.len() as u64);
            }
        }
    }
    PlanBlock {
        table,
        order,
        partials,
        multicast,
    }
}
