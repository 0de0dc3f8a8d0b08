//! A two-level fabric as one node of the in-memory network: a leaf switch per rack and a spine
//! above them, each the switch model in its [`Tier`](crate::switch::Tier), joined by links with their own rate,
//! delay and faults. To the network (and so to the workers) it is the switch of a star: a
//! worker's packet enters at its rack's leaf, and what the leaves send down leaves the node.
//! Packets between a leaf and the spine wait inside, and [`Node::poll_timeout`] tells the
//! network when the next one arrives.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use crate::fault::{FaultInjector, FaultStats, Faults};
use crate::link::{ceil_nanos, to_picos, LinkConfig, Port};
use crate::node::{Address, Nanos, Node, SwitchNode, Transmit, MAX_DATAGRAM_LEN};
use crate::switch::{
    two_level, JobConfig, Racks, SpineTraffic, Switch, SwitchConfig, SwitchCounters, SwitchError,
};
use crate::wire::Packet;

/// A packet on a link between a leaf and the spine: when it arrives, in which direction, and
/// the rack of the leaf at its end.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Inside {
    at: Nanos,
    seq: u64,
    up: bool,
    rack: u16,
    bytes: Vec<u8>,
}

/// The leaves, the spine and the links between them.
#[derive(Debug)]
pub struct LeafSpine {
    racks: Arc<Racks>,
    leaves: Vec<Switch>,
    spine: Switch,
    /// Leaf `r` up to the spine, and the spine down to leaf `r`.
    up: Vec<Port>,
    down: Vec<Port>,
    faults: FaultInjector,
    seq: u64,
    inside: BinaryHeap<Reverse<Inside>>,
    out: VecDeque<(Address, Vec<u8>)>,
    /// The packets with lanes (or packed host copies) put on those links, as
    /// [`crate::switch::spine_traffic`] counts.
    carried: SpineTraffic,
}

impl LeafSpine {
    /// One job on a fabric of `racks`: every switch with `config`'s resources and the job's
    /// tables, the inter-switch links `link` with `faults` drawn from `seed`.
    pub fn new(
        job: JobConfig,
        racks: Racks,
        config: SwitchConfig,
        link: LinkConfig,
        faults: Faults,
        seed: u64,
    ) -> Result<LeafSpine, SwitchError> {
        let racks = Arc::new(racks);
        let (spine, leaves) = two_level(&job, &racks, config)?;
        let n = usize::from(racks.racks());
        Ok(LeafSpine {
            up: vec![link.port(); n],
            down: vec![link.port(); n],
            racks,
            leaves,
            spine,
            faults: FaultInjector::new(faults, seed),
            seq: 0,
            inside: BinaryHeap::new(),
            out: VecDeque::new(),
            carried: SpineTraffic::default(),
        })
    }

    /// The leaf of rack `r`.
    pub fn leaf(&self, r: u16) -> &Switch {
        &self.leaves[usize::from(r)]
    }

    /// Every worker's rack.
    pub fn racks(&self) -> &Racks {
        &self.racks
    }

    /// The spine.
    pub fn spine(&self) -> &Switch {
        &self.spine
    }

    /// Every switch's counters added up (peaks too: the sum of each switch's own).
    pub fn counters(&self) -> SwitchCounters {
        let mut total = self.spine.counters().clone();
        for leaf in &self.leaves {
            total += leaf.counters();
        }
        total
    }

    /// Bytes that crossed the links between the leaves and the spine, both ways.
    pub fn cross_rack_bytes(&self) -> u64 {
        self.up
            .iter()
            .chain(&self.down)
            .map(|p| p.stats.bytes)
            .sum()
    }

    /// The packets carrying lanes that were put on those links (before any fault), and their
    /// bytes: what [`crate::switch::spine_traffic`] predicts.
    pub fn carried(&self) -> SpineTraffic {
        self.carried
    }

    /// What the faults did on those links.
    pub fn faults(&self) -> &FaultStats {
        self.faults.stats()
    }

    /// Put what leaf `r` (or the spine, `None`) sends on its links, or out of the fabric.
    fn drain(&mut self, now: Nanos, from: Option<u16>) {
        let mut buf = [0u8; MAX_DATAGRAM_LEN];
        loop {
            let node = match from {
                Some(r) => &mut self.leaves[usize::from(r)],
                None => &mut self.spine,
            };
            let Some(t) = node.poll_transmit(now, &mut buf) else {
                return;
            };
            let bytes = buf[..t.len].to_vec();
            let (up, rack) = match (from, t.to) {
                (Some(_), Address::Worker(port)) => {
                    self.out.push_back((Address::Worker(port), bytes));
                    continue;
                }
                (Some(r), Address::Switch) => (true, r),
                (None, Address::Worker(r)) if r < self.racks.racks() => (false, r),
                // Nowhere to go.
                (None, _) => continue,
            };
            // Lanes in the header, or packed host copies.
            let packed = Packet::new_checked(&bytes[..]).is_ok_and(|p| p.is_packed_rows());
            if packed || bytes.get(23).is_some_and(|&lanes| lanes > 0) {
                self.carried.packets += 1;
                self.carried.bytes += bytes.len() as u64;
            }
            let Self {
                up: ups,
                down,
                faults,
                seq,
                inside,
                ..
            } = self;
            let link = if up {
                &mut ups[usize::from(rack)]
            } else {
                &mut down[usize::from(rack)]
            };
            faults.apply(bytes, |bytes, extra| {
                let arrival = link
                    .send(to_picos(now), bytes.len() as u64)
                    .expect("an unbounded buffer");
                *seq += 1;
                inside.push(Reverse(Inside {
                    at: ceil_nanos(arrival) + extra,
                    seq: *seq,
                    up,
                    rack,
                    bytes,
                }));
            });
        }
    }
}

impl Node for LeafSpine {
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]) {
        let Address::Worker(w) = from else { return };
        if w >= self.racks.workers() {
            return;
        }
        let r = self.racks.rack_of(w);
        let leaf = &mut self.leaves[usize::from(r)];
        leaf.set_uplink_queue(self.up[usize::from(r)].backlog(to_picos(now)));
        leaf.handle_packet(now, from, bytes);
        self.drain(now, Some(r));
    }

    fn handle_timeout(&mut self, now: Nanos) {
        while self.inside.peek().is_some_and(|Reverse(p)| p.at <= now) {
            let Reverse(p) = self.inside.pop().expect("peeked");
            if p.up {
                for (r, link) in self.down.iter().enumerate() {
                    self.spine
                        .set_egress_queue(r as u16, link.backlog(to_picos(p.at)));
                }
                self.spine
                    .handle_packet(p.at, Address::Worker(p.rack), &p.bytes);
                self.drain(p.at, None);
            } else {
                let leaf = &mut self.leaves[usize::from(p.rack)];
                leaf.set_uplink_queue(self.up[usize::from(p.rack)].backlog(to_picos(p.at)));
                leaf.handle_packet(p.at, Address::Switch, &p.bytes);
                self.drain(p.at, Some(p.rack));
            }
        }
    }

    fn poll_transmit(&mut self, _now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        let (to, bytes) = self.out.pop_front()?;
        buf[..bytes.len()].copy_from_slice(&bytes);
        Some(Transmit {
            to,
            len: bytes.len(),
        })
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.inside.peek().map(|Reverse(p)| p.at)
    }
}

impl SwitchNode for LeafSpine {
    fn set_egress_queue(&mut self, port: u16, bytes: u64) {
        if port < self.racks.workers() {
            let r = self.racks.rack_of(port);
            self.leaves[usize::from(r)].set_egress_queue(port, bytes);
        }
    }

    fn passes(&self) -> u64 {
        std::iter::once(&self.spine)
            .chain(&self.leaves)
            .map(SwitchNode::passes)
            .sum()
    }

    fn passes_reading_pairs(&self) -> u64 {
        std::iter::once(&self.spine)
            .chain(&self.leaves)
            .map(SwitchNode::passes_reading_pairs)
            .sum()
    }

    fn aggregators_in_use(&self) -> usize {
        std::iter::once(&self.spine)
            .chain(&self.leaves)
            .map(|s| s.aggregators_in_use())
            .sum()
    }
}
