/* switchgnn: the aggregators.
 *
 * In reduce mode (the pre-aggregated exchange) a data packet is one worker's partial sum for
 * its destination `dst`: `partial_aggregator`, keyed by (destination, worker), names the
 * destination's aggregator and the pair's seen word, and the packet makes exactly one pass
 * (`last` is always set). A partial flagged as too large for 32 bits releases the aggregator
 * instead of adding (the model also notifies the destination at once; here its result timeout
 * does, and it fetches the plain features).
 *
 * Mirrors `data` (switch.rs) and the aggregator release of `raw`. A data packet makes one pass
 * per aggregator its source feeds in the running block: the `vertex_aggregators` table, keyed
 * by the pass index the packet carries, names the aggregator of this pass (the model's loop
 * over `table.row(row)`), and the packet recirculates until the entry marked `last`.
 *
 * Per pass: the count register (the model's `remaining`/`counted`/`Agg` state) decides whether
 * to add, complete or send raw; 32 lane registers, four per stage, add the lanes (the model's
 * `pool.lanes`). Aggregators are placed by the control plane (slot · chunks + chunk, plus the
 * job's base): every block of a plan fits the aggregator memory, so the model's allocation
 * from its pool never fails for such a plan and the two agree.
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

struct agg_state_t {
    bit<32> phase;   /* the block phase that last touched it: older means Idle */
    bit<32> count;   /* contributions added, or RELEASED */
}

#define LANE(i)                                                                      \
    Register<bit<32>, bit<32>>(AGGREGATORS) lane_##i;                                \
    RegisterAction<bit<32>, bit<32>, bit<32>>(lane_##i) add_##i = {                  \
        void apply(inout bit<32> value, out bit<32> sum) {                           \
            if (meta.counted == 1) { value = hdr.lanes[i].value; }                   \
            else { value = value + hdr.lanes[i].value; }                             \
            sum = value;                                                             \
        }                                                                            \
    };

#define ADD_LANE(i)                                                                  \
    if (hdr.lanes[i].isValid()) {                                                    \
        hdr.sums[i].value = add_##i.execute(meta.agg_index);                         \
        if (meta.agg_outcome == AGG_COMPLETE) { hdr.sums[i].setValid(); }            \
    }

control Aggregation(inout headers_t hdr,
                    inout ingress_metadata_t meta,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    action aggregate(bit<32> agg_base, bit<32> dst, bit<16> dst_worker, PortId_t dst_port,
                     MulticastGroupId_t emit_group, bit<16> expected, bit<1> last) {
        meta.has_pass = true;
        meta.agg_index = agg_base + (bit<32>) hdr.sg.chunk;
        meta.dst = dst;
        meta.dst_worker = dst_worker;
        meta.dst_port = dst_port;
        meta.emit_group = emit_group;
        meta.expected = expected;
        meta.last = last;
    }

    action not_in_plan() {
        meta.has_pass = false;
    }

    /* Reduce mode: the one pass of worker `hdr.sg.worker`'s partial sum for `hdr.sg.dst`. */
    action aggregate_partial(bit<32> agg_base, bit<16> dst_worker, PortId_t dst_port,
                             bit<16> expected, bit<16> seen_row) {
        meta.has_pass = true;
        meta.agg_index = agg_base + (bit<32>) hdr.sg.chunk;
        meta.dst = hdr.sg.dst;
        meta.dst_worker = dst_worker;
        meta.dst_port = dst_port;
        meta.expected = expected;
        meta.seen_index = (bit<32>) seen_row + (bit<32>) hdr.sg.chunk;
        meta.last = 1;
    }

    /* (job, block set, block, source, pass) → the pass's aggregator: one entry per
     * (vertex, aggregator) pair of the block, the model's `table.row(row)` in slot order. */
    @id(0x02000005)
    table vertex_aggregators {
        key = {
            hdr.sg.job     : exact @name("job");
            hdr.pass.set   : exact @name("set");
            hdr.sg.block   : exact @name("block");
            hdr.sg.src     : exact @name("src");
            hdr.pass.pass  : exact @name("pass");
        }
        actions = { @id(0x01000006) aggregate; @id(0x0100000a) not_in_plan; }
        const default_action = not_in_plan();
        size = PASS_SIZE;
    }

    /* (job, block set, block, destination, worker) → the destination's aggregator and the
     * pair's seen word: one entry per partial sum of a reduce block (the model's
     * `PlanBlock::pair`). */
    @id(0x0200000a)
    table partial_aggregator {
        key = {
            hdr.sg.job     : exact @name("job");
            hdr.pass.set   : exact @name("set");
            hdr.sg.block   : exact @name("block");
            hdr.sg.dst     : exact @name("dst");
            hdr.sg.worker  : exact @name("worker");
        }
        actions = { @id(0x01000010) aggregate_partial; @id(0x0100000a) not_in_plan; }
        const default_action = not_in_plan();
        size = PARTIAL_SIZE;
    }

    /* seen[seen_row + chunk] = phase of the last sighting: a duplicate within this block. The
     * row comes from `source_row` (stage 1), so this check does not wait for the pass table. */
    Register<bit<32>, bit<32>>(SEEN_WORDS) seen;
    RegisterAction<bit<32>, bit<32>, bit<8>>(seen) test_and_set = {
        void apply(inout bit<32> value, out bit<8> duplicate) {
            if (value == meta.phase) { duplicate = 1; } else { value = meta.phase; duplicate = 0; }
        }
    };

    Register<agg_state_t, bit<32>>(AGGREGATORS) state;
    /* One contribution: a fresh aggregator (older phase) starts at 1, a released one stays
     * released, an active one counts up. Returns the new count (1 = write, not add). */
    RegisterAction<agg_state_t, bit<32>, bit<32>>(state) count_in = {
        void apply(inout agg_state_t value, out bit<32> counted) {
            if (value.phase != meta.phase) {
                value.phase = meta.phase;
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
            value.phase = meta.phase;
            value.count = RELEASED;
            counted = value.count;
        }
    };

    LANE(0)  LANE(1)  LANE(2)  LANE(3)  LANE(4)  LANE(5)  LANE(6)  LANE(7)
    LANE(8)  LANE(9)  LANE(10) LANE(11) LANE(12) LANE(13) LANE(14) LANE(15)
    LANE(16) LANE(17) LANE(18) LANE(19) LANE(20) LANE(21) LANE(22) LANE(23)
    LANE(24) LANE(25) LANE(26) LANE(27) LANE(28) LANE(29) LANE(30) LANE(31)

    apply {
        if (hdr.sg.packet_type == SG_RAW) {
            /* raw(): a resend of the running block releases the destination's aggregator. */
            if ((hdr.sg.flags & SG_FLAG_RESEND) != 0 && meta.mode != SG_MODE_HOST
                    && meta.run == RUN_CURRENT && meta.dst_known) {
                release.execute(meta.agg_index);   /* agg_index from destination_slot */
            }
            return;
        }

        /* data() */
        if (meta.mode == SG_MODE_REDUCE) {
            partial_aggregator.apply();
        } else {
            vertex_aggregators.apply();
        }
        if (!meta.has_pass) {
            meta.drop = true;
            meta.drop_reason = DROP_NOT_IN_PLAN;
            return;
        }
        if (hdr.pass.pass == 0) {
            /* Acknowledge once counted, and again for a duplicate. */
            ig_dprsr_md.mirror_type = MIRROR_ACK;
            if (test_and_set.execute(meta.seen_index) == 1) {
                meta.drop = true;
                meta.drop_reason = DROP_DUPLICATE;
                return;
            }
        }
        if (meta.mode == SG_MODE_REDUCE && (hdr.sg.flags & SG_FLAG_FETCH) != 0) {
            /* A partial too large for 32 bits: release, add nothing, send nothing. */
            release.execute(meta.agg_index);
            ig_dprsr_md.drop_ctl = 1;
            return;
        }
        meta.counted = count_in.execute(meta.agg_index);
        if (meta.counted == RELEASED) {
            meta.agg_outcome = AGG_RAW;
        } else if (meta.counted == (bit<32>) meta.expected) {
            meta.agg_outcome = AGG_COMPLETE;
        } else if (meta.counted > (bit<32>) meta.expected) {
            meta.agg_outcome = AGG_DONE;
        } else {
            meta.agg_outcome = AGG_ADD;
        }
        if (meta.agg_outcome == AGG_ADD || meta.agg_outcome == AGG_COMPLETE) {
            ADD_LANE(0)  ADD_LANE(1)  ADD_LANE(2)  ADD_LANE(3)
            ADD_LANE(4)  ADD_LANE(5)  ADD_LANE(6)  ADD_LANE(7)
            ADD_LANE(8)  ADD_LANE(9)  ADD_LANE(10) ADD_LANE(11)
            ADD_LANE(12) ADD_LANE(13) ADD_LANE(14) ADD_LANE(15)
            ADD_LANE(16) ADD_LANE(17) ADD_LANE(18) ADD_LANE(19)
            ADD_LANE(20) ADD_LANE(21) ADD_LANE(22) ADD_LANE(23)
            ADD_LANE(24) ADD_LANE(25) ADD_LANE(26) ADD_LANE(27)
            ADD_LANE(28) ADD_LANE(29) ADD_LANE(30) ADD_LANE(31)
        }

        /* What this pass emits, and where the packet goes next. */
        hdr.pass.dst = meta.dst;
        hdr.pass.dst_worker = meta.dst_worker;
        hdr.pass.count = meta.counted[15:0];
        hdr.pass.pass = hdr.pass.pass + 1;
        if (meta.agg_outcome == AGG_COMPLETE) {
            hdr.pass.emit = EMIT_RESULT;
        } else if (meta.agg_outcome == AGG_RAW) {
            hdr.pass.emit = EMIT_RAW;   /* forward_raw(): the host aggregates this one */
        } else {
            hdr.pass.emit = 0;
        }
        bool emits = hdr.pass.emit != 0;
        if (meta.last == 0) {
            if (emits) {
                hdr.pass.out_kind = OUT_PASS;          /* {destination, recirculation} */
                ig_tm_md.mcast_grp_a = meta.emit_group;
            } else {
                hdr.pass.out_kind = OUT_RECIRC;
                ig_tm_md.ucast_egress_port = meta.recirc_port;
            }
        } else if (emits) {
            hdr.pass.out_kind = OUT_LAST;
            ig_tm_md.ucast_egress_port = meta.dst_port;
        } else {
            ig_dprsr_md.drop_ctl = 1;                  /* done: the ack left on pass 0 */
        }
    }
}

#endif
