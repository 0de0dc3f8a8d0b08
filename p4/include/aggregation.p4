/* switchgnn: the aggregators, spread over the pipes.
 *
 * Mirrors `data` (switch.rs) and the aggregator release of `raw`. A data packet makes one pass
 * per aggregator its source feeds in the running block: the `vertex_aggregators` table, keyed
 * by the pipe and the index of the pass the packet carries, names the aggregator of this pass
 * (the model's loop over `table.row(row)`).
 *
 * An aggregator is 64 int32 lanes in 32 pair registers: register i holds lanes i and i + 32
 * (SwitchML's pair registers), so one pass adds a whole 64-lane chunk with 32 of the 48
 * stateful ALUs. Every pipe has its own copy of every register; the control plane places each
 * destination's aggregators in one pipe (entries.rs balances the pipes' passes), and a data
 * packet's passes run where its destinations' aggregators are:
 *
 * - Every packet's first pass (pass 0) runs in the job's home pipe and only checks it
 *   (switchgnn.p4: the seen word, the acknowledgement); a data packet that passes goes around
 *   again, and its aggregation starts on pass 1, the first of the home pipe's chain. The
 *   chip's stages hold the checks or this control, not both in sequence, so the two branches
 *   share them (p4/README.md, "Where it stands"); the switch model counts the extra pass
 *   (`SwitchCounters::check_passes`). Pass 1's entry names the other pipes this source feeds
 *   (`fanout`); the replication engine sends a copy to each, which walks that pipe's chain
 *   through the pipe's own recirculation port. The chains of the pipes run at once, not one
 *   after another.
 * - A pass that completes an aggregator makes a second copy that stays in the pipe to read the
 *   sum out: a stateful ALU returns one 32-bit word per pass, so the low halves of the pairs
 *   come back in one pass (STEP_READ_LOW) and, for a chunk of more than 32 lanes, the high
 *   halves in the next (STEP_READ_HIGH), written over the copy's lanes; then it leaves for the
 *   destination. A completing pass that ends its packet (a partial sum's only pass, the last
 *   pass of a pipe's chain with nothing to fan out) needs no copy: it takes the low halves back
 *   into its own lanes as it adds, and only the high halves take a pass. The switch model
 *   counts these readout passes for the chip's budget (`SwitchCounters::readout_passes`: in
 *   place for partial sums, every half the chunk has for multicast contributions, whose chain
 *   may go on). A
 *   released aggregator's copy instead forwards the contribution raw (STEP_RAW) to the
 *   destination's owner.
 * - In reduce mode (the pre-aggregated exchange) a data packet is one worker's partial sum for
 *   its destination `dst`: on its first pass `partial_aggregator` (switchgnn.p4), keyed by
 *   (destination, worker), names the destination's aggregator, its pipe and the pair's seen
 *   word, and the partial goes around straight into that pipe for its one aggregator pass
 *   (STEP_PARTIAL), with the expected count in the pass header. A partial flagged as too
 *   large for 32 bits releases the aggregator instead of adding (the model also notifies the
 *   destination at once; here its result timeout does, and it fetches the plain features).
 *
 * - An all-reduce slice (allreduce.p4) is checked on its first pass like any packet, and on
 *   the next, in this branch, counted (allreduce.p4, applied just before this control) and
 *   added into its bank, an aggregator of the job's home pipe: written by the first
 *   contribution, summed or compared (maximum) by the others. Counting and adding share a pass
 *   so that a recirculated copy lost between them cannot leave a counted slice unadded. The
 *   completing slice takes the low halves back as it adds and makes one more pass, which marks
 *   the bank complete, reads the high halves and multicasts the result to every worker through
 *   the job's go group. A retransmission from a worker that missed a complete sum is answered
 *   with the bank read out again (two passes), to that worker only.
 *
 * Per pass, the count register (the model's `remaining`/`counted`/`Agg` state) decides whether
 * to add, complete or send raw. Aggregators are placed by the control plane (in their pipe,
 * slot · chunks + chunk after the job's base): every block of a plan fits the aggregator
 * memory, so the model's allocation from its pool never fails for such a plan and the two
 * agree.
 *
 * Differences from the model, both forced by the hardware and documented in p4/README.md:
 * lanes wrap on overflow instead of releasing the aggregator (a register can be written only
 * once per pass, so "check all lanes, then write" is impossible; the hosts' fixed-point scale
 * keeps sums from overflowing), and the sender's acknowledgement is mirrored on the first pass
 * and ECN-marked from the sender's own egress queue.
 */
#ifndef SWITCHGNN_AGGREGATION_P4
#define SWITCHGNN_AGGREGATION_P4

/* The count word of a released aggregator (switch.rs `Agg::Released`). */
const bit<32> RELEASED = 0x80000000;

/* What the count register says when a pass has no aggregator in this pipe (a first-pass
 * entry that only fans out). */
const bit<3> AGG_NONE = 4;

struct agg_state_t {
    bit<32> phase;   /* the block phase that last touched it: older means Idle */
    bit<32> count;   /* contributions added, or RELEASED */
}

/* Lanes i and i + 32 of every aggregator: a fresh aggregator (count 1) takes the contribution,
 * an active one adds it (or, for an all-reduce maximum, keeps the larger signed value), and the
 * readout passes return one half each. Four actions, the most a stateful ALU has, each with the
 * two lanes as its only packet inputs (SwitchML's layout): so the low half is read out by the
 * maximum with both lanes set to LANE_MIN, which leaves the pair as it was and returns it.
 * A chunk of fewer than i + 33 lanes writes whatever its absent lanes hold into the high half:
 * the same aggregator always serves the same chunk of a block, and the readout never reads a
 * lane its chunk does not have. Writing and adding return the new low half, which a pass keeps
 * only when it completes the sum and its packet has nothing left to add elsewhere (a partial
 * sum's only pass, the end of a chain): any other pass keeps its own lanes for the passes that
 * follow. */
#define LANE_PAIR(i, j)                                                                  \
    Register<lane_pair_t, bit<32>>(AGGREGATORS) pair_##i;                                \
    RegisterAction<lane_pair_t, bit<32>, bit<32>>(pair_##i) write_pair_##i = {           \
        void apply(inout lane_pair_t value, out bit<32> low) {                           \
            value.low = hdr.lanes[i].value;                                              \
            value.high = hdr.lanes_high[(j) - 32].value;                                             \
            low = value.low;                                                             \
        }                                                                                \
    };                                                                                   \
    RegisterAction<lane_pair_t, bit<32>, bit<32>>(pair_##i) add_pair_##i = {             \
        void apply(inout lane_pair_t value, out bit<32> low) {                           \
            value.low = value.low + hdr.lanes[i].value;                                  \
            value.high = value.high + hdr.lanes_high[(j) - 32].value;                                \
            low = value.low;                                                             \
        }                                                                                \
    };                                                                                   \
    RegisterAction<lane_pair_t, bit<32>, bit<32>>(pair_##i) max_pair_##i = {             \
        void apply(inout lane_pair_t value, out bit<32> low) {                           \
            if ((int<32>) hdr.lanes[i].value > (int<32>) value.low) {                    \
                value.low = hdr.lanes[i].value;                                          \
            }                                                                            \
            if ((int<32>) hdr.lanes_high[(j) - 32].value > (int<32>) value.high) {                   \
                value.high = hdr.lanes_high[(j) - 32].value;                                         \
            }                                                                            \
            low = value.low;                                                             \
        }                                                                                \
    };                                                                                   \
    RegisterAction<lane_pair_t, bit<32>, bit<32>>(pair_##i) read_high_##i = {            \
        void apply(inout lane_pair_t value, out bit<32> word) { word = value.high; }     \
    };                                                                                   \
    LANE_TABLE(i, j)

/* What the lane pairs do on a pass (`meta.lane_op`). Each pair has one table, applied once at
 * the end of the pass, whose action runs the pair's register: every register is used by one
 * logical table (a stage holds 16 of them on Tofino 2, four registers' worth, and each call
 * site of a register action is a table of its own: fifteen per pair when every path made its
 * own calls, which table placement could not place, "too many stages (100)"). `_KEEP` takes
 * the new low half back into the lane; a readout of the low half is the maximum with the
 * identity after lanes_to_min(), and reads a lane only where the chunk has it. */
const bit<4> LANES_IDLE      = 0;
const bit<4> LANES_WRITE     = 1;
const bit<4> LANES_WRITE_KEEP = 2;
const bit<4> LANES_ADD       = 3;
const bit<4> LANES_ADD_KEEP  = 4;
const bit<4> LANES_MAX       = 5;
const bit<4> LANES_MAX_KEEP  = 6;
const bit<4> LANES_READ_LOW  = 7;
const bit<4> LANES_READ_HIGH = 8;

#define LANE_TABLE(i, j)                                                                 \
    action write_##i() { write_pair_##i.execute(hdr.pass.agg_index); }                   \
    action write_keep_##i() {                                                            \
        hdr.lanes[i].value = write_pair_##i.execute(hdr.pass.agg_index);                 \
    }                                                                                    \
    action add_##i() { add_pair_##i.execute(hdr.pass.agg_index); }                       \
    action add_keep_##i() { hdr.lanes[i].value = add_pair_##i.execute(hdr.pass.agg_index); } \
    action max_##i() { max_pair_##i.execute(hdr.pass.agg_index); }                       \
    action max_keep_##i() { hdr.lanes[i].value = max_pair_##i.execute(hdr.pass.agg_index); } \
    action high_##i() {                                                                  \
        hdr.lanes_high[(j) - 32].value = read_high_##i.execute(hdr.pass.agg_index);      \
    }                                                                                    \
    table lanes_##i {                                                                    \
        key = {                                                                          \
            meta.lane_op                          : exact;                               \
            hdr.lanes[i].isValid()                : ternary;                             \
            hdr.lanes_high[(j) - 32].isValid()    : ternary;                             \
        }                                                                                \
        actions = { write_##i; write_keep_##i; add_##i; add_keep_##i; max_##i;           \
                    max_keep_##i; high_##i; NoAction; }                                  \
        const default_action = NoAction();                                               \
        size = 9;                                                                        \
        const entries = {                                                                \
            (LANES_WRITE, _, _)         : write_##i();                                   \
            (LANES_WRITE_KEEP, _, _)    : write_keep_##i();                              \
            (LANES_ADD, _, _)           : add_##i();                                     \
            (LANES_ADD_KEEP, _, _)      : add_keep_##i();                                \
            (LANES_MAX, _, _)           : max_##i();                                     \
            (LANES_MAX_KEEP, _, _)      : max_keep_##i();                                \
            (LANES_READ_LOW, true, _)   : max_keep_##i();                                \
            (LANES_READ_HIGH, _, true)  : high_##i();                                    \
        }                                                                                \
    }

#define APPLY_LANES(i) lanes_##i.apply();

/* One statement per lane pair. */
#define EACH_PAIR(M)                                                                     \
    M(0)  M(1)  M(2)  M(3)  M(4)  M(5)  M(6)  M(7)  M(8)  M(9)  M(10) M(11) M(12) M(13) \
    M(14) M(15) M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) M(25) M(26) M(27) \
    M(28) M(29) M(30) M(31)

struct lane_pair_t {
    bit<32> low;    /* lane i */
    bit<32> high;   /* lane i + 32 */
}

control Aggregation(inout headers_t hdr,
                    inout ingress_metadata_t meta,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    action aggregate(bit<32> agg_base, bit<32> dst, bit<16> dst_worker, PortId_t dst_port,
                     bit<8> fanout, bit<16> expected, bit<1> last) {
        meta.has_pass = true;
        hdr.pass.agg_index = hdr.pass.agg_index + agg_base;   /* the chunk, from apply */
        hdr.pass.dst = dst;                  /* (straight into the pass header: a pass that */
        hdr.pass.dst_worker = dst_worker;    /*  does not go on to write it is dropped or */
        hdr.pass.dst_port = dst_port;        /*  finds them rewritten by its next pass) */
        meta.fanout = fanout;
        meta.expected = expected;
        meta.last = last;
    }

    action not_in_plan() {
        meta.has_pass = false;
    }

    /* Around again, through this pipe's port of the packet's path (an action, not a variable:
     * ingress PHV is short). */
    action around() {
        ig_tm_md.ucast_egress_port = (PortId_t) (hdr.pass.pipe[1:0] ++ meta.loop_local);
    }

    /* A raw contribution on its way to the destination's owner. */
    action to_owner() {
        hdr.pass.out_kind = OUT_FORWARD;
        hdr.pass.dst_worker = meta.dst_owner;
        ig_tm_md.ucast_egress_port = meta.dst_owner_port;
    }

    /* Both lanes of every pair to the maximum's identity, for a low-half readout. */
#define PAIR_TO_MIN(i) hdr.lanes[i].value = LANE_MIN; hdr.lanes_high[i].value = LANE_MIN;
    action lanes_to_min() {
        EACH_PAIR(PAIR_TO_MIN)
    }

    /* (job, block set, block, source, pipe, pass) → the pass's aggregator: one entry per
     * (vertex, aggregator) pair of the block, each in its aggregator's pipe, numbered in slot
     * order within the pipe (the model's `table.row(row)`); plus, for a source none of whose
     * aggregators is in the home pipe, an entry for index 0 there that only fans out
     * (expected 0). */
    @id(0x02000005)
    table vertex_aggregators {
        key = {
            hdr.sg.job     : exact @name("job");
            hdr.pass.set   : exact @name("set");
            hdr.sg.block   : exact @name("block");
            hdr.sg.src     : exact @name("src");
            hdr.pass.pipe  : exact @name("pipe");
            hdr.pass.index : exact @name("pass");
        }
        actions = { @id(0x01000006) aggregate; @id(0x0100000a) not_in_plan; }
        const default_action = not_in_plan();
        size = PASS_SIZE;
    }

    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) chunk_word;
    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) pass_group_of;

    Register<agg_state_t, bit<32>>(AGGREGATORS) state;
    /* One contribution: a fresh aggregator (older phase) starts at 1, a released one stays
     * released, an active one counts up. Returns the new count (1 = write, not add). */
    RegisterAction<agg_state_t, bit<32>, bit<32>>(state) count_in = {
        void apply(inout agg_state_t value, out bit<32> counted) {
            if (value.phase != hdr.pass.phase) {
                value.phase = hdr.pass.phase;
                value.count = 1;
            } else if (value.count != RELEASED) {
                value.count = value.count + 1;
            }
            counted = value.count;
        }
    };
    /* A resend releases the destination's aggregator. The model leaves a completed one alone;
     * marking it released changes nothing, since every contribution to it was counted. */
    RegisterAction<agg_state_t, bit<32>, bit<32>>(state) release = {
        void apply(inout agg_state_t value, out bit<32> counted) {
            value.phase = hdr.pass.phase;
            value.count = RELEASED;
            counted = value.count;
        }
    };

    /* counted > expected for the gateway, which compares two fields only for equality: the
     * excess, in place of the expected count once the equality has been tested (no PHV for
     * a field of its own). An action of its own keeps the subtraction out of the condition. */
    action past_expected() {
        meta.expected = meta.counted[15:0] |-| meta.expected;
    }

    LANE_PAIR(0, 32)  LANE_PAIR(1, 33)  LANE_PAIR(2, 34)  LANE_PAIR(3, 35)
    LANE_PAIR(4, 36)  LANE_PAIR(5, 37)  LANE_PAIR(6, 38)  LANE_PAIR(7, 39)
    LANE_PAIR(8, 40)  LANE_PAIR(9, 41)  LANE_PAIR(10, 42) LANE_PAIR(11, 43)
    LANE_PAIR(12, 44) LANE_PAIR(13, 45) LANE_PAIR(14, 46) LANE_PAIR(15, 47)
    LANE_PAIR(16, 48) LANE_PAIR(17, 49) LANE_PAIR(18, 50) LANE_PAIR(19, 51)
    LANE_PAIR(20, 52) LANE_PAIR(21, 53) LANE_PAIR(22, 54) LANE_PAIR(23, 55)
    LANE_PAIR(24, 56) LANE_PAIR(25, 57) LANE_PAIR(26, 58) LANE_PAIR(27, 59)
    LANE_PAIR(28, 60) LANE_PAIR(29, 61) LANE_PAIR(30, 62) LANE_PAIR(31, 63)

    apply {
        bool release_now = false;   /* the aggregator state released (raw, fetch) */
        bool go_on = false;         /* a data pass that reached its aggregator */

        /* One branch per kind of pass, exclusive, and no `return`: p4c turns a return into a
         * flag that every later statement tests, so the readouts after the data path's early
         * returns depended on tables that use the same lane registers, which must all sit in
         * one stage (Tofino 2's table placement never ended: "too many stages (100) placing
         * table" of a READ_HIGH), and the flags took ingress PHV (Tofino 1). */
#ifndef SWITCHGNN_NO_ALLREDUCE
        if (hdr.sg.packet_type == SG_REDUCE) {
            /* The all-reduce's lanes (allreduce.p4 counted the slice on this same pass, so a
             * copy lost on its way here loses nothing counted): the bank is aggregator
             * agg_index of the home pipe. Op code 0 sums, 1 takes the maximum. */
            hdr.pass.pass = hdr.pass.pass + 1;
            hdr.pass.out_kind = OUT_RECIRC;
            if (meta.drop) {
                /* refused by its region: counted by its reason in Ingress */
            } else if (hdr.pass.step == STEP_CHAIN) {
                hdr.pass.count = meta.reduce_count[15:0];
                if (meta.reduce_outcome == REDUCE_REPLAY) {
                    hdr.pass.step = STEP_REPLAY_LOW;
                    around();
                } else {
                    /* The completing slice takes the low halves of the result back as it
                     * goes. */
                    bool last = meta.reduce_outcome == REDUCE_COMPLETE;
                    if (meta.reduce_count == 1) {
                        if (last) {
                            meta.lane_op = LANES_WRITE_KEEP;
                        } else {
                            meta.lane_op = LANES_WRITE;
                        }
                    } else if (hdr.sg.layer == 0) {
                        if (last) {
                            meta.lane_op = LANES_ADD_KEEP;
                        } else {
                            meta.lane_op = LANES_ADD;
                        }
                    } else {
                        if (last) {
                            meta.lane_op = LANES_MAX_KEEP;
                        } else {
                            meta.lane_op = LANES_MAX;
                        }
                    }
                    if (last) {
                        hdr.pass.step = STEP_REDUCE_DONE;
                        around();
                    } else {
                        ig_dprsr_md.drop_ctl = 1;   /* counted: the result is its ack */
                    }
                }
            } else if (hdr.pass.step == STEP_REDUCE_DONE) {
                /* The bank is marked complete (allreduce.p4); the high halves, then one copy
                 * per worker through the job's go group. */
                if (hdr.sg.lanes > LANES_READ_PER_PASS) {
                    meta.lane_op = LANES_READ_HIGH;
                }
                hdr.pass.out_kind = OUT_REDUCED;
                ig_tm_md.mcast_grp_a = meta.go_group;
            } else if (hdr.pass.step == STEP_REPLAY_LOW) {
                lanes_to_min();
                meta.lane_op = LANES_READ_LOW;
                if (hdr.sg.lanes > LANES_READ_PER_PASS) {
                    hdr.pass.step = STEP_REPLAY_HIGH;
                    around();
                } else {
                    hdr.pass.out_kind = OUT_REPLAY;
                    ig_tm_md.ucast_egress_port = hdr.pass.sender_port;
                }
            } else {
                /* STEP_REPLAY_HIGH */
                meta.lane_op = LANES_READ_HIGH;
                hdr.pass.out_kind = OUT_REPLAY;
                ig_tm_md.ucast_egress_port = hdr.pass.sender_port;
            }
        } else
#endif
        if (hdr.sg.packet_type == SG_RAW) {
            /* raw(): the release a resend asked for (its first pass checked it), in the
             * aggregator's pipe; then on to the destination's owner. */
            release_now = true;
            hdr.pass.out_kind = OUT_FORWARD;
            ig_tm_md.ucast_egress_port = hdr.pass.dst_port;
        } else if (hdr.pass.step == STEP_READ_LOW) {
            /* The copies an aggregator pass made, on their way out. */
            lanes_to_min();
            meta.lane_op = LANES_READ_LOW;
            hdr.pass.pass = hdr.pass.pass + 1;
            if (hdr.sg.lanes > LANES_READ_PER_PASS) {
                hdr.pass.step = STEP_READ_HIGH;
                hdr.pass.out_kind = OUT_RECIRC;
                around();
            } else {
                hdr.pass.out_kind = OUT_RESULT;
                ig_tm_md.ucast_egress_port = hdr.pass.dst_port;
            }
        } else if (hdr.pass.step == STEP_READ_HIGH) {
            meta.lane_op = LANES_READ_HIGH;
            hdr.pass.out_kind = OUT_RESULT;
            ig_tm_md.ucast_egress_port = hdr.pass.dst_port;
        } else if (hdr.pass.step == STEP_RAW) {
            hdr.pass.out_kind = OUT_RAW;   /* forward_raw(): the host aggregates this one */
            ig_tm_md.ucast_egress_port = hdr.pass.dst_port;
        } else if (hdr.pass.step == STEP_PARTIAL) {
            /* Reduce mode: a partial sum's one aggregator pass, in its destination's pipe
             * (its first pass found the pair and its expected count). */
            meta.expected = hdr.pass.count;
            meta.last = 1;
            if ((hdr.sg.flags & SG_FLAG_FETCH) != 0) {
                /* A partial too large for 32 bits: release, add nothing, send nothing. */
                release_now = true;
                ig_dprsr_md.drop_ctl = 1;
            } else {
                go_on = true;   /* counted after the branches */
            }
        } else {
            /* data(): the pass (pipe, index) of the source's chains. The chunk, widened by an
             * identity hash into the index word, to which the pass table's action adds the
             * aggregator base (a metadata copy would take a 32-bit container of its own). */
            hdr.pass.agg_index = chunk_word.get({hdr.sg.chunk});
            vertex_aggregators.apply();
            if (!meta.has_pass) {
                meta.drop = true;
                meta.drop_reason = DROP_NOT_IN_PLAN;
            } else {
                go_on = true;   /* counted after the branches, when it expects any */
            }
        }
        /* The aggregator state's register at one place, its two uses on the two arms of one
         * branch: every call site is a table, all of a register's tables share its stage, and
         * tables in sequence on one register depend on each other, which no stage satisfies. */
        if (release_now) {
            release.execute(hdr.pass.agg_index);
        } else if (go_on && meta.expected != 0) {
            meta.counted = count_in.execute(hdr.pass.agg_index);
        }
        /* The rest of a data pass that reached its aggregator. */
        if (go_on) {
            if (meta.expected == 0) {
                meta.agg_outcome = AGG_NONE;
            } else {
                if (meta.counted == RELEASED) {
                    meta.agg_outcome = AGG_RAW;
                } else if (meta.counted == (bit<32>) meta.expected) {
                    meta.agg_outcome = AGG_COMPLETE;
                } else if (meta.counted[31:16] != 0) {
                    meta.agg_outcome = AGG_DONE;   /* past any 16-bit expected count */
                } else {
                    past_expected();
                    if (meta.expected != 0) {
                        meta.agg_outcome = AGG_DONE;
                    } else {
                        meta.agg_outcome = AGG_ADD;
                    }
                }
            }
            /* Only the first aggregation pass (pass 1, after the checks) fans out (its
             * entry's fan-out, zeroed for later passes in place: no variable, as ingress PHV
             * is short). */
            if (hdr.pass.pass != 1) {
                meta.fanout = 0;
            }
            /* A fresh aggregator is written, an active one added to: the pass picks the
             * register action (a condition inside it would need a third input). A pass
             * that completes the sum and ends its packet (no next pass, no fan-out) takes
             * the low half of the sums back into its lanes as it goes. */
            bool adds = meta.agg_outcome == AGG_ADD || meta.agg_outcome == AGG_COMPLETE;
            bool in_place = meta.agg_outcome == AGG_COMPLETE && meta.last == 1
                            && meta.fanout == 0;
            if (adds && meta.counted == 1) {
                if (in_place) {
                    meta.lane_op = LANES_WRITE_KEEP;
                } else {
                    meta.lane_op = LANES_WRITE;
                }
            } else if (adds) {
                if (in_place) {
                    meta.lane_op = LANES_ADD_KEEP;
                } else {
                    meta.lane_op = LANES_ADD;
                }
            }

            /* What this pass leaves behind: the next pass of this pipe's chain, a copy that
             * reads the finished sum out (or forwards the contribution raw), and on the first
             * aggregation pass the first pass of every other pipe's chain. The packet is written as the next
             * pass sees it; egress adjusts the emitting copy and the other pipes' copies by
             * their replication id. */
            bool emits = meta.agg_outcome == AGG_COMPLETE || meta.agg_outcome == AGG_RAW;
            bool continues = meta.last == 0;
            /* (dst, dst_worker and dst_port were written by the pass table's action) */
            hdr.pass.count = meta.counted[15:0];
            if (meta.agg_outcome == AGG_RAW) {
                hdr.pass.emit_step = STEP_RAW;
            } else {
                hdr.pass.emit_step = STEP_READ_LOW;
            }
            hdr.pass.pass = hdr.pass.pass + 1;
            hdr.pass.index = hdr.pass.index + 1;
            hdr.pass.step = STEP_CHAIN;
            hdr.pass.out_kind = OUT_RECIRC;
            if (meta.fanout != 0 || (emits && continues)) {
                /* Several copies: the job's pass group of this pipe, fan-out and copies
                 * (entries.rs `Install::pass_group`). */
                bit<1> emit_copy = 0;
                if (emits) { emit_copy = 1; }
                bit<1> continue_copy = 0;
                if (continues) { continue_copy = 1; }
                /* path << 8 | pipe << 6 | fan-out << 2 | copies (fan-out < 16), then one
                 * add: an action takes one instruction per field. By an identity hash, not
                 * a concatenation: that was written piece by piece, so the offset needed
                 * initialising, and p4c's check of that initialisation stopped on a
                 * compiler bug (a table of the raw path, which did not reach this, sharing
                 * the offset's container). */
                meta.pass_group = pass_group_of.get({meta.path[4:0], hdr.pass.pipe[1:0],
                                                     meta.fanout[3:0], emit_copy,
                                                     continue_copy});
                ig_tm_md.mcast_grp_a = meta.pass_groups + meta.pass_group;
            } else if (continues) {
                around();
            } else if (in_place) {
                /* The low half is in the lanes: the high half, if the chunk has one, takes
                 * one more pass; otherwise the sum leaves now. */
                if (hdr.sg.lanes > LANES_READ_PER_PASS) {
                    hdr.pass.step = STEP_READ_HIGH;
                    around();
                } else {
                    hdr.pass.out_kind = OUT_RESULT;
                    ig_tm_md.ucast_egress_port = hdr.pass.dst_port;
                }
            } else if (emits) {
                hdr.pass.step = hdr.pass.emit_step;
                around();
            } else {
                ig_dprsr_md.drop_ctl = 1;   /* done: the ack left on the first pass */
            }
        }
        /* The lanes last: one table per pair (see LANES_IDLE). */
        EACH_PAIR(APPLY_LANES)
    }
}

#endif
