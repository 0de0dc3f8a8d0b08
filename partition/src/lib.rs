//! Offline preprocessing for switchgnn: split a graph across workers, measure its boundary,
//! model the traffic of each exchange, and cut the boundary graph into blocks that fit the
//! switch's aggregator memory.
//!
//! - [`assignment`]: METIS k-way, random and hash partitioners, or a part file from elsewhere;
//! - [`boundary`]: inner and boundary vertices, fan-out, boundary-graph components;
//! - [`traffic`]: bytes of the host exchange, ideal in-network aggregation and a block plan;
//! - [`blocks`]: multi-level block partitioning;
//! - [`tables`]: the switch's and each worker's lookup tables of a block;
//! - [`plan`]: the plan directory (manifest, assignment, blocks), written atomically and
//!   verified on load.

pub mod assignment;
pub mod blocks;
pub mod boundary;
mod error;
mod metis_kway;
pub mod plan;
pub mod shard;
pub mod size;
pub mod tables;
pub mod traffic;

pub use assignment::{Assignment, Method};
pub use blocks::{Block, BlockMethod, BlockParams, Blocks, Fill};
pub use boundary::Boundary;
pub use error::{ExchangeChoiceError, PartitionError, PlanCheckError, Result, ShardMismatch};
pub use metis_kway::{MetisOptions, Objective};
pub use plan::{ExchangeChoice, LayerChoice, OrderInfo, Plan, PlanSpec, PlannedOn};
pub use switchgnn_dataplane::table::BlockTable;
pub use tables::block_table;
pub use traffic::Traffic;
