//! A job's exchange plans saved beside its shards, so that the switch and the workers of a
//! kind that is computed from the graph (host, g3, strawman, reduce, hybrid, auto) need not
//! load the graph. SwitchGNN's plans come from the plan directory itself and are never saved.
//!
//! A [`container`](switchgnn_datasets::container) file of kind `SGNNSESS`: a `meta` section
//! (JSON: the kind, the fingerprints of the graph and the assignment it was built for, each
//! layer's mode, width and block count, the session checksum), and per layer `l` the owner map
//! `L<l>.owner` (u16), the block lengths `L<l>.lens` (u64, [`ARRAYS`] per block) and every
//! block array of the layer concatenated, `L<l>.<array>`. Loading rebuilds every block through
//! the same checked constructors as planning, and compares the session's checksum.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::plan::{ExchangePlan, Mode, Multicast, Partials, PlanBlock, PlanError};
use switchgnn_dataplane::table::BlockTable;
use switchgnn_dataplane::ExchangeKind;
use switchgnn_datasets::container::{Container, Section};
use switchgnn_partition::shard::{assignment_fingerprint, SHARDS_DIR};
use switchgnn_partition::Plan;
use thiserror::Error;

use crate::session::Session;

/// The container's magic: a saved exchange session.
pub const MAGIC: &[u8; 8] = b"SGNNSESS";
/// The format this build writes and reads.
pub const VERSION: u32 = 1;

/// A block's arrays of 32-bit entries, then of 64-bit ones: the order of a block's lengths in
/// `L<l>.lens`.
pub const ARRAYS_U32: [&str; 8] = [
    "vertices",
    "workers",
    "expected",
    "slots",
    "order",
    "p.sources",
    "m.vertices",
    "m.rows",
];
/// A block's arrays of 64-bit entries (see [`ARRAYS_U32`]).
pub const ARRAYS_U64: [&str; 3] = ["offsets", "p.starts", "m.offsets"];
const ARRAYS: usize = ARRAYS_U32.len() + ARRAYS_U64.len();

/// Block `b`'s arrays in the order of [`ARRAYS_U32`] (the order as vertex ids) and
/// [`ARRAYS_U64`].
fn block_arrays(b: &PlanBlock) -> ([Vec<u32>; 8], [&[u64]; 3]) {
    let (t, pa, m) = (&b.table, &b.partials, &b.multicast);
    let order = b.order.iter().map(|&r| t.vertices[r as usize]).collect();
    (
        [
            t.vertices.clone(),
            t.workers.clone(),
            t.expected.clone(),
            t.slots.clone(),
            order,
            pa.sources.clone(),
            m.vertices.clone(),
            m.rows.clone(),
        ],
        [&t.offsets, &pa.starts, &m.offsets],
    )
}

/// One concatenated array of a layer, consumed block by block.
struct Column<T> {
    data: Vec<T>,
    used: usize,
}

impl<T: Copy> Column<T> {
    fn take(&mut self, n: usize) -> Option<Vec<T>> {
        let got = self.data.get(self.used..self.used + n)?.to_vec();
        self.used += n;
        Some(got)
    }

    fn finished(&self) -> bool {
        self.used == self.data.len()
    }
}

/// Where the saved session of `kind` lives in plan directory `plan`.
pub fn session_path(plan: &Path, kind: ExchangeKind) -> PathBuf {
    plan.join(SHARDS_DIR)
        .join(format!("exchange-{}.session", kind.name()))
}

/// Where worker `rank`'s saved view of the session of `kind` lives.
pub fn view_path(plan: &Path, kind: ExchangeKind, rank: u16) -> PathBuf {
    plan.join(SHARDS_DIR)
        .join(format!("exchange-{}-worker-{rank:04}.session", kind.name()))
}

/// Why a saved session cannot be used.
#[derive(Debug, Error)]
pub enum SessionFileError {
    /// The file cannot be read or is malformed.
    #[error(transparent)]
    File(#[from] switchgnn_datasets::Error),
    /// The file is sound but not the session the job needs.
    #[error("{}: {why}", path.display())]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What differs.
        why: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    kind: String,
    graph_fingerprint: u64,
    assignment_fingerprint: u64,
    checksum: u64,
    layers: Vec<LayerMeta>,
    /// The worker whose view this is (`Session::for_worker`); `None`: the whole session.
    #[serde(default)]
    view_of: Option<u16>,
    writer: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct LayerMeta {
    mode: String,
    width: usize,
    workers: u16,
    blocks: usize,
}

fn mode_named(name: &str) -> Option<Mode> {
    [
        Mode::Blocks,
        Mode::Strawman,
        Mode::Host,
        Mode::Reduce,
        Mode::HostReduce,
        Mode::HostHybrid,
        Mode::HostTwoLevel,
    ]
    .into_iter()
    .find(|m| m.name() == name)
}

/// Save `session`, built for `plan`, to `path` atomically.
pub fn write(session: &Session, plan: &Plan, path: &Path) -> Result<(), SessionFileError> {
    write_any(session, None, plan, path)
}

/// Save worker `rank`'s view of a session (`Session::for_worker`), built for `plan`.
pub fn write_view(
    view: &Session,
    rank: u16,
    plan: &Plan,
    path: &Path,
) -> Result<(), SessionFileError> {
    write_any(view, Some(rank), plan, path)
}

fn write_any(
    session: &Session,
    view_of: Option<u16>,
    plan: &Plan,
    path: &Path,
) -> Result<(), SessionFileError> {
    let meta = Meta {
        view_of,
        kind: session.mode.name().into(),
        graph_fingerprint: plan.manifest.dataset.fingerprint,
        assignment_fingerprint: assignment_fingerprint(plan.assignment.parts()),
        checksum: session.checksum,
        layers: session
            .layers
            .iter()
            .map(|p| LayerMeta {
                mode: p.mode.name().into(),
                width: p.width,
                workers: p.workers,
                blocks: p.blocks.len(),
            })
            .collect(),
        writer: concat!("switchgnn-transport ", env!("CARGO_PKG_VERSION")).into(),
    };
    let meta = serde_json::to_vec(&meta).expect("meta serialises");
    let mut u16s: Vec<(String, &[u16])> = Vec::new();
    let mut u32s: Vec<(String, Vec<u32>)> = Vec::new();
    let mut u64s: Vec<(String, Vec<u64>)> = Vec::new();
    for (l, p) in session.layers.iter().enumerate() {
        let mut lens = Vec::with_capacity(p.blocks.len() * ARRAYS);
        let mut narrow: [Vec<u32>; 8] = Default::default();
        let mut wide: [Vec<u64>; 3] = Default::default();
        for b in &p.blocks {
            let (n, w) = block_arrays(b);
            lens.extend(n.iter().map(|a| a.len() as u64));
            lens.extend(w.iter().map(|a| a.len() as u64));
            narrow.iter_mut().zip(n).for_each(|(c, a)| c.extend(a));
            wide.iter_mut()
                .zip(w)
                .for_each(|(c, a)| c.extend_from_slice(a));
        }
        u16s.push((format!("L{l}.owner"), &p.owner));
        u64s.push((format!("L{l}.lens"), lens));
        u32s.extend(
            ARRAYS_U32
                .iter()
                .zip(narrow)
                .map(|(n, a)| (format!("L{l}.{n}"), a)),
        );
        u64s.extend(
            ARRAYS_U64
                .iter()
                .zip(wide)
                .map(|(n, a)| (format!("L{l}.{n}"), a)),
        );
    }
    let mut sections = vec![Section::u8s("meta", &meta)];
    sections.extend(u16s.iter().map(|(n, a)| Section::u16s(n.clone(), a)));
    sections.extend(u32s.iter().map(|(n, a)| Section::u32s(n.clone(), a)));
    sections.extend(u64s.iter().map(|(n, a)| Section::u64s(n.clone(), a)));
    switchgnn_datasets::container::write(path, MAGIC, VERSION, &sections)?;
    Ok(())
}

/// Read the session of `kind` saved at `path` for `plan`, checking that it was built for
/// this plan's graph and assignment and that its blocks are sound.
pub fn read(path: &Path, plan: &Plan, kind: ExchangeKind) -> Result<Session, SessionFileError> {
    read_any(path, plan, kind, None)
}

/// Read worker `rank`'s view of the session of `kind` saved at `path` for `plan`. A view's
/// blocks are checked for shape (every index in range) rather than against the planning rules
/// a view by design breaks (a destination's other contributors are left out); its checksum is
/// the whole session's, as saved.
pub fn read_view(
    path: &Path,
    plan: &Plan,
    kind: ExchangeKind,
    rank: u16,
) -> Result<Session, SessionFileError> {
    read_any(path, plan, kind, Some(rank))
}

/// Read a saved session: check its header against what the job runs ([`read_meta`]), read
/// each layer's plan ([`read_layer`]), then check the whole session's checksum (a view keeps
/// the one it was saved with).
fn read_any(
    path: &Path,
    plan: &Plan,
    kind: ExchangeKind,
    view_of: Option<u16>,
) -> Result<Session, SessionFileError> {
    let file = Container::open(path, MAGIC, "switchgnn saved exchange session")?;
    let meta = read_meta(&file, path, plan, kind, view_of)?;
    let mut layers = Vec::with_capacity(meta.layers.len());
    for (l, lm) in meta.layers.iter().enumerate() {
        layers.push(Arc::new(read_layer(&file, l, lm, plan, view_of)?));
    }
    if view_of.is_some() {
        return Ok(Session {
            mode: kind,
            layers,
            checksum: meta.checksum,
        });
    }
    let session = Session::from_layers(kind, layers);
    if session.checksum != meta.checksum {
        return Err(mismatch(
            path,
            "the plans read back do not give the checksum they were saved with".into(),
        ));
    }
    Ok(session)
}

/// A saved session that is not the one the job needs.
fn mismatch(path: &Path, why: String) -> SessionFileError {
    SessionFileError::Mismatch {
        path: path.to_path_buf(),
        why,
    }
}

/// The file's header, checked: its format version, exchange kind, whole session or view,
/// and the graph and assignment it was saved for.
fn read_meta(
    file: &Container,
    path: &Path,
    plan: &Plan,
    kind: ExchangeKind,
    view_of: Option<u16>,
) -> Result<Meta, SessionFileError> {
    if file.version() != VERSION {
        return Err(mismatch(
            path,
            format!(
                "session format {}, this build reads {VERSION}; save it again with `switchgnn shard`",
                file.version()
            ),
        ));
    }
    let meta: Meta = file.json("meta")?;
    if meta.kind != kind.name() {
        return Err(mismatch(
            path,
            format!(
                "it holds the {} exchange, the job runs {}",
                meta.kind,
                kind.name()
            ),
        ));
    }
    if meta.view_of != view_of {
        let what = |v: Option<u16>| match v {
            None => "the whole session".to_string(),
            Some(r) => format!("worker {r}'s view"),
        };
        return Err(mismatch(
            path,
            format!("it holds {}, not {}", what(meta.view_of), what(view_of)),
        ));
    }
    if meta.graph_fingerprint != plan.manifest.dataset.fingerprint
        || meta.assignment_fingerprint != assignment_fingerprint(plan.assignment.parts())
    {
        return Err(mismatch(
            path,
            "it was saved for another plan (graph or assignment fingerprint differs); save it \
             again with `switchgnn shard`"
                .into(),
        ));
    }
    Ok(meta)
}

/// Layer `l`'s exchange plan: its blocks cut from the layer's arrays by their saved lengths,
/// every entry accounted for, and the owner of every vertex.
fn read_layer(
    file: &Container,
    l: usize,
    lm: &LayerMeta,
    plan: &Plan,
    view_of: Option<u16>,
) -> Result<ExchangePlan, SessionFileError> {
    let bad = |section: String, why: String| -> SessionFileError {
        file.bad(format!("section `{section}`"), why).into()
    };
    let mode = mode_named(&lm.mode)
        .ok_or_else(|| bad("meta".into(), format!("unknown mode `{}`", lm.mode)))?;
    let lens = file.u64s(&format!("L{l}.lens"))?;
    if lens.len() != lm.blocks * ARRAYS {
        return Err(bad(
            format!("L{l}.lens"),
            format!("{} lengths for {} blocks", lens.len(), lm.blocks),
        ));
    }
    let mut narrow = Vec::with_capacity(ARRAYS_U32.len());
    for name in ARRAYS_U32 {
        narrow.push(Column {
            data: file.u32s(&format!("L{l}.{name}"))?,
            used: 0,
        });
    }
    let mut wide = Vec::with_capacity(ARRAYS_U64.len());
    for name in ARRAYS_U64 {
        wide.push(Column {
            data: file.u64s(&format!("L{l}.{name}"))?,
            used: 0,
        });
    }
    let short = |b: usize| {
        bad(
            format!("L{l}.lens"),
            format!("block {b} runs past its arrays"),
        )
    };
    let mut blocks = Vec::with_capacity(lm.blocks);
    for (b, block_lens) in lens.chunks_exact(ARRAYS).enumerate() {
        let mut n: Vec<Vec<u32>> = Vec::with_capacity(ARRAYS_U32.len());
        for (column, &len) in narrow.iter_mut().zip(block_lens) {
            n.push(column.take(len as usize).ok_or_else(|| short(b))?);
        }
        let mut w: Vec<Vec<u64>> = Vec::with_capacity(ARRAYS_U64.len());
        for (column, &len) in wide.iter_mut().zip(&block_lens[ARRAYS_U32.len()..]) {
            w.push(column.take(len as usize).ok_or_else(|| short(b))?);
        }
        let block =
            read_block(n, w, (l, b), lm, mode, plan, view_of).map_err(|(s, why)| bad(s, why))?;
        blocks.push(block);
    }
    if !narrow.iter().all(Column::finished) || !wide.iter().all(Column::finished) {
        return Err(bad(
            format!("L{l}.lens"),
            "the block lengths do not account for every array entry".into(),
        ));
    }
    let owner = file.u16s(&format!("L{l}.owner"))?;
    if owner.len() != plan.manifest.dataset.vertices {
        return Err(bad(
            format!("L{l}.owner"),
            format!(
                "{} owners for the plan's {} vertices",
                owner.len(),
                plan.manifest.dataset.vertices
            ),
        ));
    }
    ExchangePlan::new(mode, lm.width, u32::from(lm.workers), owner, blocks)
        .map_err(|e| bad(format!("L{l}.order"), e.to_string()))
}

/// Block `b` of layer `l` from its eight `u32` and three `u64` arrays: its table checked, and
/// built as a view's block, a hybrid's (with partial sums and multicast) or a plain one. A
/// failure names the section at fault and why.
fn read_block(
    narrow: Vec<Vec<u32>>,
    wide: Vec<Vec<u64>>,
    (l, b): (usize, usize),
    lm: &LayerMeta,
    mode: Mode,
    plan: &Plan,
    view_of: Option<u16>,
) -> Result<PlanBlock, (String, String)> {
    let [vertices, workers, expected, slots, order, sources, m_vertices, m_rows]: [Vec<u32>; 8] =
        narrow.try_into().expect("eight arrays");
    let [offsets, starts, m_offsets]: [Vec<u64>; 3] = wide.try_into().expect("three arrays");
    let table = BlockTable {
        vertices,
        workers,
        expected,
        offsets,
        slots,
    };
    let slot_bound = if mode.pre_aggregated() {
        usize::from(lm.workers)
    } else {
        table.len()
    };
    table
        .check(u32::from(lm.workers), slot_bound)
        .map_err(|why| (format!("L{l}.vertices"), format!("block {b}: {why}")))?;
    let partials = Partials { starts, sources };
    let multicast = Multicast {
        vertices: m_vertices,
        offsets: m_offsets,
        rows: m_rows,
    };
    let block = if view_of.is_some() {
        view_block(table, order, partials, multicast, mode, plan)
    } else if mode.pre_aggregated() {
        PlanBlock::hybrid(table, &order, partials, multicast)
    } else if partials != Partials::default() || multicast != Multicast::default() {
        return Err((
            format!("L{l}.p.sources"),
            format!("block {b} of a {} layer has partial sums", mode.name()),
        ));
    } else {
        PlanBlock::new(table, &order)
    };
    block.map_err(|e| (format!("L{l}.order"), format!("block {b}: {e}")))
}

/// A view's block from its arrays, checked for shape: `order` lists table rows (a view stores
/// them as vertex ids like the whole plan, mapped back here), partial-sum ranges and multicast
/// rows stay inside their arrays and the table, and every vertex named lies in the graph.
fn view_block(
    table: BlockTable,
    order: Vec<u32>,
    partials: Partials,
    multicast: Multicast,
    mode: Mode,
    plan: &Plan,
) -> Result<PlanBlock, PlanError> {
    let bad = |why: &str| Err(PlanError::BadOrder(format!("a worker's view: {why}")));
    let n = plan.manifest.dataset.vertices as u32;
    let order = order
        .iter()
        .map(|v| table.vertices.binary_search(v).map(|r| r as u32))
        .collect::<Result<Vec<u32>, _>>();
    let Ok(order) = order else {
        return bad("the order names a vertex outside its block");
    };
    let ranges_ok = |starts: &[u64], len: usize, entries: usize| {
        starts.len() == entries + 1
            && starts.first() == Some(&0)
            && starts.last() == Some(&(len as u64))
            && starts.windows(2).all(|w| w[0] < w[1])
    };
    if mode.pre_aggregated() && partials.known() {
        if !ranges_ok(&partials.starts, partials.sources.len(), table.slots.len())
            || partials.sources.iter().any(|&u| u >= n)
        {
            return bad("partial-sum ranges or sources out of place");
        }
    } else if partials != Partials::default() {
        return bad("partial sums outside a reduce block");
    }
    let m = &multicast;
    if *m != Multicast::default()
        && (m.offsets.len() != m.vertices.len() + 1
            || m.offsets.first() != Some(&0)
            || m.offsets.last() != Some(&(m.rows.len() as u64))
            || m.offsets.windows(2).any(|w| w[0] > w[1])
            || m.rows.iter().any(|&r| r as usize >= table.len())
            || m.vertices.iter().any(|&u| u >= n))
    {
        return bad("multicast senders out of place");
    }
    if table.vertices.last().is_some_and(|&v| v >= n) {
        return bad("a vertex beyond the graph");
    }
    Ok(PlanBlock {
        table,
        order,
        partials,
        multicast,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchgnn_datasets::synthetic::{generate, Preset};
    use switchgnn_datasets::NoProgress;
    use switchgnn_partition::PlanSpec;

    fn plan_of(workers: u32) -> (switchgnn_datasets::Dataset, Plan) {
        let d = generate(&Preset::Small.spec(0.2, 5).unwrap(), &NoProgress).unwrap();
        let spec = PlanSpec::new("synthetic:small", workers, vec![16, 8]).switch_memory(64 << 10);
        let plan = Plan::prepare(&d, &spec, &|_| {}).unwrap();
        (d, plan)
    }

    #[test]
    fn every_kind_round_trips_exactly() {
        let (d, plan) = plan_of(3);
        let dir = tempfile::tempdir().unwrap();
        for kind in [
            ExchangeKind::Switchgnn,
            ExchangeKind::Host,
            ExchangeKind::BalancedHost,
            ExchangeKind::Strawman,
            ExchangeKind::Reduce,
            ExchangeKind::HostReduce,
            ExchangeKind::HostHybrid,
            ExchangeKind::HostTwoLevel,
        ] {
            let session = Session::new(&plan, &d.graph, kind).unwrap();
            let path = dir.path().join(format!("{}.session", kind.name()));
            write(&session, &plan, &path).unwrap();
            let back = read(&path, &plan, kind).unwrap();
            assert_eq!(back.checksum, session.checksum, "{}", kind.name());
            assert_eq!(back.layers, session.layers, "{}", kind.name());
            // Asked for another kind, the file says which it holds.
            let other = if kind == ExchangeKind::Host {
                ExchangeKind::Reduce
            } else {
                ExchangeKind::Host
            };
            let err = read(&path, &plan, other).unwrap_err().to_string();
            assert!(err.contains(&format!("holds the {}", kind.name())), "{err}");
        }
    }

    #[test]
    fn every_workers_view_round_trips_and_is_a_fraction_of_the_plan() {
        let (d, plan) = plan_of(4);
        let dir = tempfile::tempdir().unwrap();
        for kind in [
            ExchangeKind::Switchgnn,
            ExchangeKind::Host,
            ExchangeKind::Strawman,
            ExchangeKind::Reduce,
            ExchangeKind::HostReduce,
            ExchangeKind::HostHybrid,
            ExchangeKind::HostTwoLevel,
        ] {
            let session = Session::new(&plan, &d.graph, kind).unwrap();
            let entries = |s: &Session| -> usize {
                s.layers
                    .iter()
                    .flat_map(|p| &p.blocks)
                    .map(|b| b.table.slots.len() + b.partials.sources.len())
                    .sum()
            };
            let mut in_views = 0;
            for rank in 0..4 {
                let view = session.for_worker(rank);
                let path = view_path(dir.path(), kind, rank);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                write_view(&view, rank, &plan, &path).unwrap();
                let back = read_view(&path, &plan, kind, rank).unwrap();
                assert_eq!(back.checksum, session.checksum, "{}", kind.name());
                assert_eq!(back.layers, view.layers, "{} worker {rank}", kind.name());
                assert!(entries(&view) < entries(&session), "{}", kind.name());
                in_views += entries(&view);
                // A view is not the whole session, nor another worker's.
                let err = read(&path, &plan, kind).unwrap_err().to_string();
                assert!(err.contains(&format!("worker {rank}'s view")), "{err}");
                let err = read_view(&path, &plan, kind, (rank + 1) % 4)
                    .unwrap_err()
                    .to_string();
                assert!(err.contains("not worker"), "{err}");
            }
            // Each per-edge entry (a slot, a partial's source) is held by at most the two
            // workers at its ends.
            assert!(
                in_views <= 2 * entries(&session),
                "{}: {in_views} in views against {} in the plan",
                kind.name(),
                entries(&session)
            );
        }
    }

    #[test]
    fn a_session_of_another_plan_or_a_lying_file_is_refused() {
        let (d, plan) = plan_of(3);
        let (_, other) = plan_of(2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.session");
        let session = Session::new(&plan, &d.graph, ExchangeKind::Host).unwrap();
        write(&session, &plan, &path).unwrap();
        let err = read(&path, &other, ExchangeKind::Host)
            .unwrap_err()
            .to_string();
        assert!(err.contains("another plan"), "{err}");

        // Well-formed sections whose tables break the plan's rules: named, never a panic.
        let mut bad = (*session.layers[0]).clone();
        bad.blocks[0].table.offsets[1] = u64::MAX;
        let lying = Session::from_layers(ExchangeKind::Host, vec![Arc::new(bad)]);
        write(&lying, &plan, &path).unwrap();
        let err = read(&path, &plan, ExchangeKind::Host)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("L0.vertices") && err.contains("row offsets"),
            "{err}"
        );
    }
}
