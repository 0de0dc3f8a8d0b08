//! The pre-aggregated exchange (`reduce`): what the switch does with partial sums, and what
//! the exchange costs against the host exchange on the same graph. Exactness under every
//! fault is the conformance suite's (`suite.rs`); these tests pin down the kind's own claims.

mod common;

use std::sync::Arc;

use common::*;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::network::Faults;
use switchgnn_dataplane::node::{Address, ExchangeId};
use switchgnn_dataplane::plan::Mode;
use switchgnn_dataplane::switch::{DropReason, JobConfig, Switch, SwitchConfig};
use switchgnn_dataplane::wire::{PacketType, Repr, HEADER_LEN};
use switchgnn_datasets::{BuildOptions, Graph};
use switchgnn_partition::Assignment;
use switchgnn_scheduler::exchange::reduce_plan;

const ID: ExchangeId = ExchangeId {
    job: 1,
    epoch: 0,
    layer: 0,
    backward: false,
};

fn header(t: PacketType, worker: u16) -> Repr {
    let mut r = ID.header(t);
    r.worker = worker;
    r.sequence = 1;
    r
}

/// Worker `w`'s partial sum for `dst`, named by its lowest source `src`.
fn partial(w: u16, src: u32, dst: u32, lanes: &[i32]) -> Repr {
    let mut r = header(PacketType::Data, w);
    r.src = src;
    r.dst = dst;
    r.lanes = lanes.len() as u8;
    r.count = 1;
    r
}

#[test]
fn the_switch_adds_one_partial_per_worker_in_one_pass() {
    // Vertex 0 on worker 0; its neighbours 1 and 2 on worker 1, 3 on worker 2. Width 4.
    let g = Graph::from_edges(4, &[(0, 1), (0, 2), (0, 3)], BuildOptions::default()).unwrap();
    let a = Assignment::new(vec![0, 1, 1, 2], 3).unwrap();
    let plan = Arc::new(reduce_plan(&g, &a, 4, 1_000).unwrap());
    assert_eq!(plan.mode, Mode::Reduce);
    // Vertex 0 expects two partials (workers 1 and 2), each leaf one (worker 0).
    assert_eq!(plan.blocks[0].table.expected, vec![2, 1, 1, 1]);
    assert_eq!(plan.most_contributions(), 3);
    let mut s = Switch::new(SwitchConfig {
        aggregators: 16,
        ecn_threshold: 1_000,
        ports: 3,
    });
    s.add_job(JobConfig::new(1, vec![plan])).unwrap();
    for w in 0..3 {
        send(&mut s, w, &header(PacketType::Join, w), &[]);
    }
    assert!(s.exchange_running(1));

    // Worker 1's partial (vertices 1 and 2) for vertex 0: acknowledged, one pass, no result.
    let out = send(&mut s, 1, &partial(1, 1, 0, &[5, 5, 5, 5]), &[5, 5, 5, 5]);
    assert_eq!(out.len(), 1);
    assert!(out[0].1.flags.ack && out[0].0 == Address::Worker(1));
    assert_eq!(s.counters().passes, 1);
    // Sent again: acknowledged again, not added twice.
    let out = send(&mut s, 1, &partial(1, 1, 0, &[5, 5, 5, 5]), &[5, 5, 5, 5]);
    assert!(out.len() == 1 && out[0].1.flags.ack);
    assert_eq!(s.counters().dropped(DropReason::Duplicate), 1);
    // Worker 0 owns vertex 0: it sends no partial for it.
    send(&mut s, 0, &partial(0, 0, 0, &[1, 1, 1, 1]), &[1, 1, 1, 1]);
    assert_eq!(s.counters().dropped(DropReason::NotInPlan), 1);
    // Worker 2's partial completes vertex 0: the sum of two partials goes to worker 0.
    let out = send(&mut s, 2, &partial(2, 3, 0, &[1, 2, 3, 4]), &[1, 2, 3, 4]);
    let result = out
        .iter()
        .find(|(_, r, _)| r.packet_type == PacketType::Result)
        .expect("a result");
    assert_eq!(result.0, Address::Worker(0));
    assert_eq!((result.1.dst, result.1.count), (0, 2));
    assert_eq!(result.2, vec![6, 7, 8, 9]);
    assert_eq!(
        s.counters().passes,
        2,
        "one pass per partial, none repeated"
    );

    // A partial its worker could not fit into 32 bits: the aggregator is released and the
    // destination's owner told to fetch; nothing is forwarded.
    let mut unfit = partial(0, 0, 1, &[0, 0, 0, 0]);
    unfit.flags.fetch = true;
    let out = send(&mut s, 0, &unfit, &[0, 0, 0, 0]);
    let notice = out
        .iter()
        .find(|(_, r, _)| r.packet_type == PacketType::Result)
        .expect("an overflow notice");
    assert_eq!(notice.0, Address::Worker(1));
    assert!(notice.1.flags.fetch && notice.1.lanes == 0);
    assert_eq!(s.counters().overflows, 1);
    assert_eq!(s.counters().raw_forwarded, 0);
}

/// The number of host-exchange copies of `graph` under `a`: one per (vertex, remote worker
/// holding a neighbour).
fn host_copies(graph: &Graph, a: &Assignment) -> u64 {
    (0..graph.num_vertices() as u32)
        .map(|u| {
            let mut remote: Vec<u32> = graph
                .neighbors(u)
                .iter()
                .map(|&v| a.part(v))
                .filter(|&w| w != a.part(u))
                .collect();
            remote.sort_unstable();
            remote.dedup();
            remote.len() as u64
        })
        .sum()
}

#[test]
fn partials_go_up_once_per_pair_and_sums_come_down_once_per_destination() {
    let d = dataset_of(random_graph(400, 1_600, 3));
    let width = 40; // two chunks
    let block = block_plan(&d, 4, width, 1 << 20, metis());
    let a = Assignment::new(block.owner.iter().map(|&w| u32::from(w)).collect(), 4).unwrap();
    let plan = Arc::new(reduce_plan(&d.graph, &a, width, 1 << 20).unwrap());
    assert_eq!(plan.blocks.len(), 1);
    let pairs: usize = plan.blocks.iter().map(|b| b.table.slots.len()).sum();
    let destinations: usize = plan.blocks.iter().map(|b| b.table.len()).sum();
    // By symmetry, the (destination, contributing worker) pairs are the host exchange's
    // (vertex, remote worker) copies.
    assert_eq!(pairs as u64, host_copies(&d.graph, &a));
    assert!(
        destinations < pairs,
        "some destinations hear from several workers"
    );

    let values = features(d.graph.num_vertices(), width, 1);
    let memory = 1 << 20;
    let run = run_exact(
        &d.graph,
        &plan,
        &values,
        &setup(scale_for(&d.graph), memory, Faults::none(), 1, false),
    );
    let chunks = plan.chunks() as u64;
    let sw = &run.switch;
    assert_eq!(sw.received(PacketType::Data), pairs as u64 * chunks);
    assert_eq!(sw.passes, sw.received(PacketType::Data), "one pass each");
    assert_eq!(sw.aggregations, destinations as u64 * chunks);
    assert_eq!(sw.sent(PacketType::Result), destinations as u64 * chunks);
    assert_eq!(sw.raw_forwarded + sw.overflows, 0);
}

#[test]
fn small_memory_cuts_destinations_into_blocks_and_stays_exact_under_loss() {
    let d = dataset_of(random_graph(300, 1_200, 5));
    let width = 40;
    let block = block_plan(&d, 3, width, 1 << 20, metis());
    let a = Assignment::new(block.owner.iter().map(|&w| u32::from(w)).collect(), 3).unwrap();
    // Room for 20 destinations of two aggregators at once.
    let aggregators = 40;
    let plan = Arc::new(reduce_plan(&d.graph, &a, width, aggregators).unwrap());
    assert!(plan.blocks.len() > 3, "{} blocks", plan.blocks.len());
    let values = features(d.graph.num_vertices(), width, 2);
    for (i, faults) in [Faults::none(), Faults::lossy(0.03)]
        .into_iter()
        .enumerate()
    {
        let s = setup(
            scale_for(&d.graph),
            aggregators as u64 * switchgnn_dataplane::switch::AGGREGATOR_BYTES,
            faults,
            7 + i as u64,
            i == 1,
        );
        let run = run_exact(&d.graph, &plan, &values, &s);
        assert!(run.switch.peak_aggregators as usize <= aggregators);
        assert_eq!(run.switch.blocks_completed as usize, plan.blocks.len());
        if faults.loss > 0.0 {
            assert!(run.network.lost > 0);
        }
    }
}

#[test]
fn partials_too_large_for_32_bits_fall_back_to_plain_features() {
    let d = dataset_of(random_graph(200, 900, 6));
    let width = 8;
    let block = block_plan(&d, 3, width, 1 << 20, metis());
    let a = Assignment::new(block.owner.iter().map(|&w| u32::from(w)).collect(), 3).unwrap();
    let plan = Arc::new(reduce_plan(&d.graph, &a, width, 1 << 14).unwrap());
    // Room for one contribution per sum: most partials of two or more sources overflow.
    let scale = Scale::for_bound(1.0, 1).unwrap();
    let values: Vec<f32> = (0..d.graph.num_vertices() * width)
        .map(|i| if i % 3 == 0 { 0.9 } else { 0.95 })
        .collect();
    let run = run_exact(
        &d.graph,
        &plan,
        &values,
        &setup(scale, 1 << 14, Faults::none(), 3, false),
    );
    assert!(run.switch.overflows > 0, "partials overflowed");
    let fetches: u64 = run.engines.iter().map(|e| e.fetches_sent).sum();
    assert!(fetches > 0, "destinations fetched plain features");
}

#[test]
fn a_lossless_udp_exchange_moves_the_bytes_the_planner_predicts() {
    use switchgnn_chip::{Chip, HostCost, Load};
    use switchgnn_dataplane::wire::FRAME_OVERHEAD;
    use switchgnn_dataplane::ExchangeKind;
    use switchgnn_partition::{Plan, PlanSpec};
    use switchgnn_scheduler::exchange::{exchange_plan, PlanOptions};
    use switchgnn_scheduler::planner::{choose, CANDIDATES};
    use switchgnn_transport::loopback::run_single_exchange;
    use switchgnn_transport::server::ServerConfig;
    use switchgnn_transport::Timeouts;

    let d = dataset_of(random_graph(400, 2_400, 9));
    let width = 32;
    let spec = PlanSpec::new(d.name.clone(), 4, vec![width]).switch_memory(1 << 20);
    let plan = Plan::prepare(&d, &spec, &|_| {}).unwrap();
    let chip = Chip::preset("tofino1-32").unwrap();
    let cost = HostCost {
        delays: switchgnn_chip::Delays::NONE,
        link_gbps: 100.0,
        per_packet_ns: 20.0,
        frame_overhead: FRAME_OVERHEAD,
        framing: Default::default(),
    };
    let (choice, picked, _) = choose(
        &d.graph,
        &plan,
        0,
        &CANDIDATES,
        &chip,
        &cost,
        PlanOptions::default(),
    )
    .unwrap();
    eprintln!("planner: {}", choice.sentence());
    let values = features(d.graph.num_vertices(), width, 4);
    let scale = scale_for(&d.graph);
    // The pick, and every in-network kind (the switch's counters tell duplicates apart).
    let mut kinds = vec![picked];
    for k in [ExchangeKind::Reduce, ExchangeKind::Switchgnn] {
        if k != picked {
            kinds.push(k);
        }
    }
    for kind in kinds {
        let xplan =
            Arc::new(exchange_plan(kind, &d.graph, &plan, 0, PlanOptions::default()).unwrap());
        // UDP payloads: the predicted load without the frame around each packet.
        let load = Load::of(&xplan, 0);
        // Timers with a 200 ms retransmission floor (Linux's least timeout), not
        // loopback's 2 ms: nothing is lost here, and a retransmission or loss probe the host
        // exchange's switch cannot tell from a first copy would only mean that a busy machine
        // read an ack late (a probe may fire after an eighth of the floor).
        let server = ServerConfig {
            timeouts: Timeouts {
                rto_us: 200_000,
                ..Timeouts::default()
            },
            ..ServerConfig::loopback(1, 4, 1 << 13)
        };
        let (report, _) =
            run_single_exchange(kind, xplan.clone(), &values, scale, server, false).unwrap();
        let c = &report.counters;
        let up: u64 = load.sent_bytes.iter().sum();
        let down: u64 = load.received_bytes.iter().sum();
        // A busy machine can fire a retransmission before the ack arrives, or repeat a join
        // or a done: the copies the switch drops as duplicates, the acks it repeats for them
        // and the repeated control are not what the plan moves. One chunk per packet (width
        // 32), so every data packet has one size.
        let header = HEADER_LEN as u64;
        let data = header + 4 * width as u64;
        let workers = u64::from(xplan.workers);
        let blocks = xplan.blocks.len() as u64;
        let dups = c.dropped(DropReason::Duplicate);
        let extra_joins = c.received(PacketType::Join) - workers;
        let extra_dones = c.received(PacketType::BlockDone) - workers * blocks;
        let extra_gos = c.sent(PacketType::BlockGo) - workers * (blocks + 1);
        let got_in = c.bytes_in - dups * data - (extra_joins + extra_dones) * header;
        let got_out = c.bytes_out - dups * header - extra_gos * header;
        eprintln!(
            "{kind}: into the switch {} B ({got_in} B once; predicted {up}), out {} B ({got_out} B \
             once; predicted {down}); {dups} duplicates",
            c.bytes_in, c.bytes_out
        );
        for (what, got, want) in [("in", got_in, up), ("out", got_out, down)] {
            let r = got as f64 / want as f64;
            assert!(
                (0.99..1.01).contains(&r),
                "{kind}: bytes {what} {got} vs {want} ({r:.4})"
            );
        }
    }
}

#[test]
fn the_hybrid_mixes_multicast_and_partial_sums_and_stays_exact() {
    use switchgnn_chip::{Chip, HostCost, Load};
    use switchgnn_dataplane::wire::FRAME_OVERHEAD;
    use switchgnn_scheduler::hybrid::hybrid_plan;

    let d = dataset_of(random_graph(400, 2_400, 12));
    let width = 40;
    let block = block_plan(&d, 4, width, 1 << 20, metis());
    let a = Assignment::new(block.owner.iter().map(|&w| u32::from(w)).collect(), 4).unwrap();
    let cost = HostCost {
        delays: switchgnn_chip::Delays::NONE,
        link_gbps: 100.0,
        per_packet_ns: 20.0,
        frame_overhead: FRAME_OVERHEAD,
        framing: Default::default(),
    };
    let serial = |plan: &switchgnn_dataplane::plan::ExchangePlan, chip: &Chip| {
        switchgnn_chip::Bound::of(chip, &Load::of(plan, FRAME_OVERHEAD), &cost).serial_seconds
    };
    let reduce = reduce_plan(&d.graph, &a, width, 1 << 13).unwrap();
    for (name, chip) in [
        ("ideal", Chip::preset("ideal").unwrap()),
        ("tofino2", Chip::preset("tofino2").unwrap()),
        ("tofino1-32", Chip::preset("tofino1-32").unwrap()),
    ] {
        let plan = Arc::new(hybrid_plan(&d.graph, &a, width, 1 << 13, &chip, &cost).unwrap());
        let senders: usize = plan.blocks.iter().map(|b| b.multicast.len()).sum();
        let pairs: usize = plan.blocks.iter().map(|b| b.table.slots.len()).sum();
        let (h, r) = (serial(&plan, &chip), serial(&reduce, &chip));
        eprintln!("{name}: {senders} multicast senders, {pairs} partial sums; estimate {h:.3e} s against reduce's {r:.3e} s");
        // The search never ends above pure reduce (one block here).
        assert!(h <= r, "{name}: {h} vs {r}");
        match name {
            // With free recirculation every pair is multicast on this graph.
            "ideal" => assert!(senders > 0 && pairs == 0, "{name}: {senders}, {pairs}"),
            // With only its recirculation ports, a Tofino 2 keeps both (24 multicast senders,
            // 945 partial sums when this was written).
            "tofino2" => assert!(
                senders > 0 && pairs > 0,
                "{name}: {senders} senders, {pairs} pairs"
            ),
            _ => {}
        }
        let values = features(d.graph.num_vertices(), width, 3);
        for (i, faults) in [Faults::none(), Faults::lossy(0.03)]
            .into_iter()
            .enumerate()
        {
            let s = setup(scale_for(&d.graph), 1 << 20, faults, 40 + i as u64, i == 1);
            let run = run_exact(&d.graph, &plan, &values, &s);
            if senders > 0 {
                assert!(run.switch.passes > run.switch.received(PacketType::Data) / 2);
            }
        }
    }
}
