/* switchgnn: admission and the exchange's limits.
 *
 * Mirrors `Switch::process` (switch.rs) up to the handler dispatch: the job must be installed,
 * the worker must belong to it and arrive on its own port; flags, type, layer, ids and lane
 * count must fit the exchange (`Repr::check_plan`). Recirculated passes were checked on their
 * first pass and skip all of this.
 */
#ifndef SWITCHGNN_ADMISSION_P4
#define SWITCHGNN_ADMISSION_P4

control Admission(inout headers_t hdr,
                  inout ingress_metadata_t meta,
                  in ingress_intrinsic_metadata_t ig_intr_md) {

    /* The pass header starts here, with the session: the deparser's mirror takes the session
     * from it (a metadata copy would take a container of its own). */
    action admit(MirrorId_t ack_session) {
        meta.admitted = true;
        hdr.pass.setValid();
        hdr.pass.ack_session = ack_session;
    }

    action reject() {
        meta.admitted = false;
    }

    /* (job, worker, ingress port) of every worker of every installed job. */
    @id(0x02000001)
    table admission {
        key = {
            hdr.sg.job                : exact @name("job");
            hdr.sg.worker             : exact @name("worker");
            ig_intr_md.ingress_port   : exact @name("port");
        }
        actions = { @id(0x01000001) admit; @id(0x01000002) reject; }
        const default_action = reject();
        size = ADMISSION_SIZE;
    }

    action set_exchange(bit<8> set, bit<8> chunks, bit<8> last_lanes, bit<16> blocks,
                        bit<32> vertices, bit<8> mode) {
        hdr.pass.set = set;
        hdr.pass.chunks = chunks;
        meta.last_lanes = last_lanes;
        meta.blocks = blocks;
        /* Repr::check_plan's limits as saturating differences, since a gateway compares two
         * fields only for equality: no room left (0) means out of range. Straight from the
         * action data: the vertex count needs no field of its own. */
        meta.vertex_room = vertices |-| meta.vertex_room;   /* (held max(src, dst)) */
        meta.chunks_left = chunks |-| hdr.sg.chunk;   /* 1: the last chunk */
        meta.mode = mode;
    }

    /* No exchange for the layer: the limits stay 0 (metadata starts at zero), and the first
     * of them drops the packet as out of range, as the model does. */
    action no_such_layer() {
        meta.vertex_room = 0;
    }

    /* Per (job, layer): the block set and lane geometry of the layer's width, its block count
     * and vertex count (the limits of `Repr::check_plan`), and the exchange mode. */
    @id(0x02000002)
    table exchange_config {
        key = {
            hdr.sg.job   : exact @name("job");
            hdr.sg.layer : exact @name("layer");
        }
        actions = { @id(0x01000003) set_exchange; @id(0x01000009) no_such_layer; }
        const default_action = no_such_layer();
        size = EXCHANGE_SIZE;
    }

    action drop_with(bit<8> reason) {
        meta.drop = true;
        meta.drop_reason = reason;
    }

    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) chunk_row;
    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) chunk_agg;

    /* The block limit as a saturating difference too (not 0: out of range). The block count
     * is a field, as the barrier compares with it; in an action of its own, as the compiler
     * copies a plain assignment's arithmetic into the conditions that read it. */
    /* The larger of the packet's vertices: both are in range when it is (one PHV word, not
     * two, for the limit below). */
    action farther_vertex() {
        meta.vertex_room = (hdr.sg.src > hdr.sg.dst) ? hdr.sg.src : hdr.sg.dst;
    }

    action measure_block() {
        meta.block_over = hdr.sg.block |-| meta.blocks;
    }

    apply {
        /* The lookups first, each on header fields alone and none of them gated: their actions
         * only write metadata, so they run in the first stages at once, and the checks below
         * read what they found (a table applied under a condition waits for every stage that
         * decides it: gated, these lookups began at stage 3 of a 35-stage first compile).
         * A recirculated pass never matches `admission` (its ingress port is a recirculation
         * path, never a worker's). */
        bool first = !hdr.pass.isValid();
        /* The chunk, widened by identity hashes straight into the seen word and aggregator
         * that source_row's and destination_slot's actions add their bases to (no 16-bit copy
         * of it: ingress PHV is short). A hash, not a move: a move from a header byte into a
         * wider field puts both in one container size, and the index sums would then pull
         * the header's chunk byte into a container it cannot fill. */
        meta.row_word = chunk_row.get({hdr.sg.chunk});
        meta.dst_agg = chunk_agg.get({hdr.sg.chunk});
        farther_vertex();
        admission.apply();
        /* (an all-reduce slice names no exchange: its layer field is its operation, and its
         * region, allreduce.p4, checks it; what this finds for it goes unread) */
        exchange_config.apply();
        measure_block();
        if (first) {
            /* The pass header of a first pass (admit made it valid; a packet dropped below
             * takes it nowhere), written before the checks so that the running exchange's
             * registers, whose tables the step picks, need not wait for them: it runs in the
             * job's home pipe (that of its recirculation port), at the start of that pipe's
             * chain. */
            hdr.pass.pass = 0;
            hdr.pass.step = STEP_CHAIN;
            hdr.pass.pipe = meta.home_pipe;
            hdr.pass.index = 0;
            hdr.pass.out_kind = OUT_FORWARD;
            hdr.pass.sender_port = ig_intr_md.ingress_port;
        }
        if (first && !meta.drop) {   /* (else the parser already named the reason) */
            /* The checks of a first pass, in the model's order (one test per condition: a
             * gateway reads at most 4 bytes and 12 bits of fields). */
            if (!hdr.sg.isValid()) {
                drop_with(DROP_TRUNCATED);
            } else if ((hdr.sg.flags & SG_FLAG_RESERVED) != 0) {
                drop_with(DROP_RESERVED_FLAGS);
            } else if (hdr.sg.packet_type == 0 || hdr.sg.packet_type > SG_STAMPS) {
                drop_with(DROP_UNKNOWN_TYPE);
            } else if ((hdr.sg.flags & SG_FLAG_PARTIAL) != 0) {
                /* a leaf's partial sum: this program is a star's switch, never a spine */
                drop_with(DROP_NOT_ADMITTED);
            } else if (!meta.admitted) {
                drop_with(DROP_NOT_ADMITTED);
            } else if (meta.workers == 0) {   /* no job_config for the job (switchgnn.p4) */
                drop_with(DROP_NOT_ADMITTED);
            } else if (hdr.sg.packet_type == SG_REDUCED) {
                drop_with(DROP_WRONG_DIRECTION);
            } else if (hdr.sg.packet_type == SG_REDUCE) {
                /* checked by its region */
            } else if (meta.vertex_room == 0) {   /* src or dst: Repr::check_plan's order */
                drop_with(DROP_OUT_OF_RANGE);
            } else if (meta.block_over != 0) {
                drop_with(DROP_OUT_OF_RANGE);
            } else if (meta.chunks_left == 0) {
                drop_with(DROP_OUT_OF_RANGE);
            } else if (hdr.sg.packet_type == SG_RESULT || hdr.sg.packet_type == SG_BLOCK_GO) {
                drop_with(DROP_WRONG_DIRECTION);
            }
        }
        /* (A packet admitted in another pipe hops into the home pipe: Ingress decides that
         * after the running exchange, which reads the step.) */
    }
}

#endif
