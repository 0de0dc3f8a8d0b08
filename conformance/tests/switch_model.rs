//! The switch model driven by hand-written event sequences.

mod common;

use std::sync::Arc;

use common::{send, send_from};

use switchgnn_dataplane::node::{Address, ExchangeId, Node};
use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use switchgnn_dataplane::switch::{DropReason, JobConfig, Switch, SwitchConfig, SwitchError};
use switchgnn_dataplane::wire::{PacketType, Repr};
use switchgnn_datasets::{BuildOptions, Graph};
use switchgnn_partition::Assignment;
use switchgnn_scheduler::exchange::ExchangePlans;
use switchgnn_scheduler::OrderKind;

const ID: ExchangeId = ExchangeId {
    job: 1,
    epoch: 0,
    layer: 0,
    backward: false,
};

/// A star: vertex 0 on worker 0, leaves 1, 2, 3 on worker 1, width 4 (one chunk).
/// Cross edges 0-1, 0-2, 0-3: vertex 0 expects 3 contributions, each leaf expects 1.
fn star_switch(mode: Mode, aggregators: usize) -> (Switch, Arc<ExchangePlan>) {
    let g = Graph::from_edges(4, &[(0, 1), (0, 2), (0, 3)], BuildOptions::default()).unwrap();
    let a = Assignment::new(vec![0, 1, 1, 1], 2).unwrap();
    let plan = Arc::new(ExchangePlan::whole_graph(&g, &a, 4, mode, OrderKind::Bfs, 0).unwrap());
    let mut s = Switch::new(SwitchConfig {
        aggregators,
        ecn_threshold: 1_000,
        ports: 4,
    });
    s.add_job(JobConfig::new(1, vec![plan.clone()])).unwrap();
    (s, plan)
}

fn packet(t: PacketType, worker: u16, f: impl FnOnce(&mut Repr)) -> Repr {
    let mut r = ID.header(t);
    r.worker = worker;
    r.sequence = 1;
    f(&mut r);
    r
}

fn join_all(s: &mut Switch) -> Vec<(Address, Repr, Vec<i32>)> {
    let a = send(s, 0, &packet(PacketType::Join, 0, |_| {}), &[]);
    assert!(a.is_empty(), "no go before everyone joined");
    send(s, 1, &packet(PacketType::Join, 1, |_| {}), &[])
}

fn data(worker: u16, src: u32, lanes: &[i32]) -> Repr {
    packet(PacketType::Data, worker, |r| {
        r.src = src;
        r.dst = src;
        r.lanes = lanes.len() as u8;
        r.count = 1;
    })
}

#[test]
fn barrier_aggregation_acks_and_duplicates() {
    let (mut s, _) = star_switch(Mode::Blocks, 16);
    let go = join_all(&mut s);
    assert_eq!(go.len(), 2);
    assert!(go
        .iter()
        .all(|(_, r, _)| r.packet_type == PacketType::BlockGo && r.block == 0));

    // Leaf 1 feeds vertex 0's aggregator (expects 3): only an ack comes back.
    let out = send(&mut s, 1, &data(1, 1, &[1, 2, 3, 4]), &[1, 2, 3, 4]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, Address::Worker(1));
    assert!(out[0].1.flags.ack);
    // The duplicate is acknowledged again and not added.
    let out = send(&mut s, 1, &data(1, 1, &[1, 2, 3, 4]), &[1, 2, 3, 4]);
    assert_eq!(out.len(), 1);
    assert_eq!(s.counters().dropped(DropReason::Duplicate), 1);
    send(&mut s, 1, &data(1, 2, &[10, 20, 30, 40]), &[10, 20, 30, 40]);
    let out = send(
        &mut s,
        1,
        &data(1, 3, &[100, 200, 300, 400]),
        &[100, 200, 300, 400],
    );
    // The third contribution completes vertex 0: its sum goes to worker 0, then the ack.
    let result = out
        .iter()
        .find(|(_, r, _)| r.packet_type == PacketType::Result)
        .unwrap();
    assert_eq!(result.0, Address::Worker(0));
    assert_eq!((result.1.dst, result.1.count), (0, 3));
    assert_eq!(result.2, [111, 222, 333, 444]);

    // Vertex 0 multicasts into three leaf aggregators: three passes, three results.
    let passes = s.counters().passes;
    let out = send(&mut s, 0, &data(0, 0, &[5, 6, 7, 8]), &[5, 6, 7, 8]);
    assert_eq!(s.counters().passes - passes, 3);
    let results: Vec<u32> = out
        .iter()
        .filter(|(_, r, _)| r.packet_type == PacketType::Result)
        .map(|(_, r, _)| r.dst)
        .collect();
    assert_eq!(results, [1, 2, 3]);
    assert_eq!(s.aggregators_in_use(), 0, "completed aggregators are freed");

    // Block done from both workers ends the exchange (one block).
    assert!(send(&mut s, 0, &packet(PacketType::BlockDone, 0, |_| {}), &[]).is_empty());
    let go = send(&mut s, 1, &packet(PacketType::BlockDone, 1, |_| {}), &[]);
    assert_eq!(go.len(), 2);
    assert!(go.iter().all(|(_, r, _)| r.block == 1));
    assert_eq!(s.counters().exchanges_completed, 1);
    // A repeated report after a lost go gets the go again; late data is stale.
    let again = send(&mut s, 0, &packet(PacketType::BlockDone, 0, |_| {}), &[]);
    assert_eq!(again.len(), 1);
    send(&mut s, 0, &data(0, 0, &[5, 6, 7, 8]), &[5, 6, 7, 8]);
    assert_eq!(s.counters().dropped(DropReason::Stale), 1);
    assert_eq!(
        s.counters().packets_in,
        s.counters().accepted + s.counters().total_drops()
    );
}

#[test]
fn admission_and_ownership_are_enforced() {
    let (mut s, _) = star_switch(Mode::Blocks, 16);
    join_all(&mut s);
    // Worker id that is not the ingress port.
    send(&mut s, 0, &data(1, 1, &[1, 2, 3, 4]), &[1, 2, 3, 4]);
    // Unknown job.
    let mut other = data(1, 1, &[1, 2, 3, 4]);
    other.job = 9;
    send(&mut s, 1, &other, &[1, 2, 3, 4]);
    assert_eq!(s.counters().dropped(DropReason::NotAdmitted), 2);
    // A worker sending a vertex it does not own.
    send(&mut s, 0, &data(0, 1, &[1, 2, 3, 4]), &[1, 2, 3, 4]);
    assert_eq!(s.counters().dropped(DropReason::NotInPlan), 1);
    // Wrong lane count for the chunk.
    send(&mut s, 1, &data(1, 1, &[1, 2]), &[1, 2]);
    assert_eq!(s.counters().dropped(DropReason::BadLanes), 1);
    // Vertex beyond the plan.
    send(&mut s, 1, &data(1, 99, &[1, 2, 3, 4]), &[1, 2, 3, 4]);
    assert_eq!(s.counters().dropped(DropReason::OutOfRange), 1);
    // Results only come from the switch.
    send(&mut s, 1, &packet(PacketType::Result, 1, |_| {}), &[]);
    assert_eq!(s.counters().dropped(DropReason::WrongDirection), 1);
    // Garbage.
    s.handle_packet(0, Address::Worker(0), &[1, 2, 3]);
    assert_eq!(s.counters().dropped(DropReason::Truncated), 1);
    assert_eq!(s.counters().aggregations, 0);
}

#[test]
fn the_strawman_pool_overflows_raw_and_sums_the_rest() {
    // One aggregator for four destinations.
    let (mut s, _) = star_switch(Mode::Strawman, 1);
    join_all(&mut s);
    // Vertex 0 feeds leaves 1, 2, 3: leaf 1 gets the aggregator (and completes at once: it
    // expects one contribution), so the pool is free again for leaf 2 and 3 too.
    let out = send(&mut s, 0, &data(0, 0, &[1, 1, 1, 1]), &[1, 1, 1, 1]);
    let results = out
        .iter()
        .filter(|(_, r, _)| r.packet_type == PacketType::Result)
        .count();
    assert_eq!(results, 3);
    // Vertex 0's aggregator (expects 3) takes the only aggregator; hold it with leaf 1 ...
    send(&mut s, 1, &data(1, 1, &[1, 0, 0, 0]), &[1, 0, 0, 0]);
    assert_eq!(s.aggregators_in_use(), 1);
    // ... and with the pool exhausted nothing else can allocate; vertex 0 still completes.
    send(&mut s, 1, &data(1, 2, &[2, 0, 0, 0]), &[2, 0, 0, 0]);
    let out = send(&mut s, 1, &data(1, 3, &[4, 0, 0, 0]), &[4, 0, 0, 0]);
    let r = out
        .iter()
        .find(|(_, r, _)| r.packet_type == PacketType::Result)
        .unwrap();
    assert_eq!((r.1.count, r.2[0]), (3, 7));
    assert_eq!(s.counters().peak_aggregators, 1);
}

#[test]
fn a_full_pool_sends_contributions_raw_with_a_partial_count() {
    let (mut s, _) = star_switch(Mode::Strawman, 0);
    join_all(&mut s);
    let out = send(&mut s, 1, &data(1, 1, &[3, 0, 0, 0]), &[3, 0, 0, 0]);
    let raw = out
        .iter()
        .find(|(_, r, _)| r.packet_type == PacketType::Raw)
        .unwrap();
    assert_eq!((raw.0, raw.1.src, raw.1.dst), (Address::Worker(0), 1, 0));
    assert!(!raw.1.flags.resend, "an overflow, not a resend");
    assert_eq!(s.counters().raw_forwarded, 1);
}

#[test]
fn resend_releases_the_aggregator_and_ecn_marks_congested_ports() {
    let (mut s, _) = star_switch(Mode::Blocks, 16);
    join_all(&mut s);
    send(&mut s, 1, &data(1, 1, &[1, 2, 3, 4]), &[1, 2, 3, 4]);
    assert_eq!(s.aggregators_in_use(), 1);
    // Worker 0 timed out and fetched vertex 2's feature; the resend releases vertex 0's
    // aggregator and reaches worker 0 unaggregated.
    let resend = packet(PacketType::Raw, 1, |r| {
        r.flags.resend = true;
        r.src = 2;
        r.dst = 0;
        r.lanes = 4;
        r.count = 1;
    });
    let out = send(&mut s, 1, &resend, &[9, 9, 9, 9]);
    assert_eq!(out[0].0, Address::Worker(0));
    assert_eq!(s.aggregators_in_use(), 0);
    assert_eq!(s.counters().releases, 1);
    // Later contributions for the released aggregator go raw.
    let out = send(&mut s, 1, &data(1, 3, &[1, 1, 1, 1]), &[1, 1, 1, 1]);
    assert!(out.iter().any(|(_, r, _)| r.packet_type == PacketType::Raw));
    // Congestion towards worker 1: the ack of a packet feeding it carries ECN.
    s.set_egress_queue(1, 5_000);
    let out = send(&mut s, 0, &data(0, 0, &[1, 1, 1, 1]), &[1, 1, 1, 1]);
    let ack = out.iter().find(|(_, r, _)| r.flags.ack).unwrap();
    assert!(ack.1.flags.ecn);
    assert!(s.counters().ecn_marks > 0);
}

/// Two jobs on one switch, each on its own ports: a job's barrier and results reach its own
/// ports, and a packet is judged by its ingress port, whatever job or rank its header names.
#[test]
fn jobs_on_their_own_ports_cannot_reach_each_other() {
    let (mut s, plan) = star_switch(Mode::Blocks, 16);
    let job2 = |r: Repr| Repr { job: 2, ..r };
    assert_eq!(
        s.add_job(JobConfig::new(2, vec![plan.clone()]).at_port(1)),
        Err(SwitchError::PortsTaken {
            job: 2,
            first: 1,
            end: 3,
            other: 1
        })
    );
    assert!(matches!(
        s.add_job(JobConfig::new(2, vec![plan.clone()]).at_port(3)),
        Err(SwitchError::TooManyWorkers { .. })
    ));
    s.add_job(JobConfig::new(2, vec![plan.clone()]).at_port(2))
        .unwrap();

    // Job 2's worker 0 (port 2) joins; a join for job 1's worker 0 from port 2, and one for
    // job 2's worker 1 from job 1's port 1, are refused and change no barrier.
    assert!(send(&mut s, 2, &job2(packet(PacketType::Join, 0, |_| {})), &[]).is_empty());
    assert!(send(&mut s, 2, &packet(PacketType::Join, 0, |_| {}), &[]).is_empty());
    assert!(send(&mut s, 1, &job2(packet(PacketType::Join, 1, |_| {})), &[]).is_empty());
    assert_eq!(s.counters().dropped(DropReason::NotAdmitted), 2);
    assert!(!s.exchange_running(1) && !s.exchange_running(2));
    let go = send(&mut s, 3, &job2(packet(PacketType::Join, 1, |_| {})), &[]);
    let mut to: Vec<Address> = go.iter().map(|(a, _, _)| *a).collect();
    to.sort();
    assert_eq!(to, [Address::Worker(2), Address::Worker(3)], "job 2's go");
    assert!(s.exchange_running(2) && !s.exchange_running(1));

    // Job 1's worker 1 (port 1) cannot feed job 2's aggregators; job 2's own worker 1 can.
    let leaf = |src| job2(data(1, src, &[1, 2, 3, 4]));
    assert!(send(&mut s, 1, &leaf(1), &[1, 2, 3, 4]).is_empty());
    assert_eq!(s.counters().dropped(DropReason::NotAdmitted), 3);
    for src in 1..=3 {
        let out = send(&mut s, 3, &leaf(src), &[1, 2, 3, 4]);
        let result = out
            .iter()
            .find(|(_, r, _)| r.packet_type == PacketType::Result);
        if src == 3 {
            let (at, r, lanes) = result.expect("the sum completes with the third leaf");
            assert_eq!(*at, Address::Worker(2), "to job 2's worker 0, on port 2");
            assert_eq!((r.job, r.worker, r.dst), (2, 0, 0));
            assert_eq!(lanes, &[3, 6, 9, 12]);
        } else {
            assert!(result.is_none());
        }
        assert!(out
            .iter()
            .any(|(a, r, _)| *a == Address::Worker(3) && r.flags.ack));
    }
}

/// A job's quota is its region of the aggregator pool: past it, its contributions go raw to
/// their hosts (still exact), while another job's allocations are untouched.
#[test]
fn a_quota_keeps_a_job_inside_its_region_of_the_pool() {
    let (mut s, plan) = star_switch(Mode::Blocks, 16);
    s.add_job(
        JobConfig::new(2, vec![plan.clone()])
            .at_port(2)
            .with_aggregators(1),
    )
    .unwrap();
    let job2 = |r: Repr| Repr { job: 2, ..r };
    // Both jobs join, then each sends the same contributions: a leaf's (vertex 0's
    // aggregator stays held, expecting two more) and vertex 0's to every leaf.
    for (port0, j) in [(0u16, 1u16), (2, 2)] {
        let at = |r: Repr| if j == 2 { job2(r) } else { r };
        send(&mut s, port0, &at(packet(PacketType::Join, 0, |_| {})), &[]);
        send(
            &mut s,
            port0 + 1,
            &at(packet(PacketType::Join, 1, |_| {})),
            &[],
        );
        send(
            &mut s,
            port0 + 1,
            &at(data(1, 1, &[1, 2, 3, 4])),
            &[1, 2, 3, 4],
        );
        let raw_before = s.counters().raw_forwarded;
        let out = send(&mut s, port0, &at(data(0, 0, &[5, 6, 7, 8])), &[5, 6, 7, 8]);
        let raw = s.counters().raw_forwarded - raw_before;
        let results = out
            .iter()
            .filter(|(_, r, _)| r.packet_type == PacketType::Result)
            .count();
        if j == 1 {
            // No quota: every leaf's sum completes in the switch.
            assert_eq!((raw, results), (0, 3), "job 1: {out:?}");
        } else {
            // One aggregator, held by vertex 0's sum: the leaves' contributions go raw.
            assert_eq!((raw, results), (3, 0), "job 2: {out:?}");
        }
    }
}

/// The star graph on a fabric of two racks, worker 0 in rack 0 and worker 1 in rack 1: leaf
/// `rack`'s switch (or the spine's, `None`).
fn tier_switch(rack: Option<u16>) -> Switch {
    use switchgnn_dataplane::switch::{Racks, Tier};
    let (_, plan) = star_switch(Mode::Blocks, 16);
    let racks = Arc::new(Racks::new(vec![0, 1]).unwrap());
    let tier = match rack {
        Some(rack) => Tier::Leaf { rack, racks },
        None => Tier::Spine(racks),
    };
    let mut s = Switch::new(SwitchConfig {
        aggregators: 16,
        ecn_threshold: 1_000,
        ports: 4,
    });
    s.add_job(JobConfig::new(1, vec![plan]).in_tier(tier))
        .unwrap();
    s
}

#[test]
fn a_leaf_sums_its_rack_and_the_spine_finishes() {
    let mut leaf = tier_switch(Some(1));
    let mut spine = tier_switch(None);
    // Barriers go up untouched; the spine runs them, its go comes down through the leaf.
    let join = packet(PacketType::Join, 1, |_| {});
    let up = send_from(&mut leaf, Address::Worker(1), &join, &[]);
    assert_eq!(up.len(), 1);
    assert_eq!((up[0].0, up[0].1), (Address::Switch, join));
    assert!(send_from(
        &mut spine,
        Address::Worker(0),
        &packet(PacketType::Join, 0, |_| {}),
        &[]
    )
    .is_empty());
    let go = send_from(&mut spine, Address::Worker(1), &join, &[]);
    assert_eq!(go.len(), 2, "a go to each worker, on its rack's port");
    let (to, go1, _) = go.into_iter().find(|(_, r, _)| r.worker == 1).unwrap();
    assert_eq!(to, Address::Worker(1));
    let down = send_from(&mut leaf, Address::Switch, &go1, &[]);
    assert_eq!(
        (down[0].0, down[0].1.packet_type),
        (Address::Worker(1), PacketType::BlockGo)
    );

    // Worker 1's three vertices feed vertex 0 (worker 0, the other rack): the leaf acks each
    // and sends one partial of three contributions up once the third is in.
    let mut partial = None;
    for (v, x) in [(1u32, 1i32), (2, 10), (3, 100)] {
        let out = send_from(
            &mut leaf,
            Address::Worker(1),
            &data(1, v, &[x, x, x, x]),
            &[x, x, x, x],
        );
        for (to, r, lanes) in out {
            if r.flags.ack {
                assert_eq!(to, Address::Worker(1));
            } else {
                assert_eq!(to, Address::Switch);
                partial = Some((r, lanes));
            }
        }
    }
    let (p, lanes) = partial.expect("a partial sum up");
    assert!(p.flags.partial && p.packet_type == PacketType::Data);
    assert_eq!((p.worker, p.dst, p.count), (1, 0, 3));
    assert_eq!(lanes, vec![111; 4]);

    // The spine finishes vertex 0's sum (rack 1 is its only contributor) and sends it down
    // towards rack 0's leaf, counting the partial's contributions.
    let out = send_from(&mut spine, Address::Worker(1), &p, &lanes);
    assert_eq!(out.len(), 1, "no ack for a partial");
    let (to, r, sums) = &out[0];
    assert_eq!(*to, Address::Worker(0));
    assert_eq!(
        (r.packet_type, r.worker, r.count),
        (PacketType::Result, 0, 3)
    );
    assert_eq!(*sums, vec![111; 4]);
    // A repeat is dropped; a partial claiming another rack's port, a worker's own data at the
    // spine, and a partial from a worker at a leaf are not admitted.
    assert!(send_from(&mut spine, Address::Worker(1), &p, &lanes).is_empty());
    assert_eq!(spine.counters().dropped(DropReason::Duplicate), 1);
    assert!(send_from(&mut spine, Address::Worker(0), &p, &lanes).is_empty());
    assert!(send_from(
        &mut spine,
        Address::Worker(1),
        &data(1, 1, &[1; 4]),
        &[1; 4]
    )
    .is_empty());
    assert_eq!(spine.counters().dropped(DropReason::NotAdmitted), 2);
    assert!(send_from(&mut leaf, Address::Worker(1), &p, &lanes).is_empty());
    // Nor does a leaf take another rack's worker on its ports, or a star any partial.
    assert!(send_from(&mut leaf, Address::Worker(0), &data(0, 0, &[1; 4]), &[1; 4]).is_empty());
    assert_eq!(leaf.counters().dropped(DropReason::NotAdmitted), 2);
    let (mut star, _) = star_switch(Mode::Blocks, 16);
    join_all(&mut star);
    assert!(send(&mut star, 1, &p, &lanes).is_empty());
    assert_eq!(star.counters().dropped(DropReason::NotAdmitted), 1);
}

#[test]
fn a_leaf_passes_on_what_another_rack_needs() {
    let mut leaf = tier_switch(Some(1));
    let mut spine = tier_switch(None);
    send_from(
        &mut spine,
        Address::Worker(0),
        &packet(PacketType::Join, 0, |_| {}),
        &[],
    );
    let go = send_from(
        &mut spine,
        Address::Worker(1),
        &packet(PacketType::Join, 1, |_| {}),
        &[],
    );
    let go1 = go.iter().find(|(_, r, _)| r.worker == 1).unwrap().1;
    send_from(&mut leaf, Address::Switch, &go1, &[]);
    // Worker 0 (rack 0) fetches vertex 1's feature from worker 1: up through the spine, down
    // to worker 1; the reply (a resend) goes back up, and releases what the leaf held for
    // vertex 0.
    let fetch = packet(PacketType::Fetch, 0, |r| {
        r.src = 1;
        r.dst = 0;
    });
    let out = send_from(&mut spine, Address::Worker(0), &fetch, &[]);
    assert_eq!(out[0].0, Address::Worker(1));
    let out = send_from(&mut leaf, Address::Switch, &fetch, &[]);
    assert_eq!(out[0].0, Address::Worker(1));
    send_from(&mut leaf, Address::Worker(1), &data(1, 1, &[5; 4]), &[5; 4]);
    let reply = packet(PacketType::Raw, 1, |r| {
        r.src = 1;
        r.dst = 0;
        r.flags.resend = true;
        r.lanes = 4;
    });
    let out = send_from(&mut leaf, Address::Worker(1), &reply, &[5; 4]);
    assert_eq!((out.len(), out[0].0), (1, Address::Switch));
    assert_eq!(leaf.counters().releases, 1);
    assert_eq!(leaf.aggregators_in_use(), 0);
    let out = send_from(&mut spine, Address::Worker(1), &reply, &[5; 4]);
    assert_eq!((out.len(), out[0].0), (1, Address::Worker(0)));
}

#[test]
fn a_leaf_that_missed_every_go_follows_the_exchange() {
    let mut leaf = tier_switch(Some(1));
    let mut spine = tier_switch(None);
    // Worker 1's join passes the leaf; the spine's go to it is lost; a result of block 0
    // comes down instead (the worker starts on it): the leaf is in block 0 all the same and
    // takes the worker's data.
    let join = packet(PacketType::Join, 1, |_| {});
    send_from(&mut leaf, Address::Worker(1), &join, &[]);
    send_from(
        &mut spine,
        Address::Worker(0),
        &packet(PacketType::Join, 0, |_| {}),
        &[],
    );
    send_from(&mut spine, Address::Worker(1), &join, &[]);
    let result = packet(PacketType::Result, 1, |r| {
        r.src = 1;
        r.dst = 1;
        r.count = 1;
        r.lanes = 4;
    });
    let out = send_from(&mut leaf, Address::Switch, &result, &[7; 4]);
    assert_eq!(out.len(), 1);
    let out = send_from(&mut leaf, Address::Worker(1), &data(1, 2, &[1; 4]), &[1; 4]);
    assert_eq!(out.len(), 1, "{:?}", leaf.counters().drops());
    assert!(out[0].1.flags.ack);
    assert_eq!(leaf.counters().total_drops(), 0);
}
