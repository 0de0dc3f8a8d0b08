//! Two-level aggregation on a leaf-spine fabric: what a leaf and a spine do beyond a star's
//! switch.
//!
//! Every worker hangs off the leaf of its rack ([`Racks`]); every leaf has one link up to the
//! spine. A job's switches all run the same plan, each in its [`Tier`]:
//! - a **leaf** aggregates what its own workers send (the star's data path, with each
//!   aggregator expecting only its rack's contributions). A destination whose contributions
//!   all come from its own rack is finished there: the leaf sends the result down. Every other
//!   completed sum goes up as a **partial** — a data packet with the level flag
//!   ([`crate::wire::Flags::partial`]), the rack as `worker` and the contributions it holds as
//!   `count`. Barriers, fetches and raw features are forwarded, up or down by the rank they
//!   name; what passes through (a worker's join, the spine's gos, any later packet of the
//!   exchange) tells the leaf which block's tables to load;
//! - the **spine** runs the job's barriers (every worker joins and reports through its leaf) and
//!   finishes every other sum: it adds one partial per contributing rack, counts the
//!   contributions they carry, and sends the sum down through the destination's leaf.
//!
//! Loss recovery stays end to end, as on the star: a partial lost on an uplink leaves the
//! spine's sum unfinished, and the destination's timeout fetches raw features from their
//! owners; a resent raw feature releases the destination's aggregator at every switch it
//! passes. A leaf or spine that cannot hold a sum (a lane overflow, no free aggregator at the
//! spine) tells the destination to fetch at once. The result a destination gets counts
//! contributions in the plan's own units (vertices, or workers' partial sums in reduce mode),
//! so its receive side is the star's, unchanged.

use std::sync::Arc;

use bitvec::vec::BitVec;

use super::aggregate::{data, data_block, fetch, raw, rows};
use super::counters::DropReason;
use super::output::{notify_fetch, send_result, Pipeline};
use super::racks::{Racks, Tier};
use super::state::{check_limits, Agg, BlockState, Job, Run};
use super::{JobConfig, Switch, SwitchConfig, SwitchError};
use crate::fixed::checked_add_lanes;
use crate::framing::{copies_per_pair, HostFraming};
use crate::node::{Address, ExchangeId};
use crate::plan::{ExchangePlan, Mode};
use crate::wire::{Packet, PacketType, Repr, HEADER_LEN, MAX_LANES};

/// The switches of a two-level fabric for `job` on `racks`, each with `config`'s resources and
/// the job in its tier: the spine, and the leaf of every rack in rack order.
pub fn two_level(
    job: &JobConfig,
    racks: &Arc<Racks>,
    config: SwitchConfig,
) -> Result<(Switch, Vec<Switch>), SwitchError> {
    let mut spine = Switch::new(config);
    spine.add_job(job.clone().in_tier(Tier::Spine(racks.clone())))?;
    let leaves = (0..racks.racks())
        .map(|rack| {
            let mut leaf = Switch::new(config);
            let tier = Tier::Leaf {
                rack,
                racks: racks.clone(),
            };
            leaf.add_job(job.clone().in_tier(tier))?;
            Ok(leaf)
        })
        .collect::<Result<Vec<_>, SwitchError>>()?;
    Ok((spine, leaves))
}

/// Who contributes to each destination of a block, rack by rack: per table row, the racks
/// that contribute (a bit each) and how many contributions come from `rack`.
struct Contributions {
    racks_in: Vec<u64>,
    local: Vec<u16>,
}

fn contributions(plan: &ExchangePlan, block: usize, racks: &Racks, rack: u16) -> Contributions {
    let b = &plan.blocks[block];
    let t = &b.table;
    let mut out = Contributions {
        racks_in: vec![0; t.len()],
        local: vec![0; t.len()],
    };
    let mut add = |row: u32, worker: u16| {
        let r = racks.rack_of(worker);
        out.racks_in[row as usize] |= 1 << r;
        if r == rack {
            out.local[row as usize] += 1;
        }
    };
    match plan.mode {
        // Nothing is aggregated.
        Mode::Host | Mode::HostReduce | Mode::HostHybrid | Mode::HostTwoLevel => {}
        // Row `s` is a source vertex whose feature goes into every slot of its row.
        Mode::Blocks | Mode::Strawman => {
            for s in 0..t.len() {
                let w = t.workers[s] as u16;
                for &i in t.row(s) {
                    add(i, w);
                }
            }
        }
        // Row `i` is a destination; its slots are the workers sending partials for it, and a
        // hybrid block's multicast senders add one contribution to each of their rows.
        Mode::Reduce => {
            for i in 0..t.len() {
                for &w in t.row(i) {
                    add(i as u32, w as u16);
                }
            }
            for j in 0..b.multicast.len() {
                let w = plan.owner[b.multicast.vertices[j] as usize];
                for &i in b.multicast.rows_of(j) {
                    add(i, w);
                }
            }
        }
    }
    out
}

/// What crosses the links between the leaves and the spine (each way counted) when an exchange
/// runs with two-level aggregation and nothing is lost: the packets that carry lanes — the
/// partial sums and the results of the in-network kinds, the copies of the host exchange —
/// and their bytes with `frame_overhead` added to each. Barriers, acknowledgements and
/// fetches are left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpineTraffic {
    /// Packets, one per link crossed.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// [`SpineTraffic`] of `plan` on `racks`: what the planning side counts for a fabric (the host
/// exchange's copies packed as `framing` says).
pub fn spine_traffic(
    plan: &ExchangePlan,
    racks: &Racks,
    frame_overhead: u64,
    framing: HostFraming,
) -> SpineTraffic {
    let chunk_bytes: Vec<u64> = (0..plan.chunks())
        .map(|c| (HEADER_LEN + 4 * plan.chunk_lanes(c)) as u64 + frame_overhead)
        .collect();
    let row_bytes: u64 = chunk_bytes.iter().sum();
    let chunks = plan.chunks() as u64;
    let mut out = SpineTraffic::default();
    // The host exchange's packed copies, apart from what `cross` counts.
    let mut packed = SpineTraffic::default();
    let mut cross = |crossings: u64| {
        out.packets += crossings * chunks;
        out.bytes += crossings * row_bytes;
    };
    for (b, block) in plan.blocks.iter().enumerate() {
        let t = &block.table;
        if !plan.mode.switch_aggregates() {
            // A source's feature (or, pre-aggregated, a partial sum) goes once to every other
            // worker that needs it (BNS-GCN with p = 1), packed with the others for that
            // worker: up and down when that worker is in another rack.
            let n = usize::from(plan.workers);
            let rows = copies_per_pair(plan, block);
            let away =
                |pair: usize| racks.rack_of((pair / n) as u16) != racks.rack_of((pair % n) as u16);
            for (_, &count) in rows.iter().enumerate().filter(|&(p, &c)| c > 0 && away(p)) {
                let (packets, records) = framing.pack(count, plan);
                packed.packets += 2 * packets;
                packed.bytes += 2 * (packets * (HEADER_LEN as u64 + frame_overhead) + records);
            }
            continue;
        }
        let c = contributions(plan, b, racks, u16::MAX);
        for (i, &r) in c.racks_in.iter().enumerate() {
            if needs_spine(r, racks.rack_of(t.workers[i] as u16)) {
                // One partial up per contributing rack, the sum down.
                cross(u64::from(r.count_ones()) + 1);
            }
        }
    }
    out.packets += packed.packets;
    out.bytes += packed.bytes;
    out
}

/// Whether row `i`'s sum needs the spine: some contribution comes from another rack than the
/// destination's.
fn needs_spine(racks_in: u64, dst_rack: u16) -> bool {
    racks_in & !(1 << dst_rack) != 0
}

impl BlockState {
    /// A leaf's state of `block`: each aggregator expects its rack's contributions, and sums
    /// that the spine finishes go up.
    pub(super) fn for_leaf(plan: &ExchangePlan, block: usize, racks: &Racks, rack: u16) -> Self {
        let mut state = BlockState::new(plan, block);
        let t = &plan.blocks[block].table;
        let c = contributions(plan, block, racks, rack);
        let chunks = plan.chunks();
        for (i, &n) in c.local.iter().enumerate() {
            state.remaining[i * chunks..][..chunks].fill(n);
        }
        state.up = (0..t.len())
            .map(|i| needs_spine(c.racks_in[i], racks.rack_of(t.workers[i] as u16)))
            .collect();
        state
    }

    /// The spine's state of `block`: each sum that needs it expects one partial per
    /// contributing rack; a seen bit per (destination, rack, chunk).
    pub(super) fn for_spine(plan: &ExchangePlan, block: usize, racks: &Racks) -> Self {
        let t = &plan.blocks[block].table;
        let c = contributions(plan, block, racks, u16::MAX);
        let chunks = plan.chunks();
        let n = t.len() * chunks;
        let racks_in: Vec<u64> = (0..t.len())
            .map(|i| {
                let r = c.racks_in[i];
                if needs_spine(r, racks.rack_of(t.workers[i] as u16)) {
                    r
                } else {
                    0
                }
            })
            .collect();
        BlockState {
            seen: BitVec::repeat(false, n * usize::from(racks.racks())),
            agg: vec![Agg::Idle; n],
            counted: vec![0; n],
            remaining: racks_in
                .iter()
                .flat_map(|r| std::iter::repeat_n(r.count_ones() as u16, chunks))
                .collect(),
            up: BitVec::new(),
            racks_in,
        }
    }
}

/// A leaf's handling of one packet from `from`: its own worker's, or the spine's.
pub(super) fn leaf(
    job: &mut Job,
    f: &mut Pipeline,
    from: Address,
    repr: &Repr,
    packet: &Packet<&[u8]>,
    bytes: &[u8],
) -> Result<(), DropReason> {
    let Tier::Leaf { rack, racks } = f.tier.clone() else {
        unreachable!("a leaf's job")
    };
    if repr.worker >= job.workers || repr.flags.partial {
        return Err(DropReason::NotAdmitted);
    }
    let own = racks.rack_of(repr.worker) == rack;
    // Only the rack's workers on their own ports, and the spine, are heard.
    if let Address::Worker(port) = from {
        if !own || u32::from(port) != u32::from(job.first_port) + u32::from(repr.worker) {
            return Err(DropReason::NotAdmitted);
        }
    }
    // All-reduce slices name no exchange plan: the spine checks them.
    if !matches!(repr.packet_type, PacketType::Reduce | PacketType::Reduced) {
        check_limits(job, repr)?;
        follow(job, f, from, repr, &racks, rack);
    }
    let up = matches!(from, Address::Worker(_));
    match repr.packet_type {
        // The spine runs barriers and all-reduces.
        PacketType::Join | PacketType::BlockDone | PacketType::Reduce if up => {
            f.forward_up(&bytes[..repr.buffer_len()]);
            Ok(())
        }
        PacketType::Data if up => data(job, f, repr, packet),
        // Up or down by the rank they name: a feature (releasing our aggregator when it is a
        // resend), a fetch.
        PacketType::Raw => raw(job, f, repr, bytes),
        PacketType::Rows => rows(job, f, repr, bytes),
        PacketType::Fetch => fetch(job, f, repr, bytes),
        // The leaf numbers what it sends its workers: it answers.
        PacketType::Stamps if up && !repr.flags.ack => super::answer_stamps(f, repr),
        // Down to one of the rack's workers.
        PacketType::BlockGo | PacketType::Result | PacketType::Reduced if !up => {
            if !own {
                return Err(DropReason::NotAdmitted);
            }
            f.forward(repr.worker, &bytes[..repr.buffer_len()]);
            Ok(())
        }
        _ => Err(DropReason::WrongDirection),
    }
}

/// Where the job's exchanges stand, as far as a leaf can tell from what passes through it:
/// a worker's join (carrying the exchange's sequence number) opens the exchange at block 0 —
/// a worker joins only once every worker is through the previous one — and a go names its
/// block. Any other packet of the running exchange from a later block moves the leaf there
/// too: the spine sends nothing of block `b` before its go, and a worker starts `b` on the
/// first packet of it, so a leaf whose copies of the go were all lost still follows.
fn follow(job: &mut Job, f: &mut Pipeline, from: Address, repr: &Repr, racks: &Racks, rack: u16) {
    let (seq, block) = match (repr.packet_type, from) {
        (PacketType::Join, Address::Worker(_)) => (repr.sequence, 0),
        (PacketType::BlockGo, Address::Switch) => (repr.sequence, repr.block),
        // A report is about a block the worker is done with, not one that began; the
        // all-reduce names no exchange.
        (PacketType::BlockDone | PacketType::Join, _) => return,
        (PacketType::BlockGo | PacketType::Reduce | PacketType::Reduced, _) => return,
        _ => match &job.current {
            Some(run)
                if run.id.matches(repr) && usize::from(repr.block) < run.plan.blocks.len() =>
            {
                (run.seq, repr.block)
            }
            _ => return,
        },
    };
    advance(job, f, ExchangeId::of(repr), seq, block, racks, rack);
}

/// Load block `block` of exchange (`id`, `seq`) when it is ahead of what the leaf holds
/// (freeing what the old block still held); older ones change nothing.
fn advance(
    job: &mut Job,
    f: &mut Pipeline,
    id: ExchangeId,
    seq: u32,
    block: u16,
    racks: &Racks,
    rack: u16,
) {
    if let Some(run) = &job.current {
        let same = run.id == id && run.seq == seq;
        if (same && block <= run.block) || (!same && seq <= run.seq) {
            return;
        }
    }
    if let Some(state) = job.current.as_mut().and_then(|run| run.state.take()) {
        state.release(f);
    }
    let plan = job.layers[usize::from(id.layer)].clone();
    let workers = usize::from(job.workers);
    let b = usize::from(block);
    let state = (b < plan.blocks.len()).then(|| BlockState::for_leaf(&plan, b, racks, rack));
    job.current = Some(Run {
        id,
        seq,
        plan,
        started: true,
        block,
        joined: BitVec::repeat(true, workers),
        done: BitVec::repeat(false, workers),
        state,
    });
}

/// The spine adds a leaf's partial sum (`repr.worker` is its rack) into its destination's
/// aggregator. Nothing is acknowledged: a leaf does not resend, the destination's timeout
/// recovers a lost partial.
pub(super) fn partial(
    job: &mut Job,
    f: &mut Pipeline,
    repr: &Repr,
    packet: &Packet<&[u8]>,
) -> Result<(), DropReason> {
    let racks = match &f.tier {
        Tier::Spine(racks) => racks.racks(),
        _ => return Err(DropReason::NotAdmitted),
    };
    let (run, lanes) = data_block(job, repr)?;
    let c = usize::from(repr.chunk);
    let plan = &run.plan;
    let block = &plan.blocks[usize::from(run.block)];
    let row = block.row_of(repr.dst).ok_or(DropReason::NotInPlan)?;
    let chunks = plan.chunks();
    let state = run.state.as_mut().expect("a running block has state");
    // (Admission already holds the rack below the racks' count, so the shift is in range.)
    if repr.worker >= racks || state.racks_in[row] >> repr.worker & 1 == 0 {
        return Err(DropReason::NotInPlan);
    }
    let seen = (row * usize::from(racks) + usize::from(repr.worker)) * chunks + c;
    if state.seen.replace(seen, true) {
        return Err(DropReason::Duplicate);
    }
    let k = row * chunks + c;
    let dst = repr.dst;
    let dst_rank = block.table.workers[row] as u16;
    f.counters.passes += 1;
    state.remaining[k] -= 1;
    state.claim(k, f);
    let Agg::Active(a) = state.agg[k] else {
        // No aggregator, or one already given up: a partial cannot go to the host on its own
        // (its sources are not named), so the destination fetches every contribution raw.
        if state.agg[k] == Agg::Idle {
            state.agg[k] = Agg::Released;
            notify_fetch(f, repr, dst, dst_rank);
        }
        return Ok(());
    };
    let mut values = [0i32; MAX_LANES];
    packet.lanes_into(&mut values[..lanes]);
    let acc = &mut f.pool.lanes[a as usize * MAX_LANES..][..lanes];
    if !checked_add_lanes(acc, &values[..lanes]) {
        f.counters.overflows += 1;
        f.pool.release(a);
        state.agg[k] = Agg::Released;
        notify_fetch(f, repr, dst, dst_rank);
        return Ok(());
    }
    f.counters.lane_updates += lanes as u64;
    state.counted[k] += repr.count;
    if state.remaining[k] == 0 {
        let mut sums = [0i32; MAX_LANES];
        sums[..lanes].copy_from_slice(&f.pool.lanes[a as usize * MAX_LANES..][..lanes]);
        send_result(f, repr, dst, dst_rank, state.counted[k], &sums[..lanes]);
        f.counters.count_readout(lanes, true);
        f.pool.release(a);
        state.agg[k] = Agg::Done;
        f.counters.aggregations += 1;
    }
    Ok(())
}
