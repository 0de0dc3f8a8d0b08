//! The exchange is exact: whatever the loss, duplication, reordering, aggregator memory or
//! fallback path, every worker ends with the integer sums a direct computation gives.

mod common;

use std::sync::Arc;

use common::*;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::network::{run_exchange, Faults};
use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use switchgnn_dataplane::switch::AGGREGATOR_BYTES;
use switchgnn_dataplane::wire::PacketType;
use switchgnn_partition::{Assignment, Method};
use switchgnn_scheduler::exchange::ExchangePlans;
use switchgnn_scheduler::OrderKind;

/// Loss, duplication and reordering together (the reorder window varies with `seed`).
fn mixed_faults(seed: u64) -> Faults {
    Faults {
        loss: 0.02,
        duplicate: 0.05,
        reorder: 0.1,
        reorder_delay: 20_000 + seed % 7 * 1_000,
        ..Faults::none()
    }
}

#[test]
fn blocks_are_exact_under_loss_duplication_and_reordering_in_both_directions() {
    let d = dataset_of(random_graph(400, 1_600, 1));
    // 48 destinations of width 80 (2 chunks each, of 64 and 16 lanes): far smaller than the
    // boundary, many blocks.
    let memory = 48 * 2 * AGGREGATOR_BYTES;
    let plan = block_plan(&d, 4, 80, memory, metis());
    assert!(plan.blocks.len() > 3, "{} blocks", plan.blocks.len());
    let scale = scale_for(&d.graph);
    let cases = [
        ("lossless", Faults::none()),
        ("1% loss", Faults::lossy(0.01)),
        ("5% loss", Faults::lossy(0.05)),
        ("duplication and reordering", mixed_faults(3)),
    ];
    for (i, (name, faults)) in cases.into_iter().enumerate() {
        for backward in [false, true] {
            let values = features(
                d.graph.num_vertices(),
                80,
                i as u64 * 2 + u64::from(backward),
            );
            let setup = setup(scale, memory, faults, 11 + i as u64, backward);
            let run = run_exact(&d.graph, &plan, &values, &setup);
            assert_eq!(
                run.switch.exchanges_completed, 1,
                "{name}: the switch saw the exchange end"
            );
            if faults.loss > 0.0 {
                assert!(run.network.lost > 0, "{name}: faults were injected");
                let retransmits: u64 = run.engines.iter().map(|e| e.retransmits).sum();
                assert!(retransmits > 0, "{name}: losses were repaired");
            }
            if faults.duplicate > 0.0 {
                assert!(
                    run.switch
                        .dropped(switchgnn_dataplane::switch::DropReason::Duplicate)
                        > 0
                );
            }
            // Blocks fit the memory: the switch never ran out of aggregators.
            assert!(run.switch.peak_aggregators as usize <= setup.switch.aggregators);
        }
    }
}

#[test]
fn a_small_send_window_never_stalls_under_loss_or_duplication() {
    // The window counts chunks awaiting their ack; a leak in that count (an ack or a timeout
    // not settling a chunk) would stall the sender for good, which the event limit catches.
    let d = dataset_of(random_graph(300, 1_200, 8));
    let memory = 32 * 2 * AGGREGATOR_BYTES;
    let plan = block_plan(&d, 3, 80, memory, metis());
    let scale = scale_for(&d.graph);
    for (i, window) in [1usize, 3, 16].into_iter().enumerate() {
        let mut s = setup(
            scale,
            memory,
            mixed_faults(20 + i as u64),
            30 + i as u64,
            false,
        );
        s.network.faults.loss = 0.03;
        s.window = window;
        let values = features(d.graph.num_vertices(), 80, 40 + i as u64);
        let run = run_exact(&d.graph, &plan, &values, &s);
        let retransmits: u64 = run.engines.iter().map(|e| e.retransmits).sum();
        assert!(retransmits > 0, "window {window}: losses were repaired");
    }
}

#[test]
fn aggregator_memory_of_one_edge_still_completes_exactly() {
    let d = dataset_of(random_graph(120, 400, 2));
    let memory = 2 * AGGREGATOR_BYTES; // two aggregators: one edge of width 32 per block
    let plan = block_plan(&d, 3, 32, memory, Method::Random { seed: 5 });
    assert!(plan.blocks.len() > 20);
    let values = features(120, 32, 9);
    let run = run_exact(
        &d.graph,
        &plan,
        &values,
        &setup(scale_for(&d.graph), memory, Faults::lossy(0.02), 4, false),
    );
    assert_eq!(run.switch.blocks_completed as usize, plan.blocks.len());
}

#[test]
fn the_strawman_overflows_to_the_hosts_and_stays_exact() {
    let d = dataset_of(random_graph(300, 1_200, 3));
    let a = Assignment::compute(&d.graph, 4, &Method::Random { seed: 1 }).unwrap();
    let plan = Arc::new(
        ExchangePlan::whole_graph(&d.graph, &a, 48, Mode::Strawman, OrderKind::Random, 2).unwrap(),
    );
    let scale = scale_for(&d.graph);
    for (i, faults) in [Faults::none(), Faults::lossy(0.05), mixed_faults(1)]
        .into_iter()
        .enumerate()
    {
        // 10 aggregators for hundreds of destinations: most contributions overflow.
        let memory = 10 * AGGREGATOR_BYTES;
        let values = features(300, 48, 20 + i as u64);
        let run = run_exact(
            &d.graph,
            &plan,
            &values,
            &setup(scale, memory, faults, i as u64, false),
        );
        assert!(
            run.switch.raw_forwarded > 100,
            "{}",
            run.switch.raw_forwarded
        );
        assert!(run.switch.aggregations > 0);
        assert_eq!(run.switch.peak_aggregators, 10);
    }
}

#[test]
fn a_lane_overflow_falls_back_to_host_aggregation() {
    let d = dataset_of(random_graph(200, 1_000, 4));
    let plan = block_plan(&d, 4, 16, 1 << 20, metis());
    // A scale chosen for one contribution: sums of many overflow int32 in the switch.
    let scale = Scale::for_bound(1.0, 1).unwrap();
    let values: Vec<f32> = features(200, 16, 5).iter().map(|x| x.abs()).collect();
    let run = run_exact(
        &d.graph,
        &plan,
        &values,
        &setup(scale, 1 << 20, Faults::none(), 1, false),
    );
    assert!(run.switch.overflows > 0);
    let notices: u64 = run.engines.iter().map(|e| e.overflow_notices).sum();
    assert_eq!(notices, run.switch.overflows);
    let host: u64 = run.engines.iter().map(|e| e.host_aggregated).sum();
    assert!(host > 0);
}

#[test]
fn host_and_in_network_exchanges_agree_and_match_the_traffic_model() {
    let d = dataset_of(random_graph(500, 2_500, 6));
    let spec_width = 136; // 3 chunks, the last of 8 lanes
    let memory = 64 * 3 * AGGREGATOR_BYTES;
    let spec =
        switchgnn_partition::PlanSpec::new("test", 5, vec![spec_width]).switch_memory(memory);
    let prepared = switchgnn_partition::Plan::prepare(&d, &spec, &|_| {}).unwrap();
    let traffic = &prepared.manifest.traffic[0];
    let ina = Arc::new(ExchangePlan::from_plan(&prepared, 0).unwrap());
    let host = Arc::new(
        ExchangePlan::whole_graph(
            &d.graph,
            &prepared.assignment,
            spec_width,
            Mode::Host,
            OrderKind::Degree,
            0,
        )
        .unwrap(),
    );
    let values = features(500, spec_width, 1);
    let scale = scale_for(&d.graph);
    let s = setup(scale, memory, Faults::none(), 1, false);
    let a = run_exact(&d.graph, &ina, &values, &s);
    let b = run_exact(&d.graph, &host, &values, &s);
    assert_eq!(a.outputs, b.outputs);
    let payload = |r: &switchgnn_dataplane::network::ExchangeRun| -> u64 {
        r.engines
            .iter()
            .map(|e| e.payload_sent + e.payload_received)
            .sum()
    };
    assert_eq!(payload(&a), traffic.plan_bytes);
    assert_eq!(payload(&b), traffic.host_bytes);
    // Nothing was sent twice on a clean network.
    assert!(a.engines.iter().all(|e| e.payload_resent == 0));
    assert!(b.engines.iter().all(|e| e.payload_resent == 0));

    // The host exchange packs its copies to the MTU and acknowledges every few packets: two
    // 64-lane chunks and an 8-lane one a row, about seven records a 1,500-byte packet, and an
    // ack per 8 packets (or at the end of a burst, once per sender and receiver).
    let copies: u64 = b.engines.iter().map(|e| e.raws).sum();
    let acks: u64 = b.engines.iter().map(|e| e.acks_sent).sum();
    let packed = b.switch.received(PacketType::Rows) - acks;
    assert!(copies >= 5 * packed, "{copies} copies in {packed} packets");
    let pairs = 5 * 4;
    assert!(
        acks <= packed / 8 + pairs,
        "{acks} acks of {packed} packets"
    );

    // With loss, the host exchange recovers (its copies are acknowledged end to end and
    // resent), and stays exact.
    let lossy = setup(scale, memory, Faults::lossy(0.05), 2, true);
    let c = run_exact(&d.graph, &host, &values, &lossy);
    assert!(c.engines.iter().map(|e| e.retransmits).sum::<u64>() > 0);
}

#[test]
fn the_host_only_kinds_send_the_rows_and_packets_the_chip_model_counts() {
    use switchgnn_chip::Load;
    use switchgnn_dataplane::framing::{copies_per_pair, HostFraming};
    use switchgnn_dataplane::switch::Racks;
    use switchgnn_scheduler::exchange::{host_hybrid_plan, host_reduce_plan, host_two_level_plan};

    let d = dataset_of(random_graph(500, 2_500, 6));
    let width = 136; // 3 chunks, the last of 8 lanes
    let a = Assignment::compute(&d.graph, 5, &metis()).unwrap();
    let values = features(500, width, 1);
    let scale = scale_for(&d.graph);
    let s = setup(scale, 1 << 20, Faults::none(), 1, false);
    let framing = HostFraming::default();
    let host =
        ExchangePlan::whole_graph(&d.graph, &a, width, Mode::Host, OrderKind::Degree, 0).unwrap();
    let partials = host_reduce_plan(&d.graph, &a, width).unwrap();
    let hybrid = host_hybrid_plan(&d.graph, &a, width).unwrap();
    // Racks of three and two workers: its proxies' shares are rows too.
    let racks = Racks::even(5, 2).unwrap();
    let two_level = host_two_level_plan(&d.graph, &a, width, &racks).unwrap();
    let mut moved = Vec::new();
    for plan in [host, partials, hybrid, two_level] {
        let name = plan.mode.name();
        let plan = Arc::new(plan);
        let run = run_exact(&d.graph, &plan, &values, &s);
        let per_pair = copies_per_pair(&plan, &plan.blocks[0]);
        let rows: u64 = per_pair.iter().sum();
        let (packets, acks) = per_pair
            .iter()
            .map(|&n| framing.pack(n, &plan).0)
            .fold((0, 0), |(p, a), n| (p + n, a + framing.acks(n)));
        // Every row's every chunk arrived once as a record, in the packets the model packs.
        let records: u64 = run.engines.iter().map(|e| e.raws).sum();
        let acks_sent: u64 = run.engines.iter().map(|e| e.acks_sent).sum();
        let data = run.switch.received(PacketType::Rows) - acks_sent;
        assert_eq!(records, rows * plan.chunks() as u64, "{name}");
        assert_eq!(data, packets, "{name}");
        // The model's acks are a floor (gaps and the ends of bursts add some).
        assert!(
            acks_sent >= acks,
            "{name}: {acks_sent} acks, at least {acks}"
        );
        assert_eq!(
            Load::host(&plan, 0, framing).packets(),
            packets + acks,
            "{name}"
        );
        moved.push(rows);
    }
    eprintln!(
        "rows: host {}, host-reduce {}, host-hybrid {}, host-two-level {}",
        moved[0], moved[1], moved[2], moved[3]
    );
    assert!(moved[2] <= moved[0].min(moved[1]));
}

#[test]
fn a_graph_without_cross_edges_finishes_at_once() {
    let d = dataset_of(random_graph(50, 100, 7));
    let a = Assignment::new(vec![0; 50], 2).unwrap();
    let plan = Arc::new(
        ExchangePlan::whole_graph(&d.graph, &a, 8, Mode::Strawman, OrderKind::Random, 0).unwrap(),
    );
    assert!(plan.blocks.is_empty());
    let s = setup(scale_for(&d.graph), 1024, Faults::none(), 0, false);
    let run = run_exchange(plan, &features(50, 8, 0), &s).unwrap();
    assert!(run.outputs.iter().all(|o| o.vertices.is_empty()));
    assert_eq!(run.switch.exchanges_completed, 1);
}

#[test]
fn corrupted_packets_that_reach_the_protocol_are_rejected_without_panics() {
    let d = dataset_of(random_graph(150, 500, 8));
    let plan = block_plan(&d, 3, 24, 40 * AGGREGATOR_BYTES, metis());
    let faults = Faults {
        corrupt: 0.02,
        check_frames: false,
        ..Faults::none()
    };
    let s = setup(scale_for(&d.graph), 40 * AGGREGATOR_BYTES, faults, 5, false);
    // Without a frame check a flipped lane bit changes a sum, so exactness is not claimed here;
    // the run must end, and what the switch rejected must be counted.
    let run = run_exchange(plan, &features(150, 24, 3), &s).unwrap();
    assert!(run.network.corrupted > 0);
    assert_eq!(
        run.switch.packets_in,
        run.switch.accepted + run.switch.total_drops()
    );
}

#[test]
fn congestion_marks_ecn_slows_senders_and_stays_exact() {
    // Eight workers on 1 Gbps links with a 2 KB marking threshold: result bursts towards a
    // worker queue up, acks echo ECN, and AIMD cuts the senders' rates.
    let d = dataset_of(random_graph(600, 4_000, 9));
    let memory = 256 * 2 * AGGREGATOR_BYTES;
    let plan = block_plan(&d, 8, 64, memory, metis());
    let mut s = setup(scale_for(&d.graph), memory, Faults::none(), 3, false);
    s.network.link.rate = 1e9 / 8.0;
    s.switch.ecn_threshold = 2_000;
    let run = run_exact(&d.graph, &plan, &features(600, 64, 4), &s);
    assert!(run.switch.ecn_marks > 0);
    assert!(run.network.peak_queue_bytes > 2_000);
    let echoes: u64 = run.engines.iter().map(|e| e.ecn_echoes).sum();
    assert!(echoes > 0, "senders heard the congestion");
}
