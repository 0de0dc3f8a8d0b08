//! What a plan needs of a Tofino 1 running `p4/switchgnn.p4`, against what the chip has.
//!
//! The chip's figures are public ones, each with its source in [`SOURCES`]; where no public
//! figure exists (recirculation bandwidth, table-update rate, the load an exact-match table
//! reaches) the figure is an [`Assumptions`] field the user can change, and the report says it
//! is an assumption. The program's own layout (which stage holds what) is [`STAGES`], written
//! from the `.p4` files; nothing here has been checked by the Tofino compiler, which these
//! machines cannot run.

use serde::Serialize;
use switchgnn_chip::PASS_HEADER;
use switchgnn_dataplane::switch::readout_passes;
use switchgnn_dataplane::wire::{FRAME_OVERHEAD, HEADER_LEN, MAX_LANES};
use switchgnn_partition::traffic::aggregators_per_vertex;
use switchgnn_partition::Plan;

use crate::program::{self, Table};

/// One figure of the chip with where it comes from (the chip model's type).
pub use switchgnn_chip::Source;

/// Where each figure of the chip comes from.
pub const SOURCES: &[Source] = &[
    Source {
        figure: "MAU stages per pipe, pipes",
        value: "12, 4",
        source: "p4lang/p4c backends/tofino device.h (TofinoDevice: getNumStages 12, getNumPipes 4)",
    },
    Source {
        figure: "SRAM per stage",
        value: "80 blocks of 1024 x 128 bit (1.25 MiB)",
        source: "p4lang/p4c backends/tofino mau/tofino/memories.h (SRAM_ROWS 8, SRAM_COLUMNS 10, SRAM_DEPTH 1024), table_format.h (128-bit words)",
    },
    Source {
        figure: "stateful ALUs per stage",
        value: "4",
        source: "p4lang/p4c backends/tofino (METER_ALUS = 4)",
    },
    Source {
        figure: "largest stateful register per stage",
        value: "16384 x 64 bit",
        source: "p4lang/p4app-switchML dev_root/p4/configuration.p4",
    },
    Source {
        figure: "register access per pass",
        value: "one 32-bit word or a 64-bit pair, one output word",
        source: "p4lang/p4c backends/tofino mau/stateful_alu.cpp (Tofino 1 MaxSize 32, MaxDualSize 64, OutputWords 1)",
    },
    Source {
        figure: "PHV",
        value: "224 containers, 4096 bit",
        source: "p4lang/p4c backends/tofino phv/phv_spec.cpp (TofinoPhvSpec)",
    },
    Source {
        figure: "port rate, pipeline clock",
        value: "100 Gb/s, 1.22 GHz (one packet per clock per pipe)",
        source: "p4lang/p4c backends/tofino parde/parde_spec.h; p4lang/open-p4studio issue 64",
    },
    Source {
        figure: "recirculation ports",
        value: "dev port 68 of pipe 0, 196, 324 and 452 of pipes 1-3",
        source: "p4lang/p4app-switchML parsers.p4 and issue 33; Tofino 1 port numbering (pipe << 7)",
    },
    Source {
        figure: "multicast groups, mirror sessions",
        value: "65536, 1024",
        source: "tna.p4 MulticastGroupId_t (16 bit), MirrorId_t (10 bit)",
    },
];

/// The program's ingress stages as p4c placed the exchange-only build for Tofino 2 (stop 64,
/// `switchgnn p4 compile --target tofino2 --no-allreduce`; stages without a register or a
/// named table hold the checks' and the aggregation's conditions and small actions). The first
/// pass's checks and a later pass's aggregation are two branches that share the stages.
pub const STAGES: &[(&str, &str, &str)] = &[
    ("0", "admission, job_config", "-"),
    (
        "1",
        "exchange_config, recirculation_path, vertex_aggregators",
        "-",
    ),
    (
        "2",
        "phase_word, previous_tag_word",
        "exchange_epoch, previous_tag, phase",
    ),
    (
        "3",
        "running_tag_word",
        "exchange_tag, previous_epoch, state (aggregator {phase, count})",
    ),
    ("5", "source_row, destination_slot", "-"),
    (
        "7-10",
        "partial_aggregator (8)",
        "sequence, arrived, reports, seen",
    ),
    (
        "11-19",
        "lanes_31 .. lanes_0",
        "pair_31 .. pair_0 (lanes i and i + 32), up to four per stage",
    ),
];

/// The chip, as [`SOURCES`] give it.
pub const STAGES_PER_PIPE: u64 = 12;
/// Stateful ALUs per stage.
pub const SALUS_PER_STAGE: u64 = 4;
/// SRAM blocks per stage.
pub const SRAM_BLOCKS_PER_STAGE: u64 = 80;
/// Words per SRAM block.
pub const SRAM_WORDS_PER_BLOCK: u64 = 1024;
/// Bits per SRAM word.
pub const SRAM_WORD_BITS: u64 = 128;
/// Multicast group ids the traffic manager has.
pub const MULTICAST_GROUPS: u64 = 65536;
/// Mirror sessions the chip has.
pub const MIRROR_SESSIONS: u64 = 1024;
/// Stateful ALUs the program uses: 32 lane pairs, state, seen, eight barrier registers (the
/// running exchange's epoch, tag, phase, the previous exchange's epoch and tag, sequence,
/// arrivals, reports) and the all-reduce's three (banks, their seen words, their counts).
pub const PROGRAM_SALUS: u64 = 32 + 2 + 8 + 3;
/// Stateful ALUs of the egress pipeline: the per-port numbers of sums and raw copies.
pub const EGRESS_SALUS: u64 = 1;
/// SRAM blocks the registers of stages 1-2 take: seven small per-job registers (one block each:
/// the running exchange's epoch, tag and phase, the previous exchange's epoch and tag, the
/// barrier's sequence and reports; the compiler gives each its own), the arrival words (64 jobs
/// x 256 workers x 32 bit: 4 blocks), the seen words (8 blocks), and the all-reduce's banks
/// (1024 x 64 bit: 1 block) and their seen words (8192 x 64 bit: 4 blocks); its counts go in
/// stage 3, beside the aggregator state.
const REGISTER_BLOCKS_STAGES_1_2: u64 = 7 + 4 + 8 + 1 + 4;

/// SRAM blocks a register of `words` words of `bits` bits takes.
fn register_blocks(words: u64, bits: u64) -> u64 {
    (words * bits).div_ceil(SRAM_WORD_BITS * SRAM_WORDS_PER_BLOCK)
}

/// What the resource model says of the program itself, whatever the plan: the figures
/// `switchgnn p4 compile` prints beside the compiler's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProgramModel {
    /// Ingress stages the model's layout ([`STAGES`]) takes: a Tofino 1's.
    pub ingress_stages: u64,
    /// Ingress stateful ALUs: one per register.
    pub ingress_salus: u64,
    /// Egress stateful ALUs.
    pub egress_salus: u64,
    /// SRAM blocks the registers' words take, ingress and egress (the spare bank a stage of
    /// registers takes besides is not counted).
    pub register_sram_blocks: u64,
}

impl ProgramModel {
    /// The program with the all-reduce region (`allreduce`) or without
    /// (`-DSWITCHGNN_NO_ALLREDUCE`).
    pub fn of(allreduce: bool) -> ProgramModel {
        let allreduce_salus = 3;
        let small = 7 * register_blocks(program::MAX_JOBS, 32);
        let exchange = 32 * register_blocks(program::AGGREGATORS, 64)
            + register_blocks(program::AGGREGATORS, 64)
            + register_blocks(program::SEEN_WORDS, 32)
            + small
            + register_blocks(program::MAX_JOBS * program::MAX_WORKERS, 32);
        let region = 2 * register_blocks(program::REDUCE_BANKS, 64)
            + register_blocks(program::REDUCE_SEEN_WORDS, 64);
        let egress = register_blocks(512, 32);
        ProgramModel {
            ingress_stages: STAGES_PER_PIPE,
            ingress_salus: if allreduce {
                PROGRAM_SALUS
            } else {
                PROGRAM_SALUS - allreduce_salus
            },
            egress_salus: EGRESS_SALUS,
            register_sram_blocks: exchange + if allreduce { region } else { 0 } + egress,
        }
    }
}

/// Figures with no public source: the report names them as assumptions.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Assumptions {
    /// Usable share of an exact-match table's words (cuckoo hashing never fills them all).
    pub load_factor: f64,
    /// Table entries the control plane installs per second.
    pub entry_rate: f64,
    /// Host link rate, Gb/s.
    pub link_gbps: f64,
    /// Bandwidth of one pipe's internal recirculation port, Gb/s.
    pub recirc_gbps: f64,
    /// Pipes the program spreads aggregators and their passes over, each through its own
    /// recirculation port.
    pub pipes: u8,
    /// Slots of the job's all-reduce region (`p4 entries --allreduce-slots`): its 2·slots
    /// banks take aggregators of the home pipe and words of the bank registers.
    pub allreduce_slots: u16,
    /// Front-panel ports looped back in each pipe (at the link rate): recirculation paths
    /// besides the internal port (`p4 entries --loopback-ports`).
    pub looped_per_pipe: u32,
}

impl Assumptions {
    /// Recirculation bandwidth the passes share, bytes/s: per pipe, what its paths carry as
    /// the program spreads passes over them ([`path_gbps`]).
    pub fn recirc_bytes_per_s(&self) -> f64 {
        path_gbps(self.looped_per_pipe, self.recirc_gbps, self.link_gbps)
            * f64::from(self.pipes)
            * 1e9
            / 8.0
    }

    /// Recirculation paths per pipe.
    pub fn paths(&self) -> u64 {
        1 + u64::from(self.looped_per_pipe)
    }
}

/// Gb/s one pipe's recirculation paths carry when the program spreads its passes over them by
/// hash slot (`entries::slot_paths`: the `PATH_SLOTS` slots in turn over the internal port, at
/// `internal_gbps`, and `looped` front-panel ports at `looped_gbps`): the slots are equal
/// shares of the passes, so the path with the most slots for its rate fills first.
pub fn path_gbps(looped: u32, internal_gbps: f64, looped_gbps: f64) -> f64 {
    let paths = looped + 1;
    let slots = |path: u32| {
        (0..program::PATH_SLOTS)
            .filter(|&s| switchgnn_chip::paths::slot_path(s, paths) == path)
            .count()
    };
    let fill = (0..paths)
        .map(|p| {
            let rate = if p == 0 { internal_gbps } else { looped_gbps };
            slots(p) as f64 / program::PATH_SLOTS as f64 / rate
        })
        .fold(0.0, f64::max);
    1.0 / fill
}

impl Default for Assumptions {
    fn default() -> Self {
        Assumptions {
            load_factor: 0.8,
            entry_rate: 100_000.0,
            link_gbps: 100.0,
            recirc_gbps: 100.0,
            pipes: program::MAX_PIPES,
            allreduce_slots: 128,
            looped_per_pipe: 0,
        }
    }
}

/// 128-bit words one entry of `table` takes (key and action data side by side).
pub fn words_per_entry(table: &Table) -> u64 {
    u64::from(table.entry_bits()).div_ceil(SRAM_WORD_BITS)
}

/// SRAM words of stages 1-2 the per-block tables take at their declared sizes, and the words
/// those stages offer once their registers are placed and the assumed load factor applied.
pub fn block_table_words(a: &Assumptions) -> (u64, u64) {
    let need = [
        &program::VERTEX_AGGREGATORS,
        &program::SOURCE_ROW,
        &program::DESTINATION_SLOT,
    ]
    .iter()
    .map(|t| t.size * words_per_entry(t))
    .sum();
    let blocks = 2 * SRAM_BLOCKS_PER_STAGE - REGISTER_BLOCKS_STAGES_1_2;
    let have = ((blocks * SRAM_WORDS_PER_BLOCK) as f64 * a.load_factor) as u64;
    (need, have)
}

/// The `prepare --table-entries` limit under which every block's tables fit half of the
/// program's per-block tables (the other half loads the next block): a block of `E` edges and
/// `V` vertices needs `2E` pass entries and `V` rows, and `2E + V ≤ PASS_SIZE / 2` keeps both
/// (`V ≤ 2E`) within their halves.
pub fn double_buffered_limit() -> u64 {
    (program::PASS_SIZE / 2).min(program::ROW_SIZE)
}

/// Bytes on the wire of one switchgnn packet with `lanes` lanes, plus the pass header on
/// recirculating copies.
fn frame_bytes(lanes: u64, recirculating: bool) -> u64 {
    let pass = if recirculating { PASS_HEADER } else { 0 };
    FRAME_OVERHEAD + HEADER_LEN as u64 + 4 * lanes + pass
}

/// Multicast groups of a job's passes on `pipes` pipes: the next pass with the readout copy in
/// every pipe, and the home pipe's fan-out to each set of other pipes, four ways each.
pub fn pass_group_count(pipes: u8) -> u64 {
    u64::from(pipes) + 4 * ((1u64 << (pipes.max(1) - 1)) - 1)
}

/// One block set's needs.
#[derive(Debug, Clone, Serialize)]
pub struct SetNeeds {
    /// Feature width of the set's layers.
    pub width: usize,
    /// Aggregators (chunks) per vertex.
    pub chunks: u64,
    /// Blocks in the set.
    pub blocks: usize,
    /// Aggregators of the largest block.
    pub peak_aggregators: u64,
    /// Pass entries ((vertex, aggregator) pairs, and at most one fan-out entry per vertex when
    /// the program spreads over several pipes) and vertices (rows), summed over blocks and at
    /// the largest block.
    pub pairs_total: u64,
    /// Pass entries of the largest block.
    pub pairs_peak: u64,
    /// Row entries over every block.
    pub vertices_total: u64,
    /// Row entries of the largest block.
    pub vertices_peak: u64,
    /// Recirculated packets and bytes of one exchange (a source's passes after its first, and
    /// the readouts of every destination's sums), and their time at the recirculation rate.
    pub recirc_packets: u64,
    /// Bytes recirculated over every block.
    pub recirc_bytes: u64,
    /// Time those bytes take on the recirculation bandwidth.
    pub recirc_s: f64,
    /// Line-rate time of one exchange's uploads (the busiest worker's bytes over its link).
    pub host_s: f64,
    /// Time to load every block's tables once, at the assumed entry rate.
    pub reload_s: f64,
}

/// Everything `switchgnn p4 resources` reports for one plan.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The dataset the plan is of.
    pub dataset: String,
    /// Workers of the plan.
    pub workers: u32,
    /// The plan's aggregator memory (bytes).
    pub switch_memory: u64,
    /// The table entries the plan was cut for, if any.
    pub table_entries: Option<u64>,
    /// Vertices with a remote neighbour.
    pub boundary_vertices: u64,
    /// What each block-table set needs.
    pub sets: Vec<SetNeeds>,
    /// Every resource checked.
    pub checks: Vec<Check>,
    /// Fits without reloading tables between blocks.
    pub fits_resident: bool,
    /// Fits when the control plane reloads the block tables between blocks.
    pub fits_with_reloads: bool,
    /// What to pass `prepare` to make the plan fit (empty when it fits resident).
    pub advice: Vec<String>,
    /// What the figures assume.
    pub assumptions: Assumptions,
}

/// A need against a limit.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What is checked.
    pub resource: String,
    /// What the plan needs of it.
    pub need: u64,
    /// What the program or chip has.
    pub have: u64,
    /// Whether the need fits.
    pub fits: bool,
    /// Where the figures come from.
    pub note: String,
}

fn check(resource: &str, need: u64, have: u64, note: &str) -> Check {
    Check {
        resource: resource.into(),
        need,
        have,
        fits: need <= have,
        note: note.into(),
    }
}

impl Report {
    /// The report of `plan` on the program under `a`.
    pub fn of(plan: &Plan, a: &Assumptions) -> Report {
        let spec = &plan.manifest.spec;
        let workers = spec.workers;
        let parts = plan.assignment.parts();
        let sets: Vec<SetNeeds> = plan
            .block_sets
            .iter()
            .map(|set| SetNeeds::of(set, parts, workers, a))
            .collect();
        let boundary = plan.manifest.boundary.boundary_vertices;
        let peaks = Peaks::of(&sets, a);
        let checks = peaks.checks(a, workers);
        let fits = |c: &Check| c.fits || c.resource.contains("entries");
        let fixed_ok = checks.iter().all(fits);
        let fits_resident = fixed_ok
            && peaks.pairs_total <= program::PASS_SIZE
            && peaks.vertices_total <= program::ROW_SIZE;
        let fits_with_reloads = fixed_ok
            && peaks.pairs_peak <= program::PASS_SIZE / 2
            && peaks.vertices_peak <= program::ROW_SIZE / 2;
        let mut advice = Vec::new();
        if peaks.aggregators > peaks.aggregator_room {
            advice.push(program::switch_memory_for(peaks.aggregator_room));
        }
        if !fits_resident && !fits_with_reloads {
            advice.push(format!("--table-entries {}", double_buffered_limit()));
        }
        Report {
            dataset: plan.manifest.dataset.name.clone(),
            workers,
            switch_memory: spec.switch_memory,
            table_entries: spec.table_entries,
            boundary_vertices: boundary,
            sets,
            checks,
            fits_resident,
            fits_with_reloads,
            advice,
            assumptions: *a,
        }
    }
}

impl SetNeeds {
    /// What one block-table set needs: its largest block's aggregators and entries, all its
    /// blocks' entries, and its recirculation, host and reload times under `a`.
    fn of(
        set: &switchgnn_partition::Blocks,
        parts: &[u32],
        workers: u32,
        a: &Assumptions,
    ) -> SetNeeds {
        let line = a.link_gbps * 1e9 / 8.0;
        let recirc = a.recirc_bytes_per_s();
        let width = set.params.width;
        let c = aggregators_per_vertex(width);
        let lanes = |chunk: u64| (width as u64 - chunk * MAX_LANES as u64).min(MAX_LANES as u64);
        let per_vertex_up: u64 = (0..c).map(|k| frame_bytes(lanes(k), false)).sum();
        let per_vertex_recirc: u64 = (0..c).map(|k| frame_bytes(lanes(k), true)).sum();
        let reads = |k: u64| readout_passes(lanes(k) as usize, false);
        let readouts_per_vertex: u64 = (0..c).map(reads).sum();
        let readout_bytes_per_vertex: u64 =
            (0..c).map(|k| reads(k) * frame_bytes(lanes(k), true)).sum();
        let mut needs = SetNeeds {
            width,
            chunks: c,
            blocks: set.blocks.len(),
            peak_aggregators: 0,
            pairs_total: 0,
            pairs_peak: 0,
            vertices_total: 0,
            vertices_peak: 0,
            recirc_packets: 0,
            recirc_bytes: 0,
            recirc_s: 0.0,
            host_s: 0.0,
            reload_s: 0.0,
        };
        for block in &set.blocks {
            let vertices = block.vertices();
            let v = vertices.len() as u64;
            let pairs = 2 * block.edges.len() as u64;
            needs.peak_aggregators = needs.peak_aggregators.max(v * c);
            // A source with no destination in the home pipe adds a pass-0 entry there.
            let entries = pairs + if a.pipes > 1 { v } else { 0 };
            needs.pairs_total += entries;
            needs.pairs_peak = needs.pairs_peak.max(entries);
            needs.vertices_total += v;
            needs.vertices_peak = needs.vertices_peak.max(v);
            needs.recirc_packets += (pairs - v) * c + v * readouts_per_vertex;
            needs.recirc_bytes += (pairs - v) * per_vertex_recirc + v * readout_bytes_per_vertex;
            let mut sent = vec![0u64; workers as usize];
            for &x in &vertices {
                sent[parts[x as usize] as usize] += per_vertex_up;
            }
            needs.host_s += *sent.iter().max().unwrap_or(&0) as f64 / line;
        }
        needs.recirc_s = needs.recirc_bytes as f64 / recirc;
        // Every block's pass entries and its two rows per vertex, loaded once.
        needs.reload_s = (needs.pairs_total + 2 * needs.vertices_total) as f64 / a.entry_rate;
        needs
    }
}

/// The job's peaks and totals over its block-table sets, and the aggregators the program has
/// room for: what the resource checks compare.
#[derive(Debug, Clone, Copy)]
struct Peaks {
    aggregators: u64,
    seen: u64,
    pairs_total: u64,
    vertices_total: u64,
    pairs_peak: u64,
    vertices_peak: u64,
    banks: u64,
    aggregator_room: u64,
}

impl Peaks {
    fn of(sets: &[SetNeeds], a: &Assumptions) -> Peaks {
        let most = |f: fn(&SetNeeds) -> u64| sets.iter().map(f).max().unwrap_or(0);
        let sum = |f: fn(&SetNeeds) -> u64| sets.iter().map(f).sum::<u64>();
        let peak_aggs = most(|s| s.peak_aggregators);
        let peak_seen = most(|s| s.vertices_peak * s.chunks);
        let (pairs_total, vertices_total) = (sum(|s| s.pairs_total), sum(|s| s.vertices_total));
        let (pairs_peak, vertices_peak) = (most(|s| s.pairs_peak), most(|s| s.vertices_peak));
        let pipes = u64::from(a.pipes);
        let chunks_peak = most(|s| s.chunks).max(1);
        // Whole destinations per pipe, as the control plane places them; the home pipe's
        // above the all-reduce's banks.
        let banks = 2 * u64::from(a.allreduce_slots);
        let aggregator_room = (program::destinations_per_pipe(chunks_peak, 0) * pipes)
            .saturating_sub(banks.div_ceil(chunks_peak))
            * chunks_peak;
        Peaks {
            aggregators: peak_aggs,
            seen: peak_seen,
            pairs_total,
            vertices_total,
            pairs_peak,
            vertices_peak,
            banks,
            aggregator_room,
        }
    }

    /// Every resource of the chip the job uses, its need against what the program has.
    fn checks(&self, a: &Assumptions, workers: u32) -> Vec<Check> {
        let (words_need, words_have) = block_table_words(a);
        let w = u64::from(workers);
        let Peaks {
            aggregators: peak_aggs,
            seen: peak_seen,
            pairs_total,
            vertices_total,
            pairs_peak,
            vertices_peak,
            banks,
            aggregator_room,
        } = *self;
        vec![
            check(
                "ingress stages",
                STAGES_PER_PIPE,
                STAGES_PER_PIPE,
                "the layout the model assumes, independent of the plan: p4c places the \
                 program in 21 on Tofino 1, which does not compile, and 20 on Tofino 2 \
                 (stop 64; `switchgnn p4 compile` says what it needs now)",
            ),
            check(
                "stateful ALUs",
                PROGRAM_SALUS,
                STAGES_PER_PIPE * SALUS_PER_STAGE,
                "32 lane pairs, aggregator state, seen, barrier, all-reduce banks",
            ),
            check(
                "egress stateful ALUs",
                EGRESS_SALUS,
                STAGES_PER_PIPE * SALUS_PER_STAGE,
                "the per-port numbers of sums and raw copies",
            ),
            check(
                "SRAM words of stages 1-2",
                words_need,
                words_have,
                "the per-block tables at their declared sizes",
            ),
            check(
                "aggregators (largest block)",
                peak_aggs,
                aggregator_room,
                "4 MiB per pipe: 32 lane-pair registers of 16384 words, less the all-reduce's banks",
            ),
            check(
                "all-reduce bank words",
                banks,
                program::REDUCE_BANKS,
                "2 per slot of the job's region, shared by the jobs of a switch",
            ),
            check(
                "seen words (largest block)",
                peak_seen,
                program::SEEN_WORDS,
                "a phase stamp per source row and chunk",
            ),
            check(
                "pass entries, all blocks loaded",
                pairs_total,
                program::PASS_SIZE,
                "(vertex, aggregator) pairs of every block, and a fan-out entry per vertex at most",
            ),
            check(
                "row entries, all blocks loaded",
                vertices_total,
                program::ROW_SIZE,
                "vertices of every block (source_row, destination_slot)",
            ),
            check(
                "pass entries, largest block",
                pairs_peak,
                program::PASS_SIZE / 2,
                "half the table: the next block loads into the other half",
            ),
            check(
                "row entries, largest block",
                vertices_peak,
                program::ROW_SIZE / 2,
                "half the table, as above",
            ),
            check(
                "multicast groups",
                1 + a.paths() * pass_group_count(a.pipes),
                MULTICAST_GROUPS,
                "block go + the pass groups of the pipes, for each recirculation path",
            ),
            check("mirror sessions", w, MIRROR_SESSIONS, "one per worker port"),
            check(
                "worker ports",
                w,
                if w <= 64 { 64 } else { 256 },
                "100G ports, or 25G breakout lanes beyond 64",
            ),
        ]
    }
}
