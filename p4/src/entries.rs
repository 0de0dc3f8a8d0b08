//! The control-plane state of one job: table entries, multicast groups and mirror sessions,
//! in a format-neutral form. [`Entries::build`] derives them from a job's exchange plans;
//! [`Entries::switch_tables`] reads them back into the exchange plans the software switch runs,
//! so a switch loaded from an entries file runs exactly what a Tofino loaded from it would.
//!
//! Layout the entries encode (see `p4/README.md`):
//! - a job occupies aggregators `agg_base ..` of every pipe it uses and seen words
//!   `seen_base ..` of its home pipe; each destination of a block keeps its aggregators in one
//!   pipe ([`place`]); the destinations of pipe `p`, in vertex order, take slots `0, 1, ...` of
//!   that pipe, and slot `i`'s chunk `c` aggregates in `agg_base + i·C + c`; vertex `s` of the
//!   block (in vertex order), as a sender, stamps seen word `seen_base + s·C + c`;
//! - a source's passes are one chain per pipe it feeds: pass 0 runs in the home pipe and fans
//!   out to the other pipes' chains;
//! - every table that grows with the graph is per block (pass entries, source rows, destination
//!   slots), so the control plane can reload it between blocks;
//! - layers of one feature width share one *set* of block tables;
//! - no register of the exchange needs a value at install time: the program stamps aggregator,
//!   seen and arrival words with the job's phase, so stale values from an earlier job or block
//!   read as empty; the all-reduce's bank words are cleared ([`RegisterClear`]): zero says
//!   "the stream's first pass comes next" (`include/allreduce.p4`);
//! - a job's all-reduce region is `2·slots` banks: aggregators at the top of its home pipe
//!   (above the exchange's) and words `bank_base ..` of the bank registers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::plan::{ExchangePlan, Mode, Partials, PlanBlock};
use switchgnn_dataplane::wire::MAX_LANES;
use switchgnn_partition::BlockTable;
use thiserror::Error;

use crate::ports::{pipe_mask, pipe_of, Copies, HostAddress, Install, PortMapError};
use crate::program::{self, Table};

pub const FORMAT: &str = "switchgnn-p4-entries";
/// Version 2: 64-lane aggregators spread over pipes (pass chains per pipe, pass groups).
/// Version 3: the in-switch all-reduce's region and the register words it starts from zero.
/// Version 4: recirculation paths over looped ports (`recirculation_path`, the parser's value
/// set `looped_ports`, pass groups per path, the ports to loop).
pub const FORMAT_VERSION: u32 = 4;
/// Versions this build reads: a version 2 file is a job without an all-reduce region, a
/// version 2 or 3 file one without looped ports.
pub const READS_VERSIONS: [u32; 3] = [2, 3, 4];

/// Bytes an acknowledgement's mirror copy keeps: the mirror byte, the pass header, Ethernet,
/// IPv4, UDP and the switchgnn header; the ack carries no lanes, and egress parses no further.
pub const ACK_TRUNCATE: u32 = 1
    + switchgnn_chip::PASS_HEADER as u32
    + 14
    + 20
    + 8
    + switchgnn_dataplane::wire::HEADER_LEN as u32;

#[derive(Debug, Error)]
pub enum EntriesError {
    #[error("{0}")]
    Layout(String),
    #[error("the {mode} exchange has no program on the switch: {why}")]
    Mode {
        mode: &'static str,
        why: &'static str,
    },
    #[error("{what}: the plan needs {need}, the program holds {have}{hint}")]
    TooLarge {
        what: &'static str,
        need: u64,
        have: u64,
        hint: String,
    },
    #[error("entry {index} ({table}): {message}")]
    Entry {
        index: usize,
        table: &'static str,
        message: String,
    },
    #[error("{0}")]
    Format(String),
    /// The job's port map does not fit the program or its workers.
    #[error(transparent)]
    Ports(#[from] PortMapError),
}

/// One exact-match entry: key values and action parameters in the program's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    pub table: &'static Table,
    pub keys: Vec<u64>,
    pub params: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    pub port: u16,
    pub rid: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MulticastGroup {
    pub id: u16,
    pub replicas: Vec<Replica>,
}

/// An ingress mirror session: the acknowledgement copies towards one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorSession {
    pub id: u16,
    pub port: u16,
    /// Bytes kept of the mirrored packet (the headers; the ack carries no lanes).
    pub truncate: u32,
}

/// What the entries are for, carried beside them in every format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub format: String,
    pub format_version: u32,
    pub job: u16,
    pub workers: u16,
    /// `switchgnn` or `host`.
    pub exchange: String,
    /// The job's plan checksum that workers present at start-up (the session checksum).
    pub plan_checksum: String,
    /// Which entries the file holds: `all`, `static`, or `block S:B` (see [`Part`]).
    pub part: String,
    pub created_by: String,
    /// Dev ports to put in MAC loopback (recirculation paths) before the entries are written.
    /// The bfrt script does so; P4Runtime has no port configuration, so its file lists them
    /// here for the operator (or a gNMI client: openconfig's `loopback-mode`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub looped_ports: Vec<u16>,
}

/// A subset of a job's entries, for a control plane that reloads the per-block tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Everything: the tables of every block stay loaded.
    All,
    /// What the job needs whatever block runs: configuration, addresses, ECN, admission,
    /// multicast groups and mirror sessions.
    Static,
    /// The per-block tables of block `block` of block set `set`.
    Block { set: u64, block: u64 },
}

impl Part {
    /// `all`, `static` or `S:B`.
    pub fn parse(text: &str) -> Option<Part> {
        match text {
            "all" => Some(Part::All),
            "static" => Some(Part::Static),
            _ => {
                let (set, block) = text.split_once(':')?;
                Some(Part::Block {
                    set: set.parse().ok()?,
                    block: block.parse().ok()?,
                })
            }
        }
    }

    pub fn name(self) -> String {
        match self {
            Part::All => "all".into(),
            Part::Static => "static".into(),
            Part::Block { set, block } => format!("block {set}:{block}"),
        }
    }
}

/// Where a block's destinations keep their aggregators: the pipe of each (in slot order) and
/// its slot among that pipe's destinations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub pipe: Vec<u8>,
    pub slot: Vec<u32>,
}

/// Place the destinations of a block, expecting `expected[s]` contributions each (the passes
/// that add into its aggregators), over the job's pipes: most passes first, each to the pipe
/// with the fewest passes so far that has room for `chunks` more aggregators, so that the
/// pipes' chains, which run at once, come out even.
pub fn place(expected: &[u32], chunks: u64, install: &Install) -> Result<Placement, EntriesError> {
    let pipes = usize::from(install.pipes);
    // The home pipe may hold the all-reduce's banks above the exchange's aggregators.
    let room: Vec<u64> = (0..install.pipes)
        .map(|p| install.aggregator_top(p).saturating_sub(install.agg_base) / chunks.max(1))
        .collect();
    let have = room.iter().sum::<u64>() * chunks;
    let region = match install.allreduce_region() {
        Some((_, _, banks)) => format!(
            ", or fewer --allreduce-slots: the job's all-reduce region takes {banks} aggregators \
             of its home pipe"
        ),
        None => String::new(),
    };
    fits(
        "aggregators of a block",
        expected.len() as u64 * chunks,
        have,
        &format!(
            " over {pipes} pipes (prepare the plan with {} or less{region})",
            program::switch_memory_for(have)
        ),
    )?;
    let mut by_passes: Vec<usize> = (0..expected.len()).collect();
    by_passes.sort_by_key(|&s| (std::cmp::Reverse(expected[s]), s));
    let mut load = vec![0u64; pipes];
    let mut used = vec![0u64; pipes];
    let mut pipe = vec![0u8; expected.len()];
    for s in by_passes {
        let p = (0..pipes)
            .filter(|&p| used[p] < room[p])
            .min_by_key(|&p| (load[p], p))
            .expect("the capacity check leaves room");
        pipe[s] = p as u8;
        load[p] += u64::from(expected[s]);
        used[p] += 1;
    }
    let mut next = vec![0u32; pipes];
    let slot = pipe
        .iter()
        .map(|&p| {
            next[usize::from(p)] += 1;
            next[usize::from(p)] - 1
        })
        .collect();
    Ok(Placement { pipe, slot })
}

/// A block's `seen` words fit the program's register after the job's base.
fn seen_fits(install: &Install, seen: u64) -> Result<(), EntriesError> {
    fits(
        "seen words of a block",
        install.seen_base + seen,
        program::SEEN_WORDS,
        "",
    )
}

/// The entries of one reduce block: every vertex it names as a sender (destinations, and the
/// sources of every partial sum, whose plain features a fetch may ask for) in `source_row`,
/// its destinations' aggregators in `destination_slot`, and one `partial_aggregator` entry per
/// (destination, worker) pair with the pair's seen word.
fn reduce_block(
    block: &PlanBlock,
    c: u64,
    install: &Install,
    key: impl Fn(u32) -> Vec<u64>,
    port: &impl Fn(u16) -> u64,
    put: &mut impl FnMut(&'static Table, Vec<u64>, Vec<u64>),
) -> Result<(), EntriesError> {
    let t = &block.table;
    let pairs = t.slots.len() as u64;
    let at = place(&t.expected, c, install)?;
    seen_fits(install, pairs * c)?;
    fits("partial sums of a block", pairs, program::PARTIAL_SIZE, "")?;
    let mut senders: BTreeMap<u32, u16> = BTreeMap::new();
    for (row, &v) in t.vertices.iter().enumerate() {
        senders.insert(v, t.workers[row] as u16);
        for (j, &w) in t.row(row).iter().enumerate() {
            let pair = t.offsets[row] as usize + j;
            if !block.partials.starts.is_empty() {
                for &u in block.partials.of(pair) {
                    senders.insert(u, w as u16);
                }
            }
        }
    }
    for (&x, &w) in &senders {
        put(&program::SOURCE_ROW, key(x), vec![u64::from(w), port(w), 0]);
    }
    for (row, &v) in t.vertices.iter().enumerate() {
        let owner = t.workers[row] as u16;
        let agg = install.agg_base + u64::from(at.slot[row]) * c;
        let pipe = u64::from(at.pipe[row]);
        put(
            &program::DESTINATION_SLOT,
            key(v),
            vec![agg, pipe, u64::from(owner), port(owner)],
        );
        for (j, &w) in t.row(row).iter().enumerate() {
            let pair = t.offsets[row] + j as u64;
            let mut k = key(v);
            k.push(u64::from(w));
            put(
                &program::PARTIAL_AGGREGATOR,
                k,
                vec![
                    agg,
                    pipe,
                    u64::from(owner),
                    port(owner),
                    u64::from(t.expected[row]),
                    install.seen_base + pair * c,
                ],
            );
        }
    }
    Ok(())
}

/// One `vertex_aggregators` entry of a source: its pipe and index in that pipe's chain, the
/// destination slot it adds into (`None`: the home pipe's pass 0 of a source with no
/// destination there, which only fans out), the other pipes pass 0 starts, and whether it
/// ends its chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SourcePass {
    pipe: u8,
    index: u64,
    slot: Option<usize>,
    fanout: u8,
    last: bool,
}

/// The passes of a source feeding `slots` (in row order), each destination's aggregator in
/// pipe `pipe_of(slot)`: one chain per pipe, slots in row order within it, pass 0 in the home
/// pipe naming the other pipes' chains.
fn source_passes(
    slots: &[u32],
    pipe_of: impl Fn(usize) -> u8,
    install: &Install,
) -> Vec<SourcePass> {
    let home = install.home_pipe();
    let mut chains: Vec<Vec<usize>> = vec![Vec::new(); usize::from(install.pipes)];
    for &s in slots {
        chains[usize::from(pipe_of(s as usize))].push(s as usize);
    }
    let fanout =
        pipe_mask((0..install.pipes).filter(|&p| p != home && !chains[usize::from(p)].is_empty()));
    let mut out = Vec::with_capacity(slots.len() + 1);
    if chains[usize::from(home)].is_empty() {
        out.push(SourcePass {
            pipe: home,
            index: 0,
            slot: None,
            fanout,
            last: true,
        });
    }
    for (p, chain) in chains.iter().enumerate() {
        for (i, &s) in chain.iter().enumerate() {
            out.push(SourcePass {
                pipe: p as u8,
                index: i as u64,
                slot: Some(s),
                fanout: if p == usize::from(home) && i == 0 {
                    fanout
                } else {
                    0
                },
                last: i + 1 == chain.len(),
            });
        }
    }
    out
}

/// The pass group a pass in `pipe` on recirculation path `path` sends `copies` through, its id
/// counted from `base`: the next pass and the readout copy to the pipe's port of the path, and
/// the start of each fanned-out pipe's chain to that pipe's (`locals`: the paths' local port
/// numbers, [`Install::path_locals`]).
pub fn pass_group(base: u16, locals: &[u16], path: u8, pipe: u8, copies: Copies) -> MulticastGroup {
    let local = locals[usize::from(path)];
    let copy = |pipe: u8, rid: u16| Replica {
        port: u16::from(pipe) << 7 | local,
        rid,
    };
    let mut replicas = Vec::new();
    if copies.continues {
        replicas.push(copy(pipe, program::RID_CONTINUE));
    }
    if copies.emits {
        replicas.push(copy(pipe, program::RID_EMIT));
    }
    for q in (0..program::MAX_PIPES).filter(|q| copies.fanout & (1 << q) != 0) {
        replicas.push(copy(q, program::RID_PIPE + u16::from(q)));
    }
    MulticastGroup {
        id: copies.group_id(base, pipe) + u16::from(path) * program::PASS_GROUPS_PER_PATH,
        replicas,
    }
}

/// The job's pass groups, for every recirculation path: in every pipe, the next pass and the
/// readout copy together; in the home pipe, pass 0's fan-out to each set of other pipes, with
/// or without those two copies.
fn pass_groups(install: &Install) -> Vec<MulticastGroup> {
    let home = install.home_pipe();
    let locals = install.path_locals();
    let both = Copies {
        fanout: 0,
        emits: true,
        continues: true,
    };
    let others = pipe_mask((0..install.pipes).filter(|&p| p != home));
    let mut groups = Vec::new();
    for path in 0..locals.len() as u8 {
        let group = |pipe: u8, copies: Copies| {
            pass_group(install.pass_groups(), &locals, path, pipe, copies)
        };
        groups.extend((0..install.pipes).map(|p| group(p, both)));
        for fanout in (1..=others).filter(|f| f & !others == 0) {
            for (emits, continues) in [(false, false), (false, true), (true, false), (true, true)] {
                groups.push(group(
                    home,
                    Copies {
                        fanout,
                        emits,
                        continues,
                    },
                ));
            }
        }
    }
    groups
}

/// The recirculation path of each hash slot: the slots spread evenly over the paths, in turn
/// (path, local port number).
pub fn slot_paths(install: &Install) -> Vec<(u8, u16)> {
    let locals = install.path_locals();
    (0..program::PATH_SLOTS as usize)
        .map(|slot| {
            let path = slot % locals.len();
            (path as u8, locals[path])
        })
        .collect()
}

/// Whether a table holds per-block entries (keyed by block set and block).
pub fn per_block(table: &Table) -> bool {
    table.keys.get(2).is_some_and(|k| k.name == "block")
}

/// Words `first .. first + count` of a register, set to zero when the job is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterClear {
    pub register: &'static program::Register,
    pub first: u64,
    pub count: u64,
}

impl RegisterClear {
    /// The words an all-reduce region of `banks` banks from bank word `bank` starts from:
    /// its banks, their seen words and their counts.
    pub fn of_region(bank: u64, banks: u64) -> [RegisterClear; 3] {
        let words = program::SEEN_WORDS_PER_BANK;
        let clear = |register, first, count| RegisterClear {
            register,
            first,
            count,
        };
        [
            clear(&program::BANK_STATE, bank, banks),
            clear(&program::REDUCE_SEEN, bank * words, banks * words),
            clear(&program::REDUCE_COUNT, bank, banks),
        ]
    }
}

/// The `allreduce_region` parameters of a region of `slots` slots (a power of two) whose banks
/// start at aggregator `agg` of the home pipe and bank word `bank`.
fn region_params(agg: u64, bank: u64, slots: u64) -> Vec<u64> {
    vec![
        agg,
        bank,
        bank * program::SEEN_WORDS_PER_BANK,
        slots,
        slots - 1,
        // Clears the slot and bank bits of a 32-bit position.
        u64::from(!(2 * slots as u32 - 1)),
        2 * slots,
    ]
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entries {
    pub meta: Metadata,
    pub tables: Vec<TableEntry>,
    pub groups: Vec<MulticastGroup>,
    pub sessions: Vec<MirrorSession>,
    /// Register words the job starts from zero (its all-reduce region), written before any
    /// table entry admits its packets.
    pub clears: Vec<RegisterClear>,
    /// The parser's value set `looped_ports`: local port numbers looped back in every pipe
    /// (the switch's, so every job on it names the same), in path order.
    pub looped: Vec<u16>,
}

/// Entries per table, for reports.
pub fn count_by_table(entries: &[TableEntry]) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for e in entries {
        *out.entry(e.table.name).or_insert(0) += 1;
    }
    out
}

/// Distinct block tables of a job's layers: layers of one width share a set.
fn sets_of(layers: &[Arc<ExchangePlan>]) -> (Vec<usize>, Vec<&ExchangePlan>) {
    let mut sets: Vec<&ExchangePlan> = Vec::new();
    let mut of_layer = Vec::new();
    for p in layers {
        let same = |q: &&ExchangePlan| {
            q.chunks() == p.chunks()
                && q.blocks.len() == p.blocks.len()
                && q.blocks
                    .iter()
                    .zip(&p.blocks)
                    .all(|(a, b)| a.table == b.table)
        };
        match sets.iter().position(same) {
            Some(i) => of_layer.push(i),
            None => {
                of_layer.push(sets.len());
                sets.push(p);
            }
        }
    }
    (of_layer, sets)
}

impl Entries {
    /// The entries of a job whose layers exchange through `layers` (one plan per layer, all
    /// of one mode), with `checksum` the session checksum its workers present.
    pub fn build(
        job: u16,
        layers: &[Arc<ExchangePlan>],
        checksum: u64,
        install: &Install,
    ) -> Result<Entries, EntriesError> {
        let first = layers
            .first()
            .ok_or_else(|| EntriesError::Layout("a job needs at least one layer".into()))?;
        let mode = first.mode;
        if mode == Mode::Strawman {
            return Err(EntriesError::Mode {
                mode: "strawman",
                why: "it allocates aggregators from a free pool on first arrival, which a \
                      Tofino pass cannot do (see p4/README.md); run it on the software switch",
            });
        }
        // The host hybrid's multicast senders are raw copies host to host: only forwarded.
        if mode != Mode::HostHybrid
            && layers
                .iter()
                .any(|p| p.blocks.iter().any(|b| !b.multicast.is_empty()))
        {
            return Err(EntriesError::Mode {
                mode: "hybrid",
                why: "its blocks mix multicast senders with partial sums, which the P4 program \
                      does not do yet; run it on the software switch, or use reduce",
            });
        }
        let workers = first.workers;
        if layers
            .iter()
            .any(|p| p.mode != mode || p.workers != workers || p.owner != first.owner)
        {
            return Err(EntriesError::Layout(
                "the layers disagree on mode, workers or owners".into(),
            ));
        }
        install.check(workers)?;
        fits(
            "workers per job",
            u64::from(workers),
            program::MAX_WORKERS,
            "",
        )?;
        fits(
            "job slot",
            u64::from(install.job_slot) + 1,
            program::MAX_JOBS,
            "",
        )?;

        let mut tables = Vec::new();
        let mut put = |table: &'static Table, keys: Vec<u64>, params: Vec<u64>| {
            tables.push(TableEntry {
                table,
                keys,
                params,
            })
        };
        let job64 = u64::from(job);
        let port = |w: u16| u64::from(install.ports[usize::from(w)]);
        put(
            &program::JOB_CONFIG,
            vec![job64],
            vec![
                u64::from(workers),
                u64::from(install.go_group),
                u64::from(install.recirc_port),
                u64::from(install.job_slot),
                u64::from(install.pass_groups()),
                u64::from(install.recirc_port) >> 7,
            ],
        );
        // With looped ports, every hash slot names its path (without, the table's default is
        // the internal port).
        if !install.looped.is_empty() {
            for (slot, (path, local)) in slot_paths(install).into_iter().enumerate() {
                put(
                    &program::RECIRCULATION_PATH,
                    vec![job64, slot as u64],
                    vec![u64::from(path), u64::from(local)],
                );
            }
        }
        let mut clears = Vec::new();
        if let Some((agg, bank, banks)) = install.allreduce_region() {
            let slots = u64::from(install.allreduce_slots);
            put(
                &program::ALLREDUCE_REGION,
                vec![job64],
                region_params(agg, bank, slots),
            );
            clears = RegisterClear::of_region(bank, banks).to_vec();
        }
        let (set_of_layer, sets) = sets_of(layers);
        for (layer, p) in layers.iter().enumerate() {
            let chunks = p.chunks();
            put(
                &program::EXCHANGE_CONFIG,
                vec![job64, layer as u64],
                vec![
                    set_of_layer[layer] as u64,
                    chunks as u64,
                    p.chunk_lanes(chunks - 1) as u64,
                    p.blocks.len() as u64,
                    p.owner.len() as u64,
                    match mode {
                        // All four only forward: the program runs them alike.
                        Mode::Host | Mode::HostReduce | Mode::HostHybrid | Mode::HostTwoLevel => {
                            program::MODE_HOST
                        }
                        Mode::Reduce => program::MODE_REDUCE,
                        _ => program::MODE_BLOCKS,
                    },
                ],
            );
        }
        // Per block: its vertices as senders and as destinations, and in SwitchGNN mode the
        // (vertex, aggregator) pairs, one entry per pass.
        for (set, p) in sets.iter().enumerate() {
            let c = p.chunks() as u64;
            for (b, block) in p.blocks.iter().enumerate() {
                let t = &block.table;
                let v = t.len() as u64;
                let key = |x: u32| vec![job64, set as u64, b as u64, u64::from(x)];
                if mode == Mode::Reduce {
                    reduce_block(block, c, install, key, &port, &mut put)?;
                    continue;
                }
                // The host exchange forwards by owner only: no aggregators, no seen words.
                let aggregates = mode == Mode::Blocks;
                let at = if aggregates {
                    seen_fits(install, v * c)?;
                    Some(place(&t.expected, c, install)?)
                } else {
                    None
                };
                let agg = |s: usize| match &at {
                    Some(at) => (install.agg_base + u64::from(at.slot[s]) * c, at.pipe[s]),
                    None => (0, 0),
                };
                // The host-only pre-aggregated exchange's rows are its destinations; the
                // program also checks and routes by the vertices its partial sums are named
                // by, and that its fetches name: every source (in the host hybrid, also every
                // vertex sent raw; in the host two-level exchange, a share to a proxy is
                // addressed to a source of the proxy's).
                let listed: Vec<(u32, u16)> = if matches!(
                    mode,
                    Mode::HostReduce | Mode::HostHybrid | Mode::HostTwoLevel
                ) {
                    let mut all: Vec<(u32, u16)> = t
                        .vertices
                        .iter()
                        .chain(&block.partials.sources)
                        .chain(&block.multicast.vertices)
                        .map(|&x| (x, p.owner[x as usize]))
                        .collect();
                    all.sort_unstable();
                    all.dedup();
                    all
                } else {
                    t.vertices
                        .iter()
                        .zip(&t.workers)
                        .map(|(&x, &w)| (x, w as u16))
                        .collect()
                };
                for (row, &(x, w)) in listed.iter().enumerate() {
                    let seen = if aggregates {
                        install.seen_base + row as u64 * c
                    } else {
                        0
                    };
                    put(
                        &program::SOURCE_ROW,
                        key(x),
                        vec![u64::from(w), port(w), seen],
                    );
                    let (base, pipe) = agg(row);
                    put(
                        &program::DESTINATION_SLOT,
                        key(x),
                        vec![base, u64::from(pipe), u64::from(w), port(w)],
                    );
                    if aggregates {
                        for pass in source_passes(t.row(row), |s| agg(s).1, install) {
                            let mut k = key(x);
                            k.extend([u64::from(pass.pipe), pass.index]);
                            let params = match pass.slot {
                                Some(s) => {
                                    let dst_worker = t.workers[s] as u16;
                                    vec![
                                        agg(s).0,
                                        u64::from(t.vertices[s]),
                                        u64::from(dst_worker),
                                        port(dst_worker),
                                        u64::from(pass.fanout),
                                        u64::from(t.expected[s]),
                                        u64::from(pass.last),
                                    ]
                                }
                                // Only a fan-out: nothing of this source's in the home pipe.
                                None => vec![0, 0, 0, 0, u64::from(pass.fanout), 0, 1],
                            };
                            put(&program::VERTEX_AGGREGATORS, k, params);
                        }
                    }
                }
            }
        }
        for w in 0..workers {
            let HostAddress { mac, ip, udp_port } = install.hosts[usize::from(w)];
            put(
                &program::WORKER_ADDRESS,
                vec![job64, u64::from(w)],
                vec![
                    mac,
                    u64::from(ip),
                    u64::from(udp_port),
                    install.switch.mac,
                    u64::from(install.switch.ip),
                ],
            );
        }
        let cells = install.ecn_threshold_bytes.div_ceil(program::CELL_BYTES);
        for w in 0..workers {
            put(&program::ECN_MARKING, vec![port(w)], vec![cells]);
        }
        for w in 0..workers {
            put(
                &program::ADMISSION,
                vec![job64, u64::from(w), port(w)],
                vec![u64::from(install.ack_session(w))],
            );
        }
        let mut groups = vec![MulticastGroup {
            id: install.go_group,
            replicas: (0..workers)
                .map(|w| Replica {
                    port: install.ports[usize::from(w)],
                    rid: w,
                })
                .collect(),
        }];
        if mode.switch_aggregates() {
            groups.extend(pass_groups(install));
        }
        let mut sessions = Vec::new();
        for w in 0..workers {
            sessions.push(MirrorSession {
                id: install.ack_session(w),
                port: install.ports[usize::from(w)],
                truncate: ACK_TRUNCATE,
            });
        }
        Ok(Entries {
            meta: Metadata {
                format: FORMAT.into(),
                format_version: FORMAT_VERSION,
                job,
                workers,
                exchange: mode.name().into(),
                plan_checksum: format!("{checksum:#018x}"),
                part: Part::All.name(),
                created_by: concat!("switchgnn ", env!("CARGO_PKG_VERSION")).into(),
                looped_ports: install.looped_ports(),
            },
            tables,
            groups,
            sessions,
            clears,
            looped: install.looped.clone(),
        })
    }

    /// The plan checksum the entries were made for.
    pub fn plan_checksum(&self) -> Result<u64, EntriesError> {
        let text = self.meta.plan_checksum.trim_start_matches("0x");
        u64::from_str_radix(text, 16).map_err(|_| {
            EntriesError::Format(format!(
                "plan checksum `{}` is not a hex number",
                self.meta.plan_checksum
            ))
        })
    }

    /// The exchange plans the switch runs, one per layer, read back from the entries alone.
    pub fn switch_tables(&self) -> Result<SwitchTables, EntriesError> {
        if self.meta.part != Part::All.name() {
            return Err(EntriesError::Format(format!(
                "the file holds the {} entries only; the software switch loads a whole job \
                 (`switchgnn p4 entries --part all`)",
                self.meta.part
            )));
        }
        Reader::default().read(self)
    }

    /// The entries of `part`, checked against the program's table sizes: all blocks together
    /// within each table, or one block within half of it (the other half holds the next).
    pub fn part(&self, part: Part) -> Result<Entries, EntriesError> {
        let keep = |e: &TableEntry| match part {
            Part::All => true,
            Part::Static => !per_block(e.table),
            Part::Block { set, block } => {
                per_block(e.table) && e.keys[1] == set && e.keys[2] == block
            }
        };
        let tables: Vec<TableEntry> = self.tables.iter().filter(|e| keep(e)).cloned().collect();
        if let Part::Block { set, block } = part {
            if tables.is_empty() {
                return Err(EntriesError::Layout(format!(
                    "the job has no block {set}:{block}"
                )));
            }
        }
        for (name, n) in count_by_table(&tables) {
            let t = program::table_by_name(name).expect("a program table");
            let (have, hint) = match part {
                Part::Block { .. } => (t.size / 2, " entries in half the table".to_string()),
                _ if per_block(t) => (
                    t.size,
                    format!(
                        " entries (prepare with --table-entries {} and load the blocks one by \
                         one: --part static, then --part S:B per block)",
                        crate::resources::double_buffered_limit()
                    ),
                ),
                _ => (t.size, " entries".to_string()),
            };
            fits(t.name, n, have, &hint)?;
        }
        // Multicast groups and mirror sessions belong to the job, not to a block.
        let replication = !matches!(part, Part::Block { .. });
        Ok(Entries {
            meta: Metadata {
                part: part.name(),
                ..self.meta.clone()
            },
            tables,
            groups: if replication {
                self.groups.clone()
            } else {
                Vec::new()
            },
            sessions: if replication {
                self.sessions.clone()
            } else {
                Vec::new()
            },
            // The all-reduce region is cleared once, with the job's static entries; the ports
            // are looped then too.
            clears: if replication {
                self.clears.clone()
            } else {
                Vec::new()
            },
            looped: if replication {
                self.looped.clone()
            } else {
                Vec::new()
            },
        })
    }
}

fn fits(what: &'static str, need: u64, have: u64, hint: &str) -> Result<(), EntriesError> {
    if need > have {
        Err(EntriesError::TooLarge {
            what,
            need,
            have,
            hint: hint.to_string(),
        })
    } else {
        Ok(())
    }
}

/// What a switch loaded from entries runs.
#[derive(Debug, Clone)]
pub struct SwitchTables {
    pub job: u16,
    pub workers: u16,
    pub layers: Vec<Arc<ExchangePlan>>,
    /// Dev port of each worker rank.
    pub ports: Vec<u16>,
    pub ecn_threshold_bytes: u64,
    pub plan_checksum: u64,
    /// Slots of the job's all-reduce region (0: none).
    pub allreduce_slots: u16,
}

/// A destination's `destination_slot` entry: its aggregator, their pipe, owner and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    agg: u64,
    pipe: u8,
    worker: u16,
    port: u16,
}

/// Per (set, block): vertex → its `destination_slot` entry.
type SlotRows = BTreeMap<(u64, u64), BTreeMap<u32, Slot>>;

/// One row of `vertex_aggregators`, as read.
#[derive(Debug, Clone, Copy)]
struct Pass {
    index: usize,
    pipe: u8,
    pass: u64,
    agg_base: u64,
    dst: u32,
    dst_worker: u16,
    fanout: u8,
    expected: u64,
    last: bool,
}

/// One row of `partial_aggregator`, as read.
#[derive(Debug, Clone, Copy)]
struct PartialRow {
    index: usize,
    agg_base: u64,
    pipe: u8,
    dst_worker: u16,
    expected: u64,
    seen_row: u64,
}

/// The `job_config` entry, as read.
#[derive(Debug, Clone, Copy)]
struct JobRow {
    workers: u16,
    go_group: u16,
    /// Its pipe is the home pipe.
    recirc_port: u64,
    pass_groups: u16,
}

#[derive(Debug, Default)]
struct Reader {
    /// The job's configuration entry.
    job: Option<JobRow>,
    layers: BTreeMap<u64, (usize, [u64; 6])>,
    /// (set, block) → vertex → (worker, port) of `source_row`.
    rows: BTreeMap<(u64, u64), BTreeMap<u32, (u16, u16)>>,
    /// (set, block) → src → passes.
    passes: BTreeMap<(u64, u64), BTreeMap<u32, Vec<Pass>>>,
    /// (set, block) → vertex → (aggregator, worker, port) of `destination_slot`.
    slots: SlotRows,
    /// (set, block) → (destination, worker) → partial-sum entry.
    partials: BTreeMap<(u64, u64), BTreeMap<(u32, u16), PartialRow>>,
    ports: BTreeMap<u16, u16>,
    ecn_cells: BTreeSet<u64>,
    addressed: BTreeSet<u16>,
    /// The `allreduce_region` entry: (slots, first bank word).
    allreduce: Option<(u16, u64)>,
    /// `recirculation_path`: hash slot → (entry index, path, local port number).
    paths: BTreeMap<u64, (usize, u8, u16)>,
}

/// Check that the destinations of each pipe (in vertex order) of block `b` of `set` hold
/// aggregators `base + i · chunks`, `i = 0, 1, ...`, with one base for every pipe.
fn check_slots(
    set: u64,
    b: u64,
    slots: &BTreeMap<u32, Slot>,
    chunks: u64,
) -> Result<(), EntriesError> {
    let base = slots.values().map(|s| s.agg).min().unwrap_or(0);
    let mut next: BTreeMap<u8, u64> = BTreeMap::new();
    for (&v, s) in slots {
        let i = next.entry(s.pipe).or_insert(0);
        if s.agg != base + *i * chunks || s.pipe >= program::MAX_PIPES {
            return Err(EntriesError::Layout(format!(
                "set {set} block {b}: destination {v} has aggregator {} of pipe {}, expected {} \
                 (slot {i} of that pipe, {chunks} chunks after base {base})",
                s.agg,
                s.pipe,
                base + *i * chunks
            )));
        }
        *i += 1;
    }
    Ok(())
}

fn entry_error(index: usize, table: &'static Table, message: String) -> EntriesError {
    EntriesError::Entry {
        index,
        table: table.name,
        message,
    }
}

impl Reader {
    fn read(mut self, entries: &Entries) -> Result<SwitchTables, EntriesError> {
        let job = entries.meta.job;
        for (index, e) in entries.tables.iter().enumerate() {
            let bad = |m: String| entry_error(index, e.table, m);
            let keyed_by_job = e.table.keys.first().is_some_and(|k| k.name == "job");
            if keyed_by_job && e.keys.first() != Some(&u64::from(job)) {
                return Err(bad(format!(
                    "job {:?} is not the file's job {job}",
                    e.keys.first()
                )));
            }
            let k = &e.keys;
            let p = &e.params;
            match e.table.id {
                id if id == program::JOB_CONFIG.id => {
                    if self.job.is_some() {
                        return Err(bad("a second job configuration".into()));
                    }
                    if p[5] != p[2] >> 7 {
                        return Err(bad(format!(
                            "home pipe {} is not the pipe of recirculation port {}",
                            p[5], p[2]
                        )));
                    }
                    self.job = Some(JobRow {
                        workers: p[0] as u16,
                        go_group: p[1] as u16,
                        recirc_port: p[2],
                        pass_groups: p[4] as u16,
                    });
                }
                id if id == program::EXCHANGE_CONFIG.id => {
                    let row = [p[0], p[1], p[2], p[3], p[4], p[5]];
                    if self.layers.insert(k[1], (index, row)).is_some() {
                        return Err(bad(format!("layer {} configured twice", k[1])));
                    }
                }
                id if id == program::SOURCE_ROW.id => {
                    let block = self.rows.entry((k[1], k[2])).or_default();
                    if block
                        .insert(k[3] as u32, (p[0] as u16, p[1] as u16))
                        .is_some()
                    {
                        return Err(bad(format!("vertex {} listed twice", k[3])));
                    }
                }
                id if id == program::VERTEX_AGGREGATORS.id => {
                    self.passes
                        .entry((k[1], k[2]))
                        .or_default()
                        .entry(k[3] as u32)
                        .or_default()
                        .push(Pass {
                            index,
                            pipe: k[4] as u8,
                            pass: k[5],
                            agg_base: p[0],
                            dst: p[1] as u32,
                            dst_worker: p[2] as u16,
                            fanout: p[4] as u8,
                            expected: p[5],
                            last: p[6] == 1,
                        });
                }
                id if id == program::PARTIAL_AGGREGATOR.id => {
                    let row = PartialRow {
                        index,
                        agg_base: p[0],
                        pipe: p[1] as u8,
                        dst_worker: p[2] as u16,
                        expected: p[4],
                        seen_row: p[5],
                    };
                    let block = self.partials.entry((k[1], k[2])).or_default();
                    if block.insert((k[3] as u32, k[4] as u16), row).is_some() {
                        return Err(bad(format!(
                            "the partial sum of worker {} for {} listed twice",
                            k[4], k[3]
                        )));
                    }
                }
                id if id == program::DESTINATION_SLOT.id => {
                    let block = self.slots.entry((k[1], k[2])).or_default();
                    let slot = Slot {
                        agg: p[0],
                        pipe: p[1] as u8,
                        worker: p[2] as u16,
                        port: p[3] as u16,
                    };
                    if block.insert(k[3] as u32, slot).is_some() {
                        return Err(bad(format!("destination {} listed twice", k[3])));
                    }
                }
                id if id == program::ADMISSION.id => {
                    if self.ports.insert(k[1] as u16, k[2] as u16).is_some() {
                        return Err(bad(format!("worker {} admitted twice", k[1])));
                    }
                }
                id if id == program::ECN_MARKING.id => {
                    self.ecn_cells.insert(p[0]);
                }
                id if id == program::ALLREDUCE_REGION.id => {
                    let (agg, bank, slots) = (p[0], p[1], p[3]);
                    let fits = slots.is_power_of_two()
                        && slots <= program::MAX_ALLREDUCE_SLOTS
                        && agg + 2 * slots <= program::AGGREGATORS
                        && bank + 2 * slots <= program::REDUCE_BANKS;
                    if !fits || *p != region_params(agg, bank, slots) {
                        return Err(bad(format!(
                            "{p:?} do not describe a power of two of slots whose banks fit the \
                             program's registers (aggregator {agg}, bank word {bank}, {slots} \
                             slots)"
                        )));
                    }
                    if self.allreduce.replace((slots as u16, bank)).is_some() {
                        return Err(bad("a second all-reduce region".into()));
                    }
                }
                id if id == program::WORKER_ADDRESS.id => {
                    self.addressed.insert(k[1] as u16);
                }
                id if id == program::RECIRCULATION_PATH.id => {
                    if self
                        .paths
                        .insert(k[1], (index, p[0] as u8, p[1] as u16))
                        .is_some()
                    {
                        return Err(bad(format!("hash slot {} given twice", k[1])));
                    }
                }
                _ => return Err(bad("a table this reader does not know".into())),
            }
        }
        self.assemble(entries)
    }

    fn assemble(self, entries: &Entries) -> Result<SwitchTables, EntriesError> {
        let layout = |m: String| EntriesError::Layout(m);
        let job = self
            .job
            .ok_or_else(|| layout("no job configuration entry".into()))?;
        let (workers, recirc) = (job.workers, job.recirc_port);
        if workers != entries.meta.workers {
            return Err(layout(format!(
                "the job configuration says {workers} workers, the metadata {}",
                entries.meta.workers
            )));
        }
        let ports: Vec<u16> = (0..workers)
            .map(|w| {
                self.ports
                    .get(&w)
                    .copied()
                    .ok_or_else(|| layout(format!("worker {w} has no admission entry")))
            })
            .collect::<Result<_, _>>()?;
        if let Some(w) = (0..workers).find(|w| !self.addressed.contains(w)) {
            return Err(layout(format!("worker {w} has no address entry")));
        }
        // Owners: every block's rows, which must agree with each other, with the destination
        // table, and with the admission ports. A reduce block lists more senders than
        // destinations (the sources of its partial sums).
        let reduce_sets: BTreeSet<u64> = self
            .layers
            .values()
            .filter(|(_, row)| row[5] == program::MODE_REDUCE)
            .map(|(_, row)| row[0])
            .collect();
        let mut owners: BTreeMap<u32, u16> = BTreeMap::new();
        for (at, rows) in &self.rows {
            let slots = self.slots.get(at);
            let reduce = reduce_sets.contains(&at.0);
            for (&v, &(w, port)) in rows {
                let slot = slots.and_then(|s| s.get(&v));
                let slot_ok = match slot {
                    Some(s) => (s.worker, s.port) == (w, port),
                    None => reduce,
                };
                if !slot_ok
                    || ports.get(usize::from(w)) != Some(&port)
                    || *owners.entry(v).or_insert(w) != w
                {
                    return Err(layout(format!(
                        "set {} block {}: vertex {v}'s owner (worker {w}, port {port}) disagrees \
                         with its destination entry, the admission ports or another block",
                        at.0, at.1
                    )));
                }
            }
            let unlisted = slots.is_some_and(|s| s.keys().any(|v| !rows.contains_key(v)));
            if unlisted || (!reduce && slots.map_or(0, |s| s.len()) != rows.len()) {
                return Err(layout(format!(
                    "set {} block {}: the source and destination tables list different vertices",
                    at.0, at.1
                )));
            }
        }
        let cells = match self.ecn_cells.len() {
            0 => return Err(layout("no ECN marking entries".into())),
            1 => *self.ecn_cells.first().expect("one"),
            _ => return Err(layout("ports disagree on the ECN threshold".into())),
        };
        if self.layers.keys().copied().ne(0..self.layers.len() as u64) {
            return Err(layout("layers must be configured as 0, 1, 2, ...".into()));
        }

        let home = pipe_of(recirc);
        let mut built: BTreeMap<u64, Arc<Vec<PlanBlock>>> = BTreeMap::new();
        let mut layers = Vec::new();
        for &(index, [set, chunks, last_lanes, blocks, vertices, mode]) in self.layers.values() {
            let bad = |m: String| entry_error(index, &program::EXCHANGE_CONFIG, m);
            if chunks == 0 || last_lanes == 0 || last_lanes > MAX_LANES as u64 {
                return Err(bad(format!(
                    "{chunks} chunks, {last_lanes} lanes in the last"
                )));
            }
            let width = (chunks as usize - 1) * MAX_LANES + last_lanes as usize;
            let mode = match mode {
                program::MODE_BLOCKS => Mode::Blocks,
                program::MODE_HOST => Mode::Host,
                program::MODE_REDUCE => Mode::Reduce,
                m => return Err(bad(format!("unknown mode {m}"))),
            };
            let mut owner = vec![u16::MAX; vertices as usize];
            for (&v, &w) in &owners {
                if v as usize >= owner.len() || w >= workers {
                    return Err(bad(format!("owner entry {v} → {w} out of range")));
                }
                owner[v as usize] = w;
            }
            let plan_blocks = match mode {
                Mode::Host => Arc::new(vec![
                    PlanBlock {
                        table: BlockTable::default(),
                        order: Vec::new(),
                        partials: Default::default(),
                        multicast: Default::default(),
                    };
                    blocks as usize
                ]),
                _ => match built.get(&set) {
                    Some(b) => b.clone(),
                    None => {
                        let b = Arc::new(
                            (0..blocks)
                                .map(|b| match mode {
                                    Mode::Reduce => self.reduce_block(set, b, chunks, &owner),
                                    _ => self.block(set, b, chunks, &owner, home),
                                })
                                .collect::<Result<Vec<_>, _>>()?,
                        );
                        built.insert(set, b.clone());
                        b
                    }
                },
            };
            if plan_blocks.len() as u64 != blocks {
                return Err(bad(format!(
                    "{blocks} blocks, but set {set} has {}",
                    plan_blocks.len()
                )));
            }
            layers.push(Arc::new(ExchangePlan {
                mode,
                width,
                workers,
                owner,
                blocks: (*plan_blocks).clone(),
            }));
        }
        if layers.is_empty() {
            return Err(layout("no layer configuration entries".into()));
        }
        let paths = self.check_paths(entries, &ports)?;
        self.check_groups(entries, job, &ports, &paths)?;
        let allreduce_slots = match self.allreduce {
            Some((slots, bank)) => {
                // A Tofino would run the region from whatever an earlier job left there.
                for RegisterClear {
                    register,
                    first,
                    count,
                } in RegisterClear::of_region(bank, 2 * u64::from(slots))
                {
                    let cleared = entries.clears.iter().any(|c| {
                        c.register.id == register.id
                            && c.first <= first
                            && c.first + c.count >= first + count
                    });
                    if !cleared {
                        return Err(layout(format!(
                            "the all-reduce region's {} words {first}..{} are not cleared at \
                             install",
                            register.name,
                            first + count
                        )));
                    }
                }
                slots
            }
            None => 0,
        };
        Ok(SwitchTables {
            job: entries.meta.job,
            workers,
            layers,
            ports,
            ecn_threshold_bytes: cells * program::CELL_BYTES,
            plan_checksum: entries.plan_checksum()?,
            allreduce_slots,
        })
    }

    /// The recirculation paths: the value set's looped local numbers are no worker's, and
    /// with `recirculation_path` entries every hash slot names a path whose local number is
    /// the internal port's (path 0) or the value set's. Returns the paths' local numbers and
    /// the paths the slots use.
    fn check_paths(
        &self,
        entries: &Entries,
        ports: &[u16],
    ) -> Result<(Vec<u16>, BTreeSet<u8>), EntriesError> {
        let probe = Install {
            ports: ports.to_vec(),
            looped: entries.looped.clone(),
            ..Install::defaults(ports.len() as u16)
        };
        probe.check_looped()?;
        let locals = probe.path_locals();
        if self.paths.is_empty() {
            return Ok((locals, BTreeSet::from([0])));
        }
        if self.paths.len() as u64 != program::PATH_SLOTS
            || self.paths.keys().any(|&k| k >= program::PATH_SLOTS)
        {
            return Err(EntriesError::Layout(format!(
                "recirculation_path has {} hash slots, not each of the {} once",
                self.paths.len(),
                program::PATH_SLOTS
            )));
        }
        let mut used = BTreeSet::new();
        for (&slot, &(index, path, local)) in &self.paths {
            if locals.get(usize::from(path)) != Some(&local) {
                return Err(entry_error(
                    index,
                    &program::RECIRCULATION_PATH,
                    format!(
                        "slot {slot} names path {path} at local port {local}, but the paths are \
                         {locals:?} (the internal port, then the value set's looped ports)"
                    ),
                ));
            }
            used.insert(path);
        }
        Ok((locals, used))
    }

    /// Every multicast group the program can ask for exists with the replicas it expects: the
    /// block go to every worker, and on every path the slots use the pass group of every pass
    /// that sends several copies.
    fn check_groups(
        &self,
        entries: &Entries,
        job: JobRow,
        ports: &[u16],
        (locals, paths): &(Vec<u16>, BTreeSet<u8>),
    ) -> Result<(), EntriesError> {
        let groups: BTreeMap<u16, &MulticastGroup> =
            entries.groups.iter().map(|g| (g.id, g)).collect();
        let go = MulticastGroup {
            id: job.go_group,
            replicas: ports
                .iter()
                .enumerate()
                .map(|(w, &port)| Replica {
                    port,
                    rid: w as u16,
                })
                .collect(),
        };
        if groups.get(&go.id) != Some(&&go) {
            return Err(EntriesError::Layout(format!(
                "the block go's multicast group {} is missing or does not reach every worker",
                go.id
            )));
        }
        let home = pipe_of(job.recirc_port);
        let mut checked = BTreeSet::new();
        for p in self.passes.values().flat_map(|b| b.values()).flatten() {
            for emits in [false, p.expected > 0] {
                let first_in_home = p.pipe == home && p.pass == 0;
                let copies = Copies::of_pass(first_in_home, p.fanout, emits, p.last);
                if !copies.need_group() || !checked.insert((p.pipe, copies)) {
                    continue;
                }
                for &path in paths {
                    let want = pass_group(job.pass_groups, locals, path, p.pipe, copies);
                    if groups.get(&want.id) != Some(&&want) {
                        return Err(entry_error(
                            p.index,
                            &program::VERTEX_AGGREGATORS,
                            format!(
                                "pass {} of pipe {} on recirculation path {path} sends through \
                                 multicast group {}, which is missing or has other replicas",
                                p.pass, p.pipe, want.id
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Rebuild block `b` of `set` from its pass and slot entries (each row's slots in
    /// ascending order, as plans list them).
    fn block(
        &self,
        set: u64,
        b: u64,
        chunks: u64,
        owner: &[u16],
        home: u8,
    ) -> Result<PlanBlock, EntriesError> {
        let (no_passes, no_slots) = (BTreeMap::new(), BTreeMap::new());
        let passes = self.passes.get(&(set, b)).unwrap_or(&no_passes);
        let slots = self.slots.get(&(set, b)).unwrap_or(&no_slots);
        let table = &program::VERTEX_AGGREGATORS;
        // Every endpoint of a block is a source and a destination: the slot table lists them,
        // and slot s is the s-th in vertex order.
        let vertices: Vec<u32> = slots.keys().copied().collect();
        if passes.keys().ne(vertices.iter()) {
            return Err(EntriesError::Layout(format!(
                "set {set} block {b}: the sources of the pass table are not the destinations \
                 of the slot table"
            )));
        }
        check_slots(set, b, slots, chunks)?;
        let slot_of = |v: u32| vertices.binary_search(&v).ok();
        let mut expected: Vec<Option<u64>> = vec![None; vertices.len()];
        let mut offsets = vec![0u64];
        let mut row_slots = Vec::new();
        for list in passes.values() {
            let mut list = list.clone();
            list.sort_by_key(|p| (p.pipe, p.pass));
            let start = row_slots.len();
            let mut fanout = 0u8;
            for (i, p) in list.iter().enumerate() {
                let bad = |m: String| entry_error(p.index, table, m);
                // Each pipe's chain runs 0, 1, ... with its last pass marked; only the home
                // pipe's pass 0 fans out, and an entry with nothing to add only fans out.
                let first = i == 0 || list[i - 1].pipe != p.pipe;
                let chain_last = list.get(i + 1).is_none_or(|q| q.pipe != p.pipe);
                let index_ok = if first {
                    p.pass == 0
                } else {
                    p.pass == list[i - 1].pass + 1
                };
                if !index_ok || p.last != chain_last {
                    return Err(bad(format!(
                        "pass {} of pipe {} (last = {}): each pipe's passes must run 0, 1, ... \
                         with the last marked",
                        p.pass, p.pipe, p.last
                    )));
                }
                let home_first = p.pipe == home && p.pass == 0;
                if p.fanout != 0 && !home_first {
                    return Err(bad(format!(
                        "pass {} of pipe {} fans out: only pass 0 of the home pipe {home} does",
                        p.pass, p.pipe
                    )));
                }
                fanout |= p.fanout;
                if p.expected == 0 {
                    if !(home_first && p.last) {
                        return Err(bad(
                            "an entry with nothing to add must be the home pipe's only pass".into(),
                        ));
                    }
                    continue;
                }
                let s = slot_of(p.dst)
                    .ok_or_else(|| bad(format!("destination {} has no slot", p.dst)))?;
                let slot = slots[&p.dst];
                if (p.agg_base, p.pipe) != (slot.agg, slot.pipe) {
                    return Err(bad(format!(
                        "aggregator {} of pipe {} is not destination {}'s ({} of pipe {})",
                        p.agg_base, p.pipe, p.dst, slot.agg, slot.pipe
                    )));
                }
                if owner.get(p.dst as usize) != Some(&p.dst_worker) {
                    return Err(bad(format!(
                        "destination {} owned by {}, not worker {}",
                        p.dst,
                        owner.get(p.dst as usize).copied().unwrap_or(u16::MAX),
                        p.dst_worker
                    )));
                }
                match expected[s] {
                    Some(e) if e != p.expected => {
                        return Err(bad(format!(
                            "destination {} expects {} here, {e} elsewhere",
                            p.dst, p.expected
                        )))
                    }
                    _ => expected[s] = Some(p.expected),
                }
                row_slots.push(s as u32);
            }
            let pipes = pipe_mask(list.iter().map(|p| p.pipe).filter(|&p| p != home));
            let home_starts = list.iter().any(|p| p.pipe == home && p.pass == 0);
            if fanout != pipes || !home_starts {
                let index = list.first().map_or(0, |p| p.index);
                return Err(entry_error(
                    index,
                    table,
                    format!(
                        "the source's pass 0 in the home pipe {home} fans out to pipes \
                         {fanout:#06b}, its chains are in {pipes:#06b}"
                    ),
                ));
            }
            row_slots[start..].sort_unstable();
            offsets.push(row_slots.len() as u64);
        }
        let expected = expected
            .into_iter()
            .zip(&vertices)
            .map(|(e, v)| {
                e.map(|e| e as u32).ok_or_else(|| {
                    EntriesError::Layout(format!(
                        "set {set} block {b}: destination {v} receives nothing"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let workers = vertices
            .iter()
            .map(|&v| u32::from(owner[v as usize]))
            .collect();
        let n = vertices.len() as u32;
        Ok(PlanBlock {
            table: BlockTable {
                vertices,
                workers,
                expected,
                offsets,
                slots: row_slots,
            },
            order: (0..n).collect(),
            partials: Default::default(),
            multicast: Default::default(),
        })
    }

    /// Rebuild reduce block `b` of `set` from its slot and partial-sum entries: the switch's
    /// view of it (destinations, contributing workers, aggregators), without the sources each
    /// worker sums, which the switch never needs.
    fn reduce_block(
        &self,
        set: u64,
        b: u64,
        chunks: u64,
        owner: &[u16],
    ) -> Result<PlanBlock, EntriesError> {
        let empty = BTreeMap::new();
        let slots = self.slots.get(&(set, b)).unwrap_or(&empty);
        let no_partials = BTreeMap::new();
        let partials = self.partials.get(&(set, b)).unwrap_or(&no_partials);
        let table = &program::PARTIAL_AGGREGATOR;
        check_slots(set, b, slots, chunks)?;
        let seen_base = partials.values().next().map_or(0, |p| p.seen_row);
        let mut t = BlockTable {
            offsets: vec![0],
            ..BlockTable::default()
        };
        let mut pairs = partials.iter().peekable();
        for (&v, slot) in slots {
            let (agg, w) = (slot.agg, slot.worker);
            let mut contributors = 0u32;
            while let Some((&(dst, worker), p)) = pairs.next_if(|((dst, _), _)| *dst == v) {
                let bad = |m: String| entry_error(p.index, table, m);
                let pair = t.slots.len() as u64;
                if p.agg_base != agg || p.pipe != slot.pipe || p.dst_worker != w || worker == w {
                    return Err(bad(format!(
                        "the partial sum of worker {worker} for {dst} names aggregator {} of \
                         pipe {} and worker {}, not {agg} of pipe {} and worker {w}",
                        p.agg_base, p.pipe, p.dst_worker, slot.pipe
                    )));
                }
                if p.seen_row != seen_base + pair * chunks {
                    return Err(bad(format!(
                        "seen word {} is not pair {pair}'s ({})",
                        p.seen_row,
                        seen_base + pair * chunks
                    )));
                }
                t.slots.push(u32::from(worker));
                contributors += 1;
            }
            let expected = partials
                .range((v, 0)..=(v, u16::MAX))
                .map(|(_, p)| p.expected)
                .collect::<BTreeSet<_>>();
            if expected.len() != 1 || expected.first() != Some(&u64::from(contributors)) {
                return Err(EntriesError::Layout(format!(
                    "set {set} block {b}: destination {v} hears from {contributors} workers \
                     but its entries expect {expected:?}"
                )));
            }
            if owner.get(v as usize) != Some(&w) {
                return Err(EntriesError::Layout(format!(
                    "set {set} block {b}: destination {v} is not worker {w}'s"
                )));
            }
            t.vertices.push(v);
            t.workers.push(u32::from(w));
            t.expected.push(contributors);
            t.offsets.push(t.slots.len() as u64);
        }
        if let Some((&(dst, worker), p)) = pairs.next() {
            return Err(entry_error(
                p.index,
                table,
                format!("the partial sum of worker {worker} for {dst}, which has no slot"),
            ));
        }
        let order = t.vertices.clone();
        PlanBlock::reduce(t, &order, Partials::default())
            .map_err(|e| EntriesError::Layout(format!("set {set} block {b}: {e}")))
    }
}
