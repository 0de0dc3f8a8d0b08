//! What a switch chip can do for an exchange, and what it cannot.
//!
//! SwitchGNN aggregates a source's contribution into each destination's aggregator with one
//! pipeline pass per destination. On a real chip every pass after a packet's first goes around
//! a recirculation path of bounded bandwidth, and every pass takes a slot of its pipe's packet
//! rate; the paper's evaluation assumes both are free. This crate holds
//!
//! - [`Chip`]: the presets `tofino1-32`, `tofino1-64`, `tofino2` and `ideal` (the paper's
//!   free recirculation), with every figure's public source, and the options a deployment
//!   changes (front-panel ports put in loopback, recirculation ports used);
//! - [`Load`]: what one exchange puts on the chip and on each host link — passes, lane
//!   updates, recirculated bytes, bytes and packets per host — for the SwitchGNN plan and for
//!   the host exchange it competes with;
//! - [`Bound`]: a lower bound on the exchange's time on a chip, and [`Verdict`]: whether
//!   in-network aggregation can beat the host exchange there, and by how much at best;
//! - [`Choice`]: the planner's pick among exchange kinds — the least bound, the host exchange
//!   on a tie;
//! - [`block_floors`]: the least time the chip needs for each block, under which a receiver
//!   does not fetch;
//! - [`paths`]: where the P4 program runs a packet's passes — the pipe of each destination's
//!   aggregators, a source's chains over the pipes, and the recirculation path of each pass —
//!   which `p4 entries` installs and the simulator's chip follows;
//! - [`Spread`]: how an exchange's passes and trips fall on those pipes and paths, whose
//!   busiest one [`Bound`] counts beside the pooled figures.

mod bound;
mod choice;
mod floor;
mod load;
pub mod paths;
mod preset;
mod spread;

pub use bound::{Bound, Term, Verdict};
pub use choice::{Candidate, Choice};
pub use floor::block_floors;
pub use load::{Delays, HostCost, HostFraming, Load, SwitchWork, Unchained};
pub use paths::PASS_HEADER;
pub use preset::{
    Chip, ChipChoice, ChipError, Preset, Source, MAX_LOOPED_PER_PIPE, PRESETS, SOURCES,
};
pub use spread::{pipe_room, place_block, Spread};
