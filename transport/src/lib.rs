//! switchgnn over real packets: the protocol's sans-IO state machines (the switch model, the
//! exchange engines and the control plane of `switchgnn-dataplane`) driven in real time over
//! UDP.
//!
//! Packet I/O (the endpoint, its datapaths, captures) lives in `switchgnn-net`; [`capture`],
//! [`dpdk`] and the endpoint's types are re-exported here for the callers of this crate.
//!
//! - [`job`]: the job file (TOML) and the rank from launcher variables;
//! - [`liveness`]: when the switch process last heard each worker, for its services;
//! - [`session`]: the per-layer exchange plans both sides derive, their checksum, the schedule;
//! - [`server`]: the software switch process;
//! - [`client`]: a worker's connection and real-time driver;
//! - [`collective`]: the all-reduce of a training job (a parameter server in the switch
//!   process, over TCP);
//! - [`participant`]: a training worker's exchanges and all-reduces (float rows in, sums out),
//!   for the Rust trainer and the Python package alike;
//! - [`loopback`]: a whole exchange job in one process (switch and workers as threads);
//! - [`tcp_exchange`]: the host exchange over TCP between the workers, the kernel's own
//!   transport as a baseline;
//! - [`plan_dir`]: the prepared plan folder (plan, shards, saved exchange plans), read and
//!   written;
//! - [`runner`]: a worker's whole run of `switchgnn exchange` (values, engines, the check);
//! - [`workload`]: the values exchanged and the direct computation they are checked against.
pub mod client;
pub mod collective;
pub mod job;
pub mod liveness;
pub mod loopback;
pub mod participant;
pub mod plan_dir;
pub mod runner;
pub mod server;
mod server_config;
pub mod session;
pub mod session_file;
pub mod tcp_exchange;
pub mod workload;

pub use client::{WorkerClient, WorkerConfig, WorkerError};
pub use job::{JobFile, Link, Timeouts};
pub use participant::{Participant, ParticipantError};
pub use plan_dir::{PlanDir, PlanDirError};
pub use server::{Overload, ServerConfig, ServerError, ServerReport, SwitchServer};
pub use session::Session;
pub use switchgnn_dataplane::ExchangeKind;
pub use switchgnn_net::{capture, dpdk};
pub use switchgnn_net::{Endpoint, EndpointStats, PeerCounters, ShimConfig};
