//! Reading entries back: the exchange plans, ports and settings a software switch runs
//! from a job's entries, every entry checked against the others on the way.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use switchgnn_dataplane::plan::{ExchangePlan, Mode, Partials, PlanBlock};
use switchgnn_dataplane::wire::MAX_LANES;
use switchgnn_partition::BlockTable;

use super::build::{pass_group, region_params};
use super::{Entries, EntriesError, MulticastGroup, RegisterClear, Replica};
use crate::ports::{pipe_mask, pipe_of, Copies, Install};
use crate::program::{self, Table};

/// What a switch loaded from entries runs.
#[derive(Debug, Clone)]
pub struct SwitchTables {
    /// The job's id.
    pub job: u16,
    /// Workers of the job.
    pub workers: u16,
    /// One exchange plan per layer.
    pub layers: Vec<Arc<ExchangePlan>>,
    /// Dev port of each worker rank.
    pub ports: Vec<u16>,
    /// Egress queue depth above which worker ports mark ECN.
    pub ecn_threshold_bytes: u64,
    /// The session checksum the workers present.
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
pub(super) struct Reader {
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
    pub(super) fn read(mut self, entries: &Entries) -> Result<SwitchTables, EntriesError> {
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

    /// The switch's tables from what was read, checked whole: the job and its workers' ports,
    /// the vertices' owners, the ECN threshold, one exchange plan per layer, the recirculation
    /// paths and groups, and the all-reduce region.
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
        let ports = self.worker_ports(workers)?;
        let owners = self.owners(&ports)?;
        let cells = self.ecn_cells()?;
        let layers = self.plans(&owners, workers, pipe_of(recirc))?;
        if layers.is_empty() {
            return Err(layout("no layer configuration entries".into()));
        }
        let paths = self.check_paths(entries, &ports)?;
        self.check_groups(entries, job, &ports, &paths)?;
        let allreduce_slots = self.allreduce_slots(entries)?;
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

    /// Each worker's port, from its admission entry; every worker must also have an address.
    fn worker_ports(&self, workers: u16) -> Result<Vec<u16>, EntriesError> {
        let layout = |m: String| EntriesError::Layout(m);
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
        Ok(ports)
    }

    /// The owner of every vertex the blocks list.
    fn owners(&self, ports: &[u16]) -> Result<BTreeMap<u32, u16>, EntriesError> {
        let layout = |m: String| EntriesError::Layout(m);
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
        Ok(owners)
    }

    /// The one ECN threshold (in cells) every port has; the layers must be numbered from 0.
    fn ecn_cells(&self) -> Result<u64, EntriesError> {
        let layout = |m: String| EntriesError::Layout(m);
        let cells = match self.ecn_cells.len() {
            0 => return Err(layout("no ECN marking entries".into())),
            1 => *self.ecn_cells.first().expect("one"),
            _ => return Err(layout("ports disagree on the ECN threshold".into())),
        };
        if self.layers.keys().copied().ne(0..self.layers.len() as u64) {
            return Err(layout("layers must be configured as 0, 1, 2, ...".into()));
        }

        Ok(cells)
    }

    /// One exchange plan per configured layer, its blocks rebuilt from the block tables of
    /// its set (layers of one set share them), `home` the job's home pipe.
    fn plans(
        &self,
        owners: &BTreeMap<u32, u16>,
        workers: u16,
        home: u8,
    ) -> Result<Vec<Arc<ExchangePlan>>, EntriesError> {
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
            for (&v, &w) in owners {
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
        Ok(layers)
    }

    /// The all-reduce region's slots (0 without one); its bank words must be cleared at
    /// install.
    fn allreduce_slots(&self, entries: &Entries) -> Result<u16, EntriesError> {
        let layout = |m: String| EntriesError::Layout(m);
        Ok(match self.allreduce {
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
