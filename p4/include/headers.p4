/* switchgnn: headers and metadata.
 *
 * `switchgnn_h` is the header of `dataplane/src/wire.rs`, field for field and bit for bit (the
 * cross-check test compares the two). Lanes are stacks of 32-bit words so that a short last
 * chunk (fewer than 64 lanes) parses too: two stacks of 32, lanes 0-31 and 32-63, since Tofino
 * keeps a stack's validity bits in one container (at most 32 bits).
 */
#ifndef SWITCHGNN_HEADERS_P4
#define SWITCHGNN_HEADERS_P4

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* wire.rs: the 32-byte switchgnn header. */
header switchgnn_h {
    bit<16> magic;
    bit<8>  version;
    bit<8>  packet_type;
    bit<8>  flags;
    bit<8>  layer;
    bit<16> job;
    bit<32> src;
    bit<32> dst;
    bit<16> block;
    bit<16> count;
    bit<16> worker;
    bit<8>  chunk;
    bit<8>  lanes;
    bit<32> epoch;
    bit<32> sequence;
}

/* One int32 lane (network byte order, two's complement). */
header lane_h {
    bit<32> value;
}

/* The pass state a packet carries from one recirculation to the next (and from ingress to
 * egress as bridged metadata). Emitted in front of Ethernet on recirculating copies only. */
header pass_h {
    bit<8>  out_kind;     /* OUT_*: what egress makes of this copy */
    bit<8>  step;         /* STEP_*: what this copy's next ingress pass does */
    bit<16> pass;         /* passes made so far (0 = the first, in the job's home pipe) */
    bit<8>  set;          /* block set of the exchange (layers of one width share tables) */
    bit<8>  chunks;       /* 64-lane chunks per feature */
    bit<8>  pipe;         /* the pipe whose aggregators this copy visits */
    bit<8>  emit_step;    /* STEP_READ_LOW or STEP_RAW: the step of an emitting pass's copy */
    bit<16> index;        /* the next pass of that pipe's chain (vertex_aggregators) */
    bit<7>  pad_dst_port; /* (ports and sessions at their own widths: a cast costs an */
    PortId_t dst_port;    /*  instruction) where a finished sum or a raw contribution leaves */
    bit<32> phase;        /* the job's block phase when pass 0 ran */
    bit<32> dst;          /* destination vertex of this pass's aggregator */
    bit<32> agg_index;    /* its aggregator, for the readout (or release) passes */
    bit<16> dst_worker;   /* its owner */
    bit<16> count;        /* contributions in the emitted sum */
    bit<7>  pad_sender_port;
    PortId_t sender_port; /* the worker's port (the ingress port of the first pass) */
#if __TARGET_TOFINO__ >= 2
    bit<8>  pad_ack_session; /* (MirrorId_t is 8 bits on Tofino 2, 10 on Tofino 1: byte-aligned */
#else
    bit<6>  pad_ack_session; /*  either way, and the same 32 bytes) */
#endif
    MirrorId_t ack_session; /* mirror session of acknowledgements to the sender */
}

/* The acknowledgement copy's mirror header (ingress-to-egress mirror to the sender). */
header ack_mirror_h {
    bit<8> kind;          /* MIRROR_ACK, widened to a byte */
}

struct headers_t {
    pass_h         pass;
    ethernet_h     ethernet;
    ipv4_h         ipv4;
    udp_h          udp;
    switchgnn_h    sg;
    lane_h[32]     lanes;       /* the contribution's lanes 0-31; on a readout copy, the sums */
    lane_h[32]     lanes_high;  /* its lanes 32-63 (lane 32 + i is lanes_high[i]) */
}

struct ingress_metadata_t {
    bit<8>  ack_kind;     /* the ack mirror header's byte: Tofino takes no constant there */
    bit<8>  drop_reason;
    bool    drop;
    bool    admitted;
    bool    hop;          /* admitted in another pipe: recirculate into the aggregation pipe */
    bit<16> row_word;     /* the chunk, then the source's seen word for it (source_row, partials) */
    bit<16> dst_agg;      /* the chunk, then the destination's aggregator for it */
    /* exchange_config */
    bit<8>  mode;
    bit<8>  last_lanes;
    bit<16> blocks;
    /* the limits against the packet (admission.p4 `set_exchange`, `measure_block`) */
    bit<32> vertex_room;  /* max(src, dst), then vertices |-| it: 0 when one is out of range */
    bit<16> block_over;   /* block |-| blocks: not 0 when block is out of range */
    bit<8>  chunks_left;  /* chunks |-| chunk: 0 out of range, 1 the last chunk */
    /* job_config */
    bit<16> workers;
    MulticastGroupId_t go_group;
    MulticastGroupId_t pass_groups;   /* first of the job's pass groups (entries.rs) */
    /* owners */
    bool    src_known;
    bit<16> src_owner;
    PortId_t src_owner_port;
    bool    dst_known;
    bit<16> dst_owner;
    PortId_t dst_owner_port;
    bit<8>  dst_pipe;     /* the pipe of the destination's aggregator */
    /* vertex_aggregators: this pass's aggregator */
    bool    has_pass;
    bit<16> expected;     /* (past an incomplete count, counted[15:0] |-| expected) */
    bit<32> seen_index;
    bit<1>  last;
    bit<8>  fanout;       /* pass 1: the other pipes whose chains this source starts */
    bit<16> pass_group;   /* the pass group's offset among the job's (path, pipe, fan-out, copies) */
    /* recirculation_path: this packet's recirculation path, the same local port in every pipe */
    bit<8>  path_slot;
    bit<8>  path;         /* 0 = the internal port */
    bit<7>  loop_local;
    /* register outcomes */
    bit<3>  agg_outcome;  /* AGG_* below (3 bits: ingress PHV is short) */
    bit<4>  lane_op;      /* LANES_* (aggregation.p4): what the lane pairs do */
    bit<32> counted;      /* count after this contribution; 1 = a fresh aggregator */
    /* job_config and the running exchange (barrier.p4) */
    bit<16> job_slot;
    PortId_t recirc_port;
    bit<8>  home_pipe;
    bit<32> running_tag;
    bit<32> previous_tag;
    bit<16> want;         /* layer << 8 | backward: a running tag's upper half for this packet */
    bit<16> block_lead;   /* running_tag[15:0] |-| block: 0 ahead, 1 this block, more behind */
    bit<16> final_lead;   /* running_tag[15:0] |-| blocks: 1 when the exchange is complete */
    bit<2>  run;          /* RUN_* (barrier.p4) */
    bool    started;
    bool    finished;
    bool    may_open;
    bool    to_sender;
    /* the all-reduce (allreduce.p4) */
    bool    reduce_known;
    bit<32> reduce_bank;       /* the slice's bank in the bank registers */
    bit<32> reduce_use;        /* the slice's position, its slot and bank bits cleared */
    bit<32> reduce_reuse;      /* 2 x slots: a bank's uses are this far apart */
    bit<32> reduce_offset;     /* 2 x slot + bank: the bank among the region's */
    bit<32> reduce_seen_offset;/* its first seen word + the worker's group of 32 */
    bit<16> reduce_slot;       /* the position's slot (position & (slots - 1)) */
    bit<16> reduce_bank_set;   /* the position's bank bit (position & slots) */
    bit<32> reduce_bit;        /* this worker's bit in its seen word */
    bit<32> reduce_seen;       /* that bit as it was before this slice */
    bit<32> reduce_count;      /* contributions in the bank after this slice */
    bit<32> reduce_held;       /* the use its bank holds after `claim` (allreduce.p4) */
    bit<8>  reduce_outcome;    /* REDUCE_* (allreduce.p4) */
}

/* What the count register says about this pass's aggregator (switch.rs `Agg`). */
const bit<3> AGG_ADD      = 0;   /* Active: add, not yet complete */
const bit<3> AGG_COMPLETE = 1;   /* Active: add, and this was the expected count → emit result */
const bit<3> AGG_RAW      = 2;   /* Released: send this contribution raw to the destination */
const bit<3> AGG_DONE     = 3;   /* already complete (cannot happen with a consistent table) */

struct egress_metadata_t {
    bit<8>  mirror_kind;
    bit<19> ecn_threshold;
    bit<19> qdepth;       /* enq_qdepth, copied by a hash: a field of its own for the ALU */
    bit<19> ecn_excess;   /* qdepth |-| ecn_threshold: not 0 marks ECN */
    bit<16> payload;      /* the lanes' bytes: a field, so that the lengths take one add each */
}

#endif
