//! The engines and the switch in lock step (quinn-proto's test `Pair` is the model): a
//! harness delivers one packet or fires one timer at a time on a simulated clock, and a test
//! script decides which packets are lost. Each test pins one recovery mechanism down: a lost
//! go, the fetch cap, RACK-style loss detection, Karn's rule, retransmission backoff, an
//! overflow notice, and a hole in the switch's numbers of the sums it sends.

mod common;

use std::collections::VecDeque;
use std::sync::Arc;

use common::{dataset_of, random_graph};
use switchgnn_dataplane::cc::{Aimd, Controller, Unpaced};
use switchgnn_dataplane::engine::{EngineConfig, Exchange, LocalFeatures, Timers};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::node::MAX_DATAGRAM_LEN;
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::switch::{JobConfig, Switch, SwitchConfig};
use switchgnn_dataplane::wire::{Packet, PacketType, Repr};
use switchgnn_dataplane::{Address, ExchangeId, ExchangeKind, Nanos, Node};
use switchgnn_scheduler::exchange::{exchange_plan, PlanOptions};

/// One hop's delay.
const HOP: Nanos = 1_000;
const TIMERS: Timers = Timers {
    rto: 20_000,
    control: 20_000,
    result: 100_000,
};
/// 160-byte chunks at 160 MB/s: one a microsecond.
const ONE_CHUNK_A_MICROSECOND: f64 = 160e6;
/// The same with a result timeout far beyond the retransmissions, so that no fetch round
/// takes over from them.
const PATIENT: Timers = Timers {
    result: 100_000_000,
    ..TIMERS
};

/// A packet on the wire, and where it goes.
#[derive(Debug, Clone)]
struct InFlight {
    at: Nanos,
    from: Address,
    to: Address,
    repr: Repr,
    bytes: Vec<u8>,
}

/// The switch, one engine per worker, a clock, and the packets in flight.
struct Harness {
    switch: Switch,
    workers: Vec<Box<dyn Exchange>>,
    now: Nanos,
    wire: VecDeque<InFlight>,
    /// Every packet put on the wire so far (lost ones included), in order.
    log: Vec<InFlight>,
    /// Decides, per packet, whether it is lost.
    lose: Box<dyn FnMut(&InFlight) -> bool>,
}

impl Harness {
    /// `pace`: each worker's line rate in bytes/s (`None`: all at once).
    fn new(
        kind: ExchangeKind,
        workers: u32,
        window: usize,
        scale: Option<Scale>,
        timers: Timers,
        pace: Option<f64>,
    ) -> Harness {
        let d = dataset_of(random_graph(60, 200, 5));
        let spec =
            switchgnn_partition::PlanSpec::new("steps", workers, vec![32]).switch_memory(1 << 20);
        let prepared = switchgnn_partition::Plan::prepare(&d, &spec, &|_| {}).unwrap();
        let plan: Arc<ExchangePlan> =
            Arc::new(exchange_plan(kind, &d.graph, &prepared, 0, PlanOptions::default()).unwrap());
        let most = (0..60).map(|v| d.graph.degree(v)).max().unwrap_or(1);
        let scale = scale.unwrap_or_else(|| Scale::for_bound(1.0, most).unwrap());
        let exchange = ExchangeId {
            job: 1,
            epoch: 0,
            layer: 0,
            backward: false,
        };
        let mut switch = Switch::new(SwitchConfig {
            aggregators: 4096,
            ecn_threshold: u64::MAX,
            ports: workers as u16,
        });
        switch
            .add_job(JobConfig::new(1, vec![plan.clone()]))
            .unwrap();
        let engines = (0..workers as u16)
            .map(|rank| {
                let vertices: Vec<u32> = (0..60)
                    .filter(|&v| plan.owner[v as usize] == rank)
                    .collect();
                let values: Vec<f32> = vertices
                    .iter()
                    .flat_map(|&v| {
                        (0..32).map(move |j| ((v as usize * 7 + j) % 19) as f32 / 9.0 - 1.0)
                    })
                    .collect();
                let cfg = EngineConfig {
                    exchange,
                    seq: 1,
                    rank,
                    scale,
                    timers,
                    window,
                    framing: Default::default(),
                };
                let local = LocalFeatures {
                    vertices: &vertices,
                    width: 32,
                    values: &values,
                };
                let cc: Box<dyn Controller> = match pace {
                    Some(rate) => Box::new(Aimd::new(rate)),
                    None => Box::new(Unpaced),
                };
                kind.engine(cfg, plan.clone(), local, cc, 0).unwrap()
            })
            .collect();
        let mut h = Harness {
            switch,
            workers: engines,
            now: 0,
            wire: VecDeque::new(),
            log: Vec::new(),
            lose: Box::new(|_| false),
        };
        for w in 0..h.workers.len() {
            h.flush_worker(w);
        }
        h
    }

    fn send(&mut self, from: Address, to: Address, bytes: Vec<u8>) {
        let repr = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
        let p = InFlight {
            at: self.now + HOP,
            from,
            to,
            repr,
            bytes,
        };
        self.log.push(p.clone());
        if !(self.lose)(&p) {
            self.wire.push_back(p);
        }
    }

    fn flush_worker(&mut self, w: usize) {
        let mut buf = [0u8; MAX_DATAGRAM_LEN];
        while let Some(t) = self.workers[w].poll_transmit(self.now, &mut buf) {
            self.send(Address::Worker(w as u16), t.to, buf[..t.len].to_vec());
        }
    }

    fn flush_switch(&mut self) {
        let mut buf = [0u8; MAX_DATAGRAM_LEN];
        while let Some(t) = self.switch.poll_transmit(self.now, &mut buf) {
            self.send(Address::Switch, t.to, buf[..t.len].to_vec());
        }
    }

    /// Deliver the next packet or fire the next timer, whichever is first; false when nothing
    /// is left to do.
    fn step(&mut self) -> bool {
        let packet = self.wire.iter().map(|p| p.at).min();
        let timer = self
            .workers
            .iter()
            .enumerate()
            .filter_map(|(i, w)| w.poll_timeout().map(|t| (t, i)))
            .min();
        match (packet, timer) {
            (Some(at), t) if t.is_none_or(|(t, _)| at <= t) => {
                let i = self.wire.iter().position(|p| p.at == at).unwrap();
                let p = self.wire.remove(i).unwrap();
                self.now = self.now.max(p.at);
                match p.to {
                    Address::Switch => {
                        self.switch.handle_packet(self.now, p.from, &p.bytes);
                        self.flush_switch();
                    }
                    Address::Worker(w) => {
                        let w = usize::from(w);
                        self.workers[w].handle_packet(self.now, Address::Switch, &p.bytes);
                        self.flush_worker(w);
                    }
                }
                true
            }
            (_, Some((t, i))) => {
                self.now = self.now.max(t);
                self.workers[i].handle_timeout(self.now);
                self.flush_worker(i);
                true
            }
            _ => false,
        }
    }

    /// Step until every worker has finished (at most `limit` steps).
    fn finish(&mut self, limit: usize) {
        for _ in 0..limit {
            if self.workers.iter().all(|w| w.is_finished()) {
                return;
            }
            assert!(self.step(), "stalled at {} ns", self.now);
        }
        panic!("not finished after {limit} steps");
    }

    /// Packets of `t` from worker `w` in the log, with the time they left.
    fn sent_by(&self, w: u16, t: PacketType) -> Vec<&InFlight> {
        self.log
            .iter()
            .filter(|p| {
                p.from == Address::Worker(w) && p.repr.packet_type == t && !p.repr.flags.ack
            })
            .collect()
    }
}

fn is(p: &InFlight, t: PacketType) -> bool {
    p.repr.packet_type == t
}

/// Everything to worker 1 is lost until its third join (the go, and the packets of the block
/// that would have told it the go was sent): it joins again, sooner than the control interval
/// at first and less often each time, the switch repeats the go, and the exchange completes.
#[test]
fn a_lost_go_is_repeated_on_the_next_join() {
    let mut h = Harness::new(ExchangeKind::Switchgnn, 3, 16, None, TIMERS, None);
    let mut joins_seen = 0;
    h.lose = Box::new(move |p| {
        if is(p, PacketType::Join) && p.from == Address::Worker(1) {
            joins_seen += 1;
        }
        joins_seen < 3 && p.to == Address::Worker(1)
    });
    h.finish(1_000_000);
    let joins: Vec<u64> = h
        .sent_by(1, PacketType::Join)
        .iter()
        .map(|p| p.at)
        .collect();
    assert!(joins.len() >= 3, "worker 1 joined again: {joins:?}");
    let gaps: Vec<u64> = joins.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps[0] < TIMERS.control,
        "the first repeat comes soon: {gaps:?}"
    );
    assert!(
        gaps.windows(2).all(|g| g[1] >= g[0]) && gaps.iter().all(|&g| g <= TIMERS.control),
        "then less often, never rarer than the control interval: {gaps:?}"
    );
    let gos = h
        .log
        .iter()
        .filter(|p| is(p, PacketType::BlockGo) && p.to == Address::Worker(1) && p.repr.block == 0)
        .count();
    assert!(gos >= 2, "the switch repeated the go ({gos})");
}

/// Every result to worker 0 is lost: after its patience it fetches the missing contributions
/// raw, never more than one window per round, and still finishes.
#[test]
fn fetch_rounds_ask_for_one_window_at_most() {
    let window = 4;
    let mut h = Harness::new(ExchangeKind::Switchgnn, 3, window, None, TIMERS, None);
    h.lose = Box::new(|p| is(p, PacketType::Result) && p.to == Address::Worker(0));
    h.finish(2_000_000);
    let fetches = h.sent_by(0, PacketType::Fetch);
    assert!(!fetches.is_empty(), "worker 0 fetched what it lost");
    // Group the fetches into rounds (a round goes out within one pacing burst).
    let mut rounds: Vec<usize> = Vec::new();
    let mut last = None;
    for f in &fetches {
        if last.is_none_or(|t| f.at > t + HOP) {
            rounds.push(0);
        }
        *rounds.last_mut().unwrap() += 1;
        last = Some(f.at);
    }
    assert!(rounds.iter().all(|&n| n <= window), "rounds {rounds:?}");
    assert!(rounds.len() > 1, "several rounds: {rounds:?}");
}

/// Every result to worker 0 is lost. With a floor of ten result timeouts on its block (a slow
/// chip's least time for it) it fetches nothing before the block has run that long, and then
/// recovers as without it; without a floor — or with one for another block only — its first
/// fetch goes out well before.
#[test]
fn no_fetch_goes_out_before_the_block_floor() {
    let floor = 10 * TIMERS.result;
    let first_fetch = |floors: Vec<Nanos>| {
        let mut h = Harness::new(ExchangeKind::Switchgnn, 3, 16, None, TIMERS, None);
        for w in &mut h.workers {
            w.set_block_floors(floors.clone());
        }
        h.lose = Box::new(|p| is(p, PacketType::Result) && p.to == Address::Worker(0));
        h.finish(2_000_000);
        let fetches = h.sent_by(0, PacketType::Fetch);
        assert!(!fetches.is_empty(), "worker 0 fetched what it lost");
        fetches[0].at
    };
    let hasty = first_fetch(Vec::new());
    let elsewhere = first_fetch(vec![0, floor]);
    let patient = first_fetch(vec![floor]);
    assert!(
        hasty < floor,
        "without the floor: first fetch at {hasty} ns"
    );
    assert_eq!(elsewhere, hasty, "block 1's floor is not block 0's");
    assert!(patient >= floor, "with it: first fetch at {patient} ns");
}

/// One data chunk is lost while the chunks sent after it are acknowledged: RACK resends it
/// long before the retransmission timeout.
#[test]
fn rack_resends_an_overtaken_chunk_before_the_timeout() {
    let mut h = Harness::new(
        ExchangeKind::Switchgnn,
        2,
        64,
        None,
        PATIENT,
        Some(ONE_CHUNK_A_MICROSECOND),
    );
    let mut lost = false;
    h.lose = Box::new(move |p| {
        let hit = !lost
            && is(p, PacketType::Data)
            && !p.repr.flags.ack
            && p.from == Address::Worker(0)
            && p.repr.sequence == 3;
        lost |= hit;
        hit
    });
    h.finish(1_000_000);
    let sends: Vec<Nanos> = data_sends(&h, 0, 3);
    assert!(sends.len() >= 2, "the lost chunk was resent");
    let gap = sends[1] - sends[0];
    assert!(
        gap < TIMERS.rto / 2,
        "resent after {gap} ns, the timeout is {} ns",
        TIMERS.rto
    );
}

/// When worker `w` sent data chunk `seq`.
fn data_sends(h: &Harness, w: u16, seq: u32) -> Vec<Nanos> {
    h.sent_by(w, PacketType::Data)
        .into_iter()
        .filter(|p| p.repr.sequence == seq)
        .map(|p| p.at)
        .collect()
}

/// One chunk of worker 0 is lost four times: first it goes again as a loss probe (two quiet
/// round trips, or the round trip and four variations, after the last send: sooner than the
/// timeout), then after a wait that doubles each time until the timeout caps it — never at a
/// fixed rate — and then gets through.
#[test]
fn retransmissions_back_off_exponentially() {
    let mut h = Harness::new(ExchangeKind::Switchgnn, 2, 64, None, PATIENT, None);
    let mut dropped = 0;
    h.lose = Box::new(move |p| {
        let hit = is(p, PacketType::Data)
            && !p.repr.flags.ack
            && p.from == Address::Worker(0)
            && p.repr.sequence == 0
            && dropped < 4;
        dropped += u32::from(hit);
        hit
    });
    h.finish(1_000_000);
    let sends = data_sends(&h, 0, 0);
    assert_eq!(sends.len(), 5, "{sends:?}");
    let gaps: Vec<Nanos> = sends.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps[0] < TIMERS.rto, "the probe waits no timeout: {gaps:?}");
    for w in gaps.windows(2) {
        assert!(
            w[1] >= (2 * w[0] - HOP).min(TIMERS.rto),
            "each wait doubles, up to the timeout: {gaps:?}"
        );
    }
    assert!(
        *gaps.last().unwrap() >= TIMERS.rto,
        "the waits reach the timeout: {gaps:?}"
    );
}

/// Karn's rule: the acknowledgement of a resent chunk is no round-trip sample. A clean run
/// measures its round trips; a run where every chunk of worker 0 is lost once (so every ack it
/// gets is for a resent chunk) has no estimate at all.
#[test]
fn the_ack_of_a_resent_chunk_is_no_round_trip_sample() {
    let mut h = Harness::new(ExchangeKind::Switchgnn, 2, 64, None, PATIENT, None);
    h.finish(1_000_000);
    let clean = h.workers[0].stats().srtt_ns;
    assert!(
        clean > 0 && clean <= 4 * HOP,
        "clean round trips of two hops: {clean}"
    );

    let mut h = Harness::new(ExchangeKind::Switchgnn, 2, 64, None, PATIENT, None);
    let mut seen = std::collections::HashSet::new();
    h.lose = Box::new(move |p| {
        is(p, PacketType::Data)
            && !p.repr.flags.ack
            && p.from == Address::Worker(0)
            && seen.insert((p.repr.block, p.repr.sequence))
    });
    h.finish(2_000_000);
    let st = h.workers[0].stats();
    assert!(st.retransmits > 0);
    assert_eq!(st.srtt_ns, 0, "no sample from a resent chunk's ack");
}

/// A lane overflow in the switch (a scale for one contribution) sends the destination an
/// overflow notice; it fetches the contributions raw and the exchange completes.
#[test]
fn an_overflow_notice_starts_a_fetch() {
    let one = Scale::for_bound(1.0, 1).unwrap();
    let mut h = Harness::new(ExchangeKind::Switchgnn, 3, 64, Some(one), TIMERS, None);
    h.finish(2_000_000);
    let notices: u64 = h.workers.iter().map(|w| w.stats().overflow_notices).sum();
    assert!(h.switch.counters().overflows > 0);
    assert_eq!(notices, h.switch.counters().overflows);
    let fetched: u64 = h
        .workers
        .iter()
        .map(|w| w.stats().fetches_sent + w.stats().cache_hits)
        .sum();
    assert!(fetched > 0, "the notices started fetches (or cache hits)");
}

/// One sum to worker 0 is lost: the hole in the switch's numbers of what it sends worker 0
/// tells it of the loss, and it fetches within a few round trips of quiet — well before the
/// result timeout. So when the lost sum is the first of the exchange (the switch's reply to
/// the question asked with the join says where the numbers start) and when it is the last
/// (nothing comes after it: the reply to the question asked once the stream falls quiet
/// shows the hole).
#[test]
fn a_hole_in_the_switchs_numbers_starts_the_fetch_early() {
    let to_0 = |p: &InFlight| is(p, PacketType::Result) && p.to == Address::Worker(0);
    let mut h = Harness::new(ExchangeKind::Switchgnn, 3, 64, None, TIMERS, None);
    h.finish(2_000_000);
    let sums = h.log.iter().filter(|p| to_0(p)).count();
    assert!(sums > 3, "worker 0 gets {sums} sums");
    // From the departure of sum `n` (1-based) of worker 0, lost, to worker 0's first fetch.
    let wait = |n: usize| {
        let mut h = Harness::new(ExchangeKind::Switchgnn, 3, 64, None, TIMERS, None);
        let mut seen = 0;
        h.lose = Box::new(move |p| {
            seen += usize::from(to_0(p));
            to_0(p) && seen == n
        });
        h.finish(2_000_000);
        let lost = h.log.iter().filter(|p| to_0(p)).nth(n - 1).unwrap().at;
        let fetches = h.sent_by(0, PacketType::Fetch);
        assert!(!fetches.is_empty(), "worker 0 fetched what it lost");
        let asked = h.sent_by(0, PacketType::Stamps).len();
        (fetches[0].at - lost, asked)
    };
    for (what, n) in [("the first", 1), ("a middle one", 2), ("the last", sums)] {
        let (wait, asked) = wait(n);
        assert!(
            wait < TIMERS.result / 2,
            "{what} sum lost: fetched {wait} ns after the loss (result timeout {} ns; \
             {asked} questions to the switch)",
            TIMERS.result
        );
    }
}

/// Every sum and raw copy to worker 0 is lost for 20 ms, and worker 0 leaves slower than its
/// fetch rounds come (2 MB/s: a request every ~20 µs). From the third unanswered request for one
/// contribution on, each doubles the wait before the next, so neither worker 0 nor the owners
/// answering it build up a queue of stale requests: once the link heals it recovers within
/// milliseconds. (Asking again at a fixed pace, it took 25 s of simulated time and 1.5 M
/// requests; over real sockets that queue took a CI machine's memory.)
#[test]
fn after_an_outage_a_slow_worker_recovers_at_once() {
    let window = 16;
    let heal = 20_000_000;
    let mut h = Harness::new(ExchangeKind::Switchgnn, 3, window, None, TIMERS, Some(2e6));
    let cut = move |p: &InFlight| {
        p.at < heal
            && p.to == Address::Worker(0)
            && (is(p, PacketType::Result) || is(p, PacketType::Raw))
            && !p.repr.flags.ack
    };
    h.lose = Box::new(cut);
    h.finish(5_000_000);

    let fetches = h.sent_by(0, PacketType::Fetch);
    assert!(
        fetches.iter().any(|f| f.at < heal),
        "worker 0 fetched during the outage"
    );
    let late = fetches.iter().filter(|f| f.at > heal + 1_000_000).count();
    assert!(
        h.now < heal + 5_000_000,
        "finished {} µs after the link healed ({late} fetches sent more than 1 ms after it)",
        (h.now - heal) / 1_000
    );
}

/// A flood of copies of one fetch reaches its owner faster than it sends: it queues at
/// most a window of replies per worker and counts the rest as shed (the requesters ask again),
/// so requests from the network cannot grow its memory without bound.
#[test]
fn an_owner_sheds_fetches_beyond_its_reply_queue() {
    let window = 4;
    let mut h = Harness::new(ExchangeKind::Switchgnn, 3, window, None, TIMERS, None);
    h.lose = Box::new(|p| is(p, PacketType::Result) && p.to == Address::Worker(0));
    h.finish(2_000_000);
    let fetch = h
        .log
        .iter()
        .find(|p| is(p, PacketType::Fetch) && p.from == Address::Switch)
        .expect("the switch forwarded a fetch")
        .clone();
    let Address::Worker(owner) = fetch.to else {
        panic!("a fetch forwarded to {:?}", fetch.to)
    };
    let owner = usize::from(owner);
    let flood = 10_000;
    let shed_before = h.workers[owner].stats().fetches_shed;
    for _ in 0..flood {
        h.workers[owner].handle_packet(h.now, Address::Switch, &fetch.bytes);
    }
    let mut buf = [0u8; MAX_DATAGRAM_LEN];
    let mut replies = 0;
    while h.workers[owner].poll_transmit(h.now, &mut buf).is_some() {
        replies += 1;
    }
    let limit = window * 3;
    let shed = h.workers[owner].stats().fetches_shed - shed_before;
    assert!(replies <= limit, "{replies} replies queued (limit {limit})");
    assert_eq!(
        shed as usize + replies,
        flood,
        "every fetch answered or shed"
    );
}
