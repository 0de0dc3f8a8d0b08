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
const bit<8>  SG_VERSION    = 1;
const bit<16> SG_UDP_PORT   = 47000;   /* the switch's UDP port (job file `switch`) */
const bit<8>  SG_MAX_LANES  = 32;      /* one aggregator: 32 int32 lanes = 128 bytes */

/* packet types (wire::PacketType) */
const bit<8> SG_DATA       = 1;
const bit<8> SG_RESULT     = 2;
const bit<8> SG_RAW        = 3;
const bit<8> SG_FETCH      = 4;
const bit<8> SG_BLOCK_DONE = 5;
const bit<8> SG_BLOCK_GO   = 6;
const bit<8> SG_JOIN       = 7;

/* flag bits (wire::Flags) */
const bit<8> SG_FLAG_ACK      = 0x01;
const bit<8> SG_FLAG_FETCH    = 0x02;
const bit<8> SG_FLAG_ECN      = 0x04;
const bit<8> SG_FLAG_RESEND   = 0x08;
const bit<8> SG_FLAG_BACKWARD = 0x10;
const bit<8> SG_FLAG_RESERVED = 0xe0;

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
const bit<32> DROP_REASONS       = 15;

/* ---- sizes (resources.rs: Tofino1::program) ---- */
/* Aggregators per pipe (2 MiB): the largest stateful register a Tofino 1 stage holds is
 * 16384 x 64 bit, which bounds the aggregators' {phase, count} pair register; the 32 lane
 * registers (16384 x 32 bit each) sit four per stage over eight stages. */
const bit<32> AGGREGATORS    = 16384;
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

/* Where recirculated passes and bridged headers come back: the pipes' internal recirculation
 * ports of a 4-pipe Tofino 1 (front-panel ports in loopback mode work the same way). */
const bit<9> RECIRC_PORT_0 = 68;
const bit<9> RECIRC_PORT_1 = 196;
const bit<9> RECIRC_PORT_2 = 324;
const bit<9> RECIRC_PORT_3 = 452;

/* Replication ids of the copies an emitting pass makes (multicast group of the destination). */
const bit<16> RID_EMIT     = 0xffff;   /* the copy to the destination's worker */
const bit<16> RID_CONTINUE = 0xfffe;   /* the copy that recirculates for the next pass */

/* What egress makes of a copy (bridged `out_kind`). */
const bit<8> OUT_FORWARD  = 0;   /* send as is (raw, fetch, go repeat) */
const bit<8> OUT_PASS     = 1;   /* emitting pass: RID_EMIT → result/raw, RID_CONTINUE → next pass */
const bit<8> OUT_RECIRC   = 2;   /* non-emitting pass: next pass */
const bit<8> OUT_LAST     = 3;   /* last pass, emitting: result/raw only */
const bit<8> OUT_GO       = 4;   /* block go multicast: rid = worker rank */

/* What an emitting pass sends to the destination (bridged `emit`). */
const bit<8> EMIT_RESULT = 1;    /* the completed sum */
const bit<8> EMIT_RAW    = 2;    /* this contribution, unaggregated (aggregator released) */
/* (3 and 4 are the barrier's extra passes, barrier.p4) */
const bit<8> EMIT_HOP    = 5;    /* admitted in another pipe: make the first pass in the aggregation pipe */

/* Mirror type of the acknowledgement copy (ingress-to-egress mirror to the sender). */
const bit<3> MIRROR_ACK = 1;

#endif
