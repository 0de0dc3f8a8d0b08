//! Benchmark: switch-model throughput and host-engine packet rate, one core, against baselines
//! measured in the same run.
//!
//! - **switch**: every data packet of one exchange (all blocks, all workers, no loss) fed
//!   straight into the switch model, with its barriers. Reported as aggregator updates
//!   (passes) per second and lanes per second; baselines are the direct computation of the
//!   same sums in memory (`reference::remote_sums`) and the packet rate that fills one
//!   100 Gbps port with these packets.
//! - **engine**: each worker's engine replaying the packets it received in a recorded run
//!   (immediate delivery, unpaced), so only engine work is timed; reported as packets
//!   (in + out) per second against the same line rate. The replay must reproduce the
//!   recorded output exactly, or the bench fails.
//!
//! - **switch in shards**: the same packets into the switch model spread over `n` cores by
//!   destination (`switch --cores n`), in bursts of 32 as the switch process hands them over
//!   (`SWITCHGNN_BENCH_BURST`),
//!   for `n` = 1, 2, … up to the cores this machine has (`SWITCHGNN_BENCH_CORES`); reported as
//!   updates per second and as a ratio to the one-core model above, measured in the same run.
//!
//! Both for SwitchGNN's blocks and for the pre-aggregated exchange (`reduce`) of the same graph.
//!
//! `cargo bench -p switchgnn-conformance --bench dataplane`; `SWITCHGNN_BENCH_SCALE` (default
//! 0.02 of products-like), `SWITCHGNN_BENCH_WORKERS` (8), `SWITCHGNN_BENCH_WIDTH` (128),
//! `SWITCHGNN_BENCH_MEMORY` (bytes, default 10 MB).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use switchgnn_conformance::allocations::{allocations, Counting};
use switchgnn_dataplane::cc::Unpaced;
use switchgnn_dataplane::engine::{EngineConfig, Exchange, ExchangeOutput, LocalFeatures, Timers};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::node::MAX_DATAGRAM_LEN;
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::reference::encode_matrix;
use switchgnn_dataplane::switch::{JobConfig, ShardedSwitch, Switch, SwitchConfig};
use switchgnn_dataplane::wire::{PacketType, HEADER_LEN};
use switchgnn_dataplane::{Address, ExchangeId, ExchangeKind, Node};
use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::NoProgress;
use switchgnn_partition::{Assignment, Plan, PlanSpec};
use switchgnn_scheduler::exchange::{reduce_plan, remote_sums, ExchangePlans};

const FRAME_OVERHEAD: usize = switchgnn_dataplane::wire::FRAME_OVERHEAD as usize;
// Counts allocations so that the figures below can say how many the nodes made per packet.
#[global_allocator]
static ALLOCATOR: Counting = Counting;

const LINE_RATE: f64 = 100e9 / 8.0;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

const ID: ExchangeId = ExchangeId {
    job: 1,
    epoch: 0,
    layer: 0,
    backward: false,
};

fn engine(plan: &Arc<ExchangePlan>, w: u16, values: &[f32], scale: Scale) -> Box<dyn Exchange> {
    let width = plan.width;
    let (vertices, local) = plan.local_rows(w, values);
    let cfg = EngineConfig {
        exchange: ID,
        seq: 1,
        rank: w,
        scale,
        timers: Timers::default(),
        window: usize::MAX,
        framing: Default::default(),
    };
    let features = LocalFeatures {
        vertices: &vertices,
        width,
        values: &local,
    };
    ExchangeKind::of_mode(plan.mode)
        .engine(cfg, plan.clone(), features, Box::new(Unpaced), 0)
        .unwrap()
}

fn switch(plan: &Arc<ExchangePlan>, memory: u64) -> Switch {
    let mut s = Switch::new(SwitchConfig {
        ports: plan.workers,
        ..SwitchConfig::with_memory(memory)
    });
    s.add_job(JobConfig::new(1, vec![plan.clone()])).unwrap();
    s
}

/// Per worker the packets it received, in order; and every (worker, packet) sent, in order.
type Recording = (Vec<Vec<Vec<u8>>>, Vec<(u16, Vec<u8>)>);

/// Run the exchange with immediate delivery; return what each worker received, in order, and
/// every packet the workers sent, in order.
fn record(plan: &Arc<ExchangePlan>, values: &[f32], scale: Scale, memory: u64) -> Recording {
    let mut sw = switch(plan, memory);
    let mut engines: Vec<Box<dyn Exchange>> = (0..plan.workers)
        .map(|w| engine(plan, w, values, scale))
        .collect();
    let mut received = vec![Vec::new(); usize::from(plan.workers)];
    let mut sent = Vec::new();
    let mut queue: VecDeque<(Address, Address, Vec<u8>)> = VecDeque::new();
    let mut buf = [0u8; MAX_DATAGRAM_LEN];
    for (w, e) in engines.iter_mut().enumerate() {
        while let Some(t) = e.poll_transmit(0, &mut buf) {
            queue.push_back((Address::Worker(w as u16), t.to, buf[..t.len].to_vec()));
        }
    }
    while let Some((from, to, bytes)) = queue.pop_front() {
        match to {
            Address::Switch => {
                let Address::Worker(w) = from else { continue };
                sent.push((w, bytes.clone()));
                sw.handle_packet(0, from, &bytes);
                while let Some(t) = sw.poll_transmit(0, &mut buf) {
                    queue.push_back((Address::Switch, t.to, buf[..t.len].to_vec()));
                }
            }
            Address::Worker(w) => {
                received[usize::from(w)].push(bytes.clone());
                let e = &mut engines[usize::from(w)];
                e.handle_packet(0, from, &bytes);
                while let Some(t) = e.poll_transmit(0, &mut buf) {
                    queue.push_back((to, t.to, buf[..t.len].to_vec()));
                }
            }
        }
    }
    assert!(
        engines.iter().all(|e| e.is_finished()),
        "recorded run ended"
    );
    (received, sent)
}

fn main() {
    let scale_factor: f64 = env("SWITCHGNN_BENCH_SCALE", 0.02);
    let workers: u32 = env("SWITCHGNN_BENCH_WORKERS", 8);
    let width: usize = env("SWITCHGNN_BENCH_WIDTH", 128);
    let memory: u64 = env("SWITCHGNN_BENCH_MEMORY", 10_000_000);
    let mut d = generate(
        &Preset::ProductsLike.spec(scale_factor, 0).unwrap(),
        &NoProgress,
    )
    .unwrap();
    d.features = None;
    let n = d.graph.num_vertices();
    let spec = PlanSpec::new("products-like", workers, vec![width]).switch_memory(memory);
    let prepared = Plan::prepare(&d, &spec, &|_| {}).unwrap();
    let plan = Arc::new(ExchangePlan::from_plan(&prepared, 0).unwrap());
    let reduce = Arc::new(
        reduce_plan(
            &d.graph,
            &prepared.assignment,
            width,
            (memory / switchgnn_dataplane::switch::AGGREGATOR_BYTES) as usize,
        )
        .unwrap(),
    );
    let values: Vec<f32> = (0..n * width)
        .map(|i| ((i * 2_654_435_761) % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    let most = (0..n as u32).map(|v| d.graph.degree(v)).max().unwrap();
    let scale = Scale::for_bound(1.0, most).unwrap();
    println!(
        "products-like at scale {scale_factor}: {n} vertices, {} edges; {workers} workers, width {width}, {} MB of aggregators (one core)",
        d.graph.num_edges(),
        memory / 1_000_000,
    );

    // Baseline: the same sums computed directly in memory.
    let (encoded, _) = encode_matrix(&scale, &values, width);
    let assignment = Assignment::new(prepared.assignment.parts().to_vec(), workers).unwrap();
    let t = Instant::now();
    let want = remote_sums(&d.graph, &assignment, width, &encoded);
    let direct_s = t.elapsed().as_secs_f64();
    for plan in [&plan, &reduce] {
        println!(
            "\n{} exchange: {} blocks",
            ExchangeKind::of_mode(plan.mode),
            plan.blocks.len()
        );
        measure(plan, &values, scale, memory, direct_s, &want);
    }
}

/// The switch model and the engines on `plan`'s exchange, against the direct computation's
/// `direct_s` seconds for the sums `want`.
fn measure(
    plan: &Arc<ExchangePlan>,
    values: &[f32],
    scale: Scale,
    memory: u64,
    direct_s: f64,
    want: &[ExchangeOutput],
) {
    let width = plan.width;

    let (received, sent) = record(plan, values, scale, memory);
    let data_packets = sent
        .iter()
        .filter(|(_, b)| b[3] == PacketType::Data as u8)
        .count();
    let data_bytes = HEADER_LEN + 4 * width.min(32);
    let line_pps = LINE_RATE / (data_bytes + FRAME_OVERHEAD) as f64;

    // Switch alone: every worker packet of the run, in the recorded order.
    let mut sw = switch(plan, memory);
    let mut buf = [0u8; MAX_DATAGRAM_LEN];
    let t = Instant::now();
    let before = allocations();
    for (w, bytes) in &sent {
        sw.handle_packet(0, Address::Worker(*w), bytes);
        while sw.poll_transmit(0, &mut buf).is_some() {}
    }
    let switch_allocations = allocations() - before;
    let switch_s = t.elapsed().as_secs_f64();
    let c = sw.counters().clone();
    assert_eq!(
        c.exchanges_completed, 1,
        "the replay completes the exchange"
    );
    println!(
        "{:<34} {:>9} {:>14} {:>14} {:>12}",
        "", "seconds", "M updates/s", "M lanes/s", "M packets/s"
    );
    println!(
        "{:<34} {direct_s:>9.3} {:>14.1} {:>14.1} {:>12}",
        "direct sums in memory (baseline)",
        c.passes as f64 / direct_s / 1e6,
        c.lane_updates as f64 / direct_s / 1e6,
        "-"
    );
    println!(
        "{:<34} {switch_s:>9.3} {:>14.1} {:>14.1} {:>12.2}",
        "switch model",
        c.passes as f64 / switch_s / 1e6,
        c.lane_updates as f64 / switch_s / 1e6,
        c.packets_in as f64 / switch_s / 1e6
    );
    println!(
        "switch model: {:.2}x the direct computation's time; {:.2}x of one 100 Gbps port's rate of {}-byte data packets ({:.2} M packets/s); {} passes for {data_packets} data packets",
        switch_s / direct_s,
        c.packets_in as f64 / switch_s / line_pps,
        data_bytes,
        line_pps / 1e6,
        c.passes
    );
    let switch_packets = c.packets_in + c.packets_out;
    println!(
        "switch model: {switch_allocations} allocations for {switch_packets} packets in+out ({:.4} per packet; the first exchange on a fresh switch, its queues warming up)",
        switch_allocations as f64 / switch_packets as f64
    );
    sharded(plan, memory, &sent, c.passes, switch_s);

    // Engines alone: replay each worker's inputs.
    let mut engine_s = 0.0;
    let mut packets = 0u64;
    let mut engine_allocations = 0u64;
    for w in 0..plan.workers {
        let mut e = engine(plan, w, values, scale);
        let t = Instant::now();
        let before = allocations();
        let mut out = 0u64;
        while e.poll_transmit(0, &mut buf).is_some() {
            out += 1;
        }
        for bytes in &received[usize::from(w)] {
            e.handle_packet(0, Address::Switch, bytes);
            while e.poll_transmit(0, &mut buf).is_some() {
                out += 1;
            }
        }
        engine_s += t.elapsed().as_secs_f64();
        engine_allocations += allocations() - before;
        packets += out + received[usize::from(w)].len() as u64;
        assert!(e.is_finished());
        assert_eq!(e.output(), &want[usize::from(w)], "replay is exact");
    }
    println!(
        "host engines: {packets} packets in+out in {engine_s:.3} s = {:.2} M packets/s per core, {:.2}x one 100 Gbps port's data-packet rate",
        packets as f64 / engine_s / 1e6,
        packets as f64 / engine_s / line_pps
    );
    println!(
        "host engines: {engine_allocations} allocations for {packets} packets in+out ({:.4} per packet, engine construction excluded)",
        engine_allocations as f64 / packets as f64
    );
}

/// The switch model in 1, 2, … shards on `sent` in bursts (32 by default), against the one-core model's
/// `passes` in `one_core_s` seconds.
fn sharded(
    plan: &Arc<ExchangePlan>,
    memory: u64,
    sent: &[(u16, Vec<u8>)],
    passes: u64,
    one_core_s: f64,
) {
    let here = std::thread::available_parallelism().map_or(1, |n| n.get());
    let most: usize = env("SWITCHGNN_BENCH_CORES", here);
    let burst: usize = env("SWITCHGNN_BENCH_BURST", 32);
    let mut buf = [0u8; MAX_DATAGRAM_LEN];
    for cores in 1..=most.clamp(1, 64) as u16 {
        let mut sw = ShardedSwitch::new(
            SwitchConfig {
                ports: plan.workers,
                ..SwitchConfig::with_memory(memory)
            },
            cores,
        )
        .unwrap();
        sw.add_job(JobConfig::new(1, vec![plan.clone()])).unwrap();
        let t = Instant::now();
        for burst in sent.chunks(burst) {
            for (w, bytes) in burst {
                sw.take(0, Address::Worker(*w), bytes);
            }
            sw.run_batch(0);
            while sw.poll_transmit(0, &mut buf).is_some() {}
        }
        let s = t.elapsed().as_secs_f64();
        let c = sw.counters();
        assert_eq!(
            c.exchanges_completed, 1,
            "the replay completes the exchange"
        );
        assert_eq!(c.passes, passes, "{cores} cores make the one core's passes");
        println!(
            "switch model on {cores} core(s), bursts of {burst}: {s:.3} s, {:.1} M updates/s, {:.2}x the one-core model's rate",
            passes as f64 / s / 1e6,
            one_core_s / s
        );
    }
}
