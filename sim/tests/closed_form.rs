//! The core against closed forms: with fluid bounds from link rates and delays, simulated
//! completion times must agree to within one packet's serialisation time.

use switchgnn_chip::{Chip, PASS_HEADER};
use switchgnn_dataplane::{Address, Nanos, Node, Transmit};
use switchgnn_sim::driver::{run, HostNode, SimConfig, SwitchNode};
use switchgnn_sim::fabric::{HostSpec, LinkSpec, SwitchSpec, Topology};

/// Sends `count` packets of `size` bytes to `dst` (`u16::MAX`: every other host, replicated
/// by the switch) as fast as it may, and expects `expect` packets.
#[derive(Debug)]
struct Host {
    dst: u16,
    size: usize,
    to_send: usize,
    expect: usize,
    received: usize,
    last_arrival: Nanos,
}

impl Host {
    fn new(dst: u16, size: usize, to_send: usize, expect: usize) -> Box<Host> {
        Box::new(Host {
            dst,
            size,
            to_send,
            expect,
            received: 0,
            last_arrival: 0,
        })
    }
}

impl Node for Host {
    fn handle_packet(&mut self, now: Nanos, _from: Address, _bytes: &[u8]) {
        self.received += 1;
        self.last_arrival = now;
    }
    fn handle_timeout(&mut self, _now: Nanos) {}
    fn poll_transmit(&mut self, _now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        if self.to_send == 0 {
            return None;
        }
        self.to_send -= 1;
        buf[..self.size].fill(0);
        buf[..2].copy_from_slice(&self.dst.to_le_bytes());
        Some(Transmit {
            to: Address::Switch,
            len: self.size,
        })
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
}

impl HostNode for Host {
    fn is_done(&self) -> bool {
        self.received >= self.expect
    }
}

/// A plain switch: forwards on the first two bytes, `u16::MAX` to every host but the sender.
/// `passes` aggregator passes per packet exercise the recirculation port.
#[derive(Debug)]
struct Forwarder {
    hosts: u16,
    passes_per_packet: u64,
    passes: u64,
    out: Vec<(Address, Vec<u8>)>,
}

impl Forwarder {
    fn new(hosts: u16, passes_per_packet: u64) -> Forwarder {
        Forwarder {
            hosts,
            passes_per_packet,
            passes: 0,
            out: Vec::new(),
        }
    }
}

impl Node for Forwarder {
    fn handle_packet(&mut self, _now: Nanos, from: Address, bytes: &[u8]) {
        self.passes += self.passes_per_packet;
        let dst = u16::from_le_bytes([bytes[0], bytes[1]]);
        let Address::Worker(src) = from else { return };
        let targets: Vec<u16> = if dst == u16::MAX {
            (0..self.hosts).filter(|&h| h != src).collect()
        } else {
            vec![dst]
        };
        for h in targets.into_iter().rev() {
            self.out.push((Address::Worker(h), bytes.to_vec()));
        }
    }
    fn handle_timeout(&mut self, _now: Nanos) {}
    fn poll_transmit(&mut self, _now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        let (to, bytes) = self.out.pop()?;
        buf[..bytes.len()].copy_from_slice(&bytes);
        Some(Transmit {
            to,
            len: bytes.len(),
        })
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
}

impl SwitchNode for Forwarder {
    fn set_egress_queue(&mut self, _port: u16, _bytes: u64) {}
    fn passes(&self) -> u64 {
        self.passes
    }
    fn aggregators_in_use(&self) -> usize {
        0
    }
}

const SIZE: usize = 1_000;
const DELAY: Nanos = 2_000;

fn config(hosts: u16, buffer: u64, per_packet_ns: Nanos) -> SimConfig {
    SimConfig {
        topology: Topology::star(
            hosts,
            LinkSpec {
                gbps: 100.0,
                delay_ns: DELAY,
            },
        ),
        // One recirculation port of 100 Gb/s (and the chip's pass rate, far above the links').
        switch: SwitchSpec {
            buffer_bytes: buffer,
            ecn_threshold: u64::MAX,
            chip: Chip::preset("tofino1-32")
                .unwrap()
                .with_recirculation_ports(1)
                .unwrap(),
        },
        host: HostSpec {
            nic_gbps: 100.0,
            per_packet_ns,
            framing: Default::default(),
        },
        frame_overhead: 0,
        sample_ns: 1_000,
        max_events: 10_000_000,
        ..SimConfig::paper(hosts)
    }
}

/// Serialisation of one packet at 100 Gbps, ns.
fn packet_time() -> f64 {
    SIZE as f64 * 8.0 / 100.0
}

fn assert_close(simulated: Nanos, bound: f64, what: &str) {
    let gap = simulated as f64 - bound;
    assert!(
        gap.abs() <= packet_time(),
        "{what}: simulated {simulated} ns, fluid bound {bound:.1} ns, off by {gap:.1} ns (> one packet, {:.1} ns)",
        packet_time()
    );
}

#[test]
fn one_flow_runs_at_line_rate() {
    let k = 10_000;
    let mut hosts = vec![Host::new(1, SIZE, k, 0), Host::new(0, SIZE, 0, k)];
    let mut sw = Forwarder::new(2, 1);
    let r = run(&config(2, u64::MAX, 0), None, &mut sw, &mut hosts).unwrap();
    // k packets through the uplink, the last one again through the downlink, two delays.
    let bound = k as f64 * packet_time() + packet_time() + 2.0 * DELAY as f64;
    assert_close(r.finish_ns, bound, "one flow");
    assert_eq!(r.uplinks[0].bytes, (k * SIZE) as u64);
    assert_eq!(r.downlinks[1].bytes, (k * SIZE) as u64);
    // Rates match: nothing waits in the switch beyond the packet being sent.
    assert!(r.peak_queue() <= SIZE as u64, "{}", r.peak_queue());
}

#[test]
fn an_incast_is_bounded_by_the_receivers_link_and_drops_beyond_the_buffer() {
    let n = 16u16;
    let k = 500;
    let mut hosts: Vec<Box<Host>> = (0..n)
        .map(|h| {
            if h == 0 {
                Host::new(0, SIZE, 0, k * (n as usize - 1))
            } else {
                Host::new(0, SIZE, k, 0)
            }
        })
        .collect();
    let mut sw = Forwarder::new(n, 1);
    let r = run(&config(n, u64::MAX, 0), None, &mut sw, &mut hosts).unwrap();
    // The first packets reach the switch after one packet time and a delay; from then on the
    // receiver's link is the bottleneck.
    let total = (n as usize - 1) * k;
    let bound = packet_time() + DELAY as f64 + total as f64 * packet_time() + DELAY as f64;
    assert_close(r.finish_ns, bound, "incast");
    // Senders arrive at 15× the drain rate: the queue peaks near 14/15 of everything sent.
    let peak_bound = total as f64 * SIZE as f64 * (n as f64 - 2.0) / (n as f64 - 1.0);
    let peak = r.downlinks[0].peak_backlog as f64;
    assert!(
        (peak - peak_bound).abs() <= (n as usize * SIZE) as f64,
        "peak queue {peak} against {peak_bound}"
    );

    // With a buffer of 100 packets the same incast loses packets, counted at the port; the
    // receiver then waits forever, which the driver reports instead of hanging.
    let mut hosts: Vec<Box<Host>> = (0..n)
        .map(|h| {
            Host::new(
                0,
                SIZE,
                if h == 0 { 0 } else { k },
                usize::from(h == 0) * total,
            )
        })
        .collect();
    let mut sw = Forwarder::new(n, 1);
    let err = run(&config(n, 100 * SIZE as u64, 0), None, &mut sw, &mut hosts).unwrap_err();
    assert!(
        matches!(err, switchgnn_sim::SimError::Stalled { unfinished: 1, .. }),
        "{err}"
    );
}

#[test]
fn a_fan_out_reaches_every_host_at_line_rate() {
    let n = 32u16;
    let k = 2_000;
    let mut hosts: Vec<Box<Host>> = (0..n)
        .map(|h| {
            if h == 0 {
                Host::new(u16::MAX, SIZE, k, 0)
            } else {
                Host::new(0, SIZE, 0, k)
            }
        })
        .collect();
    let mut sw = Forwarder::new(n, 1);
    let r = run(&config(n, u64::MAX, 0), None, &mut sw, &mut hosts).unwrap();
    // Replication in the switch costs no bandwidth of the sender: every downlink runs in
    // parallel at line rate.
    let bound = k as f64 * packet_time() + packet_time() + 2.0 * DELAY as f64;
    assert_close(r.finish_ns, bound, "fan-out");
    for h in 1..n as usize {
        assert_eq!(r.downlinks[h].bytes, (k * SIZE) as u64);
    }
}

#[test]
fn per_packet_cost_and_recirculation_bound_the_rate_when_slower_than_the_link() {
    // 200 ns per packet against 80 ns on the wire: the send core is the bottleneck (and the
    // receive core keeps up at the same pace).
    let k = 5_000;
    let mut hosts = vec![Host::new(1, SIZE, k, 0), Host::new(0, SIZE, 0, k)];
    let mut sw = Forwarder::new(2, 1);
    let r = run(&config(2, u64::MAX, 200), None, &mut sw, &mut hosts).unwrap();
    let bound = k as f64 * 200.0 + packet_time() + packet_time() + 2.0 * DELAY as f64 + 200.0;
    assert_close(r.finish_ns, bound, "per-packet cost");

    // Four passes per packet: three trips around a 100 Gbps recirculation port (each with the
    // pass header), so it runs at a little under a third of the line rate.
    let mut hosts = vec![Host::new(1, SIZE, k, 0), Host::new(0, SIZE, 0, k)];
    let mut sw = Forwarder::new(2, 4);
    let r = run(&config(2, u64::MAX, 0), None, &mut sw, &mut hosts).unwrap();
    let bound = packet_time()
        + DELAY as f64
        + k as f64 * 3.0 * (SIZE as u64 + PASS_HEADER) as f64 * 8.0 / 100.0
        + packet_time()
        + DELAY as f64;
    assert_close(r.finish_ns, bound, "recirculation");
    assert_eq!(r.recirculation.recirculations, 3 * k as u64);
}

#[test]
fn a_leaf_spine_adds_its_hops_and_its_uplinks_bound_the_rate() {
    // 2 racks of 2 hosts under one spine, 4:1 oversubscribed: 50 Gb/s uplinks.
    let link = LinkSpec {
        gbps: 100.0,
        delay_ns: DELAY,
    };
    let topology = Topology::leaf_spine(2, 2, 1, link, 4.0);
    let cfg = SimConfig {
        topology,
        ..config(4, u64::MAX, 0)
    };
    let k = 2_000;
    let mut hosts = vec![
        Host::new(2, SIZE, k, 0),
        Host::new(0, SIZE, 0, 0),
        Host::new(0, SIZE, 0, k),
        Host::new(0, SIZE, 0, 0),
    ];
    let mut sw = Forwarder::new(4, 1);
    let r = run(&cfg, None, &mut sw, &mut hosts).unwrap();
    // Host 0 → its leaf → the switch on the spine → rack 1's leaf → host 2: four delays;
    // the first packet's 100 Gb/s hop, then k packets at the uplinks' 50 Gb/s, and the last
    // one's trailing hops (the spine's 50 Gb/s port and the leaf's 100 Gb/s one).
    let pt = packet_time();
    let bound = pt + k as f64 * 2.0 * pt + 2.0 * pt + pt + 4.0 * DELAY as f64;
    assert_close(r.finish_ns, bound, "across a leaf-spine");
    let bytes = (k * SIZE) as u64;
    assert_eq!(r.leaf_uplinks[0].bytes, bytes, "rack 0 up to spine 0");
    assert_eq!(r.spine_downlinks[1].bytes, bytes, "spine 0 down to rack 1");
    assert_eq!(r.spine_bytes(), 2 * bytes);
    assert_eq!(r.downlinks[2].bytes, bytes);
}
