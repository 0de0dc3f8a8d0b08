//! The switch model and the engines allocate nothing per packet: they write packets into the
//! driver's buffer and recycle their own queues. Every exchange kind runs two exchanges on
//! one switch with immediate delivery; the allocations counted inside the nodes' calls during
//! the second (the first warms the switch's queues) must not grow with the packets: far below
//! one per packet, where a single allocation per packet would put them at one or more. What is
//! left is per block (each block's aggregator state and receive bitmaps): blocks of 256 KiB of
//! aggregators hold thousands of packets each.

mod common;

use std::collections::VecDeque;

use common::{dataset_of, random_graph};
use switchgnn_conformance::allocations::{count_allocations, Counting};
use switchgnn_conformance::Fixture;
use switchgnn_dataplane::cc::Unpaced;
use switchgnn_dataplane::engine::Exchange;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::node::MAX_DATAGRAM_LEN;
use switchgnn_dataplane::switch::{JobConfig, Switch, SwitchConfig};
use switchgnn_dataplane::{Address, ExchangeId, ExchangeKind, Node};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations inside the nodes' calls, and the packets those calls handled or produced.
#[derive(Debug, Default)]
struct Tally {
    switch_allocations: u64,
    switch_packets: u64,
    engine_allocations: u64,
    engine_packets: u64,
    /// Host copies the engines took in (several a packet, packed).
    engine_copies: u64,
}

impl Tally {
    fn per_packet(allocations: u64, packets: u64) -> f64 {
        allocations as f64 / packets.max(1) as f64
    }
}

type Queue = VecDeque<(Address, Address, [u8; MAX_DATAGRAM_LEN], usize)>;

/// Everything `node` has to send, into `queue`, counting the allocations of the polls.
fn drain(node: &mut dyn Node, from: Address, queue: &mut Queue) -> (u64, u64) {
    let (mut allocations, mut packets) = (0, 0);
    loop {
        let mut buf = [0u8; MAX_DATAGRAM_LEN];
        let (a, t) = count_allocations(|| node.poll_transmit(0, &mut buf));
        allocations += a;
        let Some(t) = t else {
            return (allocations, packets);
        };
        packets += 1;
        queue.push_back((from, t.to, buf, t.len));
    }
}

/// One exchange (epoch `epoch`) of fresh engines through `switch`, packets delivered at once.
fn exchange(
    kind: ExchangeKind,
    fixture: &Fixture,
    switch: &mut Switch,
    scale: Scale,
    epoch: u32,
) -> Tally {
    let plan = fixture.plan(kind);
    let id = ExchangeId {
        job: 1,
        epoch,
        layer: 0,
        backward: false,
    };
    let mut engines: Vec<Box<dyn Exchange>> = (0..plan.workers)
        .map(|w| fixture.engine(kind, w, id, epoch + 1, scale, Box::new(Unpaced), 0))
        .collect();
    let mut tally = Tally::default();
    let mut queue = Queue::with_capacity(1 << 16);
    for (w, e) in engines.iter_mut().enumerate() {
        let (a, n) = drain(&mut **e, Address::Worker(w as u16), &mut queue);
        tally.engine_allocations += a;
        tally.engine_packets += n;
    }
    while let Some((from, to, bytes, len)) = queue.pop_front() {
        let bytes = &bytes[..len];
        match to {
            Address::Switch => {
                let (a, ()) = count_allocations(|| switch.handle_packet(0, from, bytes));
                let (b, n) = drain(switch, Address::Switch, &mut queue);
                tally.switch_allocations += a + b;
                tally.switch_packets += 1 + n;
            }
            Address::Worker(w) => {
                let e = &mut engines[usize::from(w)];
                let (a, ()) = count_allocations(|| e.handle_packet(0, from, bytes));
                let (b, n) = drain(&mut **e, to, &mut queue);
                tally.engine_allocations += a + b;
                tally.engine_packets += 1 + n;
            }
        }
    }
    assert!(
        engines.iter().all(|e| e.is_finished()),
        "{kind}: the exchange completes"
    );
    tally.engine_copies = engines.iter().map(|e| e.stats().raws).sum();
    tally
}

#[test]
fn switch_and_engines_allocate_nothing_per_packet() {
    let dataset = dataset_of(random_graph(3_000, 18_000, 7));
    // Two chunks per row, a few blocks of 256 KiB of aggregators.
    let memory = 256 << 10;
    let fixture = Fixture::new(&dataset, 4, 128, memory);
    let most = (0..dataset.graph.num_vertices() as u32)
        .map(|v| dataset.graph.degree(v))
        .max()
        .unwrap_or(1);
    let scale = Scale::for_bound(1.0, most).unwrap();
    for kind in ExchangeKind::ALL {
        let plan = fixture.plan(kind);
        let mut switch = Switch::new(SwitchConfig {
            ports: plan.workers,
            ..SwitchConfig::with_memory(memory)
        });
        switch
            .add_job(JobConfig::new(1, vec![plan.clone()]))
            .unwrap();
        exchange(kind, &fixture, &mut switch, scale, 0);
        let t = exchange(kind, &fixture, &mut switch, scale, 1);
        let switch_rate = Tally::per_packet(t.switch_allocations, t.switch_packets);
        // The host kinds pack several copies a packet: their unit of work is the copy.
        let engine_units = t.engine_packets.max(t.engine_copies);
        let engine_rate = Tally::per_packet(t.engine_allocations, engine_units);
        println!(
            "{kind:<10} blocks {:>3}  switch: {:>6} allocations for {:>7} packets ({switch_rate:.4}/packet)  engines: {:>6} for {:>7} packets, {:>7} copies ({engine_rate:.4}/packet or copy)",
            plan.blocks.len(),
            t.switch_allocations,
            t.switch_packets,
            t.engine_allocations,
            t.engine_packets,
            t.engine_copies
        );
        // Enough packets to see a rate (the host kinds pack several copies a packet).
        let enough = if kind.in_network() { 10_000 } else { 2_000 };
        assert!(t.switch_packets > enough && t.engine_packets > enough);
        assert!(
            switch_rate < 0.01,
            "{kind}: the switch allocated {switch_rate:.4} times per packet"
        );
        assert!(
            engine_rate < 0.05,
            "{kind}: the engines allocated {engine_rate:.4} times per packet or copy"
        );
    }
}
