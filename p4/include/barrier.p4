/* switchgnn: the running exchange, its barriers and the block go.
 *
 * Mirrors `running`, `join`, `start_if_all_joined`, `begin_block` and `block_done`
 * (switch.rs). The model keeps this state in a `Run`; here it is registers per job (index:
 * the job's slot from `job_config`):
 *
 *   exchange_epoch[job]  epoch of the running exchange;
 *   exchange_tag[job]    layer << 24 | backward << 16 | (block + 1); block + 1 = 0 while the
 *                        workers are still joining, = blocks + 1 once the exchange is complete;
 *   previous_epoch[job], previous_tag[job]: epoch and tag of the exchange before, to repeat
 *                        its final go to a worker that missed it (two registers, not a pair:
 *                        a stateful ALU takes two packet words, and the pair's read and write
 *                        took three);
 *   phase[job]           a counter advanced at every barrier: aggregator, seen and arrival
 *                        words stamped with an older phase count as empty, so the program never
 *                        clears registers in bulk (the model frees a block's state at its end);
 *   sequence[job]        the running exchange's sequence number (exchanges run in order);
 *   arrived[job·MAX_WORKERS + worker]  the phase in which the worker last reported;
 *   reports[job]         reports in the current phase.
 *
 * A register is touched once per pass, so the two writes that change the exchange (opening the
 * next one, advancing the block) are made by one extra pass of the packet that triggers them:
 * one pass per exchange and one per block, none per data packet.
 */
#ifndef SWITCHGNN_BARRIER_P4
#define SWITCHGNN_BARRIER_P4

/* What the exchange registers say about a packet. */
const bit<2> RUN_CURRENT = 1;   /* the running exchange and the packet's block */
const bit<2> RUN_OTHER   = 2;   /* the running exchange, another block (or not started) */
const bit<2> RUN_STALE   = 3;   /* another exchange */

/* Extra passes of the barrier (bridged `step` of a barrier packet). */
const bit<8> STEP_OPEN    = 3;  /* write the new exchange into the registers */
const bit<8> STEP_ADVANCE = 4;  /* advance the block, then multicast its go */

control RunningExchange(inout headers_t hdr,
                        inout ingress_metadata_t meta) {
    Register<bit<32>, bit<16>>(MAX_JOBS) exchange_epoch;
    Register<bit<32>, bit<16>>(MAX_JOBS) exchange_tag;
    Register<bit<32>, bit<16>>(MAX_JOBS) previous_epoch;
    Register<bit<32>, bit<16>>(MAX_JOBS) previous_tag;
    Register<bit<32>, bit<16>>(MAX_JOBS) phase;

    RegisterAction<bit<32>, bit<16>, bit<32>>(exchange_epoch) read_epoch = {
        void apply(inout bit<32> value, out bit<32> old) { old = value; }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(exchange_epoch) write_epoch = {
        void apply(inout bit<32> value, out bit<32> old) { old = value; value = hdr.sg.epoch; }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(exchange_tag) read_tag = {
        void apply(inout bit<32> value, out bit<32> old) { old = value; }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(exchange_tag) write_tag = {
        void apply(inout bit<32> value, out bit<32> now) { value = hdr.pass.agg_index; now = value; }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(exchange_tag) advance_tag = {
        void apply(inout bit<32> value, out bit<32> now) { value = value + 1; now = value; }
    };
    RegisterAction<bit<32>, bit<16>, bit<8>>(previous_epoch) same_previous_epoch = {
        void apply(inout bit<32> value, out bit<8> same) {
            if (value == hdr.sg.epoch) { same = 1; } else { same = 0; }
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(previous_tag) read_previous_tag = {
        void apply(inout bit<32> value, out bit<32> tag) { tag = value; }
    };
    /* The opening pass carries the old epoch and tag in the pass header's dst and phase
     * words (see Barrier.open_next). */
    RegisterAction<bit<32>, bit<16>, bit<8>>(previous_epoch) write_previous_epoch = {
        void apply(inout bit<32> value, out bit<8> unused) {
            value = hdr.pass.dst;
            unused = 0;
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(previous_tag) write_previous_tag = {
        void apply(inout bit<32> value, out bit<32> unused) {
            value = hdr.pass.phase;
            unused = 0;
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(phase) read_phase = {
        void apply(inout bit<32> value, out bit<32> now) { now = value; }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(phase) next_phase = {
        void apply(inout bit<32> value, out bit<32> now) { value = value + 1; now = value; }
    };

    /* One table for each register that the barrier's own passes write, its action picked by
     * the pass's step: every call site of a register's actions is a table of its own, and all
     * of them must share the register's stage (p4/README.md, "Where it stands"). A first
     * pass's step is CHAIN or HOP (admission.p4); the default runs no register action, as
     * one indexed through the hash unit may not be a default. */
    action tag_read() { meta.running_tag = read_tag.execute(meta.job_slot); }
    action tag_write() { meta.running_tag = write_tag.execute(meta.job_slot); }
    action tag_advance() { meta.running_tag = advance_tag.execute(meta.job_slot); }
    table running_tag_word {
        key = { hdr.pass.step : exact; }
        actions = { tag_read; tag_write; tag_advance; NoAction; }
        const default_action = NoAction();
        size = 4;
        const entries = {
            STEP_CHAIN   : tag_read();
            STEP_HOP     : tag_read();
            STEP_OPEN    : tag_write();
            STEP_ADVANCE : tag_advance();
        }
    }
    action previous_tag_read() { meta.previous_tag = read_previous_tag.execute(meta.job_slot); }
    action previous_tag_write() { write_previous_tag.execute(meta.job_slot); }
    table previous_tag_word {
        key = { hdr.pass.step : exact; }
        actions = { previous_tag_read; previous_tag_write; NoAction; }
        const default_action = NoAction();
        size = 3;
        const entries = {
            STEP_CHAIN : previous_tag_read();
            STEP_HOP   : previous_tag_read();
            STEP_OPEN  : previous_tag_write();
        }
    }
    action phase_read() { hdr.pass.phase = read_phase.execute(meta.job_slot); }
    action phase_next() { hdr.pass.phase = next_phase.execute(meta.job_slot); }
    table phase_word {
        key = { hdr.pass.step : exact; }
        actions = { phase_read; phase_next; NoAction; }
        const default_action = NoAction();
        size = 4;
        const entries = {
            STEP_CHAIN   : phase_read();
            STEP_HOP     : phase_read();
            STEP_OPEN    : phase_next();
            STEP_ADVANCE : phase_next();
        }
    }

    /* The packet's block and the block count against the running block, as saturating
     * differences (a gateway compares two fields only for equality): once started, block_lead
     * is 0 for a block ahead, 1 for the running block, more for one behind. An action of its
     * own: the compiler copies a plain assignment's arithmetic into the conditions that read
     * it, and a gateway does no arithmetic. */
    action locate_block() {
        meta.block_lead = meta.running_tag[15:0] |-| hdr.sg.block;
        meta.final_lead = meta.running_tag[15:0] |-| meta.blocks;   /* 1: the final block */
    }

    /* The new exchange's tag (layer << 24 | backward << 16, no block yet), widened by a hash
     * into the pass header's aggregator word, which a barrier pass does not use: a metadata
     * word of its own would cost ingress PHV. */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) opened_tag;

    apply {
        /* (The registers are indexed by the job's slot as it is: a 32-bit copy of it would
         * take PHV for nothing.) */
        /* The running epoch goes in the pass header's dst word and the phase in its phase word
         * (no metadata copies: ingress PHV is short): compared below, carried by an opening
         * pass for `previous`, and a data pass's table writes its destination over dst. */
        /* The tag's upper half, layer << 8 | backward, as one concatenation (one instruction);
         * the Barrier compares with it too. */
        meta.want = hdr.sg.layer ++ 7w0 ++ hdr.sg.flags[4:4];
        bit<8> same_epoch = 1;   /* does the previous exchange's epoch match the packet's? */
        /* (Only first passes, hops and the barrier's own passes come here: a packet's later
         * passes are the aggregation's, switchgnn.p4.) */
        if (hdr.pass.step == STEP_OPEN) {
            hdr.pass.agg_index = opened_tag.get({hdr.sg.layer, 7w0, hdr.sg.flags[4:4], 16w0});
            write_epoch.execute(meta.job_slot);
            write_previous_epoch.execute(meta.job_slot);
            hdr.pass.dst = hdr.sg.epoch;
        } else if (hdr.pass.step == STEP_ADVANCE) {
            hdr.pass.dst = hdr.sg.epoch;
        } else {   /* pass 0 */
            hdr.pass.dst = read_epoch.execute(meta.job_slot);
            same_epoch = same_previous_epoch.execute(meta.job_slot);
        }
        /* written on opening (before the phase word overwrites the old tag the opening
         * pass carries), else read */
        previous_tag_word.apply();
        if (same_epoch == 0) {
            meta.previous_tag = 0;   /* the previous exchange's tag only for its epoch */
        }
        running_tag_word.apply();   /* written on opening, advanced, else read */
        phase_word.apply();         /* advanced on opening and advancing, else read */
        /* Flags from comparisons by branching: Tofino's actions cannot move a comparison's
         * value into a field. */
        locate_block();
        meta.started = false;
        meta.finished = false;
        if (meta.running_tag[15:0] != 0) {
            meta.started = true;
            if (meta.final_lead == 1) {   /* the running block is `blocks`: complete */
                meta.finished = true;
            }
        }
        /* (one comparison per condition: a gateway takes 4 bytes and 12 bits of fields) */
        if (hdr.pass.dst != hdr.sg.epoch) {
            meta.run = RUN_STALE;
        } else if (meta.running_tag[31:16] != meta.want) {
            meta.run = RUN_STALE;
        } else if (meta.block_lead == 1) {   /* started, and the packet's block */
            meta.run = RUN_CURRENT;
        } else {
            meta.run = RUN_OTHER;
        }
    }
}

/* Join and BlockDone: count reports once per worker and phase; the last one starts the next
 * block. */
control Barrier(inout headers_t hdr,
                inout ingress_metadata_t meta,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Register<bit<32>, bit<16>>(MAX_JOBS * MAX_WORKERS) arrived;
    Register<bit<32>, bit<16>>(MAX_JOBS) reports;
    Register<bit<32>, bit<16>>(MAX_JOBS) sequence;

    /* Exchanges run in sequence order (switch.rs `join`). Two actions, as a stateful ALU
     * makes at most two comparisons: one for a join that may open the next exchange, one for
     * any other. */
    RegisterAction<bit<32>, bit<16>, bit<8>>(sequence) check_sequence = {
        void apply(inout bit<32> value, out bit<8> verdict) {
            if (hdr.sg.sequence == value) {
                verdict = 1;                       /* this exchange */
            } else if (hdr.sg.sequence > value) {
                value = hdr.sg.sequence;
                verdict = 2;                       /* opens the next */
            } else {
                verdict = 0;                       /* stale */
            }
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<8>>(sequence) check_sequence_closed = {
        void apply(inout bit<32> value, out bit<8> verdict) {
            if (hdr.sg.sequence == value) {
                verdict = 1;                       /* this exchange */
            } else {
                verdict = 0;                       /* stale, or the next while this one runs */
            }
        }
    };
    /* First report of this worker in this phase? */
    RegisterAction<bit<32>, bit<16>, bit<8>>(arrived) mark_arrived = {
        void apply(inout bit<32> value, out bit<8> first) {
            if (value != hdr.pass.phase) {
                value = hdr.pass.phase;
                first = 1;
            } else {
                first = 0;
            }
        }
    };
    /* Count it; the last report resets the count and completes the barrier. */
    RegisterAction<bit<32>, bit<16>, bit<8>>(reports) count_report = {
        void apply(inout bit<32> value, out bit<8> complete) {
            if (value + 1 == (bit<32>) meta.workers) {
                value = 0;
                complete = 1;
            } else {
                value = value + 1;
                complete = 0;
            }
        }
    };

    /* (an identity hash: the concatenation, widened, without moving header bits by the ALU) */
    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) arrival_index;

    action drop_stale() {
        meta.drop = true;
        meta.drop_reason = DROP_STALE;
    }

    /* A go to this worker alone (switch.rs `Fabric::go` for one port): a lost go, repeated.
     * The block is the running one (or, for a late BlockDone, the previous exchange's final
     * one), computed here from the tag: sg.block is alone in its container anyway, as the
     * source of a saturating subtraction, and a metadata copy would cost ingress PHV. */
    action go_running() {
        hdr.sg.packet_type = SG_BLOCK_GO;
        hdr.sg.block = meta.running_tag[15:0] - 1;
        hdr.pass.out_kind = OUT_FORWARD;
        hdr.pass.dst_worker = hdr.sg.worker;
        meta.to_sender = true;
    }
    action go_previous() {
        hdr.sg.packet_type = SG_BLOCK_GO;
        hdr.sg.block = meta.previous_tag[15:0] - 1;
        hdr.pass.out_kind = OUT_FORWARD;
        hdr.pass.dst_worker = hdr.sg.worker;
        meta.to_sender = true;
    }

    apply {
        /* slot · MAX_WORKERS + worker, by concatenation (slot < MAX_JOBS = 64, an admitted
         * worker < MAX_WORKERS = 256): a register index is a field or a slice, not a sum. */
        bit<16> arrival = arrival_index.get({meta.job_slot[5:0], hdr.sg.worker[7:0]});

        if (hdr.pass.step == STEP_ADVANCE) {
            /* begin_block: multicast the go of the block the exchange is now in (the final go,
             * block = blocks, when it is complete). */
            hdr.sg.packet_type = SG_BLOCK_GO;
            hdr.sg.block = meta.running_tag[15:0] - 1;
            hdr.pass.out_kind = OUT_GO;
            ig_tm_md.mcast_grp_a = meta.go_group;
            return;
        }
        if (hdr.pass.step != STEP_OPEN) {
            if (hdr.sg.packet_type == SG_JOIN) {
                meta.may_open = false;
                if (meta.finished || meta.running_tag == 0) {
                    meta.may_open = true;
                }
                bit<8> verdict;
                if (meta.may_open) {
                    verdict = check_sequence.execute(meta.job_slot);
                } else {
                    verdict = check_sequence_closed.execute(meta.job_slot);
                }
                if (verdict == 0) { drop_stale(); return; }
                if (verdict == 2) {
                    /* open_next: one more pass writes the exchange registers, carrying the
                     * old exchange for `previous`. */
                    hdr.pass.step = STEP_OPEN;
                    hdr.pass.phase = meta.running_tag;
                    hdr.pass.out_kind = OUT_RECIRC;
                    ig_tm_md.ucast_egress_port = meta.recirc_port;
                    return;
                }
                if (meta.run == RUN_STALE) { drop_stale(); return; }
                if (meta.started) { go_running(); return; }
            } else {
                /* BlockDone */
                if (meta.run == RUN_STALE) {
                    if (meta.previous_tag != 0 && meta.previous_tag[31:16] == meta.want) {
                        go_previous();   /* missed the final go */
                        return;
                    }
                    drop_stale();
                    return;
                }
                if (!meta.started) { drop_stale(); return; }
                /* (started: block_lead 0 is a block ahead, 2 or more one behind) */
                if (meta.block_lead == 0) { drop_stale(); return; }
                if (meta.block_lead != 1) { go_running(); return; }
                if (meta.finished) { drop_stale(); return; }
            }
        }
        if (mark_arrived.execute(arrival) == 0) {
            ig_dprsr_md.drop_ctl = 1;   /* a repeated report: already counted */
            return;
        }
        if (count_report.execute(meta.job_slot) == 1) {
            /* The barrier is complete: one more pass advances the block. */
            hdr.pass.step = STEP_ADVANCE;
            hdr.pass.out_kind = OUT_RECIRC;
            ig_tm_md.ucast_egress_port = meta.recirc_port;
        } else {
            ig_dprsr_md.drop_ctl = 1;
        }
    }
}

#endif
