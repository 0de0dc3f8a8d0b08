//! The switch model in shards (aggregators spread over cores by destination) does what the
//! one-core model does: the same sums, the same passes, the same packets.

mod common;

use std::sync::Arc;

use common::{dataset_of, random_graph};
use switchgnn_conformance::Fixture;
use switchgnn_dataplane::control::WatchedSwitch;
use switchgnn_dataplane::fault::Faults;
use switchgnn_dataplane::network::{run_exchange_kind, run_exchange_sharded, RunSetup};
use switchgnn_dataplane::node::MAX_DATAGRAM_LEN;
use switchgnn_dataplane::node::{Address, Node};
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::switch::{
    JobConfig, Racks, ShardedSwitch, SwitchConfig, SwitchCounters, SwitchError, Tier, MAX_SHARDS,
};
use switchgnn_dataplane::wire::PacketType;
use switchgnn_dataplane::ExchangeKind;

/// 240 vertices on 4 workers, width 40 (two chunks), 16 KiB of aggregators: several blocks.
fn fixture() -> Fixture {
    Fixture::new(&dataset_of(random_graph(240, 900, 11)), 4, 40, 16 << 10)
}

fn setup(f: &Fixture, kind: ExchangeKind) -> RunSetup {
    let case = switchgnn_conformance::Case {
        kind,
        condition: switchgnn_conformance::CONDITIONS[0],
        backward: false,
    };
    let mut s = RunSetup::new(f.scale(&case), 16 << 10, Faults::none(), 7);
    s.switch.ports = 4;
    s
}

/// What a run's switch did that does not depend on the order its output left in.
fn work(c: &SwitchCounters) -> Vec<u64> {
    let mut w = vec![
        c.packets_in,
        c.bytes_in,
        c.accepted,
        c.packets_out,
        c.bytes_out,
        c.passes,
        c.readout_passes,
        c.lane_updates,
        c.aggregations,
        c.raw_forwarded,
        c.overflows,
        c.releases,
        c.acks,
        c.ecn_marks,
        c.blocks_completed,
        c.exchanges_completed,
        c.total_drops(),
    ];
    w.extend(c.in_by_type);
    w.extend(c.out_by_type);
    w
}

#[test]
fn shards_do_the_work_of_one_switch() {
    let f = fixture();
    for kind in ExchangeKind::ALL.into_iter().filter(|k| k.in_network()) {
        let plan = f.plan(kind).clone();
        let setup = setup(&f, kind);
        let whole = run_exchange_kind(kind, plan.clone(), &f.features, &setup).expect("one core");
        assert!(whole.switch.passes > 0, "{kind}: the switch aggregates");
        for shards in [2, 3, 5] {
            let run = run_exchange_sharded(kind, plan.clone(), &f.features, &setup, shards)
                .unwrap_or_else(|e| panic!("{kind} in {shards} shards: {e}"));
            assert_eq!(
                run.outputs, whole.outputs,
                "{kind} in {shards} shards: sums"
            );
            if kind == ExchangeKind::Strawman {
                // The strawman runs one block of every cross edge through a pool too small
                // for it: which contributions find an aggregator depends on how the pool is
                // cut (each shard has its share), so only the sums must agree.
                assert!(run.switch.raw_forwarded > 0 && whole.switch.raw_forwarded > 0);
                continue;
            }
            assert_eq!(
                work(&run.switch),
                work(&whole.switch),
                "{kind} in {shards} shards: what the switch did"
            );
        }
    }
}

#[test]
fn every_shard_takes_a_share_of_the_passes() {
    let f = fixture();
    let kind = ExchangeKind::Switchgnn;
    let plan = f.plan(kind).clone();
    let setup = setup(&f, kind);
    let mut switch = ShardedSwitch::new(setup.switch, 3).unwrap();
    switch
        .add_job(JobConfig::new(1, vec![plan.clone()]))
        .unwrap();
    run_unpaced(&f, kind, &setup, &mut switch);
    let per_shard = switch.shard_counters();
    let total: u64 = per_shard.iter().map(|c| c.passes).sum();
    assert_eq!(total, switch.counters().passes);
    // The control plane's stall watch sees every shard's aggregation, not the lead's alone.
    let progress = WatchedSwitch::progress(&switch);
    assert_eq!(progress[2], switch.counters().lane_updates);
    assert!(progress[2] > switch.lead().counters().lane_updates);
    for (i, c) in per_shard.iter().enumerate() {
        // Keys are spread round-robin: each shard has about a third of the passes.
        assert!(
            c.passes * 5 > total && c.passes * 2 < total,
            "shard {i}: {} of {total} passes",
            c.passes
        );
        // A data packet is acknowledged by the owner of its first aggregator: every shard
        // acknowledges some. Only the lead sends the gos.
        assert!(c.acks > 0, "shard {i} acks");
        assert_eq!(
            c.out_by_type[PacketType::BlockGo as usize] > 0,
            i == 0,
            "shard {i}: gos"
        );
    }
}

#[test]
fn a_batch_on_threads_equals_packets_one_by_one() {
    // The same packets into two sharded switches, one packet by packet on this thread, the
    // other in batches on its shard threads: the same output.
    let f = fixture();
    let kind = ExchangeKind::Reduce;
    let plan: Arc<ExchangePlan> = f.plan(kind).clone();
    let setup = setup(&f, kind);
    let build = || {
        let mut s = ShardedSwitch::new(setup.switch, 4).unwrap();
        s.add_job(JobConfig::new(1, vec![plan.clone()])).unwrap();
        s
    };
    let (mut one_by_one, mut batched) = (build(), build());
    // Traffic: the run of the whole exchange through a recording switch, replayed.
    let recorded = record(&f, kind, &setup);
    assert!(recorded.len() > 100, "{} packets", recorded.len());
    let mut buf = [0u8; MAX_DATAGRAM_LEN];
    let drain = |s: &mut ShardedSwitch, buf: &mut [u8], out: &mut Vec<(Address, Vec<u8>)>| {
        while let Some(t) = s.poll_transmit(0, buf) {
            out.push((t.to, buf[..t.len].to_vec()));
        }
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for burst in recorded.chunks(32) {
        for (from, bytes) in burst {
            one_by_one.handle_packet(0, *from, bytes);
            batched.take(0, *from, bytes);
        }
        drain(&mut one_by_one, &mut buf, &mut a);
        batched.run_batch(0);
        drain(&mut batched, &mut buf, &mut b);
    }
    // Per shard the order is the same, and each drain takes shard after shard either way: the
    // outputs match in order.
    assert!(!a.is_empty());
    assert_eq!(a, b);
    assert_eq!(one_by_one.counters(), batched.counters());
}

/// Every packet the switch received in one whole exchange of `kind`, with its ingress.
fn record(f: &Fixture, kind: ExchangeKind, setup: &RunSetup) -> Vec<(Address, Vec<u8>)> {
    #[derive(Debug)]
    struct Recorder {
        inner: ShardedSwitch,
        seen: Vec<(Address, Vec<u8>)>,
    }
    impl Node for Recorder {
        fn handle_packet(&mut self, now: u64, from: Address, bytes: &[u8]) {
            self.seen.push((from, bytes.to_vec()));
            self.inner.handle_packet(now, from, bytes);
        }
        fn handle_timeout(&mut self, now: u64) {
            self.inner.handle_timeout(now)
        }
        fn poll_transmit(
            &mut self,
            now: u64,
            buf: &mut [u8],
        ) -> Option<switchgnn_dataplane::Transmit> {
            self.inner.poll_transmit(now, buf)
        }
        fn poll_timeout(&self) -> Option<u64> {
            None
        }
    }
    impl switchgnn_dataplane::node::SwitchNode for Recorder {
        fn set_egress_queue(&mut self, port: u16, bytes: u64) {
            self.inner.set_egress_queue(port, bytes)
        }
        fn passes(&self) -> u64 {
            self.inner.counters().passes
        }
        fn aggregators_in_use(&self) -> usize {
            self.inner.aggregators_in_use()
        }
    }
    let plan = f.plan(kind).clone();
    let mut inner = ShardedSwitch::new(setup.switch, 1).unwrap();
    inner
        .add_job(JobConfig::new(1, vec![plan.clone()]))
        .unwrap();
    let mut rec = Recorder {
        inner,
        seen: Vec::new(),
    };
    run_unpaced(f, kind, setup, &mut rec);
    rec.seen
}

/// One exchange of `kind` through `switch`, the engines unpaced, on the setup's network.
fn run_unpaced<S: switchgnn_dataplane::node::SwitchNode>(
    f: &Fixture,
    kind: ExchangeKind,
    setup: &RunSetup,
    switch: &mut S,
) {
    let plan = f.plan(kind);
    let mut engines: Vec<_> = (0..plan.workers)
        .map(|w| {
            let cc = Box::new(switchgnn_dataplane::cc::Unpaced);
            f.engine(kind, w, setup.exchange, 1, setup.scale, cc, 0)
        })
        .collect();
    let mut net = switchgnn_dataplane::network::Network::new(setup.network, plan.workers);
    net.run(switch, &mut engines).unwrap();
}

#[test]
fn what_cannot_be_sharded_is_refused() {
    let config = SwitchConfig::with_memory(1 << 16);
    assert_eq!(
        ShardedSwitch::new(config, 0).unwrap_err(),
        SwitchError::BadShards(0)
    );
    assert_eq!(
        ShardedSwitch::new(config, MAX_SHARDS + 1).unwrap_err(),
        SwitchError::BadShards(MAX_SHARDS + 1)
    );
    let f = fixture();
    let plan = f.plan(ExchangeKind::Switchgnn).clone();
    let racks = Arc::new(Racks::even(plan.workers, 2).unwrap());
    let mut sharded = ShardedSwitch::new(config, 2).unwrap();
    let spine = JobConfig::new(1, vec![plan.clone()]).in_tier(Tier::Spine(racks.clone()));
    assert_eq!(
        sharded.add_job(spine).unwrap_err(),
        SwitchError::ShardedTier(1)
    );
    // One shard is the plain switch: a spine is fine there.
    let mut one = ShardedSwitch::new(config, 1).unwrap();
    one.add_job(JobConfig::new(1, vec![plan]).in_tier(Tier::Spine(racks)))
        .unwrap();
}
