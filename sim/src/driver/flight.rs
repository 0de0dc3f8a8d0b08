//! What moves through the simulated fabric: the events of the loop, the packets in flight
//! and the routes they take through a leaf-spine.

use crate::background::Segment;

#[derive(Debug, Clone, Copy)]
pub(super) enum Event {
    /// A packet (slab key) reaches the switch from a host.
    AtSwitch {
        from: u16,
        packet: u32,
    },
    /// A packet reaches a host (after its receive processing).
    AtHost {
        host: u16,
        packet: u32,
    },
    Timer {
        host: u16,
        generation: u32,
    },
    /// The switch's deadline (its control plane's, when it has one).
    SwitchTimer {
        generation: u32,
    },
    /// Packets the switch emitted once their recirculations are over (slab key of the batch).
    Release {
        batch: u32,
    },
    /// The background traffic's deadline (a flow's start or a retransmission timer).
    BackgroundTimer {
        generation: u32,
    },
    /// A packet reaches a leaf or a spine that forwards it (a leaf-spine's).
    Transit {
        packet: u32,
    },
    /// A packet from host `from` reaches the leaf switch of its rack (two-level aggregation).
    AtLeaf {
        rack: u16,
        from: u16,
        packet: u32,
    },
}

impl Event {
    /// A deadline rather than a packet on its way.
    pub(super) fn is_timer(&self) -> bool {
        matches!(
            self,
            Event::Timer { .. } | Event::SwitchTimer { .. } | Event::BackgroundTimer { .. }
        )
    }
}

/// The switch a batch of packets leaves: the exchange's (the star's, or the spine), or the
/// leaf of a rack.
#[derive(Debug, Clone, Copy)]
pub(super) enum Origin {
    Switch,
    Leaf(u16),
}

/// A packet in flight and its cost on the wire.
#[derive(Debug)]
pub(super) struct Flight {
    pub(super) bytes: Vec<u8>,
    /// Frame bytes on a link (the real packets', when bundled).
    pub(super) wire: u64,
    /// Real packets it stands for.
    pub(super) count: u32,
    /// A background flow's segment (then `bytes` is empty): the switch forwards it to its
    /// destination's port without a pass through the exchange's pipeline logic.
    pub(super) segment: Option<Segment>,
    /// Where it goes from the leaf or spine it is at (a leaf-spine's packets only).
    pub(super) route: Option<Route>,
}

/// A packet's way through a leaf-spine from the switch it is at: the inter-switch ports still
/// ahead of it, then where it ends.
#[derive(Debug, Clone, Copy)]
pub(super) struct Route {
    pub(super) hops: [Hop; 2],
    pub(super) len: u8,
    pub(super) next: u8,
    pub(super) end: End,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Hop {
    LeafUp { rack: u16, spine: u16 },
    SpineDown { spine: u16, rack: u16 },
}

#[derive(Debug, Clone, Copy)]
pub(super) enum End {
    /// The exchange's switch (spine 0), from host `from` (or, with two levels, from the
    /// leaf of rack `from`).
    Switch { from: u16 },
    /// Host `h`, through its leaf's downlink.
    Host(u16),
    /// The leaf switch of a rack (two-level aggregation).
    Leaf(u16),
}

impl Route {
    /// Through `hops` (at most two) to `end`.
    pub(super) fn to(end: End, hops: &[Hop]) -> Option<Route> {
        let mut r = Route {
            hops: [Hop::LeafUp { rack: 0, spine: 0 }; 2],
            len: hops.len() as u8,
            next: 0,
            end,
        };
        r.hops[..hops.len()].copy_from_slice(hops);
        Some(r)
    }

    pub(super) fn pop(&mut self) -> Option<Hop> {
        (self.next < self.len).then(|| {
            self.next += 1;
            self.hops[usize::from(self.next - 1)]
        })
    }
}
