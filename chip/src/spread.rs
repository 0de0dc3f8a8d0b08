//! How an exchange's switch work falls on a chip's pipes and recirculation paths.
//!
//! [`Load`](crate::Load) pools the chip: all passes over all pipes, all recirculated bytes over
//! all paths. The program does not: a pass runs in the pipe that holds its destination's
//! aggregators, and every trip of one packet goes around the one path its hash picks in each
//! pipe ([`crate::paths`]). A source feeding hundreds of destinations puts hundreds of trips
//! on one path, so the busiest path can take several times the pooled share (Chameleon's
//! hybrid at 32 workers on a Tofino 2 with 96 ports looped: 26 µs on its busiest path against
//! 6.9 µs pooled, in the simulator). Each path and each pipe is a server of its own rate, so
//! its work alone is a lower bound on the exchange's time, as the pooled figures are.
//!
//! Readouts are counted in their destination's pipe but on no one path: which packet completes
//! a sum, and so whose path reads it out, is known only when it runs. They count against the
//! pipe's paths together.

use serde::Serialize;
use switchgnn_dataplane::plan::{ExchangePlan, Mode, PlanBlock};
use switchgnn_dataplane::switch::{
    readout_passes_at, LANES_READ_PER_PAIR_PASS, LANES_READ_PER_PASS,
};
use switchgnn_dataplane::wire::{HEADER_LEN, MAX_LANES};

use crate::paths::{self, Placement, HOME_PIPE, PASS_HEADER};
use crate::preset::Chip;

/// One exchange's switch work per pipe and per recirculation path, for one chip's shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Spread {
    /// Pipes the work was spread over ([`Chip::aggregator_pipes`]).
    pub pipes: u32,
    /// Recirculation paths of each pipe ([`Chip::paths_per_pipe`]).
    pub paths_per_pipe: u32,
    /// Bytes of the trips around each path, pipe after pipe (`pipe · paths_per_pipe + path`).
    pub path_bytes: Vec<u64>,
    /// Bytes of the readouts' trips in each pipe (on whichever of its paths the packet that
    /// completes a sum takes).
    pub readout_bytes: Vec<u64>,
    /// Passes in each pipe, readouts included.
    pub passes: Vec<u64>,
    /// int32 additions in each pipe.
    pub lane_updates: Vec<u64>,
}

/// Destinations each pipe of `chip` holds with `switch_memory` bytes of aggregators spread
/// over the pipes it uses, for features of `chunks` 64-lane chunks (an aggregator each).
pub fn pipe_room(switch_memory: u64, chip: &Chip, chunks: usize) -> u64 {
    (switch_memory / (MAX_LANES as u64 * 4) / chunks.max(1) as u64)
        .div_ceil(u64::from(chip.aggregator_pipes()))
}

/// The placement of a block's destinations over `pipes` pipes holding `room` destinations each,
/// as the simulator's chip places them: within the room if they fit, else as if the pipes were
/// unbounded (the plan was made for more memory than the room).
pub fn place_block(expected: &[u32], pipes: u32, room: u64) -> Placement {
    let n = pipes.max(1) as usize;
    paths::place(expected, &vec![room; n])
        .or_else(|| paths::place(expected, &vec![u64::MAX; n]))
        .expect("unbounded pipes hold every destination")
}

impl Spread {
    /// The work of `plan` on `chip`, its blocks' destinations placed in `switch_memory` bytes
    /// of aggregators as [`pipe_room`] shares them over the pipes (`None`: as much as the
    /// plan's blocks need), frames of `frame_overhead` bytes beyond the header. `None` for a
    /// kind the switch does not aggregate and on the ideal chip (its passes cost nothing).
    pub fn of(
        plan: &ExchangePlan,
        chip: &Chip,
        switch_memory: Option<u64>,
        frame_overhead: u64,
    ) -> Option<Spread> {
        Spread::of_blocks(plan, &plan.blocks, chip, switch_memory, frame_overhead)
    }

    /// [`Spread::of`] for `blocks` of `plan` alone.
    pub fn of_blocks(
        plan: &ExchangePlan,
        blocks: &[PlanBlock],
        chip: &Chip,
        switch_memory: Option<u64>,
        frame_overhead: u64,
    ) -> Option<Spread> {
        // (The strawman's pool may overflow into raw copies that pass once: see Load::of.)
        if chip.is_ideal() || !plan.mode.switch_aggregates() || plan.mode == Mode::Strawman {
            return None;
        }
        let room = switch_memory.map_or(u64::MAX, |m| pipe_room(m, chip, plan.chunks()));
        let pipes = chip.aggregator_pipes();
        let paths_per_pipe = chip.paths_per_pipe();
        let n = pipes as usize;
        let mut spread = Spread {
            pipes,
            paths_per_pipe,
            path_bytes: vec![0; n * paths_per_pipe as usize],
            readout_bytes: vec![0; n],
            passes: vec![0; n],
            lane_updates: vec![0; n],
        };
        let read_per_pass = if chip.reads_pairs {
            LANES_READ_PER_PAIR_PASS
        } else {
            LANES_READ_PER_PASS
        };
        let header = HEADER_LEN as u64 + frame_overhead;
        for block in blocks {
            let at = place_block(&block.table.expected, pipes, room);
            let mut sources = Sources {
                plan,
                at: &at,
                header,
                spread: &mut spread,
            };
            sources.add_block(block);
            let in_place = plan.mode == Mode::Reduce;
            let t = &block.table;
            for row in (0..t.len()).filter(|&r| t.expected[r] > 0 || in_place) {
                let pipe = usize::from(at.pipe[row]);
                for c in 0..plan.chunks() {
                    let lanes = plan.chunk_lanes(c);
                    let reads = readout_passes_at(lanes, in_place, read_per_pass);
                    spread.passes[pipe] += reads;
                    spread.readout_bytes[pipe] += reads * (header + 4 * lanes as u64 + PASS_HEADER);
                }
            }
        }
        Some(spread)
    }

    /// The same chip shape as `chip`'s (the spread was counted for it).
    pub fn fits(&self, chip: &Chip) -> bool {
        self.pipes == chip.aggregator_pipes() && self.paths_per_pipe == chip.paths_per_pipe()
    }

    /// Seconds the busiest recirculation path needs, each at its own rate, or the busiest
    /// pipe's paths together with its readouts, whichever is longer.
    pub fn busiest_path_seconds(&self, chip: &Chip) -> f64 {
        let per_pipe = self.paths_per_pipe.max(1) as usize;
        let rate = |path: usize| chip.path_bytes_per_s(path as u32);
        let path = self
            .path_bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| b as f64 / rate(i % per_pipe))
            .fold(0.0, f64::max);
        let pipe_rate: f64 = (0..per_pipe).map(rate).sum();
        let pipe = self
            .path_bytes
            .chunks(per_pipe)
            .zip(&self.readout_bytes)
            .map(|(paths, &readouts)| (paths.iter().sum::<u64>() + readouts) as f64 / pipe_rate)
            .fold(0.0, f64::max);
        path.max(pipe)
    }

    /// Seconds the busiest pipe's packet rate needs.
    pub fn busiest_pipe_passes_seconds(&self, chip: &Chip) -> f64 {
        let most = self.passes.iter().copied().max().unwrap_or(0);
        most as f64 / chip.pass_rate_per_pipe
    }

    /// Seconds the busiest pipe's stateful ALUs need.
    pub fn busiest_pipe_lanes_seconds(&self, chip: &Chip) -> f64 {
        let most = self.lane_updates.iter().copied().max().unwrap_or(0);
        most as f64 / (chip.lane_rate() / f64::from(chip.pipes))
    }
}

/// The packets of one block's sources, each counted in its pipes and on its path.
struct Sources<'a> {
    plan: &'a ExchangePlan,
    at: &'a Placement,
    header: u64,
    spread: &'a mut Spread,
}

impl Sources<'_> {
    fn add_block(&mut self, block: &PlanBlock) {
        let t = &block.table;
        if self.plan.mode == Mode::Reduce {
            // One partial sum per pair, named by its lowest source, into its destination alone.
            for row in 0..t.len() {
                let dst = t.vertices[row];
                for j in 0..t.row(row).len() {
                    let pair = t.offsets[row] as usize + j;
                    let src = block.partials.of(pair)[0];
                    self.add(src, dst, &[row as u32], true);
                }
            }
            // A hybrid block's multicast senders: each feature once, into every row it feeds.
            let m = &block.multicast;
            for i in 0..m.len() {
                self.add(m.vertices[i], m.vertices[i], m.rows_of(i), false);
            }
        } else {
            for row in 0..t.len() {
                let targets = t.row(row);
                if !targets.is_empty() {
                    self.add(t.vertices[row], t.vertices[row], targets, false);
                }
            }
        }
    }

    /// Every chunk of a packet from `src` to `dst` that adds into the destination slots
    /// `targets`: its first pass, in the home pipe, which checks it (its arrival: no trip);
    /// then its passes in each pipe, each a trip around the path its hash picks, and its
    /// additions. A partial sum (`direct`) goes from its checks straight to its destination's
    /// pipe; a feature walks its source's chains ([`paths::source_passes`]).
    fn add(&mut self, src: u32, dst: u32, targets: &[u32], direct: bool) {
        let s = &mut *self.spread;
        let path = paths::path_of(src, dst, s.paths_per_pipe) as usize;
        let passes = paths::passes_after_checks(
            targets,
            |slot| self.at.pipe[slot],
            HOME_PIPE,
            s.pipes as u8,
            direct,
        );
        for c in 0..self.plan.chunks() {
            let lanes = self.plan.chunk_lanes(c) as u64;
            let trip = self.header + 4 * lanes + PASS_HEADER;
            s.passes[usize::from(HOME_PIPE)] += 1;
            for pass in &passes {
                let pipe = usize::from(pass.pipe);
                s.passes[pipe] += 1;
                if pass.slot.is_some() {
                    s.lane_updates[pipe] += lanes;
                }
                s.path_bytes[pipe * s.paths_per_pipe as usize + path] += trip;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::tests::{plan, reduce_plan};
    use crate::{Bound, HostCost, Load, Term};

    #[test]
    fn each_pass_counts_in_its_pipe_and_each_trip_on_its_path() {
        // Tofino 1 with two pipes, one path each (no looped ports).
        let chip = Chip::preset("tofino1-32").unwrap();
        assert_eq!((chip.aggregator_pipes(), chip.paths_per_pipe()), (2, 1));
        let plan = plan(Mode::Blocks);
        let s = Spread::of(&plan, &chip, None, 66).unwrap();
        // Vertex 1 (two contributions) goes to pipe 0, vertices 0 and 2 to pipe 1. Every chunk
        // is checked on arrival in the home pipe. Vertex 1's packets add into pipe 1 only: a
        // trip of their own around the home pipe's path that fans out, then two trips around
        // pipe 1's; vertices 0 and 2 add into pipe 0 on one trip.
        let (c0, c1) = (66 + 32 + 256, 66 + 32 + 32);
        let trips = |n| n * (c0 + PASS_HEADER) + n * (c1 + PASS_HEADER);
        assert_eq!(s.path_bytes, [trips(3), trips(2)]);
        // Three readout passes per sum (32 lanes per pass: 64 + 8 lanes).
        assert_eq!(s.passes, [6 + 2 + 2 + 2 + 3, 4 + 2 * 3]);
        assert_eq!(s.lane_updates, [2 * 72, 2 * 72]);
        let readout = 2 * (c0 + PASS_HEADER) + c1 + PASS_HEADER;
        assert_eq!(s.readout_bytes, [readout, 2 * readout]);
        // The bound's recirculation term is that path's time, above the pooled one.
        let load = Load::of(&plan, 66);
        let cost = HostCost {
            delays: crate::Delays::NONE,
            link_gbps: 100.0,
            per_packet_ns: 0.0,
            frame_overhead: 66,
            framing: Default::default(),
        };
        let pooled = Bound::of(&chip, &load, &cost);
        let spread = Bound::of(
            &chip,
            &load.clone().spread_on(&plan, &chip, None, 66),
            &cost,
        );
        // Pipe 1's one path carries its trips and its two sums' readouts.
        let path = (s.path_bytes[1] + s.readout_bytes[1]) as f64 / chip.path_bytes_per_s(0);
        assert_eq!(spread.recirculation_s, path.max(pooled.recirculation_s));
        assert!(
            spread.passes_s >= pooled.passes_s && spread.lane_updates_s >= pooled.lane_updates_s
        );
        // Counted for another chip's shape, it is left out.
        let tofino2 = Chip::preset("tofino2").unwrap();
        assert_eq!(
            Bound::of(&tofino2, &load.spread_on(&plan, &chip, None, 66), &cost),
            Bound::of(&tofino2, &Load::of(&plan, 66), &cost)
        );
        assert_ne!(spread.dominant, Term::HostPackets);
    }

    #[test]
    fn a_partial_sum_trips_once_on_the_path_of_its_source_and_destination() {
        // Tofino 2 with 8 looped ports: 4 pipes of 3 paths.
        let chip = Chip::preset("tofino2")
            .unwrap()
            .with_loopback_ports(8, 100.0)
            .unwrap();
        assert_eq!((chip.aggregator_pipes(), chip.paths_per_pipe()), (4, 3));
        let reduce = reduce_plan();
        let s = Spread::of(&reduce, &chip, None, 66).unwrap();
        // One destination per pipe, each partial a trip there after its checks in the home
        // pipe (0's around the home pipe's path).
        let trip = (66 + 32 + 256 + PASS_HEADER) + (66 + 32 + 32 + PASS_HEADER);
        let mut want = vec![0; 12];
        want[paths::path_of(1, 0, 3) as usize] += trip;
        want[3 + paths::path_of(0, 1, 3) as usize] += trip;
        want[6 + paths::path_of(1, 2, 3) as usize] += trip;
        assert_eq!(s.path_bytes, want);
        // Both chunks of each partial; the home pipe also takes every chunk's checks. A Tofino 2 reads a 64-lane sum in the completing pass: no readouts.
        assert_eq!(s.passes, [6 + 2, 2, 2, 0]);
        assert!(Spread::of(&plan(Mode::HostReduce), &chip, None, 66).is_none());
        assert!(Spread::of(&reduce, &Chip::preset("ideal").unwrap(), None, 66).is_none());
    }
}
