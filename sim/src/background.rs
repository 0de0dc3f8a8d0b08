//! Background traffic beside the exchange: other jobs' TCP flows between the hosts, arriving
//! as a Poisson process at a set load with a published flow-size distribution, each sent by a
//! plain TCP-like sender (slow start, congestion avoidance, NewReno fast recovery, a
//! retransmission timeout, and RFC 3168's response to ECN). The flows share the hosts' links
//! and the switch's egress queues with the exchange, so each sees the other's queues: the
//! exchange's ECN rate control can be judged by what it does to their completion times.
//!
//! The driver ([`crate::driver::run_with_background`]) moves the packets; this module decides
//! what the flows send and when, and records each flow's completion time.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use switchgnn_dataplane::engine::RttEstimator;
use switchgnn_dataplane::Nanos;

use crate::fabric::{LinkSpec, Topology};

/// A published flow-size distribution, as cumulative percentages at flow sizes (bytes),
/// interpolated linearly in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowSizes {
    /// The web-search workload of DCTCP (Alizadeh et al., SIGCOMM 2010), as HPCC's traffic
    /// generator tabulates it: mostly short queries, most bytes in flows of 1–30 MB.
    WebSearch,
    /// Facebook's Hadoop cluster (Roy et al., SIGCOMM 2015), as HPCC tabulates it: most flows
    /// under 1 KB, a tail to 10 MB.
    Hadoop,
}

const WEB_SEARCH: [(f64, f64); 12] = [
    (0.0, 0.0),
    (10_000.0, 15.0),
    (20_000.0, 20.0),
    (30_000.0, 30.0),
    (50_000.0, 40.0),
    (80_000.0, 53.0),
    (200_000.0, 60.0),
    (1_000_000.0, 70.0),
    (2_000_000.0, 80.0),
    (5_000_000.0, 90.0),
    (10_000_000.0, 97.0),
    (30_000_000.0, 100.0),
];

const HADOOP: [(f64, f64); 20] = [
    (0.0, 0.0),
    (100.0, 1.0),
    (200.0, 2.0),
    (300.0, 5.0),
    (350.0, 15.0),
    (400.0, 20.0),
    (500.0, 30.0),
    (600.0, 40.0),
    (700.0, 50.0),
    (1_000.0, 60.0),
    (2_000.0, 67.0),
    (7_000.0, 70.0),
    (30_000.0, 72.0),
    (50_000.0, 82.0),
    (80_000.0, 87.0),
    (120_000.0, 90.0),
    (300_000.0, 95.0),
    (1_000_000.0, 97.5),
    (2_000_000.0, 99.0),
    (10_000_000.0, 100.0),
];

impl FlowSizes {
    /// The distribution's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FlowSizes::WebSearch => "websearch",
            FlowSizes::Hadoop => "hadoop",
        }
    }

    /// The distribution called `name` (see [`FlowSizes::name`]).
    pub fn from_name(name: &str) -> Option<FlowSizes> {
        match name {
            "websearch" | "web-search" => Some(FlowSizes::WebSearch),
            "hadoop" => Some(FlowSizes::Hadoop),
            _ => None,
        }
    }

    fn cdf(self) -> &'static [(f64, f64)] {
        match self {
            FlowSizes::WebSearch => &WEB_SEARCH,
            FlowSizes::Hadoop => &HADOOP,
        }
    }

    /// The flow size at cumulative fraction `u` in [0, 1) (at least one byte).
    pub fn at(self, u: f64) -> u64 {
        let cdf = self.cdf();
        let p = u.clamp(0.0, 1.0) * 100.0;
        let i = cdf
            .iter()
            .position(|&(_, c)| c >= p)
            .unwrap_or(cdf.len() - 1);
        if i == 0 {
            return cdf[0].0.max(1.0) as u64;
        }
        let ((x0, c0), (x1, c1)) = (cdf[i - 1], cdf[i]);
        let x = if c1 > c0 {
            x0 + (x1 - x0) * (p - c0) / (c1 - c0)
        } else {
            x1
        };
        x.round().max(1.0) as u64
    }

    /// The mean flow size (bytes) of the interpolated distribution.
    pub fn mean(self) -> f64 {
        self.cdf()
            .windows(2)
            .map(|w| (w[1].1 - w[0].1) / 100.0 * (w[0].0 + w[1].0) / 2.0)
            .sum()
    }
}

/// What background traffic to run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BackgroundSpec {
    /// The flow-size distribution flows are drawn from.
    pub sizes: FlowSizes,
    /// Offered load: the fraction of every host's uplink the flows fill on average.
    pub load: f64,
    /// Flows arrive during `[0, duration_ns)`.
    pub duration_ns: Nanos,
    /// Seed of the flows' arrivals, sizes and endpoints.
    pub seed: u64,
    /// Payload bytes per packet (a 1500-byte MTU's TCP segment).
    pub mss: u32,
    /// The shortest retransmission timeout.
    pub min_rto_ns: Nanos,
    /// The senders halve their window on an ECN echo (once per window of data, RFC 3168).
    pub ecn: bool,
}

impl BackgroundSpec {
    /// `sizes` at `load` for `duration_ns`: 1460-byte segments, a 1 ms minimum timeout (a
    /// datacenter-tuned TCP) and ECN on.
    pub fn new(sizes: FlowSizes, load: f64, duration_ns: Nanos, seed: u64) -> BackgroundSpec {
        BackgroundSpec {
            sizes,
            load,
            duration_ns,
            seed,
            mss: 1460,
            min_rto_ns: 1_000_000,
            ecn: true,
        }
    }
}

/// A background packet on the wire: a data segment or an acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The flow it belongs to.
    pub flow: u32,
    /// Data: the segment's index. Acknowledgement: the next index the receiver expects.
    pub seq: u32,
    /// An acknowledgement (else a data segment).
    pub ack: bool,
    /// Congestion experienced: set by a switch queue above its marking threshold (data).
    pub ce: bool,
    /// ECN echo: the acknowledged segment was marked (acknowledgements).
    pub ece: bool,
    /// Frame bytes on a link.
    pub wire: u64,
}

/// TCP/IP header bytes beyond what the frame overhead already counts for UDP.
const TCP_EXTRA: u64 = 12;
/// The smallest Ethernet frame with its preamble and gap.
const MIN_FRAME: u64 = 84;
/// The initial congestion window, segments (RFC 6928).
const INITIAL_WINDOW: f64 = 10.0;

/// One flow: its sender's and receiver's state.
#[derive(Debug, Clone)]
struct Flow {
    src: u16,
    dst: u16,
    size: u64,
    start: Nanos,
    end: Option<Nanos>,
    segments: u32,
    // Sender.
    next: u32,
    acked: u32,
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    /// NewReno: in fast recovery until this segment is acknowledged.
    recover: Option<u32>,
    /// No ECN cut again until this segment is acknowledged.
    cut_until: u32,
    sent_at: Vec<Nanos>,
    retransmitted: Vec<bool>,
    rtt: RttEstimator,
    backoff: u32,
    rto_at: Option<Nanos>,
    timer_generation: u32,
    // Receiver.
    expected: u32,
    out_of_order: BTreeSet<u32>,
}

/// One flow's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    /// Sending host.
    pub src: u16,
    /// Receiving host.
    pub dst: u16,
    /// Payload bytes.
    pub size: u64,
    /// When it started.
    pub start_ns: Nanos,
    /// Completion time: from its start until the receiver had every byte.
    pub fct_ns: Nanos,
    /// Its completion time on an empty fabric (serialising its frames at the host link's
    /// rate, plus the two links' propagation and one frame's store-and-forward).
    pub ideal_ns: Nanos,
    /// Segments it sent again.
    pub retransmits: u32,
}

impl FlowRecord {
    /// How many times its ideal completion time it took.
    pub fn slowdown(&self) -> f64 {
        self.fct_ns as f64 / self.ideal_ns.max(1) as f64
    }
}

/// Every background flow of a run, driven by the simulator's event loop.
#[derive(Debug)]
pub struct Background {
    spec: BackgroundSpec,
    flows: Vec<Flow>,
    /// Flows not started yet, in start order (indexes into `flows`).
    waiting: VecDeque<u32>,
    /// (deadline, flow, generation) of retransmission timers; stale entries are skipped.
    timers: BinaryHeap<Reverse<(Nanos, u32, u32)>>,
    outbox: VecDeque<(u16, Segment)>,
    unfinished: usize,
    link_gbps: f64,
    delay_ns: Nanos,
    frame_overhead: u64,
    retransmits: Vec<u32>,
    /// On a leaf-spine: hosts per rack, and the leaves' uplinks (a flow across racks crosses
    /// two of them besides its hosts' links).
    racks: Option<(u16, LinkSpec)>,
}

impl Background {
    /// The flows of `spec` among `hosts` hosts whose links run at `link_gbps` with a one-way
    /// delay of `delay_ns`; frames carry `frame_overhead` bytes beyond their payload.
    pub fn new(
        spec: BackgroundSpec,
        hosts: u16,
        link_gbps: f64,
        delay_ns: Nanos,
        frame_overhead: u64,
    ) -> Background {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let mut flows = Vec::new();
        if hosts >= 2 && spec.load > 0.0 {
            // All hosts together start flows at this rate (per nanosecond).
            let bytes_per_ns = link_gbps / 8.0 * spec.load * f64::from(hosts);
            let rate = bytes_per_ns / spec.sizes.mean();
            let mut t = 0.0f64;
            loop {
                let u: f64 = rng.random();
                t += -(1.0 - u).ln() / rate;
                if t >= spec.duration_ns as f64 {
                    break;
                }
                let src = rng.random_range(0..hosts);
                let mut dst = rng.random_range(0..hosts - 1);
                if dst >= src {
                    dst += 1;
                }
                let size = spec.sizes.at(rng.random());
                let segments = size.div_ceil(u64::from(spec.mss)).max(1) as u32;
                flows.push(Flow {
                    src,
                    dst,
                    size,
                    start: t as Nanos,
                    end: None,
                    segments,
                    next: 0,
                    acked: 0,
                    cwnd: INITIAL_WINDOW,
                    ssthresh: f64::INFINITY,
                    dupacks: 0,
                    recover: None,
                    cut_until: 0,
                    sent_at: vec![0; segments as usize],
                    retransmitted: vec![false; segments as usize],
                    rtt: RttEstimator::default(),
                    backoff: 1,
                    rto_at: None,
                    timer_generation: 0,
                    expected: 0,
                    out_of_order: BTreeSet::new(),
                });
            }
        }
        let n = flows.len();
        Background {
            spec,
            waiting: (0..n as u32).collect(),
            flows,
            timers: BinaryHeap::new(),
            outbox: VecDeque::new(),
            unfinished: n,
            link_gbps,
            delay_ns,
            frame_overhead,
            retransmits: vec![0; n],
            racks: None,
        }
    }

    /// What the traffic was made from.
    pub fn spec(&self) -> &BackgroundSpec {
        &self.spec
    }

    /// Flows in the run.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Whether every flow has completed.
    pub fn is_done(&self) -> bool {
        self.unfinished == 0
    }

    /// Flows not completed yet.
    pub fn unfinished(&self) -> usize {
        self.unfinished
    }

    /// The completed flows' records, in start order.
    pub fn records(&self) -> Vec<FlowRecord> {
        self.flows
            .iter()
            .zip(&self.retransmits)
            .filter_map(|(f, &retransmits)| {
                Some(FlowRecord {
                    src: f.src,
                    dst: f.dst,
                    size: f.size,
                    start_ns: f.start,
                    fct_ns: f.end? - f.start,
                    ideal_ns: self.ideal(f),
                    retransmits,
                })
            })
            .collect()
    }

    fn data_wire(&self, f: &Flow, seq: u32) -> u64 {
        let mss = u64::from(self.spec.mss);
        let payload = if seq + 1 == f.segments {
            f.size - mss * u64::from(f.segments - 1)
        } else {
            mss
        };
        (payload + self.frame_overhead + TCP_EXTRA).max(MIN_FRAME)
    }

    /// The flows run on `topology` (their ideal times follow its paths).
    pub fn on(mut self, topology: &Topology) -> Background {
        self.racks = match *topology {
            Topology::Star { .. } => None,
            Topology::LeafSpine {
                hosts_per_rack,
                uplink,
                ..
            } => Some((hosts_per_rack.max(1), uplink)),
        };
        self
    }

    /// A flow's time on an empty fabric: its frames at the slowest link's rate on its path,
    /// its last frame stored and forwarded at every other link, and every link's delay.
    fn ideal(&self, f: &Flow) -> Nanos {
        let host = LinkSpec {
            gbps: self.link_gbps,
            delay_ns: self.delay_ns,
        };
        let across = |(per_rack, _): &(u16, LinkSpec)| f.src / per_rack != f.dst / per_rack;
        let path: &[LinkSpec] = match self.racks {
            Some(r) if across(&r) => &[host, r.1, r.1, host],
            _ => &[host, host],
        };
        let bytes: u64 = (0..f.segments).map(|s| self.data_wire(f, s)).sum();
        let last = self.data_wire(f, f.segments - 1) as f64;
        let ns_per_byte = path.iter().map(|l| 8.0 / l.gbps);
        let slowest = ns_per_byte.clone().fold(0.0, f64::max);
        let forwards = ns_per_byte.sum::<f64>() - slowest;
        let delays: Nanos = path.iter().map(|l| l.delay_ns).sum();
        (bytes as f64 * slowest + last * forwards) as Nanos + delays
    }

    /// The next time something is due: a flow's start or a retransmission timer.
    pub fn poll_timeout(&mut self) -> Option<Nanos> {
        while let Some(&Reverse((at, flow, generation))) = self.timers.peek() {
            let f = &self.flows[flow as usize];
            if f.timer_generation == generation && f.rto_at == Some(at) {
                break;
            }
            self.timers.pop();
        }
        let start = self.waiting.front().map(|&i| self.flows[i as usize].start);
        let timer = self.timers.peek().map(|Reverse((at, _, _))| *at);
        match (start, timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Start the flows whose time has come and fire the timers that are due.
    pub fn handle_timeout(&mut self, now: Nanos) {
        while let Some(&i) = self.waiting.front() {
            if self.flows[i as usize].start > now {
                break;
            }
            self.waiting.pop_front();
            self.send(now, i);
        }
        while let Some(&Reverse((at, flow, generation))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let f = &mut self.flows[flow as usize];
            if f.timer_generation != generation || f.rto_at != Some(at) || f.end.is_some() {
                continue;
            }
            // A timeout: go back to the first unacknowledged segment with one segment's
            // window, and wait twice as long next time.
            f.rto_at = None;
            f.ssthresh = (f.cwnd / 2.0).max(2.0);
            f.cwnd = 1.0;
            f.recover = None;
            f.dupacks = 0;
            f.backoff = (f.backoff * 2).min(64);
            let first = f.acked;
            for s in first..f.next {
                f.retransmitted[s as usize] = true;
            }
            f.next = first;
            self.retransmits[flow as usize] += 1;
            self.send(now, flow);
        }
    }

    /// Where `segment`, sent by `from`, goes: the other end of its flow.
    pub fn destination(&self, from: u16, segment: &Segment) -> u16 {
        let f = &self.flows[segment.flow as usize];
        if from == f.src {
            f.dst
        } else {
            f.src
        }
    }

    /// The next segment to put on a host's uplink: (host, segment).
    pub fn poll_transmit(&mut self) -> Option<(u16, Segment)> {
        self.outbox.pop_front()
    }

    /// `segment` reached `host`.
    pub fn on_segment(&mut self, now: Nanos, host: u16, segment: Segment) {
        let i = segment.flow;
        if segment.ack {
            self.on_ack(now, i, segment);
        } else {
            self.on_data(now, host, i, segment);
        }
    }

    fn on_data(&mut self, now: Nanos, host: u16, i: u32, s: Segment) {
        let ack_wire = (self.frame_overhead + TCP_EXTRA).max(MIN_FRAME);
        let f = &mut self.flows[i as usize];
        if s.seq == f.expected {
            f.expected += 1;
            while f.out_of_order.remove(&f.expected) {
                f.expected += 1;
            }
        } else if s.seq > f.expected {
            f.out_of_order.insert(s.seq);
        }
        if f.expected == f.segments && f.end.is_none() {
            f.end = Some(now);
            self.unfinished -= 1;
        }
        let ack = Segment {
            flow: i,
            seq: f.expected,
            ack: true,
            ce: false,
            ece: s.ce,
            wire: ack_wire,
        };
        self.outbox.push_back((host, ack));
    }

    fn on_ack(&mut self, now: Nanos, i: u32, s: Segment) {
        let ecn = self.spec.ecn;
        let f = &mut self.flows[i as usize];
        if s.seq > f.acked {
            let newly = f64::from(s.seq - f.acked);
            // An RTT sample from a segment sent once (Karn).
            let last = (s.seq - 1) as usize;
            if !f.retransmitted[last] {
                f.rtt.sample(now.saturating_sub(f.sent_at[last]));
                f.backoff = 1;
            }
            f.acked = s.seq;
            f.next = f.next.max(f.acked);
            f.dupacks = 0;
            match f.recover {
                Some(r) if f.acked < r => {
                    // A partial acknowledgement: the next hole is lost too.
                    let hole = f.acked;
                    f.retransmitted[hole as usize] = true;
                    self.retransmits[i as usize] += 1;
                    self.emit(now, i, hole);
                }
                Some(_) => {
                    f.recover = None;
                    f.cwnd = f.ssthresh;
                }
                None if f.cwnd < f.ssthresh => f.cwnd += newly,
                None => f.cwnd += newly / f.cwnd,
            }
        } else if s.seq == f.acked && f.acked < f.next {
            f.dupacks += 1;
            if f.dupacks == 3 && f.recover.is_none() {
                f.ssthresh = (f.cwnd / 2.0).max(2.0);
                f.cwnd = f.ssthresh + 3.0;
                f.recover = Some(f.next);
                let hole = f.acked;
                f.retransmitted[hole as usize] = true;
                self.retransmits[i as usize] += 1;
                self.emit(now, i, hole);
            } else if f.recover.is_some() {
                f.cwnd += 1.0;
            }
        }
        let f = &mut self.flows[i as usize];
        if ecn && s.ece && f.acked >= f.cut_until && f.recover.is_none() {
            f.ssthresh = (f.cwnd / 2.0).max(2.0);
            f.cwnd = f.ssthresh;
            f.cut_until = f.next;
        }
        self.send(now, i);
    }

    /// Send what the window allows, and keep the retransmission timer running while anything
    /// is unacknowledged.
    fn send(&mut self, now: Nanos, i: u32) {
        loop {
            let f = &self.flows[i as usize];
            if f.next >= f.segments || f64::from(f.next - f.acked) >= f.cwnd.floor().max(1.0) {
                break;
            }
            let seq = f.next;
            self.flows[i as usize].next += 1;
            self.emit(now, i, seq);
        }
        let min_rto = self.spec.min_rto_ns;
        let f = &mut self.flows[i as usize];
        if f.acked >= f.segments {
            f.rto_at = None;
            return;
        }
        if f.acked < f.next {
            let rto = f.rtt.rto(min_rto) * Nanos::from(f.backoff);
            let at = now + rto;
            f.rto_at = Some(at);
            f.timer_generation += 1;
            self.timers.push(Reverse((at, i, f.timer_generation)));
        }
    }

    fn emit(&mut self, now: Nanos, i: u32, seq: u32) {
        let wire = self.data_wire(&self.flows[i as usize], seq);
        let f = &mut self.flows[i as usize];
        f.sent_at[seq as usize] = now;
        let segment = Segment {
            flow: i,
            seq,
            ack: false,
            ce: false,
            ece: false,
            wire,
        };
        self.outbox.push_back((f.src, segment));
    }
}

/// Percentiles of the flows' slowdowns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FctSummary {
    /// Flows that completed.
    pub flows: usize,
    /// Median slowdown: completion time over the ideal.
    pub median_slowdown: f64,
    /// 99th-percentile slowdown.
    pub p99_slowdown: f64,
    /// Median completion time.
    pub median_fct_ns: f64,
    /// 99th-percentile completion time.
    pub p99_fct_ns: f64,
    /// Segments sent again, over every flow.
    pub retransmits: u64,
}

impl FctSummary {
    /// The summary of `records`.
    pub fn of(records: &[FlowRecord]) -> FctSummary {
        let mut slow: Vec<f64> = records.iter().map(FlowRecord::slowdown).collect();
        let mut fct: Vec<f64> = records.iter().map(|r| r.fct_ns as f64).collect();
        slow.sort_by(f64::total_cmp);
        fct.sort_by(f64::total_cmp);
        FctSummary {
            flows: records.len(),
            median_slowdown: percentile(&slow, 0.5),
            p99_slowdown: percentile(&slow, 0.99),
            median_fct_ns: percentile(&fct, 0.5),
            p99_fct_ns: percentile(&fct, 0.99),
            retransmits: records.iter().map(|r| u64::from(r.retransmits)).sum(),
        }
    }
}

/// The `q` quantile of sorted `values` (nearest rank); 0 when empty.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_published_points() {
        for sizes in [FlowSizes::WebSearch, FlowSizes::Hadoop] {
            for &(x, c) in sizes.cdf() {
                if c > 0.0 {
                    assert_eq!(sizes.at(c / 100.0), x.max(1.0) as u64, "{sizes:?}");
                }
            }
            // The sampled mean approaches the distribution's.
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let n = 200_000;
            let mean = (0..n).map(|_| sizes.at(rng.random()) as f64).sum::<f64>() / n as f64;
            let want = sizes.mean();
            assert!(
                (mean / want - 1.0).abs() < 0.05,
                "{sizes:?}: {mean} vs {want}"
            );
        }
        // Web search: 53% of the flows up to 80 KB, a mean of 1.71 MB; Hadoop: half up to
        // 700 B.
        assert_eq!(FlowSizes::WebSearch.at(0.53), 80_000);
        assert!((FlowSizes::WebSearch.mean() - 1.71e6).abs() < 0.01e6);
        assert_eq!(FlowSizes::Hadoop.at(0.5), 700);
    }

    #[test]
    fn arrivals_offer_the_load_asked_for() {
        let spec = BackgroundSpec::new(FlowSizes::Hadoop, 0.4, 20_000_000, 3);
        let bg = Background::new(spec, 16, 100.0, 1_000, 42);
        let bytes: u64 = bg.flows.iter().map(|f| f.size).sum();
        // 0.4 of 16 × 100 Gb/s for 20 ms.
        let want = 0.4 * 16.0 * 100e9 / 8.0 * 0.02;
        assert!(
            (bytes as f64 / want - 1.0).abs() < 0.15,
            "{bytes} vs {want}"
        );
        assert!(bg
            .flows
            .iter()
            .all(|f| f.src != f.dst && f.src < 16 && f.dst < 16));
        assert!(bg.flows.windows(2).all(|w| w[0].start <= w[1].start));
    }
}
