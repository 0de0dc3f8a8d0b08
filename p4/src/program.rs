//! What the control plane knows of `p4/switchgnn.p4`: its tables with their P4Runtime ids, key
//! fields and action parameters (name and bit width), and the program's constants. This is the
//! one place the Rust side names the P4 program; `tests/cross_check.rs` reads the `.p4` files
//! and fails when they disagree.

/// A field of a key or a parameter of an action: name and width in bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The field's name in the program.
    pub name: &'static str,
    /// Width in bits.
    pub bits: u32,
}

const fn f(name: &'static str, bits: u32) -> Field {
    Field { name, bits }
}

/// An action of the program the control plane installs entries of: its name, P4Runtime id and
/// parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    /// Fully qualified, as P4Runtime and BfRt name it (`Ingress.check.admit`).
    pub name: &'static str,
    /// P4Runtime id (type prefix 0x01).
    pub id: u32,
    /// Parameters in the action's order.
    pub params: &'static [Field],
}

/// A table the control plane fills, as the program declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    /// Fully qualified, as P4Runtime and BfRt name it (`Ingress.check.admission`).
    pub name: &'static str,
    /// P4Runtime id (type prefix 0x02).
    pub id: u32,
    /// Exact-match key fields in key order (P4Runtime field ids are 1-based positions).
    pub keys: &'static [Field],
    /// The action the control plane installs.
    pub action: &'static Action,
    /// `size` in the program: entries it can hold.
    pub size: u64,
}

impl Table {
    /// Bits of key and action data one entry stores.
    pub fn entry_bits(&self) -> u32 {
        self.keys
            .iter()
            .chain(self.action.params)
            .map(|k| k.bits)
            .sum()
    }
}

/// Bits of a Tofino port id.
pub const PORT_BITS: u32 = 9;

/// `admit`: admits a worker's packets and names its acknowledgements' mirror session.
pub const ADMIT: Action = Action {
    name: "Ingress.check.admit",
    id: 0x0100_0001,
    params: &[f("ack_session", 10)],
};
/// `set_exchange`: a layer's block-table set, chunking, block count and mode.
pub const SET_EXCHANGE: Action = Action {
    name: "Ingress.check.set_exchange",
    id: 0x0100_0003,
    params: &[
        f("set", 8),
        f("chunks", 8),
        f("last_lanes", 8),
        f("blocks", 16),
        f("vertices", 32),
        f("mode", 8),
    ],
};
/// `set_source_row`: a sender's owner, port and seen word.
pub const SET_SOURCE_ROW: Action = Action {
    name: "Ingress.set_source_row",
    id: 0x0100_0004,
    params: &[f("worker", 16), f("port", PORT_BITS), f("seen_row", 16)],
};
/// `set_destination`: a destination's aggregators, their pipe, owner and port.
pub const SET_DESTINATION: Action = Action {
    name: "Ingress.set_destination",
    id: 0x0100_0005,
    params: &[
        f("agg_base", 16),
        f("pipe", 8),
        f("worker", 16),
        f("port", PORT_BITS),
    ],
};
/// `aggregate`: one pass of a source into a destination's aggregator.
pub const AGGREGATE: Action = Action {
    name: "Ingress.aggregation.aggregate",
    id: 0x0100_0006,
    params: &[
        f("agg_base", 32),
        f("dst", 32),
        f("dst_worker", 16),
        f("dst_port", PORT_BITS),
        f("fanout", 8),
        f("expected", 16),
        f("last", 1),
    ],
};
/// `aggregate_partial`: a worker's partial sum into its destination's aggregator.
pub const AGGREGATE_PARTIAL: Action = Action {
    name: "Ingress.aggregate_partial",
    id: 0x0100_0010,
    params: &[
        f("agg_base", 32),
        f("pipe", 8),
        f("dst_worker", 16),
        f("dst_port", PORT_BITS),
        f("expected", 16),
        f("seen_row", 16),
    ],
};
/// `set_job`: a job's workers, go group, recirculation port and slot.
pub const SET_JOB: Action = Action {
    name: "Ingress.set_job",
    id: 0x0100_0008,
    params: &[
        f("workers", 16),
        f("go_group", 16),
        f("recirc_port", PORT_BITS),
        f("job_slot", 16),
        f("pass_groups", 16),
        f("home_pipe", 8),
    ],
};
/// `set_worker_address`: the addresses packets to a worker carry.
pub const SET_WORKER_ADDRESS: Action = Action {
    name: "Egress.set_worker_address",
    id: 0x0100_000b,
    params: &[
        f("mac", 48),
        f("ip", 32),
        f("udp_port", 16),
        f("switch_mac", 48),
        f("switch_ip", 32),
    ],
};
/// `set_ecn_threshold`: the queue depth above which a port marks ECN.
pub const SET_ECN_THRESHOLD: Action = Action {
    name: "Egress.set_ecn_threshold",
    id: 0x0100_000d,
    params: &[f("cells", 19)],
};

/// The job's all-reduce region: its banks' first aggregator (home pipe), first bank word and
/// first seen word, `slots`, `slots − 1`, the mask that clears a position's slot and bank bits,
/// and `2·slots`.
pub const SET_REGION: Action = Action {
    name: "Ingress.allreduce.set_region",
    id: 0x0100_0011,
    params: &[
        f("agg_base", 32),
        f("bank_base", 16),
        f("seen_base", 16),
        f("slots", 16),
        f("slot_mask", 16),
        f("use_mask", 32),
        f("reuse", 32),
    ],
};

/// `set_path`: the recirculation path of a hash slot.
pub const SET_PATH: Action = Action {
    name: "Ingress.set_path",
    id: 0x0100_0013,
    params: &[f("path", 8), f("local", 7)],
};

/// Which (job, worker) may send on which port.
pub const ADMISSION: Table = Table {
    name: "Ingress.check.admission",
    id: 0x0200_0001,
    keys: &[f("job", 16), f("worker", 16), f("port", PORT_BITS)],
    action: &ADMIT,
    size: 4096,
};
/// Per (job, layer): the exchange's configuration.
pub const EXCHANGE_CONFIG: Table = Table {
    name: "Ingress.check.exchange_config",
    id: 0x0200_0002,
    keys: &[f("job", 16), f("layer", 8)],
    action: &SET_EXCHANGE,
    size: 1024,
};
/// Per-block tables (they grow with the graph, so the control plane may reload them between
/// blocks): sizes as `include/constants.p4` declares them.
pub const PASS_SIZE: u64 = 36864;
/// Entries of `source_row` and of `destination_slot`.
pub const ROW_SIZE: u64 = 18432;
/// (destination, worker) pairs of a loaded reduce block.
pub const PARTIAL_SIZE: u64 = 16384;

/// Per block: each sender's row (owner, port, seen word).
pub const SOURCE_ROW: Table = Table {
    name: "Ingress.source_row",
    id: 0x0200_0003,
    keys: &[f("job", 16), f("set", 8), f("block", 16), f("vertex", 32)],
    action: &SET_SOURCE_ROW,
    size: ROW_SIZE,
};
/// Per block: each destination's aggregators.
pub const DESTINATION_SLOT: Table = Table {
    name: "Ingress.destination_slot",
    id: 0x0200_0004,
    keys: &[f("job", 16), f("set", 8), f("block", 16), f("vertex", 32)],
    action: &SET_DESTINATION,
    size: ROW_SIZE,
};
/// Per block: a source's passes, one entry per (vertex, aggregator) pair.
pub const VERTEX_AGGREGATORS: Table = Table {
    name: "Ingress.aggregation.vertex_aggregators",
    id: 0x0200_0005,
    keys: &[
        f("job", 16),
        f("set", 8),
        f("block", 16),
        f("src", 32),
        f("pipe", 8),
        f("pass", 16),
    ],
    action: &AGGREGATE,
    size: PASS_SIZE,
};
/// Reduce mode: (destination, worker) → the destination's aggregator and the pair's seen word.
pub const PARTIAL_AGGREGATOR: Table = Table {
    name: "Ingress.partial_aggregator",
    id: 0x0200_000a,
    keys: &[
        f("job", 16),
        f("set", 8),
        f("block", 16),
        f("dst", 32),
        f("worker", 16),
    ],
    action: &AGGREGATE_PARTIAL,
    size: PARTIAL_SIZE,
};
/// Per job: its configuration.
pub const JOB_CONFIG: Table = Table {
    name: "Ingress.job_config",
    id: 0x0200_0007,
    keys: &[f("job", 16)],
    action: &SET_JOB,
    size: MAX_JOBS,
};
/// Per job with an in-switch all-reduce: its region (`include/allreduce.p4`).
pub const ALLREDUCE_REGION: Table = Table {
    name: "Ingress.allreduce.allreduce_region",
    id: 0x0200_000b,
    keys: &[f("job", 16)],
    action: &SET_REGION,
    size: MAX_JOBS,
};
/// Per (job, worker): its addresses.
pub const WORKER_ADDRESS: Table = Table {
    name: "Egress.worker_address",
    id: 0x0200_0008,
    keys: &[f("job", 16), f("worker", 16)],
    action: &SET_WORKER_ADDRESS,
    size: 4096,
};
/// Per port: its ECN threshold.
pub const ECN_MARKING: Table = Table {
    name: "Egress.ecn_marking",
    id: 0x0200_0009,
    keys: &[f("port", PORT_BITS)],
    action: &SET_ECN_THRESHOLD,
    size: 512,
};

/// (job, hash slot) → the packet's recirculation path: its index among the job's paths and the
/// local port number looped in every pipe (`include/aggregation.p4`). A job without looped
/// ports has no entries: the default is the internal port.
pub const RECIRCULATION_PATH: Table = Table {
    name: "Ingress.recirculation_path",
    id: 0x0200_000c,
    keys: &[f("job", 16), f("slot", 8)],
    action: &SET_PATH,
    size: PATH_SIZE,
};

/// Every table the control plane fills, in installation order (configuration first, so that
/// no packet meets a half-installed job: admission comes last).
pub const TABLES: [&Table; 11] = [
    &JOB_CONFIG,
    &EXCHANGE_CONFIG,
    &ALLREDUCE_REGION,
    &RECIRCULATION_PATH,
    &SOURCE_ROW,
    &DESTINATION_SLOT,
    &VERTEX_AGGREGATORS,
    &PARTIAL_AGGREGATOR,
    &WORKER_ADDRESS,
    &ECN_MARKING,
    &ADMISSION,
];

/// The table with P4Runtime id `id`.
pub fn table_by_id(id: u32) -> Option<&'static Table> {
    TABLES.iter().copied().find(|t| t.id == id)
}

/// The table named `name` (fully qualified).
pub fn table_by_name(name: &str) -> Option<&'static Table> {
    TABLES.iter().copied().find(|t| t.name == name)
}

/// Constants of `include/constants.p4` the control plane depends on.
pub const SG_UDP_PORT: u16 = 47000;
/// Aggregators per pipe (32 lane-pair registers of this many 64-bit words: 4 MiB).
pub const AGGREGATORS: u64 = 16384;
/// Lanes one pass reads back out of the aggregator registers.
pub const LANES_READ_PER_PASS: u64 = 32;
/// Pipes the program spreads aggregators over at most (a Tofino 1 has 4, or 2 on its
/// 32-port parts).
pub const MAX_PIPES: u8 = 4;

/// Destinations of `chunks` aggregators each that one pipe holds above aggregator `agg_base`
/// (the control plane keeps a destination's aggregators in one pipe).
pub fn destinations_per_pipe(chunks: u64, agg_base: u64) -> u64 {
    AGGREGATORS.saturating_sub(agg_base) / chunks.max(1)
}

/// Aggregator bytes the program holds over `pipes` pipes.
pub fn aggregator_memory(pipes: u8) -> u64 {
    AGGREGATORS * u64::from(pipes) * switchgnn_dataplane::switch::AGGREGATOR_BYTES
}

/// The `prepare --switch-memory` that matches the program's aggregators on `pipes` pipes.
pub fn switch_memory_option(pipes: u8) -> String {
    switch_memory_for(aggregator_memory(pipes) / switchgnn_dataplane::switch::AGGREGATOR_BYTES)
}

/// The `prepare --switch-memory` whose blocks need at most `aggregators` aggregators (rounded
/// down to whole KiB where it is not whole MiB).
pub fn switch_memory_for(aggregators: u64) -> String {
    let bytes = aggregators * switchgnn_dataplane::switch::AGGREGATOR_BYTES;
    if bytes % (1 << 20) == 0 {
        format!("--switch-memory {}MiB", bytes >> 20)
    } else {
        format!("--switch-memory {}KiB", bytes >> 10)
    }
}
/// Seen words (one per source row and chunk of the running block).
pub const SEEN_WORDS: u64 = 32768;
/// Jobs the program holds at once.
pub const MAX_JOBS: u64 = 64;
/// Workers one job may have.
pub const MAX_WORKERS: u64 = 256;
/// The internal recirculation ports of the four pipes of a Tofino 1: pipe `p`'s is
/// `p << 7 | RECIRC_LOCAL`.
pub const RECIRC_PORTS: [u16; 4] = [68, 196, 324, 452];
/// The local number of every pipe's internal recirculation port.
pub const RECIRC_LOCAL: u16 = 68;
/// Local port numbers the parser's value set `looped_ports` holds at most: front-panel ports
/// looped back in every pipe (`include/parser.p4`).
pub const LOOPED_LOCALS: u64 = 31;
/// P4Runtime id of that value set (`IngressParser.looped_ports`; id prefix 0x03).
pub const LOOPED_PORTS_ID: u32 = 0x0300_0001;
/// Hash slots of `recirculation_path` per job: the control plane spreads them over the paths.
pub const PATH_SLOTS: u64 = switchgnn_chip::paths::PATH_SLOTS;
/// Entries of `recirculation_path`: 16 jobs with looped ports.
pub const PATH_SIZE: u64 = 4096;
/// A pass group per path: the job's group ids span `paths · PASS_GROUPS_PER_PATH` after its
/// block go (`path << 8 | pipe << 6 | fan-out << 2 | copies`).
pub const PASS_GROUPS_PER_PATH: u16 = 256;
/// Replication ids of a pass group's copies: the readout (or raw) copy, the next pass of the
/// chain, and `RID_PIPE + p` the start of pipe `p`'s chain.
pub const RID_EMIT: u16 = 0xffff;
/// Replication id of the next pass of a chain.
pub const RID_CONTINUE: u16 = 0xfffe;
/// Replication id of the start of pipe 0's chain (pipe `p`: `RID_PIPE + p`).
pub const RID_PIPE: u16 = 0xfff0;
/// Exchange mode codes of `set_exchange` (`dataplane::plan::Mode` discriminants).
pub const MODE_BLOCKS: u64 = 0;
/// The host exchanges: forwarded only.
pub const MODE_HOST: u64 = 2;
/// Pre-aggregation: partial sums into destinations' aggregators.
pub const MODE_REDUCE: u64 = 3;
/// Bytes of one queue cell, the unit of `enq_qdepth` (an assumption: the figure commonly
/// quoted for Tofino 1; Intel publishes none).
pub const CELL_BYTES: u64 = 80;

/// A register the control plane writes when it installs a job: its P4Runtime id (type prefix
/// 0x16, `@id` in the program), its fields (each word of a pair) and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Register {
    /// Fully qualified, as P4Runtime and BfRt name it.
    pub name: &'static str,
    /// P4Runtime id (type prefix 0x16).
    pub id: u32,
    /// The fields of each word.
    pub fields: &'static [Field],
    /// Words in the register.
    pub size: u64,
}

/// All-reduce banks over every job's region, two per slot (`include/constants.p4`).
pub const REDUCE_BANKS: u64 = 1024;
/// Seen words of one bank: one per group of 32 workers.
pub const SEEN_WORDS_PER_BANK: u64 = MAX_WORKERS / 32;
/// Seen words over every bank.
pub const REDUCE_SEEN_WORDS: u64 = REDUCE_BANKS * SEEN_WORDS_PER_BANK;
/// The most slots one job's region may have on the program: one bank per slot and bank.
pub const MAX_ALLREDUCE_SLOTS: u64 = REDUCE_BANKS / 2;

/// Per bank: the use it holds and the use it takes next.
pub const BANK_STATE: Register = Register {
    name: "Ingress.allreduce.bank_state",
    id: 0x1600_0001,
    fields: &[f("held", 32), f("next", 32)],
    size: REDUCE_BANKS,
};
/// Per bank and group of 32 workers: the use its bits belong to and who contributed.
pub const REDUCE_SEEN: Register = Register {
    name: "Ingress.allreduce.reduce_seen",
    id: 0x1600_0002,
    fields: &[f("use", 32), f("value", 32)],
    size: REDUCE_SEEN_WORDS,
};
/// Per bank: the use its count belongs to and the contributions counted.
pub const REDUCE_COUNT: Register = Register {
    name: "Ingress.allreduce.reduce_count",
    id: 0x1600_0003,
    fields: &[f("use", 32), f("value", 32)],
    size: REDUCE_BANKS,
};

/// The registers a job's installation clears (its all-reduce region starts at zero).
pub const REGISTERS: [&Register; 3] = [&BANK_STATE, &REDUCE_SEEN, &REDUCE_COUNT];

/// The register with P4Runtime id `id`.
pub fn register_by_id(id: u32) -> Option<&'static Register> {
    REGISTERS.iter().copied().find(|r| r.id == id)
}
