//! switchgnn's packet I/O, in layers (as quinn-udp's socket layer, or smoltcp's `phy` under
//! its interface):
//!
//! - [`datapath`]: the trait every packet I/O implements and its plain types (datagrams, ECN
//!   codepoints, receive backlogs, the largest datagram);
//! - [`udp`]: the kernel's UDP stack as a datapath; [`frame`]: Ethernet / IPv4 / UDP frames;
//!   [`shim`]: the seeded fault shim on the send path;
//! - [`dpdk`]: DPDK's settings, and (cargo feature `dpdk`) its datapath; [`capture`]: pcap
//!   files of what an endpoint sends and receives;
//! - [`endpoint`]: batching, per-peer counters, the shim and captures over any datapath;
//! - [`open`](mod@open): a transport setting turned into an endpoint.
pub mod capture;
pub mod datapath;
pub mod dpdk;
pub mod endpoint;
pub mod frame;
pub mod open;
pub mod shim;
pub mod udp;

pub use datapath::{Datagram, EcnCodepoint, RxBacklog, MAX_DATAGRAM};
pub use endpoint::{Endpoint, EndpointStats, PeerCounters};
pub use open::{open, OpenError, Opening, Transport};
pub use shim::{ShimConfig, ShimStats};
