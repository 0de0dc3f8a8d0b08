//! The chip of a switch as the P4 program uses it: every pass runs in the pipe that holds the
//! aggregator it adds into and takes a slot of that pipe's packet rate, and every pass but a
//! packet's first (its arrival in the job's home pipe) goes around that pipe's recirculation
//! path that the packet's hash picks — the pipe's internal port or one of its looped front-panel
//! ports, each at its own rate. The decisions (placement of the destinations over the pipes, a
//! source's chains, the hash and its path) are `switchgnn_chip::paths`, the ones `p4 entries`
//! installs.

use std::sync::Arc;

use switchgnn_chip::paths::{self, Placement};
use switchgnn_chip::{Chip, PASS_HEADER};
use switchgnn_dataplane::plan::{ExchangePlan, Mode, PlanBlock};
use switchgnn_dataplane::wire::{Packet, PacketType, Repr};

use super::Recirculation;
use crate::fabric::Picos;
use crate::series::Series;

pub use switchgnn_chip::paths::HOME_PIPE;
pub use switchgnn_chip::pipe_room;

/// Where a chip runs the passes of one exchange's packets: the pipe of every destination of
/// every block, placed as the control plane places them.
#[derive(Debug, Clone)]
pub struct PassPipes {
    plan: Arc<ExchangePlan>,
    /// Per block, the pipe of each table row (`None`: a block the switch does not aggregate).
    placement: Vec<Option<Placement>>,
    pipes: u8,
}

impl PassPipes {
    /// The placement of `plan`'s blocks on `chip`, each pipe holding `room` destinations
    /// ([`pipe_room`]; a block that does not fit is placed without it), as
    /// [`switchgnn_chip::place_block`] places them for the bound.
    pub fn new(plan: Arc<ExchangePlan>, chip: &Chip, room: u64) -> PassPipes {
        let pipes = chip.aggregator_pipes();
        let placement = plan
            .blocks
            .iter()
            .map(|b| {
                plan.mode
                    .switch_aggregates()
                    .then(|| switchgnn_chip::place_block(&b.table.expected, pipes, room))
            })
            .collect();
        PassPipes {
            plan,
            placement,
            pipes: pipes as u8,
        }
    }

    /// The table rows a data packet adds into, in row order, as the switch model finds them,
    /// and whether it is a partial sum (which goes from its checks straight to its row's pipe).
    fn targets<'a>(
        &'a self,
        block: &'a PlanBlock,
        r: &Repr,
        one: &'a mut [u32; 1],
    ) -> Option<(&'a [u32], bool)> {
        if self.plan.mode == Mode::Reduce && r.src == r.dst {
            let i = block.multicast.index(r.src)?;
            Some((block.multicast.rows_of(i), false))
        } else if self.plan.mode == Mode::Reduce {
            one[0] = block.row_of(r.dst)? as u32;
            Some((&one[..], true))
        } else {
            Some((block.table.row(block.row_of(r.src)?), false))
        }
    }

    /// Passes in each pipe (`per_pipe`, one entry per pipe) of a packet from a worker
    /// (`bytes`) that made `passes` passes in the switch model and sent `sent` (whose sums name
    /// the destinations it completed, read out in their pipes): its first pass, which checks it
    /// in the home pipe, then a partial sum's pass in its destination's pipe or a feature's
    /// chains over the pipes (with a pass of its own in the home pipe when none of its
    /// destinations is there), and its readouts. A packet the plan does not explain (or one of another switch's) makes its
    /// passes in the home pipe.
    pub(super) fn split<'a>(
        &self,
        bytes: &[u8],
        passes: u64,
        sent: impl Iterator<Item = &'a [u8]>,
        per_pipe: &mut [u64],
    ) {
        per_pipe.fill(0);
        let home = usize::from(HOME_PIPE);
        if passes == 0 {
            // Its arrival: a pass that adds nothing, through the home pipe.
            per_pipe[home] = 1;
            return;
        }
        let parsed = Packet::new_checked(bytes)
            .ok()
            .and_then(|p| Repr::parse(&p).ok());
        let found = parsed.as_ref().and_then(|r| {
            if r.packet_type != PacketType::Data || r.flags.ack {
                return None;
            }
            let b = usize::from(r.block);
            Some((r, &self.plan.blocks[b], self.placement.get(b)?.as_ref()?))
        });
        let mut one = [0];
        let targets = found.and_then(|(r, block, at)| {
            let (targets, direct) = self.targets(block, r, &mut one)?;
            Some((block, at, targets, direct))
        });
        // (its first pass, the checks, then one per target)
        let Some((block, at, targets, direct)) = targets.filter(|t| (t.2.len() as u64) < passes)
        else {
            per_pipe[home] = passes;
            return;
        };
        let pipe_of = |s: usize| at.pipe[s];
        per_pipe[home] += 1;
        for pass in paths::passes_after_checks(targets, pipe_of, HOME_PIPE, self.pipes, direct) {
            per_pipe[usize::from(pass.pipe)] += 1;
        }
        let readouts = passes - 1 - targets.len() as u64;
        if readouts == 0 {
            return;
        }
        // The sums it completed leave from their destinations' pipes, each read out there.
        let completed: Vec<u8> = sent
            .filter_map(|b| {
                let r = Repr::parse(&Packet::new_checked(b).ok()?).ok()?;
                // (a leaf's share of a sum goes up as data named by its destination; the
                // sender's acknowledgement, data with the ack flag, is no sum)
                let sum = (r.packet_type == PacketType::Result && r.lanes > 0)
                    || (r.packet_type == PacketType::Data && r.src == r.dst && !r.flags.ack);
                sum.then(|| block.row_of(r.dst)).flatten().map(pipe_of)
            })
            .collect();
        if completed.is_empty() {
            per_pipe[home] += readouts;
            return;
        }
        let n = completed.len() as u64;
        for (i, &p) in completed.iter().enumerate() {
            let i = i as u64;
            per_pipe[usize::from(p)] += readouts * (i + 1) / n - readouts * i / n;
        }
    }
}

/// One chip's servers: when each pipe it uses, and each of their recirculation paths, is next
/// free.
#[derive(Debug, Clone)]
pub(super) struct ChipServers {
    pipes: Vec<Picos>,
    paths: Vec<Vec<Picos>>,
    per_pipe: Vec<u64>,
}

/// A packet's passes on a chip: in each pipe, its passes and the frame bytes of one trip.
pub(super) struct Passes<'a> {
    /// Passes in each pipe (the home pipe's first is the packet's arrival).
    pub(super) per_pipe: &'a [u64],
    /// The recirculation path (of every pipe) its hash picks.
    pub(super) path: u32,
    /// Frame bytes of the real packets it stands for.
    pub(super) wire: u64,
    /// Real packets it stands for.
    pub(super) count: u64,
}

impl ChipServers {
    /// Idle servers for `chip`: its pipes used, each with its paths.
    pub(super) fn new(chip: &Chip) -> ChipServers {
        let pipes = chip.aggregator_pipes() as usize;
        ChipServers {
            pipes: vec![0; pipes],
            paths: vec![vec![0; chip.paths_per_pipe() as usize]; pipes],
            per_pipe: vec![0; pipes],
        }
    }

    /// A buffer for [`PassPipes::split`], one entry per pipe.
    pub(super) fn take_split(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.per_pipe)
    }

    /// Give the buffer back.
    pub(super) fn put_split(&mut self, per_pipe: Vec<u64>) {
        self.per_pipe = per_pipe;
    }

    /// When `chip` is done with a packet that arrived at `now_ps` and makes `p`'s passes: in each
    /// pipe its passes take slots of the pipe's packet rate, and its trips (every pass there but
    /// the arrival) go around the pipe's port of its path first; the pipes' chains run at once.
    /// Busy times are recorded as shares of the chip's whole capacity (so that a fully used
    /// chip is busy all the time). Also when its first pass (its arrival in the home pipe) is
    /// done: the program mirrors the sender's acknowledgement there.
    pub(super) fn run(
        &mut self,
        chip: &Chip,
        now_ps: Picos,
        p: &Passes<'_>,
        rec: &mut Recirculation,
        series: &mut Series,
    ) -> Ready {
        let mut ready = now_ps;
        let mut first = now_ps;
        let path = p.path as usize % self.paths[0].len();
        let path_rate = chip.path_bytes_per_s(path as u32);
        let pipes = self.pipes.len() as f64;
        let total_rate: f64 = (0..self.paths[0].len() as u32)
            .map(|q| chip.path_bytes_per_s(q))
            .sum::<f64>()
            * pipes;
        for (pipe, &passes) in p.per_pipe.iter().enumerate() {
            if passes == 0 {
                continue;
            }
            let trips = passes - u64::from(pipe == usize::from(HOME_PIPE));
            if trips > 0 {
                let bytes = trips * (p.wire + p.count * PASS_HEADER);
                let ps = (bytes as f64 * 1e12 / path_rate).round() as Picos;
                let free = &mut self.paths[pipe][path];
                let start = (*free).max(now_ps);
                *free = start + ps;
                let share = path_rate / total_rate;
                rec.recirculations += trips * p.count;
                rec.bytes += bytes;
                rec.busy_ns += ps as f64 / 1_000.0 * share;
                rec.max_wait_ns = rec.max_wait_ns.max((start - now_ps) as f64 / 1_000.0);
                series.recirculated(start as f64 / 1_000.0, (start + ps) as f64 / 1_000.0, share);
                ready = ready.max(start + ps);
            }
            let ps = ((passes * p.count) as f64 * 1e12 / chip.pass_rate_per_pipe).round() as Picos;
            let free = &mut self.pipes[pipe];
            let start = (*free).max(now_ps);
            if pipe == usize::from(HOME_PIPE) {
                first = start + (p.count as f64 * 1e12 / chip.pass_rate_per_pipe).round() as Picos;
            }
            *free = start + ps;
            rec.pipeline_busy_ns += ps as f64 / 1_000.0 / pipes;
            let wait = (start - now_ps) as f64 / 1_000.0;
            rec.pipeline_max_wait_ns = rec.pipeline_max_wait_ns.max(wait);
            ready = ready.max(start + ps);
        }
        Ready { first, last: ready }
    }
}

/// When a chip is done with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ready {
    /// Its first pass, in the home pipe: the sender's acknowledgement leaves then.
    pub(super) first: Picos,
    /// Its last pass: everything else it makes leaves then.
    pub(super) last: Picos,
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchgnn_dataplane::wire::Flags;
    use switchgnn_datasets::synthetic::{generate, Preset};
    use switchgnn_datasets::NoProgress;
    use switchgnn_partition::blocks::BlockMethod;
    use switchgnn_partition::{Plan, PlanSpec};

    use crate::modes::exchange_plan;
    use crate::{SimKind, SimMode};

    fn data(src: u32, block: u16) -> Vec<u8> {
        let r = Repr {
            packet_type: PacketType::Data,
            flags: Flags::default(),
            layer: 0,
            job: 1,
            src,
            dst: 0,
            block,
            count: 1,
            worker: 0,
            chunk: 0,
            lanes: 64,
            epoch: 0,
            sequence: 0,
        };
        let mut buf = vec![0u8; 2048];
        let n = r.emit_with_lanes(&[0; 64], &mut buf);
        buf.truncate(n);
        buf
    }

    #[test]
    fn every_pass_runs_in_the_pipe_of_its_destination() {
        let d = generate(&Preset::Small.spec(1.0, 3).unwrap(), &NoProgress).unwrap();
        let spec = PlanSpec::new("synthetic:small", 8, vec![64])
            .switch_memory(64 << 20)
            .block_method(BlockMethod::Vertices);
        let p = Plan::prepare(&d, &spec, &|_| {}).unwrap();
        let plan = Arc::new(
            exchange_plan(SimMode::of(SimKind::SwitchGnn), &d.graph, &p, 0, 7, None).unwrap(),
        );
        let chip = Chip::preset("tofino1-64").unwrap();
        let at = PassPipes::new(
            plan.clone(),
            &chip,
            pipe_room(1 << 26, &chip, plan.chunks()),
        );
        let mut per_pipe = vec![0; 4];
        let mut others = 0;
        for (b, block) in plan.blocks.iter().enumerate() {
            let pipe = &at.placement[b].as_ref().unwrap().pipe;
            for (row, &v) in block.table.vertices.iter().enumerate() {
                let targets = block.table.row(row);
                if targets.is_empty() {
                    continue;
                }
                // (the model's count: the pass that checks it, one per destination)
                at.split(
                    &data(v, b as u16),
                    1 + targets.len() as u64,
                    std::iter::empty(),
                    &mut per_pipe,
                );
                let mut want = [0u64; 4];
                for &s in targets {
                    want[usize::from(pipe[s as usize])] += 1;
                }
                // A pass of its own in the home pipe when none of its destinations is there,
                // after the one that checks it there.
                want[0] = want[0].max(1) + 1;
                assert_eq!(per_pipe, want, "block {b}, source {v}");
                others += want[1..].iter().sum::<u64>();
            }
        }
        assert!(others > 0, "the placement uses the other pipes");
        // What the plan does not explain runs in the home pipe; so does a packet's arrival.
        at.split(&[0u8; 8], 3, std::iter::empty(), &mut per_pipe);
        assert_eq!(per_pipe, [3, 0, 0, 0]);
        at.split(&data(0, 0), 0, std::iter::empty(), &mut per_pipe);
        assert_eq!(per_pipe, [1, 0, 0, 0]);
    }

    #[test]
    fn each_pipes_trips_go_around_its_own_port_of_the_path() {
        // Two pipes with 3 looped ports each (paths 0..4 per pipe).
        let chip = Chip::preset("tofino1-32")
            .unwrap()
            .with_loopback_ports(6, 100.0)
            .unwrap();
        let mut servers = ChipServers::new(&chip);
        assert_eq!((servers.paths.len(), servers.paths[0].len()), (2, 4));
        let mut rec = Recirculation::default();
        let mut series = Series::new(1_000);
        let p = Passes {
            per_pipe: &[2, 3],
            path: 2,
            wire: 1000,
            count: 1,
        };
        let done = servers.run(&chip, 0, &p, &mut rec, &mut series);
        let ready = done.last;
        // Its first pass, the arrival in the home pipe, takes one slot of that pipe's rate.
        let slot = (1e12 / chip.pass_rate_per_pipe).round() as Picos;
        assert_eq!(done.first, slot);
        assert!(done.first < done.last);
        // One trip in the home pipe (its first pass is the arrival), three in pipe 1, each on
        // that pipe's path 2 at a looped port's 100 Gb/s.
        let trip = ((1000 + PASS_HEADER) as f64 * 8.0 / 100.0 * 1_000.0).round() as Picos;
        assert_eq!(servers.paths[0][2], trip);
        assert_eq!(servers.paths[1][2], 3 * trip);
        for (pipe, paths) in servers.paths.iter().enumerate() {
            for (path, &free) in paths.iter().enumerate() {
                assert!(path == 2 || free == 0, "pipe {pipe} path {path}");
            }
        }
        assert_eq!(ready, 3 * trip);
        assert_eq!(rec.recirculations, 4);
        // Busy time as a share of all eight paths.
        assert!((rec.busy_ns - 4.0 * trip as f64 / 1_000.0 / 8.0).abs() < 1e-9);
    }
}
