//! The switchgnn dataplane: everything that moves a feature, as sans-IO state machines.
//!
//! - [`wire`]: the header (`Packet` view, `Repr`) and its int32 lanes;
//! - [`fixed`]: float ↔ int32 with SwitchML's no-overflow scale;
//! - [`framing`]: how the host exchange packs copies to the MTU and coalesces its acks;
//! - [`table`]: one block's lookup table (sources, destinations, expected counts);
//! - [`plan`]: what one exchange needs at run time (block tables, send orders, owners);
//! - [`switch`]: the switch model, exactly what the P4 program does;
//! - [`control`]: the control plane beside it (admission, heartbeats, liveness, abort, drain,
//!   rejoin), as sans-IO machines for the switch and the workers;
//! - [`allreduce`]: the gradient all-reduce in the switch (SwitchML), the worker's half;
//! - [`engine`]: the host protocol engine of one worker (in-network or host exchange);
//! - [`kind`]: the exchange kinds and the one factory of their engines;
//! - [`link`]: one model of a link direction and its queue, for every driver;
//! - [`cc`]: congestion control behind a trait (DCQCN-like AIMD by default);
//! - [`fault`]: the one seeded fault injector every driver runs;
//! - [`network`]: an in-memory star network with seeded faults that drives them all;
//! - [`reference`](mod@reference): fixed-point encoding of whole matrices, for the direct computation every
//!   exchange must equal exactly.
//!
//! It depends on no graph, partitioner or C library: plans come from the planning crates
//! (`switchgnn_scheduler::exchange`), bytes from whichever driver runs the state machines.

pub mod allreduce;
pub mod cc;
pub mod control;
pub mod engine;
pub mod fault;
pub mod fixed;
pub mod framing;
pub mod kind;
pub mod leafspine;
pub mod link;
pub mod network;
pub mod node;
pub mod plan;
pub mod reference;
pub mod switch;
pub mod table;
mod view;
pub mod wire;

pub use kind::ExchangeKind;
pub use node::{Address, ExchangeId, Nanos, Node, Operation, Outbox, Transmit};
