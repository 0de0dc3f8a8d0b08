//! Building a job's entries from its exchange plans: where each block's destinations keep
//! their aggregators, the passes of each source, and the job-, block- and worker-wide table
//! entries with the multicast groups and mirror sessions.

use std::collections::BTreeMap;
use std::sync::Arc;

use switchgnn_chip::paths::{self, SourcePass};
use switchgnn_dataplane::plan::{ExchangePlan, Mode, PlanBlock};

use super::{
    fits, Entries, EntriesError, Metadata, MirrorSession, MulticastGroup, Part, RegisterClear,
    Replica, TableEntry, ACK_TRUNCATE, FORMAT, FORMAT_VERSION,
};
use crate::ports::{pipe_mask, Copies, HostAddress, Install};
use crate::program::{self, Table};

pub use switchgnn_chip::paths::Placement;

/// Place the destinations of a block, expecting `expected[s]` contributions each (the passes
/// that add into its aggregators), over the job's pipes, `chunks` aggregators each
/// ([`switchgnn_chip::paths::place`]: most passes first, each to the pipe with the fewest passes
/// so far that has room, so that the pipes' chains, which run at once, come out even).
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
    Ok(paths::place(expected, &room).expect("the capacity check leaves room"))
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
    put: &mut Put<'_>,
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

/// The `vertex_aggregators` entries of a source feeding `slots` (in row order), each
/// destination's aggregator in pipe `pipe_of(slot)` ([`paths::source_passes`] over the job's
/// pipes from its home pipe).
fn source_passes(
    slots: &[u32],
    pipe_of: impl Fn(usize) -> u8,
    install: &Install,
) -> Vec<SourcePass> {
    paths::source_passes(slots, pipe_of, install.home_pipe(), install.pipes)
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

/// The recirculation path of each hash slot ([`paths::slot_path`]: the slots spread evenly
/// over the paths, in turn): (path, local port number).
pub fn slot_paths(install: &Install) -> Vec<(u8, u16)> {
    let locals = install.path_locals();
    (0..program::PATH_SLOTS)
        .map(|slot| {
            let path = paths::slot_path(slot, locals.len() as u32);
            (path as u8, locals[path as usize])
        })
        .collect()
}

/// The `allreduce_region` parameters of a region of `slots` slots (a power of two) whose banks
/// start at aggregator `agg` of the home pipe and bank word `bank`.
pub(super) fn region_params(agg: u64, bank: u64, slots: u64) -> Vec<u64> {
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

/// The entry sink `Entries::build`'s steps write into.
type Put<'a> = dyn FnMut(&'static Table, Vec<u64>, Vec<u64>) + 'a;

/// Check that a job of `layers` fits the program and `install`: one mode the program runs,
/// layers that agree, a valid port map, few enough workers and a job slot in range. Its mode
/// and workers.
fn check_job(layers: &[Arc<ExchangePlan>], install: &Install) -> Result<(Mode, u16), EntriesError> {
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
    Ok((mode, workers))
}

/// The job-wide entries: the job's configuration, its hash slots' recirculation paths, its
/// all-reduce region and one configuration per layer. The register words to clear at install.
fn job_entries(
    job: u16,
    layers: &[Arc<ExchangePlan>],
    install: &Install,
    put: &mut Put<'_>,
) -> Vec<RegisterClear> {
    let first = &layers[0];
    let (mode, workers) = (first.mode, first.workers);
    let job64 = u64::from(job);
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
    let (set_of_layer, _) = sets_of(layers);
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
    clears
}

/// The entries of block `b` of block-table set `set` (plan `p`): its vertices as senders and
/// as destinations, and in SwitchGNN mode the (vertex, aggregator) pairs, one entry per pass.
fn block_entries(
    job: u16,
    mode: Mode,
    p: &ExchangePlan,
    set: usize,
    b: usize,
    install: &Install,
    put: &mut Put<'_>,
) -> Result<(), EntriesError> {
    let job64 = u64::from(job);
    let port = |w: u16| u64::from(install.ports[usize::from(w)]);
    let c = p.chunks() as u64;
    let block = &p.blocks[b];
    let t = &block.table;
    let v = t.len() as u64;
    let key = |x: u32| vec![job64, set as u64, b as u64, u64::from(x)];
    if mode == Mode::Reduce {
        return reduce_block(block, c, install, key, &port, put);
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
    for (row, &(x, w)) in listed_vertices(mode, p, block).iter().enumerate() {
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
        if !aggregates {
            continue;
        }
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
    Ok(())
}

/// The vertices block `block` lists in `source_row` and `destination_slot`, with their
/// owners. The host-only pre-aggregated exchange's rows are its destinations; the program
/// also checks and routes by the vertices its partial sums are named by, and that its fetches
/// name: every source (in the host hybrid, also every vertex sent raw; in the host two-level
/// exchange, a share to a proxy is addressed to a source of the proxy's).
fn listed_vertices(mode: Mode, p: &ExchangePlan, block: &PlanBlock) -> Vec<(u32, u16)> {
    let t = &block.table;
    if matches!(
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
    }
}

/// The per-worker entries: each worker's addresses, the ECN threshold of its port and its
/// admission with the mirror session of its acknowledgements.
fn worker_entries(job: u16, workers: u16, install: &Install, put: &mut Put<'_>) {
    let job64 = u64::from(job);
    let port = |w: u16| u64::from(install.ports[usize::from(w)]);
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
}

/// The job's multicast groups (its go group, and the pass groups where the switch
/// aggregates) and the mirror sessions of its workers' acknowledgements.
fn groups_and_sessions(
    mode: Mode,
    workers: u16,
    install: &Install,
) -> (Vec<MulticastGroup>, Vec<MirrorSession>) {
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
    (groups, sessions)
}

impl Entries {
    /// The entries of a job whose layers exchange through `layers` (one plan per layer, all
    /// of one mode), with `checksum` the session checksum its workers present.
    ///
    /// In four steps: check that the job fits the program, then its job-wide entries (job,
    /// recirculation paths, all-reduce region, one per layer), its per-block entries, and
    /// its per-worker entries with the multicast groups and mirror sessions.
    pub fn build(
        job: u16,
        layers: &[Arc<ExchangePlan>],
        checksum: u64,
        install: &Install,
    ) -> Result<Entries, EntriesError> {
        let (mode, workers) = check_job(layers, install)?;
        let mut tables = Vec::new();
        let mut put = |table: &'static Table, keys: Vec<u64>, params: Vec<u64>| {
            tables.push(TableEntry {
                table,
                keys,
                params,
            })
        };
        let clears = job_entries(job, layers, install, &mut put);
        let (_, sets) = sets_of(layers);
        for (set, p) in sets.iter().enumerate() {
            for b in 0..p.blocks.len() {
                block_entries(job, mode, p, set, b, install, &mut put)?;
            }
        }
        worker_entries(job, workers, install, &mut put);
        let (groups, sessions) = groups_and_sessions(mode, workers, install);
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
}
