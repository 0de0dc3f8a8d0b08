//! The event loop itself: the state of one run (ports, queues, timers, what is in flight)
//! and what each event does to it.

use std::time::Instant;

use switchgnn_dataplane::fault::FaultInjector;
use switchgnn_dataplane::switch::{EgressStamps, Switch};
use switchgnn_dataplane::wire::{Flags, Packet, PacketType, HEADER_LEN};
use switchgnn_dataplane::{Address, Nanos, Node, Transmit};

use super::flight::{End, Event, Flight, Hop, Origin, Route};
use super::pipes::{ChipServers, PassPipes, Passes, Ready};
use super::{Bundle, HostNode, Recirculation, RunResult, SimConfig, SwitchNode, Tap};
use crate::background::Background;
use crate::fabric::{ceil_nanos, to_picos, FabricPorts, Picos, Topology};
use crate::queue::{EventQueue, Slab};
use crate::series::{Class, Series, Traffic};

pub(super) struct Loop<'a, S: SwitchNode, H: HostNode + ?Sized> {
    tap: Option<&'a mut dyn Tap>,
    cfg: &'a SimConfig,
    bundle: Option<Bundle>,
    switch: &'a mut S,
    /// With two-level aggregation, the leaf switch of each rack (else empty).
    leaves: &'a mut [Switch],
    hosts: &'a mut [Box<H>],
    fabric: FabricPorts,
    faults: FaultInjector,
    pub(super) events: EventQueue<Event>,
    packets: Slab<Flight>,
    batches: Slab<(Origin, Vec<(Address, Flight)>)>,
    pub(super) now: Nanos,
    send_free: Vec<Picos>,
    receive_free: Vec<Picos>,
    timers: Vec<(Option<Nanos>, u32)>,
    switch_timer: (Option<Nanos>, u32),
    reported: Vec<u64>,
    /// Per switch (the exchange's, then each leaf): when its pipes and their recirculation
    /// paths are next free.
    chips: Vec<ChipServers>,
    /// Where the chips run each packet's passes (`None`: all in the home pipe).
    pass_pipes: Option<&'a PassPipes>,
    /// Per switch, the numbering of its worker ports. The switch model numbers packets as it
    /// emits them, before the chip's passes, which finish out of that order; a chip numbers
    /// them in its egress, as they leave (`switch/stamp.rs`). So the loop numbers them again
    /// as they leave the simulated chip, and an answer about the numbering
    /// (`PacketType::Stamps`) carries the next number then.
    egress_numbers: Vec<EgressStamps>,
    recirculation: Recirculation,
    peak_aggregators: usize,
    delivered: Traffic,
    series: Series,
    pub(super) unfinished: usize,
    done: Vec<bool>,
    /// Where nodes write the packets they send.
    buf: Box<[u8]>,
    pub(super) background: Option<&'a mut Background>,
    background_timer: (Option<Nanos>, u32),
    /// When the last host finished (the run may go on for the background flows).
    hosts_finished: Option<Nanos>,
}

/// Bytes of the buffer nodes write their packets into: a jumbo frame, so that the test nodes
/// of the closed-form checks can send packets of any size a link carries (the protocol's
/// nodes need at most `MAX_DATAGRAM_LEN`, the same frame's UDP payload).
const SEND_BUFFER: usize = 9216;

impl<'a, S: SwitchNode, H: HostNode + ?Sized> Loop<'a, S, H> {
    /// A loop over these nodes at time 0, nothing scheduled yet.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        cfg: &'a SimConfig,
        bundle: Option<Bundle>,
        switch: &'a mut S,
        leaves: &'a mut [Switch],
        hosts: &'a mut [Box<H>],
        tap: Option<&'a mut dyn Tap>,
        background: Option<&'a mut Background>,
        pass_pipes: Option<&'a PassPipes>,
    ) -> Self {
        let n = hosts.len();
        let switches = 1 + leaves.len();
        let done: Vec<bool> = hosts.iter().map(|h| h.is_done()).collect();
        Loop {
            tap: tap.map(|t| t as &mut dyn Tap),
            cfg,
            bundle,
            fabric: FabricPorts::new(&cfg.topology, &cfg.switch, &cfg.host),
            faults: FaultInjector::new(cfg.faults, cfg.fault_seed),
            switch,
            leaves,
            hosts,
            events: EventQueue::default(),
            packets: Slab::default(),
            batches: Slab::default(),
            now: 0,
            send_free: vec![0; n],
            receive_free: vec![0; n],
            timers: vec![(None, 0); n],
            switch_timer: (None, 0),
            reported: vec![0; n],
            chips: vec![ChipServers::new(&cfg.switch.chip); switches],
            pass_pipes,
            egress_numbers: vec![EgressStamps::default(); switches],
            recirculation: Recirculation::default(),
            peak_aggregators: 0,
            delivered: Traffic::default(),
            series: Series::new(cfg.sample_ns),
            unfinished: done.iter().filter(|d| !**d).count(),
            done,
            buf: vec![0; SEND_BUFFER].into_boxed_slice(),
            background,
            background_timer: (None, 0),
            hosts_finished: None,
        }
    }
}

impl<S: SwitchNode, H: HostNode + ?Sized> Loop<'_, S, H> {
    /// Schedule every node's first events: the hosts' packets and timers, the switch's timer
    /// and the background flows'.
    pub(super) fn prime(&mut self) {
        for h in 0..self.hosts.len() {
            self.after_host_event(h);
        }
        self.arm_switch_timer();
        self.after_background_event();
    }

    /// Handle one event at `self.now`.
    pub(super) fn dispatch(&mut self, event: Event) {
        let l = self;
        match event {
            Event::AtSwitch { from, packet } => {
                let f = l.packets.remove(packet).expect("a packet in flight");
                l.at_switch(from, f);
                l.arm_switch_timer();
            }
            Event::Transit { packet } => {
                let f = l.packets.remove(packet).expect("a packet in flight");
                l.transit(f);
                l.arm_switch_timer();
            }
            Event::AtLeaf { rack, from, packet } => {
                let f = l.packets.remove(packet).expect("a packet in flight");
                l.at_leaf(rack, Address::Worker(from), f);
                l.arm_switch_timer();
            }
            Event::BackgroundTimer { generation } => {
                if l.background_timer.1 == generation {
                    l.background_timer.0 = None;
                    let now = l.now;
                    if let Some(b) = l.background.as_mut() {
                        b.handle_timeout(now);
                    }
                    l.after_background_event();
                }
            }
            Event::SwitchTimer { generation } => {
                if l.switch_timer.1 == generation {
                    l.switch_timer.0 = None;
                    l.switch.handle_timeout(l.now);
                    // What a timer makes the switch send (its control plane's messages)
                    // takes no aggregator pass.
                    while let Some(t) = l.switch.poll_transmit(l.now, &mut l.buf) {
                        if let Address::Worker(w) = t.to {
                            let f = l.flight(l.buf[..t.len].to_vec());
                            l.switch_sends(w, f);
                        }
                    }
                    l.arm_switch_timer();
                }
            }
            Event::AtHost { host, packet } => {
                let f = l.packets.remove(packet).expect("a packet in flight");
                if let Some(segment) = f.segment {
                    let now = l.now;
                    if let Some(b) = l.background.as_mut() {
                        b.on_segment(now, host, segment);
                    }
                    l.after_background_event();
                    return;
                }
                let class =
                    Packet::new_checked(&f.bytes[..]).map_or(Class::Other, |p| Class::of(&p));
                l.delivered.add(class, f.wire);
                l.series.delivered(l.now, class, f.wire);
                let h = usize::from(host);
                l.hosts[h].handle_packet(l.now, Address::Switch, &f.bytes);
                l.after_host_event(h);
            }
            Event::Timer { host, generation } => {
                let h = usize::from(host);
                if l.timers[h].1 == generation {
                    l.timers[h].0 = None;
                    l.hosts[h].handle_timeout(l.now);
                    l.after_host_event(h);
                }
            }
            Event::Release { batch } => {
                let (origin, out) = l.batches.remove(batch).expect("a batch");
                l.release(origin, out);
            }
        }
    }

    /// The run's measurements, after `events` events since `started`.
    pub(super) fn result(self, events: u64, started: Instant) -> RunResult {
        let l = self;
        RunResult {
            finish_ns: l.hosts_finished.unwrap_or(l.now),
            events,
            wall_seconds: started.elapsed().as_secs_f64(),
            uplinks: l.fabric.uplinks.iter().map(|p| p.stats).collect(),
            downlinks: l.fabric.downlinks.iter().map(|p| p.stats).collect(),
            leaf_uplinks: l.fabric.leaf_up.iter().map(|p| p.stats).collect(),
            spine_downlinks: l.fabric.spine_down.iter().map(|p| p.stats).collect(),
            recirculation: l.recirculation,
            peak_aggregators: l.peak_aggregators,
            delivered: l.delivered,
            series: l.series,
            faults: *l.faults.stats(),
        }
    }
}

impl<S: SwitchNode, H: HostNode + ?Sized> Loop<'_, S, H> {
    /// Frame bytes and packet count of a dataplane packet, bundled or not.
    fn weigh(&self, bytes: &[u8]) -> (u64, u32) {
        let overhead = self.cfg.frame_overhead;
        let Some(b) = self.bundle else {
            return (bytes.len() as u64 + overhead, 1);
        };
        let Ok(p) = Packet::new_checked(bytes) else {
            return (bytes.len() as u64 + overhead, 1);
        };
        let per_chunk = [
            PacketType::Data,
            PacketType::Result,
            PacketType::Raw,
            PacketType::Fetch,
        ]
        .iter()
        .any(|&t| t as u8 == p.packet_type());
        if !per_chunk {
            return (bytes.len() as u64 + overhead, 1);
        }
        let c = u64::from(b.chunks);
        let wire = if p.lanes() > 0 {
            // The real chunks: one header each and the whole row's lanes.
            c * (HEADER_LEN as u64 + overhead) + 4 * u64::from(b.width)
        } else {
            c * (bytes.len() as u64 + overhead)
        };
        (wire, b.chunks)
    }

    fn flight(&self, bytes: Vec<u8>) -> Flight {
        let (wire, count) = self.weigh(&bytes);
        Flight {
            bytes,
            wire,
            count,
            segment: None,
            route: None,
        }
    }

    /// Put what the background flows have to send on their hosts' uplinks, and re-arm their
    /// timer.
    fn after_background_event(&mut self) {
        let now = self.now;
        let Some(b) = self.background.as_mut() else {
            return;
        };
        let mut out = Vec::new();
        while let Some((host, segment)) = b.poll_transmit() {
            out.push((host, segment, b.destination(host, &segment)));
        }
        let due = b.poll_timeout();
        for (host, segment, to) in out {
            let h = usize::from(host);
            // The flows share the host's link with the exchange, not its packet cores.
            let at = self.fabric.uplinks[h]
                .send(to_picos(now), segment.wire)
                .expect("host queues are unbounded");
            let mut f = Flight {
                bytes: Vec::new(),
                wire: segment.wire,
                count: 1,
                segment: Some(segment),
                route: None,
            };
            if self.leaf_spine() {
                f.route = self.segment_route(host, to, segment.flow);
                self.arrive(f, ceil_nanos(at), |packet| Event::Transit { packet });
                continue;
            }
            self.arrive(f, ceil_nanos(at), |packet| Event::AtSwitch {
                from: host,
                packet,
            });
        }
        if due != self.background_timer.0 {
            self.background_timer.0 = due;
            self.background_timer.1 += 1;
            if let Some(t) = due {
                let generation = self.background_timer.1;
                self.events
                    .push(t.max(now), Event::BackgroundTimer { generation });
            }
        }
    }

    /// Send what host `h` has, and re-arm its timer.
    fn after_host_event(&mut self, h: usize) {
        let now = self.now;
        while let Some(Transmit { len, .. }) = self.hosts[h].poll_transmit(now, &mut self.buf) {
            let f = self.flight(self.buf[..len].to_vec());
            let cost = to_picos(self.cfg.host.per_packet_ns) * u64::from(f.count);
            let ready = self.send_free[h].max(to_picos(now)) + cost;
            self.send_free[h] = ready;
            self.series.sent(now, f.wire);
            let at = self.fabric.uplinks[h]
                .send(ready, f.wire)
                .expect("host queues are unbounded");
            let from = h as u16;
            if self.two_level() {
                // To the host's leaf switch.
                let rack = self.cfg.topology.rack_of(from);
                self.arrive(f, ceil_nanos(at), |packet| Event::AtLeaf {
                    rack,
                    from,
                    packet,
                });
                continue;
            }
            if self.leaf_spine() {
                // Up through the host's leaf to the exchange's switch, spine 0.
                let rack = self.cfg.topology.rack_of(from);
                let mut f = f;
                f.route = Route::to(End::Switch { from }, &[Hop::LeafUp { rack, spine: 0 }]);
                self.arrive(f, ceil_nanos(at), |packet| Event::Transit { packet });
                continue;
            }
            self.arrive(f, ceil_nanos(at), |packet| Event::AtSwitch { from, packet });
        }
        if !self.done[h] && self.hosts[h].is_done() {
            self.done[h] = true;
            self.unfinished -= 1;
            if self.unfinished == 0 {
                self.hosts_finished = Some(now);
            }
        }
        let due = self.hosts[h].poll_timeout();
        if due != self.timers[h].0 {
            self.timers[h].0 = due;
            self.timers[h].1 += 1;
            if let Some(t) = due {
                self.events.push(
                    t.max(now),
                    Event::Timer {
                        host: h as u16,
                        generation: self.timers[h].1,
                    },
                );
            }
        }
    }

    fn at_switch(&mut self, from: u16, f: Flight) {
        if let Some(segment) = f.segment.as_ref() {
            // Background: plain forwarding towards the other end of its flow.
            let b = self
                .background
                .as_ref()
                .expect("background segments have flows");
            let to = b.destination(from, segment);
            self.egress(to, f);
            return;
        }
        let now_ps = to_picos(self.now);
        // Tell the switch the egress backlogs it marks by (only those that changed). Its port
        // leads to a worker on a star; on a leaf-spine to the deeper of the two queues on the
        // way down to that worker; with two levels, to a leaf (spine 0's link down to it).
        let two_level = self.two_level();
        let ports = if two_level {
            self.leaves.len()
        } else {
            self.fabric.downlinks.len()
        };
        for port in 0..ports {
            let (link, spine) = if two_level {
                (self.fabric.spine_down(0, port as u16), None)
            } else {
                let spine = self.leaf_spine().then(|| {
                    let rack = self.cfg.topology.rack_of(port as u16);
                    self.fabric.spine_down(0, rack)
                });
                (&self.fabric.downlinks[port], spine)
            };
            // An idle port that was reported empty stays empty: skip the arithmetic.
            if self.reported[port] == 0
                && link.idle_at(now_ps)
                && spine.is_none_or(|s| s.idle_at(now_ps))
            {
                continue;
            }
            let q = link
                .backlog(now_ps)
                .max(spine.map_or(0, |s| s.backlog(now_ps)));
            if q != self.reported[port] {
                self.reported[port] = q;
                self.switch.set_egress_queue(port as u16, q);
            }
        }
        // (With two levels, the leaves' ports towards the hosts are the ones tapped.)
        if let Some(tap) = self.tap.as_mut().filter(|_| !two_level) {
            tap.packet(self.now, Address::Worker(from), Address::Switch, &f.bytes);
        }
        let reads_pairs = self.cfg.switch.chip.reads_pairs;
        let before = passes_on(&*self.switch, reads_pairs);
        self.switch
            .handle_packet(self.now, Address::Worker(from), &f.bytes);
        let passes = passes_on(&*self.switch, reads_pairs) - before;
        let mut out = Vec::new();
        while let Some(t) = self.switch.poll_transmit(self.now, &mut self.buf) {
            if let Address::Worker(_) = t.to {
                out.push((t.to, self.flight(self.buf[..t.len].to_vec())));
            }
        }
        let from_worker = !self.two_level();
        self.after_pass(Origin::Switch, now_ps, passes, &f, out, from_worker);
    }

    /// `f` reaches the leaf of `rack` from `from` (one of its hosts, or the spine): the switch
    /// model in its leaf tier handles it on that leaf's own chip.
    fn at_leaf(&mut self, rack: u16, from: Address, f: Flight) {
        let now_ps = to_picos(self.now);
        let Topology::LeafSpine { hosts_per_rack, .. } = self.cfg.topology else {
            unreachable!("leaves on a leaf-spine only")
        };
        let first = rack * hosts_per_rack;
        let leaf = &mut self.leaves[usize::from(rack)];
        for h in first..first + hosts_per_rack {
            let q = self.fabric.downlinks[usize::from(h)].backlog(now_ps);
            leaf.set_egress_queue(h, q);
        }
        leaf.set_uplink_queue(self.fabric.leaf_up_port(rack, 0).backlog(now_ps));
        if let (Some(tap), Address::Worker(_)) = (self.tap.as_mut(), from) {
            tap.packet(self.now, from, Address::Switch, &f.bytes);
        }
        let reads_pairs = self.cfg.switch.chip.reads_pairs;
        let before = passes_on(leaf, reads_pairs);
        leaf.handle_packet(self.now, from, &f.bytes);
        let passes = passes_on(leaf, reads_pairs) - before;
        let mut out = Vec::new();
        while let Some(t) = self.leaves[usize::from(rack)].poll_transmit(self.now, &mut self.buf) {
            out.push((t.to, self.flight(self.buf[..t.len].to_vec())));
        }
        let from_worker = matches!(from, Address::Worker(_));
        self.after_pass(Origin::Leaf(rack), now_ps, passes, &f, out, from_worker);
    }

    /// A switch (`origin`) made `passes` aggregator passes for `f`, which arrived at `now_ps`
    /// (from a worker, or from another switch): note the aggregators in use, and send `out` once
    /// the chip is done.
    fn after_pass(
        &mut self,
        origin: Origin,
        now_ps: Picos,
        passes: u64,
        f: &Flight,
        out: Vec<(Address, Flight)>,
        from_worker: bool,
    ) {
        let in_use = self.switch.aggregators_in_use()
            + self
                .leaves
                .iter()
                .map(|l| l.aggregators_in_use())
                .sum::<usize>();
        self.peak_aggregators = self.peak_aggregators.max(in_use);
        self.series.aggregators(self.now, in_use);
        self.recirculation.passes += passes * u64::from(f.count);
        let chip = match origin {
            Origin::Switch => 0,
            Origin::Leaf(r) => 1 + usize::from(r),
        };
        let done = self.switch_time(chip, now_ps, passes, f, &out, from_worker);
        // The program mirrors a data packet's acknowledgement on its first pass: it does not
        // wait for the packet's trips, which on a busy path take tens of microseconds.
        let (acks, rest): (Vec<_>, Vec<_>) =
            out.into_iter().partition(|(_, o)| is_data_ack(&o.bytes));
        self.release_at(origin, done.first, acks);
        self.release_at(origin, done.last, rest);
    }

    /// Send `out` from `origin` at `at_ps` (at once when that is within a nanosecond: not
    /// worth an event).
    fn release_at(&mut self, origin: Origin, at_ps: Picos, out: Vec<(Address, Flight)>) {
        if out.is_empty() {
            return;
        }
        if ceil_nanos(at_ps) <= self.now + 1 {
            self.release(origin, out);
            return;
        }
        let batch = self.batches.insert((origin, out));
        self.events
            .push(ceil_nanos(at_ps), Event::Release { batch });
    }

    /// Packets a switch is done with leave it, numbered as its egress numbers them.
    fn release(&mut self, origin: Origin, out: Vec<(Address, Flight)>) {
        let chip = match origin {
            Origin::Switch => 0,
            Origin::Leaf(r) => 1 + usize::from(r),
        };
        for (to, mut f) in out {
            let len = f.bytes.len();
            self.egress_numbers[chip].stamp(&Transmit { to, len }, &mut f.bytes);
            match (origin, to) {
                (Origin::Switch, Address::Worker(w)) => self.switch_sends(w, f),
                (Origin::Leaf(rack), to) => self.leaf_sends(rack, to, f),
                (Origin::Switch, Address::Switch) => {}
            }
        }
    }

    /// A packet the leaf of `rack` emitted: down to one of its hosts, or up to spine 0.
    fn leaf_sends(&mut self, rack: u16, to: Address, mut f: Flight) {
        match to {
            Address::Worker(h) => {
                if let Some(tap) = self.tap.as_mut() {
                    tap.packet(self.now, Address::Switch, to, &f.bytes);
                }
                self.egress(h, f);
            }
            Address::Switch => {
                f.route = Route::to(
                    End::Switch { from: rack },
                    &[Hop::LeafUp { rack, spine: 0 }],
                );
                self.transit(f);
            }
        }
    }

    /// When the switch is done with `f` after `passes` aggregator passes, arriving at `now_ps`
    /// and sending `out`: every pass (at least one) takes a slot of its pipe's packet rate, and
    /// every pass after the first goes around its pipe's recirculation path that the packet's
    /// hash picks (`pipes.rs`). A packet from a worker makes its passes in the pipes the plan's
    /// placement gives its destinations; any other in the home pipe. The ideal chip takes no
    /// time.
    fn switch_time(
        &mut self,
        chip_index: usize,
        now_ps: Picos,
        passes: u64,
        f: &Flight,
        out: &[(Address, Flight)],
        from_worker: bool,
    ) -> Ready {
        let chip = self.cfg.switch.chip;
        let count = u64::from(f.count);
        if chip.is_ideal() {
            let extra = passes.saturating_sub(1) * count;
            self.recirculation.recirculations += extra;
            return Ready {
                first: now_ps,
                last: now_ps,
            };
        }
        let servers = &mut self.chips[chip_index];
        let mut per_pipe = servers.take_split();
        match self.pass_pipes.filter(|_| from_worker) {
            Some(at) => at.split(
                &f.bytes,
                passes,
                out.iter().map(|o| &o.1.bytes[..]),
                &mut per_pipe,
            ),
            None => {
                per_pipe.fill(0);
                per_pipe[usize::from(super::pipes::HOME_PIPE)] = passes.max(1);
            }
        }
        let path = Packet::new_checked(&f.bytes[..]).map_or(0, |p| {
            switchgnn_chip::paths::path_of(p.src(), p.dst(), chip.paths_per_pipe())
        });
        let p = Passes {
            per_pipe: &per_pipe,
            path,
            wire: f.wire,
            count,
        };
        let ready = servers.run(&chip, now_ps, &p, &mut self.recirculation, &mut self.series);
        servers.put_split(per_pipe);
        ready
    }

    /// Re-arm the switch's timer when its deadline moved.
    fn arm_switch_timer(&mut self) {
        let due = self.switch.poll_timeout();
        if due != self.switch_timer.0 {
            self.switch_timer.0 = due;
            self.switch_timer.1 += 1;
            if let Some(t) = due {
                let generation = self.switch_timer.1;
                self.events
                    .push(t.max(self.now), Event::SwitchTimer { generation });
            }
        }
    }

    fn leaf_spine(&self) -> bool {
        matches!(self.cfg.topology, Topology::LeafSpine { .. })
    }

    /// Whether every rack's leaf is a switch of the exchange's (two-level aggregation).
    fn two_level(&self) -> bool {
        !self.leaves.is_empty()
    }

    /// The way of a background segment from host `from` to host `to` once it is at `from`'s
    /// leaf: down to `to` if it is in the same rack, else up to the spine its flow hashes to
    /// and down through `to`'s leaf.
    fn segment_route(&self, from: u16, to: u16, flow: u32) -> Option<Route> {
        let Topology::LeafSpine { spines, .. } = self.cfg.topology else {
            return Route::to(End::Host(to), &[]);
        };
        let (a, b) = (
            self.cfg.topology.rack_of(from),
            self.cfg.topology.rack_of(to),
        );
        if a == b {
            return Route::to(End::Host(to), &[]);
        }
        // Fibonacci hashing of the flow id: every segment of a flow takes the same spine.
        let spine = ((u64::from(flow).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32)
            % u64::from(spines.max(1))) as u16;
        Route::to(
            End::Host(to),
            &[
                Hop::LeafUp { rack: a, spine },
                Hop::SpineDown { spine, rack: b },
            ],
        )
    }

    /// A packet the exchange's switch emitted for worker `w`: on a star straight onto `w`'s
    /// egress, on a leaf-spine down from spine 0 through `w`'s leaf; with two levels, `w` is
    /// the spine's port towards rack `w`'s leaf switch.
    fn switch_sends(&mut self, w: u16, mut f: Flight) {
        if self.two_level() {
            // The spine's port `w` is the link down to rack `w`'s leaf.
            if usize::from(w) < self.leaves.len() {
                f.route = Route::to(End::Leaf(w), &[Hop::SpineDown { spine: 0, rack: w }]);
                self.transit(f);
            }
            return;
        }
        if let Some(tap) = self.tap.as_mut() {
            tap.packet(self.now, Address::Switch, Address::Worker(w), &f.bytes);
        }
        if !self.leaf_spine() || usize::from(w) >= self.fabric.downlinks.len() {
            self.egress(w, f);
            return;
        }
        let rack = self.cfg.topology.rack_of(w);
        f.route = Route::to(End::Host(w), &[Hop::SpineDown { spine: 0, rack }]);
        self.transit(f);
    }

    /// `f` is at a leaf or a spine: on to its next port, or to where it ends. Segments are
    /// marked at every port above the marking threshold; the exchange's packets on their way
    /// up (where the switch model cannot see the queue) carry the mark in their header, and
    /// the switch echoes it.
    fn transit(&mut self, mut f: Flight) {
        let route = f.route.as_mut().expect("a packet in transit has a route");
        let Some(hop) = route.pop() else {
            match route.end {
                End::Host(h) => self.egress(h, f),
                End::Switch { from } => self.at_switch(from, f),
                End::Leaf(rack) => self.at_leaf(rack, Address::Switch, f),
            }
            return;
        };
        let now_ps = to_picos(self.now);
        let threshold = self.cfg.switch.ecn_threshold;
        let port = match hop {
            Hop::LeafUp { rack, spine } => self.fabric.leaf_up_mut(rack, spine),
            Hop::SpineDown { spine, rack } => self.fabric.spine_down_mut(spine, rack),
        };
        let congested = port.backlog(now_ps) > threshold;
        let Some(arrival) = port.send(now_ps, f.wire) else {
            self.series.dropped(self.now, f.wire);
            return;
        };
        match f.segment.as_mut() {
            Some(segment) => segment.ce |= congested && !segment.ack,
            None if congested && matches!(hop, Hop::LeafUp { .. }) => mark(&mut f.bytes),
            None => {}
        }
        self.arrive(f, ceil_nanos(arrival), |packet| Event::Transit { packet });
    }

    /// Queue a packet on the egress port of its destination host (the star's switch's, or its
    /// leaf's); a segment is marked when that queue is above the threshold.
    fn egress(&mut self, to: u16, mut f: Flight) {
        let h = usize::from(to);
        if h >= self.fabric.downlinks.len() {
            return;
        }
        if let Some(segment) = f.segment.as_mut() {
            let backlog = self.fabric.downlinks[h].backlog(to_picos(self.now));
            if !segment.ack && backlog > self.cfg.switch.ecn_threshold {
                segment.ce = true;
            }
        }
        let now_ps = to_picos(self.now);
        let port = &mut self.fabric.downlinks[h];
        let Some(arrival) = port.send(now_ps, f.wire) else {
            self.series.dropped(self.now, f.wire);
            return;
        };
        let backlog = port.backlog(now_ps);
        self.series.queue(self.now, backlog);
        if f.segment.is_some() {
            let host = h as u16;
            self.arrive(f, ceil_nanos(arrival), |packet| Event::AtHost {
                host,
                packet,
            });
            return;
        }
        // The host's receive core takes packets in arrival order (one link feeds it).
        let cost = to_picos(self.cfg.host.per_packet_ns) * u64::from(f.count);
        let ready = self.receive_free[h].max(arrival) + cost;
        self.receive_free[h] = ready;
        let host = h as u16;
        self.arrive(f, ceil_nanos(ready), |packet| Event::AtHost {
            host,
            packet,
        });
    }

    /// `f` arrives at `at` as `event` (with its packet's slab index), through the fault
    /// injector: lost, once, or twice, perhaps held back.
    fn arrive(&mut self, f: Flight, at: Nanos, event: impl Fn(u32) -> Event) {
        for (f, extra) in self.faulty(f) {
            let packet = self.packets.insert(f);
            self.events.push(at + extra, event(packet));
        }
    }

    /// The copies of `f` that arrive, and their extra delays, through the fault injector (a
    /// bundled packet is lost, duplicated or held back with all the chunks it stands for).
    fn faulty(&mut self, f: Flight) -> Vec<(Flight, Nanos)> {
        if !self.cfg.faults.is_active() {
            return vec![(f, 0)];
        }
        if f.segment.is_some() {
            // The injector works on the protocol's packets; background flows see real drops only.
            return vec![(f, 0)];
        }
        let Flight {
            bytes,
            wire,
            count,
            segment,
            route,
        } = f;
        let mut out = Vec::with_capacity(2);
        self.faults.apply(bytes, |bytes, extra| {
            out.push((
                Flight {
                    bytes,
                    wire,
                    count,
                    segment,
                    route,
                },
                extra,
            ))
        });
        out
    }
}

/// Passes `switch` has made on a chip that reads a 64-lane sum out in one pass (`reads_pairs`,
/// Tofino 2) or in two (Tofino 1, and the P4 program as written).
fn passes_on<S: SwitchNode + ?Sized>(switch: &S, reads_pairs: bool) -> u64 {
    if reads_pairs {
        switch.passes_reading_pairs()
    } else {
        switch.passes()
    }
}

/// Set the ECN flag of a dataplane packet's header (what a queue above its threshold does to
/// the IP header's codepoint). Acknowledgements are left alone: their flag is an echo of the
/// data path's congestion (TCP's ECE), which a queue on their own way must not fake; so is
/// anything that does not parse.
fn mark(bytes: &mut [u8]) {
    if let Ok(mut p) = Packet::new_checked(&mut bytes[..]) {
        if let Ok(mut flags) = switchgnn_dataplane::wire::Flags::from_u8(p.flags()) {
            if !flags.ack {
                flags.ecn = true;
                p.set_flags(flags);
            }
        }
    }
}

/// Whether `bytes` is a switch's acknowledgement of a data packet (its type, the ack flag).
fn is_data_ack(bytes: &[u8]) -> bool {
    Packet::new_checked(bytes).is_ok_and(|p| {
        p.packet_type() == PacketType::Data as u8 && Flags::from_u8(p.flags()).is_ok_and(|f| f.ack)
    })
}
