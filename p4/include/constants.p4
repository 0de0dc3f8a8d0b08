/* switchgnn: compile-time configuration and protocol constants.
 *
 * The protocol constants mirror `dataplane/src/wire.rs` and `dataplane/src/switch.rs`; the test
 * `p4/tests/cross_check.rs` reads this file and fails when they drift apart. The sizes below are
 * what the resource model (`switchgnn p4 resources`) assumes; change them together with
 * `p4/src/resources.rs`.
 */
#ifndef SWITCHGNN_CONSTANTS_P4
#define SWITCHGNN_CONSTANTS_P4

/* ---- wire format (wire.rs) ---- */
const bit<16> SG_MAGIC      = 0x5347;
const bit<8>  SG_VERSION    = 4;
const bit<16> SG_UDP_PORT   = 47000;   /* the switch's UDP port (job file `switch`) */
const bit<8>  SG_MAX_LANES  = 64;      /* one aggregator: 64 int32 lanes = 256 bytes */

/* packet types (wire::PacketType) */
const bit<8> SG_DATA       = 1;
const bit<8> SG_RESULT     = 2;
const bit<8> SG_RAW        = 3;
const bit<8> SG_FETCH      = 4;
const bit<8> SG_BLOCK_DONE = 5;
const bit<8> SG_BLOCK_GO   = 6;
const bit<8> SG_JOIN       = 7;
const bit<8> SG_REDUCE     = 8;   /* in-switch all-reduce (allreduce.p4) */
const bit<8> SG_REDUCED    = 9;
const bit<8> SG_ROWS       = 10;  /* packed host copies, or their ack of ranges: forwarded whole */
const bit<8> SG_STAMPS     = 11;  /* where the egress numbering of the asker's port stands */

/* flag bits (wire::Flags) */
const bit<8> SG_FLAG_ACK      = 0x01;
const bit<8> SG_FLAG_FETCH    = 0x02;
const bit<8> SG_FLAG_ECN      = 0x04;
const bit<8> SG_FLAG_RESEND   = 0x08;
const bit<8> SG_FLAG_BACKWARD = 0x10;
const bit<8> SG_FLAG_PARTIAL  = 0x20;   /* a leaf's partial sum: spines only, none in this program */
const bit<8> SG_FLAG_RESERVED = 0xc0;

/* exchange modes (dataplane::plan::Mode as the control plane encodes it) */
const bit<8> SG_MODE_BLOCKS = 0;
const bit<8> SG_MODE_HOST   = 2;
const bit<8> SG_MODE_REDUCE = 3;

/* drop reasons: index of the `drops` counter (switch::DropReason, in the same order) */
const bit<8> DROP_TRUNCATED      = 0;
const bit<8> DROP_BAD_MAGIC      = 1;
const bit<8> DROP_BAD_VERSION    = 2;
const bit<8> DROP_UNKNOWN_TYPE   = 3;
const bit<8> DROP_RESERVED_FLAGS = 4;
const bit<8> DROP_TOO_MANY_LANES = 5;
const bit<8> DROP_LANES_BEYOND   = 6;
const bit<8> DROP_OUT_OF_RANGE   = 7;
const bit<8> DROP_NOT_ADMITTED   = 8;
const bit<8> DROP_WRONG_DIRECTION = 9;
const bit<8> DROP_STALE          = 10;
const bit<8> DROP_WRONG_MODE     = 11;
const bit<8> DROP_NOT_IN_PLAN    = 12;
const bit<8> DROP_BAD_LANES      = 13;
const bit<8> DROP_DUPLICATE      = 14;
const bit<8> DROP_NO_ALLREDUCE   = 15;
const bit<32> DROP_REASONS       = 16;

/* ---- sizes (resources.rs: Tofino1::program) ---- */
/* Aggregators per pipe (4 MiB): the largest stateful register a Tofino 1 stage holds is
 * 16384 x 64 bit, which bounds the aggregators' {phase, count} pair register and each of the
 * 32 lane-pair registers (lanes i and i + 32 of every aggregator in register i), four per stage
 * over eight stages. Every pipe holds its own copy of every register, so a switch of P pipes
 * holds P times as many aggregators, each in the pipe whose passes add into it. */
const bit<32> AGGREGATORS    = 16384;
/* Lanes a pass reads back: one 32-bit output word per stateful ALU (the low halves of the pairs
 * in one pass, the high halves in the next). */
const bit<8>  LANES_READ_PER_PASS = 32;
/* Seen words: one 32-bit phase stamp per source row and chunk of the running block. */
const bit<32> SEEN_WORDS     = 32768;
/* Jobs the barrier registers hold, and workers per job. */
const bit<32> MAX_JOBS       = 64;
const bit<32> MAX_WORKERS    = 256;
/* Exact-match table sizes: the control plane may not install more (see p4/README.md). */
const int ADMISSION_SIZE     = 4096;
const int EXCHANGE_SIZE      = 1024;
/* The per-block tables share the SRAM of stages 1-2 (p4/README.md has the arithmetic): */
const int PASS_SIZE          = 36864;   /* (vertex, aggregator) pairs of the loaded blocks */
const int ROW_SIZE           = 18432;   /* vertices of the loaded blocks (two tables) */
const int PARTIAL_SIZE       = 16384;   /* (destination, worker) pairs of a loaded reduce block */
const int WORKER_SIZE        = 4096;
/* In-switch all-reduce (allreduce.p4): bank words over every job's region, 2 per slot (512
 * slots in all: four jobs of the job file's default 128). The lanes of a bank are an
 * aggregator of the lane-pair registers in the job's home pipe. Its three registers take one
 * stateful ALU each in stages 1-3; the banks and their seen words take 1 + 4 SRAM blocks of
 * stages 1-2, which is what those stages have left beside the per-block tables (README). */
const bit<32> REDUCE_BANKS   = 1024;
/* Seen words: one bit per worker, 32 to a word, MAX_WORKERS / 32 words per bank. */
const bit<32> REDUCE_SEEN_WORDS = 8192;

/* Where recirculated passes and bridged headers come back: the pipes' internal recirculation
 * ports of a 4-pipe Tofino 1, pipe p's being (p << 7) | RECIRC_LOCAL. A pass that must run in
 * pipe p is sent there. */
const bit<7> RECIRC_LOCAL  = 68;
const bit<9> RECIRC_PORT_0 = 68;
const bit<9> RECIRC_PORT_1 = 196;
const bit<9> RECIRC_PORT_2 = 324;
const bit<9> RECIRC_PORT_3 = 452;

/* Recirculation paths (p4/README.md "Looped ports"). Besides its internal recirculation port, a
 * pipe may loop front-panel ports back into itself; the control plane loops the same local port
 * numbers in every pipe, so that one lookup names a path for whichever pipe a pass goes to:
 * path 0 is the internal port (RECIRC_LOCAL), paths 1.. the looped local numbers the parser's
 * value set lists. A pass's path is that of its hash slot (`recirculation_path`, keyed by job
 * and PATH_SLOTS slots of a hash of the packet's source and destination, so one source's passes
 * keep one path and stay in order); a pass group is replicated per path (entries.rs). */
const int LOOPED_LOCALS      = 31;     /* the value set's size: local ports per pipe in loopback */
const bit<32> PATH_SLOTS     = 256;    /* hash slots per job the control plane spreads over paths */
const int PATH_SIZE          = 4096;   /* recirculation_path entries: 16 jobs of PATH_SLOTS */

/* Replication ids of the recirculating copies a pass makes (its pass group, entries.rs). */
const bit<16> RID_EMIT     = 0xffff;   /* the copy that reads the sum out (or forwards raw) */
const bit<16> RID_CONTINUE = 0xfffe;   /* the copy that makes the next pass of this pipe's chain */
const bit<16> RID_PIPE     = 0xfff0;   /* + p: the copy that starts pipe p's chain (fan-out) */

/* What egress makes of a copy (bridged `out_kind`). */
const bit<8> OUT_FORWARD  = 0;   /* send as is (raw, fetch, go repeat) */
const bit<8> OUT_RECIRC   = 2;   /* a copy that comes back for another pass (rid says which) */
const bit<8> OUT_RESULT   = 3;   /* a finished sum, read out into the lanes */
const bit<8> OUT_GO       = 4;   /* block go multicast: rid = worker rank */
const bit<8> OUT_RAW      = 5;   /* a contribution its released aggregator did not take */
const bit<8> OUT_REDUCED  = 6;   /* an all-reduce result, one copy per worker: rid = worker rank */
const bit<8> OUT_REPLAY   = 7;   /* an all-reduce result again, to the worker that asked */

/* What the next ingress pass of a recirculating copy does (bridged `step`). */
const bit<8> STEP_CHAIN     = 0;  /* the aggregator pass (pipe, index) of vertex_aggregators */
const bit<8> STEP_READ_LOW  = 1;  /* read lanes 0..31 of agg_index into the packet */
const bit<8> STEP_RAW       = 2;  /* forward this contribution raw to the destination */
/* (3 and 4 are the barrier's extra passes, barrier.p4) */
const bit<8> STEP_HOP       = 5;  /* admitted in another pipe: first pass in the home pipe */
const bit<8> STEP_READ_HIGH = 6;  /* read lanes 32..63 of agg_index into the packet */
const bit<8> STEP_RELEASE   = 7;  /* a resend: release agg_index in this pipe, then forward */
const bit<8> STEP_REDUCE_DONE = 8;  /* all-reduce: mark the bank complete, read the high half, multicast */
const bit<8> STEP_REPLAY_LOW  = 9;  /* all-reduce: read a complete bank's low half for one worker */
const bit<8> STEP_REPLAY_HIGH = 10; /* all-reduce: then its high half, and back to that worker */
const bit<8> STEP_PARTIAL   = 11; /* reduce mode: a partial sum's one aggregator pass */

/* The least int32: the identity of the lane maximum, so that a maximum with it reads a lane
 * pair out unchanged (aggregation.p4, READ_LOW). */
const bit<32> LANE_MIN = 0x80000000;

/* Mirror type of the acknowledgement copy (ingress-to-egress mirror to the sender): a 3-bit
 * field on Tofino 1, 4 bits on Tofino 2. */
#if __TARGET_TOFINO__ >= 2
const bit<4> MIRROR_ACK = 1;
#else
const bit<3> MIRROR_ACK = 1;
#endif

#endif
