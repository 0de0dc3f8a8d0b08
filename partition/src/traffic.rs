//! The traffic model: bytes one layer of feature exchange of width `D` puts on the links between
//! the hosts and the switch (uplinks plus downlinks), counting payload only (headers depend on
//! the transport and are measured there). Counting both ends matters: a host-exchange copy
//! crosses its sender's uplink and its receiver's downlink, while in-network aggregation sends
//! a vertex up once and a sum down once — with two workers both move the same bytes.
//!
//! - *host exchange* (BNS-GCN with p = 1): every boundary vertex goes once to each remote worker
//!   that needs it, as `D` fp32 values: `2 · Σ fan-out · 4D` bytes (up and down);
//! - *in-network, ideal* (unlimited aggregator memory): every boundary vertex goes up to the
//!   switch once, and every vertex with remote neighbours receives one aggregated result, as
//!   `D` int32 lanes: `4D · B` up and `4D · B` down for `B` boundary vertices (the graph is
//!   symmetric, so senders and receivers are the same set);
//! - *block plan*: the same per block — a vertex sends once and receives once for every block
//!   its cross edges fall in.
//!
//! Aggregator memory: one aggregator is 256 bytes = 64 int32 lanes (the wire's chunk), so a
//! destination needs `⌈D/64⌉` aggregators.

use serde::Serialize;

use crate::boundary::Boundary;

/// int32 lanes per aggregator: one chunk of the wire format.
pub const LANES_PER_AGGREGATOR: u64 = switchgnn_dataplane::wire::MAX_LANES as u64;
/// Bytes of one aggregator on the switch.
pub const AGGREGATOR_BYTES: u64 = switchgnn_dataplane::switch::AGGREGATOR_BYTES;

/// Payload bytes of `rows` feature rows of width `width` (fp32 on hosts, int32 lanes on the
/// switch: 4 bytes per value either way).
pub fn row_bytes(rows: u64, width: usize) -> u64 {
    rows * 4 * width as u64
}

/// Aggregators one destination vertex needs for a width-`width` feature.
pub fn aggregators_per_vertex(width: usize) -> u64 {
    (width as u64).div_ceil(LANES_PER_AGGREGATOR)
}

/// Traffic of one layer and direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Traffic {
    /// Feature width exchanged.
    pub width: usize,
    /// Host exchange, uplinks plus downlinks.
    pub host_bytes: u64,
    /// Ideal in-network aggregation, uplinks: each boundary vertex sent once.
    pub ideal_up_bytes: u64,
    /// Ideal in-network aggregation, downlinks: each boundary vertex's sum received once.
    pub ideal_down_bytes: u64,
    /// Aggregator memory needed to hold every destination at once (the ideal's assumption).
    pub ideal_aggregator_bytes: u64,
    /// Aggregator memory the largest boundary component alone needs.
    pub largest_component_aggregator_bytes: u64,
}

impl Traffic {
    /// The traffic of one layer of `width` over `boundary`.
    pub fn estimate(boundary: &Boundary, width: usize) -> Traffic {
        let per_vertex_memory = aggregators_per_vertex(width) * AGGREGATOR_BYTES;
        Traffic {
            width,
            host_bytes: 2 * row_bytes(boundary.total_fanout, width),
            ideal_up_bytes: row_bytes(boundary.boundary_vertices, width),
            ideal_down_bytes: row_bytes(boundary.boundary_vertices, width),
            ideal_aggregator_bytes: boundary.boundary_vertices * per_vertex_memory,
            largest_component_aggregator_bytes: boundary.components.largest_vertices
                * per_vertex_memory,
        }
    }

    /// Ideal in-network aggregation, both directions.
    pub fn ideal_bytes(&self) -> u64 {
        self.ideal_up_bytes + self.ideal_down_bytes
    }

    /// Share of host-exchange traffic that ideal in-network aggregation saves (0.94 = −94%).
    pub fn ideal_reduction(&self) -> f64 {
        reduction(self.ideal_bytes(), self.host_bytes)
    }
}

/// `1 − ours/host`, or 0 when the host exchange sends nothing.
pub fn reduction(ours: u64, host: u64) -> f64 {
    if host == 0 {
        0.0
    } else {
        1.0 - ours as f64 / host as f64
    }
}
