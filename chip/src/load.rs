//! What one exchange puts on the switch and on each host: counted from its plan, packet by
//! packet, the way the engines and the switch model send them.

use serde::Serialize;
use switchgnn_dataplane::plan::{ExchangePlan, Mode, PlanBlock};
use switchgnn_dataplane::switch::{readout_passes, readout_passes_at, LANES_READ_PER_PAIR_PASS};
use switchgnn_dataplane::wire::{ACK_RANGE_LEN, HEADER_LEN};

use switchgnn_dataplane::framing::copies_per_pair;

use crate::paths::PASS_HEADER;
use crate::preset::Chip;
use crate::spread::Spread;
pub use switchgnn_dataplane::framing::HostFraming;

/// The host side of an exchange's cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostCost {
    /// Each host's link rate, Gb/s (full duplex).
    pub link_gbps: f64,
    /// Time a host's send core spends on each packet it sends, and its receive core on each it
    /// receives, ns.
    pub per_packet_ns: f64,
    /// Bytes a frame adds around a packet on the wire.
    pub frame_overhead: u64,
    /// How the host exchange frames its copies (MTU packets, coalesced acks): the baseline
    /// every in-network kind is judged against.
    pub framing: HostFraming,
    /// How long the exchange's messages take on their way ([`Delays::NONE`]: no latency
    /// counted, the bound is the resources' alone).
    pub delays: Delays,
}

/// One-way propagation delays an exchange waits on, ns: each of its steps is a message that
/// must arrive before the next can start, whatever the bandwidth.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Delays {
    /// From a host to the exchange's switch (its barrier and, in-network, its aggregators),
    /// or back: the host link's delay on a star; host link and leaf uplink on a leaf-spine
    /// fabric, whose exchange switch is a spine.
    pub to_switch_ns: f64,
    /// From a host to another, the shortest way (a host-only kind's copy between two hosts of
    /// one rack turns at their leaf): two host links.
    pub host_to_host_ns: f64,
}

impl Delays {
    /// No latency: the bound counts the resources alone.
    pub const NONE: Delays = Delays {
        to_switch_ns: 0.0,
        host_to_host_ns: 0.0,
    };

    /// A star of links with `link_ns` of one-way delay each.
    pub fn star(link_ns: f64) -> Delays {
        Delays {
            to_switch_ns: link_ns,
            host_to_host_ns: 2.0 * link_ns,
        }
    }

    /// The least time an exchange of `blocks` blocks spends on messages, seconds: the join
    /// goes up and the first go comes down; then per block its rows cross from host to host
    /// (through the switch, or summed in it), the last receiver's done goes up and the next
    /// go, or the final one, comes down. No engine sends a block before its go or reports it
    /// done before its rows are in, so these steps follow one another: on a star,
    /// `(2 + 4 · blocks)` link delays. A load of no blocks (a switch's work alone) waits on
    /// nothing: 0.
    pub fn seconds(&self, blocks: u64) -> f64 {
        if blocks == 0 {
            return 0.0;
        }
        let b = blocks as f64;
        ((2.0 + 2.0 * b) * self.to_switch_ns + b * self.host_to_host_ns) * 1e-9
    }
}

/// One exchange's work: per host, and at the switch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Load {
    /// Frame bytes each host sends.
    pub sent_bytes: Vec<u64>,
    /// Frame bytes each host receives.
    pub received_bytes: Vec<u64>,
    /// Packets each host sends.
    pub sent_packets: Vec<u64>,
    /// Packets each host receives.
    pub received_packets: Vec<u64>,
    /// Pipeline passes: one per packet from a host (which checks it), plus one per aggregator
    /// it feeds, plus the readout of every finished sum.
    pub passes: u64,
    /// Passes after a packet's first (readouts included): trips around a recirculation path.
    pub recirculations: u64,
    /// Bytes those trips carry.
    pub recirculated_bytes: u64,
    /// int32 additions into aggregators.
    pub lane_updates: u64,
    /// The readouts among the above that a chip reading both words of a pair register in one
    /// pass (Tofino 2, [`Chip::reads_pairs`]) does not make; see [`Load::switch_work_on`].
    pub pair_read_savings: SwitchWork,
    /// The switch's work that each host's uploads cause (their passes and additions), by
    /// sender: what the leaf switch of a rack takes on for its hosts.
    pub uploads: Vec<SwitchWork>,
    /// The switch's work per pipe and per recirculation path of one chip
    /// ([`Load::spread_on`]); `None` until counted, and for the kinds the switch only forwards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    /// Blocks the exchange runs one after another (each a barrier round: [`Delays::seconds`]).
    pub blocks: u64,
    /// The part of the above that may overlap the exchange's chain of messages rather than
    /// fall between them: the barrier's own messages; in the host-only kinds every ack (a
    /// receiver sends them as the rows arrive, until just before it reports the block done,
    /// so they may still be leaving it and arriving at their sender as the next go comes) and
    /// every pass (a forwarding switch is busy until the last done arrives). The latency of
    /// the chain adds to the rest only ([`crate::Bound`]). The switch's acks of in-network
    /// data leave on the packet's first pass, before the sums it feeds, so their bytes arrive
    /// before the sums' receivers report; but a host may report its own sums in before its
    /// receive core has worked through the acks behind them, so their packets are unchained.
    pub unchained: Unchained,
}

/// Packets and bytes per host, and switch passes, that may overlap the chain of messages
/// ([`Load::unchained`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Unchained {
    /// Frame bytes each host sends.
    pub sent_bytes: Vec<u64>,
    /// Frame bytes each host receives.
    pub received_bytes: Vec<u64>,
    /// Packets each host sends.
    pub sent_packets: Vec<u64>,
    /// Packets each host receives.
    pub received_packets: Vec<u64>,
    /// Pipeline passes.
    pub passes: u64,
}

/// Switch work, of the kinds [`Load`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SwitchWork {
    /// Pipeline passes, as in [`Load::passes`].
    pub passes: u64,
    /// Passes after a packet's first, as in [`Load::recirculations`].
    pub recirculations: u64,
    /// Bytes those recirculated passes carry.
    pub recirculated_bytes: u64,
    /// int32 additions into aggregators.
    pub lane_updates: u64,
}

impl std::ops::AddAssign for SwitchWork {
    fn add_assign(&mut self, w: SwitchWork) {
        self.passes += w.passes;
        self.recirculations += w.recirculations;
        self.recirculated_bytes += w.recirculated_bytes;
        self.lane_updates += w.lane_updates;
    }
}

impl Load {
    fn new(workers: u16, blocks: usize) -> Load {
        let n = usize::from(workers);
        let per_host = vec![0; n];
        Load {
            blocks: blocks as u64,
            unchained: Unchained {
                sent_bytes: per_host.clone(),
                received_bytes: per_host.clone(),
                sent_packets: per_host.clone(),
                received_packets: per_host,
                passes: 0,
            },
            sent_bytes: vec![0; n],
            received_bytes: vec![0; n],
            sent_packets: vec![0; n],
            received_packets: vec![0; n],
            uploads: vec![SwitchWork::default(); n],
            ..Load::default()
        }
    }

    /// The switch work of the uploads of the hosts `from` keeps, alone (no host side, no sums
    /// read out): a lower bound on the work of a switch that sees only those hosts' packets, as
    /// a leaf sees its rack's.
    pub fn uploads_from(&self, from: impl Fn(u16) -> bool) -> Load {
        let mut load = Load::default();
        for (w, &u) in self.uploads.iter().enumerate() {
            if from(w as u16) {
                load.add_switch_work(u);
            }
        }
        load
    }

    /// `self` with `plan`'s work counted per pipe and per path of `chip`, its blocks placed in
    /// `switch_memory` ([`Spread::of`]; `None`: as much as they need), so that its
    /// [`Bound`](crate::Bound) on that chip counts the busiest pipe and path too.
    pub fn spread_on(
        mut self,
        plan: &ExchangePlan,
        chip: &Chip,
        switch_memory: Option<u64>,
        frame_overhead: u64,
    ) -> Load {
        self.spread = Spread::of(plan, chip, switch_memory, frame_overhead);
        self
    }

    /// The switch's work on `chip`: passes (readouts included), recirculations and their bytes,
    /// and lane updates.
    pub fn switch_work_on(&self, chip: &Chip) -> SwitchWork {
        let saved = if chip.reads_pairs {
            self.pair_read_savings
        } else {
            SwitchWork::default()
        };
        SwitchWork {
            passes: self.passes - saved.passes,
            recirculations: self.recirculations - saved.recirculations,
            recirculated_bytes: self.recirculated_bytes - saved.recirculated_bytes,
            lane_updates: self.lane_updates,
        }
    }

    fn add_switch_work(&mut self, w: SwitchWork) {
        self.passes += w.passes;
        self.recirculations += w.recirculations;
        self.recirculated_bytes += w.recirculated_bytes;
        self.lane_updates += w.lane_updates;
    }

    /// `count` packets of `bytes` in all (frames included) from host `from` through the
    /// switch to host `to`, one pass each.
    fn add_packets(&mut self, from: Option<u16>, to: Option<u16>, count: u64, bytes: u64) {
        if let Some(f) = from {
            self.sent_bytes[usize::from(f)] += bytes;
            self.sent_packets[usize::from(f)] += count;
            self.passes += count;
            self.uploads[usize::from(f)].passes += count;
        }
        if let Some(t) = to {
            self.received_bytes[usize::from(t)] += bytes;
            self.received_packets[usize::from(t)] += count;
        }
    }

    /// One packet of `bytes` (frame included) from host `from` through the switch to host
    /// `to` (`None`: it ends in the switch).
    fn packet(&mut self, from: Option<u16>, to: Option<u16>, bytes: u64) {
        self.add_packets(from, to, 1, bytes);
    }

    /// As [`Load::add_packets`], for packets that may overlap the chain of messages (the
    /// barrier's, the host-only kinds' acks): counted in [`Load::unchained`] too, on both
    /// hosts and at the switch.
    fn add_unchained(&mut self, from: Option<u16>, to: Option<u16>, count: u64, bytes: u64) {
        self.add_packets(from, to, count, bytes);
        let u = &mut self.unchained;
        if let Some(f) = from {
            u.sent_bytes[usize::from(f)] += bytes;
            u.sent_packets[usize::from(f)] += count;
            u.passes += count;
        }
        if let Some(t) = to {
            u.received_bytes[usize::from(t)] += bytes;
            u.received_packets[usize::from(t)] += count;
        }
    }

    /// The in-network exchange of `plan` (SwitchGNN blocks or the strawman): every chunk of
    /// every row goes up once and makes one pass per destination aggregator it feeds; the
    /// switch acknowledges it, and sends each destination's sum to its owner once complete.
    pub fn in_network(plan: &ExchangePlan, frame_overhead: u64) -> Load {
        Load::in_network_of(plan, &plan.blocks, frame_overhead)
    }

    fn in_network_of(plan: &ExchangePlan, blocks: &[PlanBlock], frame_overhead: u64) -> Load {
        let mut load = Load::new(plan.workers, blocks.len());
        let header = HEADER_LEN as u64 + frame_overhead;
        load.barriers(plan, blocks.len(), header);
        for block in blocks {
            let t = &block.table;
            for row in 0..t.len() {
                let owner = t.workers[row] as u16;
                load.multicast(plan, header, owner, t.row(row).len() as u64);
                if t.expected[row] > 0 {
                    load.results(plan, header, owner, false);
                }
            }
        }
        load
    }

    /// The joins and the final go of an exchange of `blocks` blocks, and each block's go to
    /// every worker and done from every worker (header-only packets).
    fn barriers(&mut self, plan: &ExchangePlan, blocks: usize, header: u64) {
        let rounds = blocks + 1;
        for w in 0..plan.workers {
            for _ in 0..rounds {
                self.add_unchained(Some(w), None, 1, header);
                self.add_unchained(None, Some(w), 1, header);
            }
        }
    }

    /// Every chunk of one feature from `owner` going up, acknowledged (header only), and added
    /// into `aggregators` aggregators, one pass each after the first, which checks it (the P4
    /// program's stages hold the checks or the aggregation, not both): every aggregator pass a
    /// trip around a recirculation path.
    fn multicast(&mut self, plan: &ExchangePlan, header: u64, owner: u16, aggregators: u64) {
        for c in 0..plan.chunks() {
            let lanes = plan.chunk_lanes(c) as u64;
            let bytes = header + 4 * lanes;
            self.packet(Some(owner), None, bytes);
            self.packet(None, Some(owner), header);
            // The ack's bytes arrive before the sums it feeds leave, but the owner's receive
            // core may still be working through it when it reports its own sums in.
            self.unchained.received_packets[usize::from(owner)] += 1;
            let work = SwitchWork {
                passes: aggregators,
                recirculations: aggregators,
                recirculated_bytes: aggregators * (bytes + PASS_HEADER),
                lane_updates: aggregators * lanes,
            };
            self.add_switch_work(work);
            self.uploads[usize::from(owner)] += work;
        }
    }

    /// Every chunk of one destination's sum going down to its owner `to`, after the passes
    /// that read it out of the registers (each a trip around a recirculation path; `in_place`:
    /// completed by a pass that ends its packet, see [`readout_passes`]).
    fn results(&mut self, plan: &ExchangePlan, header: u64, to: u16, in_place: bool) {
        for c in 0..plan.chunks() {
            let lanes = plan.chunk_lanes(c);
            let bytes = header + 4 * lanes as u64;
            let reads = readout_passes(lanes, in_place);
            self.passes += reads;
            self.recirculations += reads;
            self.recirculated_bytes += reads * (bytes + PASS_HEADER);
            let saved = reads - readout_passes_at(lanes, in_place, LANES_READ_PER_PAIR_PASS);
            self.pair_read_savings += SwitchWork {
                passes: saved,
                recirculations: saved,
                recirculated_bytes: saved * (bytes + PASS_HEADER),
                lane_updates: 0,
            };
            self.packet(None, Some(to), bytes);
        }
    }

    /// The host exchange of `plan` (one block of every cross edge): each boundary vertex goes
    /// once to every other worker that holds a neighbour of it (in the host-only
    /// pre-aggregated exchange, each partial sum to its destination's owner; in the host
    /// hybrid, per ordered pair one or the other, [`copies_per_pair`]), its chunks
    /// packed with the others for that worker into packets of `framing`'s MTU, forwarded by
    /// the switch in one pass each; the receiver acknowledges once per
    /// [`HostFraming::ack_every`] packets, an ack of ranges (at least: gaps and the ends of
    /// bursts add some).
    pub fn host(plan: &ExchangePlan, frame_overhead: u64, framing: HostFraming) -> Load {
        Load::host_of(plan, &plan.blocks, frame_overhead, framing)
    }

    fn host_of(
        plan: &ExchangePlan,
        blocks: &[PlanBlock],
        frame_overhead: u64,
        framing: HostFraming,
    ) -> Load {
        let mut load = Load::new(plan.workers, blocks.len());
        let n = usize::from(plan.workers);
        let header = HEADER_LEN as u64 + frame_overhead;
        // Each block's copies are packed apart (a block's packets never carry the next's).
        for block in blocks {
            for (pair, &count) in copies_per_pair(plan, block).iter().enumerate() {
                if count == 0 {
                    continue;
                }
                let (from, to) = ((pair / n) as u16, (pair % n) as u16);
                let (packets, bytes) = framing.pack(count, plan);
                load.add_packets(Some(from), Some(to), packets, packets * header + bytes);
                let acks = framing.acks(packets);
                let ack_bytes = acks * (header + ACK_RANGE_LEN as u64);
                load.add_unchained(Some(to), Some(from), acks, ack_bytes);
            }
        }
        load.unchained.passes = load.passes;
        load
    }

    /// The pre-aggregated exchange of a reduce `plan`: per destination, each contributing
    /// worker sends one partial sum per chunk, which the switch acknowledges and adds in the
    /// packet's only pass; each destination's sum goes down to its owner once. A hybrid
    /// block's multicast senders go up once and make a pass per destination, as in
    /// [`Load::in_network`], and so do the barriers.
    pub fn reduce(plan: &ExchangePlan, frame_overhead: u64) -> Load {
        Load::reduce_of(plan, &plan.blocks, frame_overhead)
    }

    fn reduce_of(plan: &ExchangePlan, blocks: &[PlanBlock], frame_overhead: u64) -> Load {
        let mut load = Load::new(plan.workers, blocks.len());
        let header = HEADER_LEN as u64 + frame_overhead;
        load.barriers(plan, blocks.len(), header);
        for block in blocks {
            let t = &block.table;
            for row in 0..t.len() {
                for &w in t.row(row) {
                    load.multicast(plan, header, w as u16, 1);
                }
                // At best a partial sum completes it, in place (a lower bound for hybrid
                // blocks, whose multicast senders may complete it and read both halves).
                load.results(plan, header, t.workers[row] as u16, true);
            }
            let m = &block.multicast;
            for i in 0..m.len() {
                let owner = plan.owner[m.vertices[i] as usize];
                load.multicast(plan, header, owner, m.rows_of(i).len() as u64);
            }
        }
        load
    }

    /// The load of `plan` under `cost`: the host exchange framed as `cost` says, every other
    /// kind as [`Load::of`] counts it. What verdicts and the planner compare.
    pub fn for_cost(plan: &ExchangePlan, cost: &HostCost) -> Load {
        match plan.mode {
            Mode::Host | Mode::HostReduce | Mode::HostHybrid | Mode::HostTwoLevel => {
                Load::host(plan, cost.frame_overhead, cost.framing)
            }
            _ => Load::of(plan, cost.frame_overhead),
        }
    }

    /// The load of `plan` as its mode sends it (the host exchange framed by default: 1,500-byte
    /// packets, an ack per 8).
    pub fn of(plan: &ExchangePlan, frame_overhead: u64) -> Load {
        Load::of_blocks(plan, &plan.blocks, frame_overhead)
    }

    /// The load of block `block` of `plan` alone (with its go and its dones, and a join): what
    /// the switch must get through before that block's last sum can leave.
    pub fn of_block(plan: &ExchangePlan, block: usize, frame_overhead: u64) -> Load {
        Load::of_blocks(plan, &plan.blocks[block..=block], frame_overhead)
    }

    fn of_blocks(plan: &ExchangePlan, blocks: &[PlanBlock], frame_overhead: u64) -> Load {
        match plan.mode {
            Mode::Host | Mode::HostReduce | Mode::HostHybrid | Mode::HostTwoLevel => {
                Load::host_of(plan, blocks, frame_overhead, HostFraming::default())
            }
            Mode::Reduce => Load::reduce_of(plan, blocks, frame_overhead),
            Mode::Blocks => Load::in_network_of(plan, blocks, frame_overhead),
            Mode::Strawman => Load::in_network_of(plan, blocks, frame_overhead).overflowing(),
        }
    }

    /// The strawman's floor: its hosts send and receive at least what every contribution
    /// aggregated would, but a full pool forwards a contribution raw in its one pass, with no
    /// trip and no addition, and which ones overflow is decided as they arrive. So its switch
    /// work is bound by one pass per packet from a host alone (counted with every contribution
    /// aggregated, a run whose pool overflowed beat the bound by 6%).
    fn overflowing(mut self) -> Load {
        self.recirculations = 0;
        self.recirculated_bytes = 0;
        self.lane_updates = 0;
        self.pair_read_savings = SwitchWork::default();
        self.passes = self.packets();
        for (upload, &packets) in self.uploads.iter_mut().zip(&self.sent_packets) {
            *upload = SwitchWork {
                passes: packets,
                ..SwitchWork::default()
            };
        }
        self
    }

    /// Packets that entered the switch from hosts.
    pub fn packets(&self) -> u64 {
        self.sent_packets.iter().sum()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use switchgnn_dataplane::plan::{Partials, PlanBlock};
    use switchgnn_dataplane::table::BlockTable;
    use switchgnn_dataplane::wire::RECORD_HEADER_LEN;

    /// The path 0 - 1 - 2 with vertex 1 on worker 1 and the ends on worker 0: every edge
    /// crosses. Width 72: chunks of 64 and 8 lanes.
    pub(crate) fn plan(mode: Mode) -> ExchangePlan {
        let table = BlockTable {
            vertices: vec![0, 1, 2],
            workers: vec![0, 1, 0],
            expected: vec![1, 2, 1],
            offsets: vec![0, 1, 3, 4],
            slots: vec![1, 0, 2, 1],
        };
        let block = PlanBlock::new(table, &[0, 1, 2]).unwrap();
        ExchangePlan::new(mode, 72, 2, vec![0, 1, 0], vec![block]).unwrap()
    }

    #[test]
    fn the_in_network_load_counts_every_pass() {
        let l = Load::in_network(&plan(Mode::Blocks), 66);
        let (c0, c1) = (66 + 32 + 256, 66 + 32 + 32);
        // Two joins, two dones and six data chunks enter the pipeline; each chunk's first pass
        // checks it, then it makes a trip per aggregator it feeds: two for vertex 1's, one for
        // the others'. Each of the three sums is read out in two passes for its 64-lane chunk
        // and one for its 8-lane chunk.
        assert_eq!(l.packets(), 10);
        assert_eq!((l.passes, l.recirculations), (10 + 8 + 9, 8 + 9));
        let readouts = 3 * (2 * (c0 + PASS_HEADER) + c1 + PASS_HEADER);
        assert_eq!(
            l.recirculated_bytes,
            4 * (c0 + c1 + 2 * PASS_HEADER) + readouts
        );
        assert_eq!(l.lane_updates, 4 * 72);
        // Worker 0 sends a join, a done and its two rows; it receives two gos (the block's and
        // the final one), an ack per chunk and the sums of its two destinations.
        assert_eq!(l.sent_bytes[0], 2 * 98 + 2 * (c0 + c1));
        assert_eq!(l.received_packets[0], 2 + 4 + 4);
        assert_eq!(l.received_bytes[1], 2 * 98 + 2 * 98 + c0 + c1);
        // A Tofino 2 returns both words of a pair register: one readout pass per 64-lane chunk.
        let t1 = l.switch_work_on(&Chip::preset("tofino1-32").unwrap());
        assert_eq!(
            (t1.passes, t1.recirculated_bytes),
            (l.passes, l.recirculated_bytes)
        );
        let t2 = l.switch_work_on(&Chip::preset("tofino2").unwrap());
        assert_eq!(
            (t2.passes, t2.recirculations),
            (l.passes - 3, l.recirculations - 3)
        );
        assert_eq!(
            t2.recirculated_bytes,
            l.recirculated_bytes - 3 * (c0 + PASS_HEADER)
        );
        assert_eq!(t2.lane_updates, l.lane_updates);
    }

    #[test]
    fn the_uploads_of_every_host_are_the_switch_work_but_the_readouts() {
        let l = Load::in_network(&plan(Mode::Blocks), 66);
        let all = l.uploads_from(|_| true);
        let (c0, c1) = (66 + 32 + 256, 66 + 32 + 32);
        let readouts = 3 * (2 * (c0 + PASS_HEADER) + c1 + PASS_HEADER);
        assert_eq!(
            all.passes,
            l.passes - 9,
            "three sums, three readout passes each"
        );
        assert_eq!(all.recirculated_bytes, l.recirculated_bytes - readouts);
        assert_eq!(all.lane_updates, l.lane_updates);
        // Worker 1 sends vertex 1, which feeds two aggregators: two trips per chunk after the
        // pass that checks it (and a join and a done).
        let one = l.uploads_from(|w| w == 1);
        assert_eq!((one.passes, one.recirculations), (2 + 2 + 4, 4));
        assert_eq!(one.lane_updates, 2 * 72);
        assert_eq!(
            one.passes + l.uploads_from(|w| w == 0).passes,
            all.passes,
            "every upload counted once"
        );
    }

    #[test]
    fn a_block_alone_carries_its_share_and_its_own_barrier() {
        let one = plan(Mode::Blocks);
        let block = one.blocks[0].clone();
        let two = ExchangePlan::new(
            Mode::Blocks,
            72,
            2,
            vec![0, 1, 0],
            vec![block.clone(), block],
        )
        .unwrap();
        let whole = Load::of(&two, 66);
        let (a, b) = (Load::of_block(&two, 0, 66), Load::of_block(&two, 1, 66));
        assert_eq!(
            a,
            Load::of(&one, 66),
            "a block alone is a one-block exchange"
        );
        assert_eq!(a, b);
        // Alone, each block has a join and a done per worker; together the two share one join.
        let workers = 2;
        assert_eq!(a.passes + b.passes, whole.passes + workers);
        assert_eq!(a.lane_updates + b.lane_updates, whole.lane_updates);
        assert_eq!(
            a.recirculated_bytes + b.recirculated_bytes,
            whole.recirculated_bytes
        );
    }

    /// [`plan`]'s graph pre-aggregated: destinations 0 and 2 hear from worker 1 (vertex 1),
    /// destination 1 from worker 0 (vertices 0 and 2 summed into one partial, named by 0).
    pub(crate) fn reduce_plan() -> ExchangePlan {
        let table = BlockTable {
            vertices: vec![0, 1, 2],
            workers: vec![0, 1, 0],
            expected: vec![1, 1, 1],
            offsets: vec![0, 1, 2, 3],
            slots: vec![1, 0, 1],
        };
        let partials = Partials {
            starts: vec![0, 1, 3, 4],
            sources: vec![1, 0, 2, 1],
        };
        let block = PlanBlock::reduce(table, &[0, 1, 2], partials).unwrap();
        ExchangePlan::new(Mode::Reduce, 72, 2, vec![0, 1, 0], vec![block]).unwrap()
    }

    #[test]
    fn the_reduce_load_sends_one_partial_sum_per_worker_and_destination() {
        let plan = reduce_plan();
        let l = Load::of(&plan, 66);
        // Besides a join and a done each: worker 0 sends one partial per chunk, worker 1 two.
        assert_eq!(l.sent_packets, vec![2 + 2, 2 + 4]);
        // Two gos each; an ack per partial; one sum per chunk per destination.
        assert_eq!(l.received_packets, vec![2 + 2 + 4, 2 + 4 + 2]);
        // One pass per packet, and one trip per partial's chunk to its aggregator after the
        // pass that checks it; each sum's 64-lane chunk takes one readout pass for its high
        // half (the low half comes back in the completing pass), its 8-lane chunk none.
        assert_eq!((l.passes, l.recirculations), (4 + 6 + 6 + 3, 6 + 3));
        assert_eq!(l.lane_updates, 3 * 72);
    }

    #[test]
    fn chunks_pack_into_mtu_packets() {
        let f = HostFraming::default();
        // 1,500 less IP and UDP (28) and the header (32): 1,440 bytes of records a packet.
        assert_eq!(f.record_bytes(), 1_440);
        // Width 72: records of 264 (64 lanes) and 40 bytes (8 lanes), 304 a row. Four rows
        // take 1,216 bytes; the fifth's 64-lane chunk (264) does not fit the 224 left, its
        // 8-lane chunk would, but records go in order: the fifth row opens a second packet.
        let plan = plan(Mode::Host);
        assert_eq!(f.pack(4, &plan), (1, 4 * 304));
        assert_eq!(f.pack(5, &plan), (2, 5 * 304));
        assert_eq!(f.pack(0, &plan), (0, 0));
        // Jumbo frames: 8,940 bytes of records, 29 such rows in one packet.
        let jumbo = HostFraming { mtu: 9_000, ..f };
        assert_eq!(jumbo.pack(29, &plan).0, 1);
        assert_eq!(jumbo.pack(30, &plan).0, 2);
        // The smallest MTU still carries a full chunk.
        let small = HostFraming { mtu: 576, ..f };
        assert_eq!(small.pack(1, &plan), (1, 304));
        assert_eq!((f.acks(0), f.acks(1), f.acks(8), f.acks(17)), (0, 1, 1, 3));
    }

    #[test]
    fn the_framed_host_load_packs_each_pair_and_acks_every_few_packets() {
        let plan = plan(Mode::Host);
        let framed = Load::host(&plan, 66, HostFraming::default());
        // Worker 0 sends vertices 0 and 2 (72 lanes each) to worker 1 in one packet, worker 1
        // vertex 1 to worker 0 in another; each receiver acks its one packet.
        let data = |rows: u64| 66 + 32 + rows * (2 * RECORD_HEADER_LEN as u64 + 288);
        let ack = 66 + 32 + 8;
        assert_eq!(framed.sent_packets, vec![2, 2]);
        assert_eq!(framed.sent_bytes, vec![data(2) + ack, data(1) + ack]);
        assert_eq!(framed.received_bytes, vec![data(1) + ack, data(2) + ack]);
        assert_eq!((framed.passes, framed.recirculations), (4, 0));
        // Judged under a cost, the host kind is framed as the cost says and every other kind
        // is as sent.
        let small = HostFraming {
            mtu: 576,
            ack_every: 1,
        };
        let cost = HostCost {
            delays: Delays::NONE,
            link_gbps: 100.0,
            per_packet_ns: 20.0,
            frame_overhead: 66,
            framing: small,
        };
        assert_eq!(Load::for_cost(&plan, &cost), Load::host(&plan, 66, small));
        assert_ne!(Load::for_cost(&plan, &cost), framed);
        let blocks = super::tests::plan(Mode::Blocks);
        assert_eq!(Load::for_cost(&blocks, &cost), Load::of(&blocks, 66));
    }

    #[test]
    fn the_host_load_follows_its_framing() {
        let plan = plan(Mode::Host);
        // At the smallest MTU one 72-lane row (304 bytes of records) fills a packet (516
        // bytes of room): worker 0's two rows for worker 1 take two packets; an ack for each.
        let small = HostFraming {
            mtu: 576,
            ack_every: 1,
        };
        let l = Load::host(&plan, 66, small);
        assert_eq!(l.sent_packets, vec![2 + 1, 1 + 2]);
        assert_eq!(l.received_packets, vec![1 + 2, 2 + 1]);
        assert_eq!((l.passes, l.recirculations, l.lane_updates), (6, 0, 0));
        // The default framing is what `Load::of` counts.
        assert_eq!(
            Load::of(&plan, 66),
            Load::host(&plan, 66, HostFraming::default())
        );
    }
}
