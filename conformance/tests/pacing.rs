//! Pacing in bursts (`Controller::burst`): a paced engine may run up to its burst ahead of its
//! rate, and asks to be woken when half a burst is due; without a burst it sends one data
//! packet per instant. Either way the rate holds: the data that has left by any instant is at
//! most the burst beyond what the rate allows since the first packet.

mod common;

use std::collections::VecDeque;

use common::{dataset_of, random_graph};
use switchgnn_conformance::Fixture;
use switchgnn_dataplane::cc::Aimd;
use switchgnn_dataplane::engine::Exchange;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::node::MAX_DATAGRAM_LEN;
use switchgnn_dataplane::switch::{JobConfig, Switch, SwitchConfig};
use switchgnn_dataplane::wire::{Packet, PacketType, Repr, HEADER_LEN, MAX_PACKET_LEN};
use switchgnn_dataplane::{Address, ExchangeId, ExchangeKind, Nanos, Node};

/// 1 Gb/s: a full 288-byte packet every 2.3 µs.
const RATE: f64 = 125e6;

type Queue = VecDeque<(Address, Address, Vec<u8>)>;

/// What `node` sends at `now`, into `queue`; the data packets among it.
fn drain(node: &mut dyn Node, from: Address, now: Nanos, queue: &mut Queue) -> usize {
    let mut data = 0;
    let mut buf = [0u8; MAX_DATAGRAM_LEN];
    while let Some(t) = node.poll_transmit(now, &mut buf) {
        let bytes = buf[..t.len].to_vec();
        if from != Address::Switch {
            // Control messages are not dataplane packets; they do not parse.
            if let Ok(repr) = Packet::new_checked(&bytes[..]).and_then(|p| Repr::parse(&p)) {
                data += usize::from(repr.packet_type == PacketType::Data && !repr.flags.ack);
            }
        }
        queue.push_back((from, t.to, bytes));
    }
    data
}

/// Deliver everything queued at `now` until nothing more is sent; the data packets each worker
/// sent meanwhile.
fn settle(
    switch: &mut Switch,
    engines: &mut [Box<dyn Exchange>],
    now: Nanos,
    queue: &mut Queue,
) -> Vec<usize> {
    let mut data = vec![0; engines.len()];
    for (w, e) in engines.iter_mut().enumerate() {
        data[w] += drain(&mut **e, Address::Worker(w as u16), now, queue);
    }
    while let Some((from, to, bytes)) = queue.pop_front() {
        match to {
            Address::Switch => {
                switch.handle_packet(now, from, &bytes);
                drain(switch, Address::Switch, now, queue);
            }
            Address::Worker(w) => {
                let w = usize::from(w);
                engines[w].handle_packet(now, from, &bytes);
                data[w] += drain(&mut *engines[w], to, now, queue);
            }
        }
    }
    data
}

/// Run one SwitchGNN exchange on simulated time with immediate delivery, every worker paced
/// at `RATE` with `burst` bytes of slack; per instant the engines wake at, worker 0's data
/// packets sent then. Also the data packets' length.
fn run(burst: usize) -> (Vec<(Nanos, usize)>, usize) {
    let dataset = dataset_of(random_graph(600, 3_000, 11));
    let fixture = Fixture::new(&dataset, 4, 64, 1 << 20);
    let scale = Scale::for_bound(1.0, 64).unwrap();
    let kind = ExchangeKind::Switchgnn;
    let plan = fixture.plan(kind);
    let mut switch = Switch::new(SwitchConfig {
        ports: plan.workers,
        ..SwitchConfig::with_memory(1 << 20)
    });
    switch
        .add_job(JobConfig::new(1, vec![plan.clone()]))
        .unwrap();
    let id = ExchangeId {
        job: 1,
        epoch: 0,
        layer: 0,
        backward: false,
    };
    let mut engines: Vec<Box<dyn Exchange>> = (0..plan.workers)
        .map(|w| {
            let mut cc = Aimd::new(RATE);
            cc.burst = burst;
            fixture.engine(kind, w, id, 1, scale, Box::new(cc), 0)
        })
        .collect();
    let mut queue = Queue::new();
    let mut sends = Vec::new();
    let mut now = 0;
    for _ in 0..1_000_000 {
        let data = settle(&mut switch, &mut engines, now, &mut queue);
        if data[0] > 0 {
            sends.push((now, data[0]));
        }
        if engines.iter().all(|e| e.is_finished()) {
            let len = HEADER_LEN + 4 * plan.width.min(64);
            return (sends, len);
        }
        let next = engines
            .iter()
            .filter_map(|e| e.poll_timeout())
            .min()
            .expect("an unfinished engine has a deadline");
        now = next.max(now + 1);
        for e in &mut engines {
            if e.poll_timeout().is_some_and(|d| d <= now) {
                e.handle_timeout(now);
            }
        }
    }
    panic!("the exchange did not finish");
}

#[test]
fn without_a_burst_one_data_packet_leaves_per_instant() {
    let (sends, _) = run(0);
    assert!(sends.len() > 20, "{} sends", sends.len());
    assert!(
        sends.iter().all(|&(_, n)| n == 1),
        "{:?}",
        sends.iter().filter(|s| s.1 > 1).take(5).collect::<Vec<_>>()
    );
}

#[test]
fn a_burst_leaves_at_once_and_the_rate_still_holds() {
    let burst = 16 * MAX_PACKET_LEN;
    let (sends, len) = run(burst);
    let total: usize = sends.iter().map(|s| s.1).sum();
    let most = sends.iter().map(|s| s.1).max().unwrap();
    // The first instant takes a whole burst (and the packet it starts with).
    assert!(
        most >= burst / len,
        "at most {most} packets at once, burst {burst} B of {len} B packets"
    );
    assert!(
        sends.len() < total / 4,
        "{} sends for {total} packets",
        sends.len()
    );
    // Never ahead of the rate by more than the burst (and one packet).
    let start = sends[0].0;
    let mut sent = 0;
    for &(t, n) in &sends {
        sent += n * len;
        let allowed = (t - start) as f64 * 1e-9 * RATE + (burst + len) as f64;
        assert!(
            sent as f64 <= allowed,
            "{sent} B by {} ns, the rate allows {allowed:.0}",
            t - start
        );
    }
}
