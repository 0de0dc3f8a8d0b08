//! The control plane of the Tofino program in `p4/`: the program's tables as the Rust side
//! knows them ([`program`]), a plan's table entries ([`entries`]) written as P4Runtime JSON
//! ([`p4runtime`]) or a bfrt_python script ([`bfrt`]) and read back for the software switch,
//! where a job sits on the switch ([`ports`]), the resource model ([`resources`]), and the
//! program through p4c's Tofino back end beside it ([`compile`]).

pub mod bfrt;
pub mod compile;
pub mod entries;
pub mod p4runtime;
pub mod ports;
pub mod program;
pub mod resources;

pub use entries::{Entries, EntriesError, SwitchTables};
pub use ports::Install;
