//! The plan's manifest: what it was made for, what it holds, and the checksum of every file,
//! as JSON sealed by a checksum of its own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::assignment::Method;
use crate::blocks::BlockMethod;
use crate::error::ExchangeChoiceError;
use crate::metis_kway::MetisOptions;

/// Version of the plan directory's format (manifest and binary files); a plan of another
/// version is refused, to be prepared again.
pub const FORMAT_VERSION: u32 = 2;

/// What to plan for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSpec {
    /// The dataset argument the plan was made from (a path or `synthetic:...`).
    pub dataset: String,
    /// Workers the graph is split across.
    pub workers: u32,
    /// How vertices are assigned to workers.
    pub partitioner: Method,
    /// Aggregator memory of the switch, bytes.
    pub switch_memory: u64,
    /// Width exchanged at each layer.
    pub feature_dims: Vec<usize>,
    /// Target share of capacity per METIS part in block partitioning.
    pub fill_target: f64,
    /// METIS options of the block partitioning.
    pub block_metis: MetisOptions,
    /// How blocks are cut.
    #[serde(default)]
    pub block_method: BlockMethod,
    /// Table entries one block may need on the switch ((vertex, aggregator) pairs plus
    /// destinations); `None`: no limit besides the aggregator memory.
    #[serde(default)]
    pub table_entries: Option<u64>,
}

impl PlanSpec {
    /// A spec with the defaults: METIS worker partition, 100 MB of aggregators (the paper's
    /// largest switch memory), blocks filled to 90 %, METIS blocks, no table-entry limit.
    /// The setters below change one field each.
    pub fn new(dataset: impl Into<String>, workers: u32, feature_dims: Vec<usize>) -> PlanSpec {
        PlanSpec {
            dataset: dataset.into(),
            workers,
            partitioner: Method::Metis(MetisOptions::default()),
            switch_memory: 100_000_000,
            feature_dims,
            fill_target: 0.9,
            block_metis: MetisOptions::default(),
            block_method: BlockMethod::default(),
            table_entries: None,
        }
    }

    /// Set [`PlanSpec::switch_memory`], bytes.
    pub fn switch_memory(mut self, bytes: u64) -> PlanSpec {
        self.switch_memory = bytes;
        self
    }

    /// Set [`PlanSpec::partitioner`].
    pub fn partitioner(mut self, method: Method) -> PlanSpec {
        self.partitioner = method;
        self
    }

    /// Set [`PlanSpec::fill_target`], a share in `(0, 1]`.
    pub fn fill_target(mut self, share: f64) -> PlanSpec {
        self.fill_target = share;
        self
    }

    /// Set [`PlanSpec::block_metis`].
    pub fn block_metis(mut self, options: MetisOptions) -> PlanSpec {
        self.block_metis = options;
        self
    }

    /// Set [`PlanSpec::block_method`].
    pub fn block_method(mut self, method: BlockMethod) -> PlanSpec {
        self.block_method = method;
        self
    }

    /// Set [`PlanSpec::table_entries`].
    pub fn table_entries(mut self, limit: Option<u64>) -> PlanSpec {
        self.table_entries = limit;
        self
    }
}

/// The graph a plan was made for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    /// The dataset's name.
    pub name: String,
    /// Vertices of the graph.
    pub vertices: usize,
    /// Undirected edges, each counted once.
    pub edges: u64,
    /// xxh3 of the CSR arrays: a plan only applies to the exact graph it was made for.
    pub fingerprint: u64,
}

/// The worker partition's boundary, as [`crate::Boundary`] measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundarySummary {
    /// Vertices with a neighbour on another worker.
    pub boundary_vertices: u64,
    /// Edges whose endpoints live on different workers.
    pub cross_edges: u64,
    /// Vertex copies the host exchange sends per layer.
    pub total_fanout: u64,
    /// Remote workers per boundary vertex, on average.
    pub mean_fanout: f64,
    /// Vertices of the boundary graph's largest component.
    pub largest_component_vertices: u64,
    /// Largest worker's vertices over the mean.
    pub imbalance: f64,
}

/// One block set: the blocks for every width needing the same aggregators per vertex.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockSetInfo {
    /// Aggregators each destination takes (names the set's files).
    pub aggregators_per_vertex: u64,
    /// The widest layer this set serves.
    pub width: usize,
    /// Destinations one block may hold.
    pub capacity_vertices: u64,
    /// Deepest level of the multi-level cut.
    pub levels: u32,
    /// Blocks in the set.
    pub blocks: usize,
    /// Destinations over capacity, averaged over blocks.
    pub mean_fill: f64,
    /// The least-filled block's destinations over capacity.
    pub min_fill: f64,
    /// Destinations summed over blocks: the rows the plan sends each way.
    pub vertex_slots: u64,
    /// The set's blocks file in the plan directory.
    pub file: String,
}

/// Payload bytes of one layer, one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerTraffic {
    /// The layer, from 0.
    pub layer: usize,
    /// Feature width the layer exchanges.
    pub width: usize,
    /// The host exchange (a copy per remote worker), bytes.
    pub host_bytes: u64,
    /// Ideal in-network aggregation (all destinations at once), bytes.
    pub ideal_bytes: u64,
    /// This plan's blocks, bytes.
    pub plan_bytes: u64,
    /// Share of the host bytes the ideal saves.
    pub ideal_reduction: f64,
    /// Share of the host bytes this plan saves.
    pub plan_reduction: f64,
}

/// Size and checksum of one file of the plan, recorded in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileSum {
    /// Length of the file.
    pub bytes: u64,
    /// xxh3 of its bytes.
    pub xxh3: u64,
}

/// Which send order the plan's blocks carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderInfo {
    /// The order's name (e.g. `priority-bfs`), as the scheduler calls it.
    pub kind: String,
    /// Seed of the order's random choices.
    pub seed: u64,
}

/// The exchange kind chosen for each layer (`switchgnn prepare --exchange`), with what the
/// choice was based on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExchangeChoice {
    /// `auto` (the least predicted time on `chip`) or the kind the user named.
    pub by: String,
    /// The chip the predictions are for, in words.
    pub chip: String,
    /// One per layer, in layer order.
    pub layers: Vec<LayerChoice>,
    /// The chip and hosts the choice was made for: a hybrid layer's plan is rebuilt for
    /// them by every process of the job (`None`: the default chip for the worker count).
    #[serde(default)]
    pub planned_on: Option<PlannedOn>,
}

/// The chip options and host costs of a choice (`switchgnn_chip::ChipChoice` and
/// `HostCost`, kept as plain values here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedOn {
    /// The chip preset's name.
    pub preset: String,
    /// Front-panel ports put in loopback.
    pub loopback_ports: u32,
    /// Dedicated recirculation ports used (`None`: the chip's default).
    pub recirculation_ports: Option<u32>,
    /// Host link rate, Gb/s.
    pub link_gbps: f64,
    /// A host's cost per packet sent or received, ns.
    pub host_packet_ns: f64,
    /// The MTU and the packets per acknowledgement of the host-only baseline the kinds were
    /// judged against (`switchgnn_chip::HostFraming`); `None` in plans made before the
    /// baseline was framed so, which judged against one 64-lane chunk per packet.
    #[serde(default)]
    pub host_mtu: Option<u32>,
    /// Packets per acknowledgement of that baseline; `None` as for `host_mtu`.
    #[serde(default)]
    pub host_ack_every: Option<u32>,
    /// One-way delays whose latency the bounds added, ns (`switchgnn_chip::Delays`): from a
    /// host to the exchange's switch, and between two hosts. 0, or absent in plans made before
    /// bounds counted latency: none.
    #[serde(default)]
    pub to_switch_delay_ns: f64,
    /// See `to_switch_delay_ns`.
    #[serde(default)]
    pub host_to_host_delay_ns: f64,
}

/// One layer's exchange kind, and the predicted time (seconds) of every kind weighed: the chip
/// model's lower bound, the busiest resource of the chip and the hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerChoice {
    /// The exchange kind's name (`switchgnn_dataplane::ExchangeKind`).
    pub kind: String,
    /// Predicted seconds of each kind weighed, by name.
    pub predicted_s: BTreeMap<String, f64>,
}

/// The plan directory's `manifest.json`: what the plan is for and what it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// What the plan was made for.
    pub spec: PlanSpec,
    /// Send order of every block; absent until [`Plan::set_orders`](super::Plan::set_orders).
    #[serde(default)]
    pub order: Option<OrderInfo>,
    /// The exchange kind of each layer; absent until
    /// [`Plan::set_exchange`](super::Plan::set_exchange).
    #[serde(default)]
    pub exchange: Option<ExchangeChoice>,
    /// The graph it applies to.
    pub dataset: DatasetInfo,
    /// The worker partition's boundary.
    pub boundary: BoundarySummary,
    /// One per distinct aggregators-per-vertex.
    pub block_sets: Vec<BlockSetInfo>,
    /// Predicted bytes of each layer.
    pub traffic: Vec<LayerTraffic>,
    /// Size and checksum of every other file, by name.
    pub files: BTreeMap<String, FileSum>,
    /// The switchgnn version that prepared the plan.
    pub created_by: String,
    /// xxh3 (hex) of this manifest as written without this field: a manifest edited by hand
    /// or damaged fails it, so none of its fields can disagree with what was prepared.
    /// Written last, checked first (after the format version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

impl Manifest {
    /// The manifest's bytes on disk: pretty JSON with its own checksum (the one in memory
    /// keeps none).
    pub(super) fn sealed(&self) -> Vec<u8> {
        let mut sealed = Manifest {
            checksum: None,
            ..self.clone()
        };
        let body = serde_json::to_vec_pretty(&sealed).expect("manifest serialises");
        sealed.checksum = Some(format!("{:016x}", xxh3_64(&body)));
        serde_json::to_vec_pretty(&sealed).expect("manifest serialises")
    }

    /// Check the checksum of a manifest read from disk (it is then taken out).
    pub(super) fn unseal(&mut self) -> std::result::Result<(), SealError> {
        let Some(stated) = self.checksum.take() else {
            return Err(SealError::Unsealed);
        };
        let body = serde_json::to_vec_pretty(self).expect("manifest serialises");
        let actual = format!("{:016x}", xxh3_64(&body));
        if stated == actual {
            Ok(())
        } else {
            Err(SealError::Broken { stated, actual })
        }
    }
}

/// Why a manifest read from disk is not the one `switchgnn prepare` wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SealError {
    /// The manifest carries no checksum.
    #[error("no checksum of its own: not written by switchgnn prepare")]
    Unsealed,
    /// The checksum does not match the contents.
    #[error(
        "its checksum ({stated}) is not that of its contents ({actual}): edited by hand or \
         damaged; prepare the plan again"
    )]
    Broken {
        /// The checksum the manifest states.
        stated: String,
        /// The checksum of its contents.
        actual: String,
    },
}

/// A choice names one kind per layer.
pub(super) fn check_exchange(
    choice: &ExchangeChoice,
    layers: usize,
) -> std::result::Result<(), ExchangeChoiceError> {
    if choice.layers.len() != layers {
        return Err(ExchangeChoiceError::Layers {
            choice: choice.layers.len(),
            plan: layers,
        });
    }
    if let Some(l) = choice.layers.iter().position(|l| l.kind.is_empty()) {
        return Err(ExchangeChoiceError::NoKind(l));
    }
    Ok(())
}
