//! The control-plane state of one job: table entries, multicast groups and mirror sessions,
//! in a format-neutral form. [`Entries::build`] derives them from a job's exchange plans;
//! [`Entries::switch_tables`] reads them back into the exchange plans the software switch runs,
//! so a switch loaded from an entries file runs exactly what a Tofino loaded from it would.
//!
//! Layout the entries encode (see `p4/README.md`):
//! - a job occupies aggregators `agg_base ..` of every pipe it uses and seen words
//!   `seen_base ..` of its home pipe; each destination of a block keeps its aggregators in one
//!   pipe ([`place`]); the destinations of pipe `p`, in vertex order, take slots `0, 1, ...` of
//!   that pipe, and slot `i`'s chunk `c` aggregates in `agg_base + i·C + c`; vertex `s` of the
//!   block (in vertex order), as a sender, stamps seen word `seen_base + s·C + c`;
//! - a source's passes are one chain per pipe it feeds: pass 0 runs in the home pipe and fans
//!   out to the other pipes' chains;
//! - every table that grows with the graph is per block (pass entries, source rows, destination
//!   slots), so the control plane can reload it between blocks;
//! - layers of one feature width share one *set* of block tables;
//! - no register of the exchange needs a value at install time: the program stamps aggregator,
//!   seen and arrival words with the job's phase, so stale values from an earlier job or block
//!   read as empty; the all-reduce's bank words are cleared ([`RegisterClear`]): zero says
//!   "the stream's first pass comes next" (`include/allreduce.p4`);
//! - a job's all-reduce region is `2·slots` banks: aggregators at the top of its home pipe
//!   (above the exchange's) and words `bank_base ..` of the bank registers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ports::PortMapError;
use crate::program::{self, Table};

mod build;
mod read;

pub use build::{pass_group, place, slot_paths, Placement};
use read::Reader;
pub use read::SwitchTables;

/// The `format` every entries file names.
pub const FORMAT: &str = "switchgnn-p4-entries";
/// Version 2: 64-lane aggregators spread over pipes (pass chains per pipe, pass groups).
/// Version 3: the in-switch all-reduce's region and the register words it starts from zero.
/// Version 4: recirculation paths over looped ports (`recirculation_path`, the parser's value
/// set `looped_ports`, pass groups per path, the ports to loop).
pub const FORMAT_VERSION: u32 = 4;
/// Versions this build reads: a version 2 file is a job without an all-reduce region, a
/// version 2 or 3 file one without looped ports.
pub const READS_VERSIONS: [u32; 3] = [2, 3, 4];

/// Bytes an acknowledgement's mirror copy keeps: the mirror byte, the pass header, Ethernet,
/// IPv4, UDP and the switchgnn header; the ack carries no lanes, and egress parses no further.
pub const ACK_TRUNCATE: u32 = 1
    + switchgnn_chip::PASS_HEADER as u32
    + 14
    + 20
    + 8
    + switchgnn_dataplane::wire::HEADER_LEN as u32;

/// Why entries cannot be built or read back.
#[derive(Debug, Error)]
pub enum EntriesError {
    /// The plans or the entries break the layout the program expects; the text says how.
    #[error("{0}")]
    Layout(String),
    /// The exchange kind has no program on the switch.
    #[error("the {mode} exchange has no program on the switch: {why}")]
    Mode {
        /// The kind's name.
        mode: &'static str,
        /// Why the program cannot run it.
        why: &'static str,
    },
    /// The plan needs more of a table or register than the program holds.
    #[error("{what}: the plan needs {need}, the program holds {have}{hint}")]
    TooLarge {
        /// What is too small.
        what: &'static str,
        /// What the plan needs.
        need: u64,
        /// What the program holds.
        have: u64,
        /// How to make the plan fit, if there is a way (empty otherwise).
        hint: String,
    },
    /// One entry read back is malformed or disagrees with the others.
    #[error("entry {index} ({table}): {message}")]
    Entry {
        /// Its position among the entries.
        index: usize,
        /// Its table's name.
        table: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A file is not entries this build reads.
    #[error("{0}")]
    Format(String),
    /// The job's port map does not fit the program or its workers.
    #[error(transparent)]
    Ports(#[from] PortMapError),
}

/// One exact-match entry: key values and action parameters in the program's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    /// The table.
    pub table: &'static Table,
    /// Key values in key order.
    pub keys: Vec<u64>,
    /// Action parameters in the action's order.
    pub params: Vec<u64>,
}

/// One copy of a multicast group: its port and replication id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    /// Dev port.
    pub port: u16,
    /// Replication id (the worker rank, or a pass's role).
    pub rid: u16,
}

/// A multicast group and its copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MulticastGroup {
    /// Group id.
    pub id: u16,
    /// Its copies.
    pub replicas: Vec<Replica>,
}

/// An ingress mirror session: the acknowledgement copies towards one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorSession {
    /// Session id.
    pub id: u16,
    /// Dev port the copies go to.
    pub port: u16,
    /// Bytes kept of the mirrored packet (the headers; the ack carries no lanes).
    pub truncate: u32,
}

/// What the entries are for, carried beside them in every format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    /// Always [`FORMAT`].
    pub format: String,
    /// The layout version (see [`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The job's id.
    pub job: u16,
    /// Workers of the job.
    pub workers: u16,
    /// `switchgnn` or `host`.
    pub exchange: String,
    /// The job's plan checksum that workers present at start-up (the session checksum).
    pub plan_checksum: String,
    /// Which entries the file holds: `all`, `static`, or `block S:B` (see [`Part`]).
    pub part: String,
    /// The program that wrote the file.
    pub created_by: String,
    /// Dev ports to put in MAC loopback (recirculation paths) before the entries are written.
    /// The bfrt script does so; P4Runtime has no port configuration, so its file lists them
    /// here for the operator (or a gNMI client: openconfig's `loopback-mode`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub looped_ports: Vec<u16>,
}

/// A subset of a job's entries, for a control plane that reloads the per-block tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Everything: the tables of every block stay loaded.
    All,
    /// What the job needs whatever block runs: configuration, addresses, ECN, admission,
    /// multicast groups and mirror sessions.
    Static,
    /// The per-block tables of block `block` of block set `set`.
    Block {
        /// The block-table set.
        set: u64,
        /// The block within it.
        block: u64,
    },
}

impl Part {
    /// `all`, `static` or `S:B`.
    pub fn parse(text: &str) -> Option<Part> {
        match text {
            "all" => Some(Part::All),
            "static" => Some(Part::Static),
            _ => {
                let (set, block) = text.split_once(':')?;
                Some(Part::Block {
                    set: set.parse().ok()?,
                    block: block.parse().ok()?,
                })
            }
        }
    }

    /// The part's name (as [`Part::parse`] reads it).
    pub fn name(self) -> String {
        match self {
            Part::All => "all".into(),
            Part::Static => "static".into(),
            Part::Block { set, block } => format!("block {set}:{block}"),
        }
    }
}

/// Whether a table holds per-block entries (keyed by block set and block).
pub fn per_block(table: &Table) -> bool {
    table.keys.get(2).is_some_and(|k| k.name == "block")
}

/// Words `first .. first + count` of a register, set to zero when the job is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterClear {
    /// The register.
    pub register: &'static program::Register,
    /// First word.
    pub first: u64,
    /// Words.
    pub count: u64,
}

impl RegisterClear {
    /// The words an all-reduce region of `banks` banks from bank word `bank` starts from:
    /// its banks, their seen words and their counts.
    pub fn of_region(bank: u64, banks: u64) -> [RegisterClear; 3] {
        let words = program::SEEN_WORDS_PER_BANK;
        let clear = |register, first, count| RegisterClear {
            register,
            first,
            count,
        };
        [
            clear(&program::BANK_STATE, bank, banks),
            clear(&program::REDUCE_SEEN, bank * words, banks * words),
            clear(&program::REDUCE_COUNT, bank, banks),
        ]
    }
}

/// A job's control-plane state: its table entries, multicast groups, mirror sessions, the
/// register words cleared at install and the ports looped back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entries {
    /// What the entries are for.
    pub meta: Metadata,
    /// Table entries in installation order.
    pub tables: Vec<TableEntry>,
    /// Multicast groups.
    pub groups: Vec<MulticastGroup>,
    /// Mirror sessions.
    pub sessions: Vec<MirrorSession>,
    /// Register words the job starts from zero (its all-reduce region), written before any
    /// table entry admits its packets.
    pub clears: Vec<RegisterClear>,
    /// The parser's value set `looped_ports`: local port numbers looped back in every pipe
    /// (the switch's, so every job on it names the same), in path order.
    pub looped: Vec<u16>,
}

/// Entries per table, for reports.
pub fn count_by_table(entries: &[TableEntry]) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for e in entries {
        *out.entry(e.table.name).or_insert(0) += 1;
    }
    out
}

impl Entries {
    /// The plan checksum the entries were made for.
    pub fn plan_checksum(&self) -> Result<u64, EntriesError> {
        let text = self.meta.plan_checksum.trim_start_matches("0x");
        u64::from_str_radix(text, 16).map_err(|_| {
            EntriesError::Format(format!(
                "plan checksum `{}` is not a hex number",
                self.meta.plan_checksum
            ))
        })
    }

    /// The exchange plans the switch runs, one per layer, read back from the entries alone.
    pub fn switch_tables(&self) -> Result<SwitchTables, EntriesError> {
        if self.meta.part != Part::All.name() {
            return Err(EntriesError::Format(format!(
                "the file holds the {} entries only; the software switch loads a whole job \
                 (`switchgnn p4 entries --part all`)",
                self.meta.part
            )));
        }
        Reader::default().read(self)
    }

    /// The entries of `part`, checked against the program's table sizes: all blocks together
    /// within each table, or one block within half of it (the other half holds the next).
    pub fn part(&self, part: Part) -> Result<Entries, EntriesError> {
        let keep = |e: &TableEntry| match part {
            Part::All => true,
            Part::Static => !per_block(e.table),
            Part::Block { set, block } => {
                per_block(e.table) && e.keys[1] == set && e.keys[2] == block
            }
        };
        let tables: Vec<TableEntry> = self.tables.iter().filter(|e| keep(e)).cloned().collect();
        if let Part::Block { set, block } = part {
            if tables.is_empty() {
                return Err(EntriesError::Layout(format!(
                    "the job has no block {set}:{block}"
                )));
            }
        }
        for (name, n) in count_by_table(&tables) {
            let t = program::table_by_name(name).expect("a program table");
            let (have, hint) = match part {
                Part::Block { .. } => (t.size / 2, " entries in half the table".to_string()),
                _ if per_block(t) => (
                    t.size,
                    format!(
                        " entries (prepare with --table-entries {} and load the blocks one by \
                         one: --part static, then --part S:B per block)",
                        crate::resources::double_buffered_limit()
                    ),
                ),
                _ => (t.size, " entries".to_string()),
            };
            fits(t.name, n, have, &hint)?;
        }
        // Multicast groups and mirror sessions belong to the job, not to a block.
        let replication = !matches!(part, Part::Block { .. });
        Ok(Entries {
            meta: Metadata {
                part: part.name(),
                ..self.meta.clone()
            },
            tables,
            groups: if replication {
                self.groups.clone()
            } else {
                Vec::new()
            },
            sessions: if replication {
                self.sessions.clone()
            } else {
                Vec::new()
            },
            // The all-reduce region is cleared once, with the job's static entries; the ports
            // are looped then too.
            clears: if replication {
                self.clears.clone()
            } else {
                Vec::new()
            },
            looped: if replication {
                self.looped.clone()
            } else {
                Vec::new()
            },
        })
    }
}

fn fits(what: &'static str, need: u64, have: u64, hint: &str) -> Result<(), EntriesError> {
    if need > have {
        Err(EntriesError::TooLarge {
            what,
            need,
            have,
            hint: hint.to_string(),
        })
    } else {
        Ok(())
    }
}
