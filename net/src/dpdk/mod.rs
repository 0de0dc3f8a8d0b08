//! DPDK: Ethernet / IPv4 / UDP frames straight from and to the NIC's rings, past the kernel.
//!
//! - [`settings`]: the `[dpdk]` section of a job file and what each process makes of it (its
//!   EAL arguments, ARP table, CPUs) — plain data, in every build;
//! - `datapath` (cargo feature `dpdk`): the [`Datapath`](crate::datapath::Datapath) over the
//!   EAL's ports.

mod affinity;
#[cfg(feature = "dpdk")]
mod datapath;
pub mod settings;

#[cfg(feature = "dpdk")]
pub use datapath::{is_real, DpdkDatapath};
pub use settings::{parse_mac, DpdkSettings, DpdkSettingsError, Role};

/// Whether this build has the DPDK datapath (cargo feature `dpdk`).
pub const IN_THIS_BUILD: bool = cfg!(feature = "dpdk");
