//! A discrete-event network simulator for switchgnn, at the paper's scale (128 workers on a
//! 100 Gbps star, or a leaf-spine) on one machine. It drives the dataplane's own sans-IO state machines — the
//! switch model and the host engines — so what it measures is the code that runs for real.
//!
//! - [`queue`]: the event queue (nanosecond clock, deterministic order) and a slab;
//! - [`fabric`]: links, drop-tail egress queues, the topology (a star or a leaf-spine), host
//!   NICs;
//! - [`driver`]: the event loop, recirculation, ECN feedback, chunk bundling;
//! - [`series`]: time series and delivered traffic;
//! - [`allreduce`]: the in-switch all-reduce against SwitchML's link bound;
//! - [`modes`]: the exchanges compared (host, g3, strawman, switchgnn, switchgnn-nogamr,
//!   reduce, hybrid, auto);
//! - [`background`], [`contention`]: TCP-like flows beside an exchange;
//! - [`racks`]: an exchange on leaf-spine fabrics against the star;
//! - [`sweep`]: a grid of runs over datasets, worker counts, memories and modes, and the
//!   studies' grids;
//! - [`report`], [`plot`]: CSV / JSON tables and SVG / PNG figures.

pub mod allreduce;
pub mod background;
pub mod contention;
pub mod driver;
pub mod fabric;
pub mod modes;
pub mod plot;
pub mod queue;
pub mod racks;
pub mod report;
pub mod series;
pub mod sweep;

pub use driver::{run, Bundle, HostNode, RunResult, SimConfig, SimError, SwitchNode};
pub use fabric::{HostSpec, LinkSpec, SwitchSpec, Topology};
pub use modes::{SendOrder, SimKind, SimMode};
