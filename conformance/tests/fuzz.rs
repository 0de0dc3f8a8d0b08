//! Arbitrary bytes and arbitrary event sequences: the switch and the engine never panic, and
//! every packet the switch does not process is counted under a drop reason. Random graphs,
//! partitions, memories and faults: the exchange is always exact and always ends.

mod common;

use std::sync::Arc;

use common::*;
use proptest::prelude::*;
use switchgnn_dataplane::cc::Unpaced;
use switchgnn_dataplane::engine::{EngineConfig, InNetworkEngine, LocalFeatures, Timers};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::network::Faults;
use switchgnn_dataplane::node::MAX_DATAGRAM_LEN;
use switchgnn_dataplane::node::{Address, ExchangeId, Node};
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::switch::{JobConfig, Switch, SwitchConfig};
use switchgnn_dataplane::wire::{Flags, PacketType, Repr, MAX_LANES};
use switchgnn_partition::Method;

fn small_plan() -> Arc<ExchangePlan> {
    let d = dataset_of(random_graph(40, 120, 1));
    block_plan(
        &d,
        3,
        40,
        8 * 2 * switchgnn_dataplane::switch::AGGREGATOR_BYTES,
        Method::Random { seed: 1 },
    )
}

fn switch_for(plan: &Arc<ExchangePlan>) -> Switch {
    let mut s = Switch::new(SwitchConfig {
        aggregators: 8,
        ecn_threshold: 0,
        ports: 4,
    });
    s.add_job(JobConfig::new(7, vec![plan.clone(), plan.clone()]))
        .unwrap();
    s
}

/// Headers that parse, with fields near the plan's limits so that many are accepted.
fn header() -> impl Strategy<Value = (Repr, Vec<i32>, u16)> {
    (
        (1u8..=9, 0u8..64, 0u8..3, 6u16..9, 0u32..44, 0u32..44),
        (
            0u16..20,
            0u16..5,
            0u16..4,
            0u8..3,
            0usize..=MAX_LANES,
            0u32..3,
        ),
        (0u32..4, any::<i32>(), 0u16..4),
    )
        .prop_map(
            |(
                (t, flags, layer, job, src, dst),
                (block, count, worker, chunk, lanes, epoch),
                (seq, fill, port),
            )| {
                let r = Repr {
                    packet_type: PacketType::from_u8(t).unwrap(),
                    flags: Flags::from_u8(flags).unwrap(),
                    layer,
                    job,
                    src,
                    dst,
                    block,
                    count,
                    worker,
                    chunk,
                    lanes: lanes as u8,
                    epoch,
                    sequence: seq,
                };
                (r, vec![fill; lanes], port)
            },
        )
}

/// Hand `s` the `garbage` (from where port 3 comes from) and the `events`, each from the
/// address of its port, draining what it sends: the packets fed.
fn feed(
    s: &mut Switch,
    garbage: &[Vec<u8>],
    events: &[(Repr, Vec<i32>, u16)],
    from: impl Fn(u16) -> Address,
) -> u64 {
    let mut buf = [0u8; MAX_DATAGRAM_LEN];
    for bytes in garbage {
        s.handle_packet(0, from(3), bytes);
    }
    for (r, lanes, port) in events {
        s.handle_packet(0, from(*port), &r.to_bytes(lanes));
        while s.poll_transmit(0, &mut buf).is_some() {}
    }
    (garbage.len() + events.len()) as u64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_switch_counts_every_rejection(
        garbage in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..40),
        events in proptest::collection::vec(header(), 0..300),
    ) {
        let plan = small_plan();
        let mut s = switch_for(&plan);
        let fed = feed(&mut s, &garbage, &events, Address::Worker);
        let c = s.counters();
        prop_assert_eq!(c.packets_in, fed);
        prop_assert_eq!(c.packets_in, c.accepted + c.total_drops());
        prop_assert!(s.aggregators_in_use() <= 8);
    }

    #[test]
    fn leaves_and_spines_count_every_rejection(
        garbage in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..40),
        events in proptest::collection::vec(header(), 0..300),
    ) {
        use switchgnn_dataplane::switch::{Racks, Tier};
        let plan = small_plan();
        let racks = Arc::new(Racks::new(vec![0, 0, 1]).unwrap());
        let tiers = [
            Tier::Leaf { rack: 0, racks: racks.clone() },
            Tier::Leaf { rack: 1, racks: racks.clone() },
            Tier::Spine(racks),
        ];
        for tier in tiers {
            let mut s = Switch::new(SwitchConfig {
                aggregators: 8,
                ecn_threshold: 0,
                ports: 4,
            });
            s.add_job(JobConfig::new(7, vec![plan.clone(), plan.clone()]).in_tier(tier))
                .unwrap();
            // Port 3 stands for a leaf's uplink.
            let from = |port| if port == 3 { Address::Switch } else { Address::Worker(port) };
            let fed = feed(&mut s, &garbage, &events, from);
            let c = s.counters();
            prop_assert_eq!(c.packets_in, fed);
            prop_assert_eq!(c.packets_in, c.accepted + c.total_drops());
            prop_assert!(s.aggregators_in_use() <= 8);
        }
    }

    #[test]
    fn an_engine_survives_arbitrary_input(
        garbage in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..40),
        events in proptest::collection::vec(header(), 0..300),
    ) {
        let plan = small_plan();
        let vertices: Vec<u32> = (0..40).filter(|&v| plan.owner[v as usize] == 1).collect();
        let values = vec![0.5f32; vertices.len() * 40];
        let cfg = EngineConfig {
            exchange: ExchangeId { job: 7, epoch: 1, layer: 1, backward: false },
            seq: 1,
            rank: 1,
            scale: Scale::for_bound(1.0, 64).unwrap(),
            timers: Timers::default(),
            window: 4,
            framing: Default::default(),
        };
        let local = LocalFeatures { vertices: &vertices, width: 40, values: &values };
        let mut e = InNetworkEngine::new(cfg, plan, local, Box::new(Unpaced), 0).unwrap();
        let mut buf = [0u8; MAX_DATAGRAM_LEN];
        let mut now = 0;
        let mut fed = 0;
        for bytes in &garbage {
            e.handle_packet(now, Address::Switch, bytes);
            fed += 1;
        }
        for (r, lanes, _) in &events {
            now += 1_000;
            e.handle_packet(now, Address::Switch, &r.to_bytes(lanes));
            fed += 1;
            if e.poll_timeout().is_some_and(|t| t <= now) {
                e.handle_timeout(now);
            }
            while e.poll_transmit(now, &mut buf).is_some() {}
        }
        use switchgnn_dataplane::engine::{EngineDrop, Exchange};
        let st = e.stats();
        prop_assert_eq!(st.packets_received, fed);
        // Every drop has its reason, and garbage is dropped as malformed (a random buffer
        // almost never starts with the magic).
        prop_assert_eq!(st.drops.iter().sum::<u64>(), st.dropped);
        let malformed = garbage.iter().filter(|b| b.len() < 2 || b[..2] != *b"SG").count() as u64;
        prop_assert!(st.dropped_for(EngineDrop::Malformed) >= malformed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn random_exchanges_are_exact_and_end(
        n in 20usize..150,
        density in 2usize..6,
        workers in 2u32..6,
        slots in 2u64..40,
        width in 1usize..70,
        loss in prop_oneof![Just(0.0), Just(0.01), Just(0.05)],
        dup in prop_oneof![Just(0.0), Just(0.05)],
        seed in any::<u64>(),
    ) {
        let d = dataset_of(random_graph(n, n * density, seed));
        let chunks = width.div_ceil(32) as u64;
        let memory = slots.max(2) * chunks * switchgnn_dataplane::switch::AGGREGATOR_BYTES;
        let plan = block_plan(&d, workers, width, memory, Method::Random { seed });
        let faults = Faults { loss, duplicate: dup, reorder: dup, reorder_delay: 10_000, ..Faults::none() };
        let values = features(n, width, seed ^ 1);
        let s = setup(scale_for(&d.graph), memory, faults, seed, seed % 2 == 0);
        run_exact(&d.graph, &plan, &values, &s);
        // The same on a two-level fabric of 2 to `workers` racks.
        let racks = 2 + (seed % u64::from(workers - 1)) as u16;
        run_exact_two_level(&d.graph, &plan, &values, &s, racks);
    }
}
