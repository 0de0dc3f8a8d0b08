//! What one exchange puts on the switch and on each host: counted from its plan, packet by
//! packet, the way the engines and the switch model send them.

use serde::Serialize;
use switchgnn_dataplane::plan::{ExchangePlan, Mode, PlanBlock};
use switchgnn_dataplane::switch::readout_passes;
use switchgnn_dataplane::wire::HEADER_LEN;

/// Bytes a recirculating copy carries besides the packet: the pass header the P4 program adds
/// (`p4/include/headers.p4`).
pub const PASS_HEADER: u64 = 32;

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
    /// Pipeline passes: one per packet from a host, plus one per further aggregator, plus the
    /// readout of every finished sum.
    pub passes: u64,
    /// Passes after a packet's first (readouts included): trips around a recirculation path.
    pub recirculations: u64,
    /// Bytes those trips carry.
    pub recirculated_bytes: u64,
    /// int32 additions into aggregators.
    pub lane_updates: u64,
    /// The switch's work that each host's uploads cause (their passes and additions), by
    /// sender: what the leaf switch of a rack takes on for its hosts.
    pub uploads: Vec<SwitchWork>,
}

/// Switch work, of the kinds [`Load`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SwitchWork {
    pub passes: u64,
    pub recirculations: u64,
    pub recirculated_bytes: u64,
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
    fn new(workers: u16) -> Load {
        let n = usize::from(workers);
        Load {
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

    fn add_switch_work(&mut self, w: SwitchWork) {
        self.passes += w.passes;
        self.recirculations += w.recirculations;
        self.recirculated_bytes += w.recirculated_bytes;
        self.lane_updates += w.lane_updates;
    }

    /// One packet of `bytes` (frame included) from host `from` through the switch to host
    /// `to` (`None`: it ends in the switch).
    fn packet(&mut self, from: Option<u16>, to: Option<u16>, bytes: u64) {
        if let Some(f) = from {
            self.sent_bytes[usize::from(f)] += bytes;
            self.sent_packets[usize::from(f)] += 1;
            self.passes += 1;
            self.uploads[usize::from(f)].passes += 1;
        }
        if let Some(t) = to {
            self.received_bytes[usize::from(t)] += bytes;
            self.received_packets[usize::from(t)] += 1;
        }
    }

    /// The in-network exchange of `plan` (SwitchGNN blocks or the strawman): every chunk of
    /// every row goes up once and makes one pass per destination aggregator it feeds; the
    /// switch acknowledges it, and sends each destination's sum to its owner once complete.
    pub fn in_network(plan: &ExchangePlan, frame_overhead: u64) -> Load {
        Load::in_network_of(plan, &plan.blocks, frame_overhead)
    }

    fn in_network_of(plan: &ExchangePlan, blocks: &[PlanBlock], frame_overhead: u64) -> Load {
        let mut load = Load::new(plan.workers);
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
                self.packet(Some(w), None, header);
                self.packet(None, Some(w), header);
            }
        }
    }

    /// Every chunk of one feature from `owner` going up, acknowledged (header only), and added
    /// into `aggregators` aggregators, one pass each (every pass after the first a trip around
    /// a recirculation path).
    fn multicast(&mut self, plan: &ExchangePlan, header: u64, owner: u16, aggregators: u64) {
        for c in 0..plan.chunks() {
            let lanes = plan.chunk_lanes(c) as u64;
            let bytes = header + 4 * lanes;
            self.packet(Some(owner), None, bytes);
            self.packet(None, Some(owner), header);
            let extra = aggregators.saturating_sub(1);
            let work = SwitchWork {
                passes: extra,
                recirculations: extra,
                recirculated_bytes: extra * (bytes + PASS_HEADER),
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
            self.packet(None, Some(to), bytes);
        }
    }

    /// The host exchange of `plan` (one block of every cross edge): each boundary vertex goes
    /// once to every other worker that holds a neighbour of it, forwarded by the switch in one
    /// pass, and the receiver acknowledges each copy (header only).
    pub fn host(plan: &ExchangePlan, frame_overhead: u64) -> Load {
        Load::host_of(plan, &plan.blocks, frame_overhead)
    }

    fn host_of(plan: &ExchangePlan, blocks: &[PlanBlock], frame_overhead: u64) -> Load {
        let mut load = Load::new(plan.workers);
        let header = HEADER_LEN as u64 + frame_overhead;
        let mut targets: Vec<u16> = Vec::new();
        for block in blocks {
            let t = &block.table;
            for row in 0..t.len() {
                let owner = t.workers[row] as u16;
                targets.clear();
                targets.extend(block.sources(row).map(|s| plan.owner[s as usize]));
                targets.sort_unstable();
                targets.dedup();
                for &to in targets.iter().filter(|&&to| to != owner) {
                    for c in 0..plan.chunks() {
                        load.packet(
                            Some(owner),
                            Some(to),
                            header + 4 * plan.chunk_lanes(c) as u64,
                        );
                        load.packet(Some(to), Some(owner), header);
                    }
                }
            }
        }
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
        let mut load = Load::new(plan.workers);
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

    /// The load of `plan` as its mode sends it.
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
            Mode::Host => Load::host_of(plan, blocks, frame_overhead),
            Mode::Reduce => Load::reduce_of(plan, blocks, frame_overhead),
            Mode::Blocks | Mode::Strawman => Load::in_network_of(plan, blocks, frame_overhead),
        }
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
        // Two joins, two dones and six data chunks enter the pipeline; vertex 1 feeds two
        // aggregators, so each of its chunks makes one more pass. Each of the three sums is
        // read out in two passes for its 64-lane chunk and one for its 8-lane chunk.
        assert_eq!(l.packets(), 10);
        assert_eq!((l.passes, l.recirculations), (12 + 9, 2 + 9));
        let readouts = 3 * (2 * (c0 + PASS_HEADER) + c1 + PASS_HEADER);
        assert_eq!(l.recirculated_bytes, c0 + c1 + 2 * PASS_HEADER + readouts);
        assert_eq!(l.lane_updates, 4 * 72);
        // Worker 0 sends a join, a done and its two rows; it receives two gos (the block's and
        // the final one), an ack per chunk and the sums of its two destinations.
        assert_eq!(l.sent_bytes[0], 2 * 98 + 2 * (c0 + c1));
        assert_eq!(l.received_packets[0], 2 + 4 + 4);
        assert_eq!(l.received_bytes[1], 2 * 98 + 2 * 98 + c0 + c1);
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
        // Worker 1 sends vertex 1, which feeds two aggregators: one extra pass per chunk.
        let one = l.uploads_from(|w| w == 1);
        assert_eq!((one.passes, one.recirculations), (2 + 2 + 2, 2));
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

    #[test]
    fn the_reduce_load_sends_one_partial_sum_per_worker_and_destination() {
        // Destinations 0 and 2 hear from worker 1 (vertex 1), destination 1 from worker 0
        // (vertices 0 and 2 summed into one partial).
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
        let plan = ExchangePlan::new(Mode::Reduce, 72, 2, vec![0, 1, 0], vec![block]).unwrap();
        let l = Load::of(&plan, 66);
        // Besides a join and a done each: worker 0 sends one partial per chunk, worker 1 two.
        assert_eq!(l.sent_packets, vec![2 + 2, 2 + 4]);
        // Two gos each; an ack per partial; one sum per chunk per destination.
        assert_eq!(l.received_packets, vec![2 + 2 + 4, 2 + 4 + 2]);
        // One pass per packet; each sum's 64-lane chunk takes one readout pass for its high
        // half (the low half comes back in the completing pass), its 8-lane chunk none.
        assert_eq!((l.passes, l.recirculations), (4 + 6 + 3, 3));
        assert_eq!(l.lane_updates, 3 * 72);
    }

    #[test]
    fn the_host_load_sends_each_vertex_once_per_remote_worker() {
        let l = Load::host(&plan(Mode::Host), 66);
        // Vertices 0 and 2 go to worker 1, vertex 1 once to worker 0: two chunks each, and an
        // acknowledgement per copy.
        assert_eq!(l.sent_packets, vec![4 + 2, 2 + 4]);
        assert_eq!(l.received_packets, vec![2 + 4, 4 + 2]);
        assert_eq!((l.passes, l.recirculations, l.lane_updates), (12, 0, 0));
    }
}
