/* switchgnn: egress — what each copy becomes, addresses, and ECN.
 *
 * Mirrors the packet construction of switch.rs: the acknowledgement (`ack` in `data`), the
 * result once read out and the raw forward of a released aggregator (`result`, `forward_raw`),
 * the block go to each worker (`Fabric::go`), an all-reduce's result (`send_result` in
 * switch/reduce.rs), and `Fabric::send`, which marks ECN on every
 * packet leaving through a queue deeper than the threshold. Recirculating copies of a pass
 * group learn here, from their replication id, which step or pipe they go on to.
 *
 * Sums and raw copies are numbered per egress port as they leave (switch/stamp.rs): workers do
 * not acknowledge them, and a hole in the numbers tells a worker that one was lost, so that it
 * fetches after a round trip or two instead of its whole result timeout. A worker's question
 * (SG_STAMPS, reflected by the ingress) leaves with the next number, not taken: it shows the
 * loss of the last packets of a stream, after which nothing comes, and, asked when a worker
 * joins, where its exchange's numbers start (the register starts wherever it is).
 */
#ifndef SWITCHGNN_EGRESS_P4
#define SWITCHGNN_EGRESS_P4

control Egress(inout headers_t hdr,
               inout egress_metadata_t meta,
               in egress_intrinsic_metadata_t eg_intr_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    bit<16> to_worker = 0;
    bool recirculates = false;

    action set_worker_address(bit<48> mac, bit<32> ip, bit<16> udp_port,
                              bit<48> switch_mac, bit<32> switch_ip) {
        hdr.ethernet.dst_addr = mac;
        hdr.ethernet.src_addr = switch_mac;
        hdr.ipv4.dst_addr = ip;
        hdr.ipv4.src_addr = switch_ip;
        hdr.udp.dst_port = udp_port;
        hdr.udp.src_port = SG_UDP_PORT;
    }

    action unknown_worker() {
        eg_dprsr_md.drop_ctl = 1;
    }

    /* (job, worker) → the worker's addresses, and the switch's own. */
    @id(0x02000008)
    table worker_address {
        key = {
            hdr.sg.job : exact @name("job");
            to_worker  : exact @name("worker");
        }
        actions = { @id(0x0100000b) set_worker_address; @id(0x0100000c) unknown_worker; }
        const default_action = unknown_worker();
        size = WORKER_SIZE;
    }

    /* Egress port → the number the next sum or raw copy through it carries. */
    Register<bit<32>, bit<32>>(512) stamps;
    RegisterAction<bit<32>, bit<32>, bit<32>>(stamps) next_stamp = {
        void apply(inout bit<32> value, out bit<32> old) { old = value; value = value + 1; }
    };
    /* A worker's question (SG_STAMPS): the next number, not taken. */
    RegisterAction<bit<32>, bit<32>, bit<32>>(stamps) peek_stamp = {
        void apply(inout bit<32> value, out bit<32> next) { next = value; }
    };
    /* The register at one call site, its action picked by the packet's type: each call site
     * is a table, and a register's tables must share its stage (p4/README.md). */
    action take_stamp() {
        hdr.sg.sequence = next_stamp.execute((bit<32>) eg_intr_md.egress_port);
    }
    action show_stamp() {
        hdr.sg.sequence = peek_stamp.execute((bit<32>) eg_intr_md.egress_port);
    }
    table stamp {
        key = { hdr.sg.packet_type : exact; }
        actions = { take_stamp; show_stamp; NoAction; }
        const default_action = NoAction();
        size = 3;
        const entries = {
            SG_RESULT : take_stamp();
            SG_RAW    : take_stamp();
            SG_STAMPS : show_stamp();
        }
    }

    /* (the queue depth by an identity hash into a field of its own: the saturating
     * subtraction below needs sources alone in their containers, and the intrinsic header
     * packs enq_qdepth with padding) */
    Hash<bit<19>>(HashAlgorithm_t.IDENTITY) qdepth_copy;

    /* (an action of its own: an action that takes hash output may hold no action data, and
     * the statements around it hold constants) */
    action copy_qdepth() {
        meta.qdepth = qdepth_copy.get({eg_intr_md.enq_qdepth});
    }

    /* The depth past the threshold (a gateway compares two fields only for equality). */
    action measure_queue() {
        meta.ecn_excess = meta.qdepth |-| meta.ecn_threshold;
    }

    action set_ecn_threshold(bit<19> cells) {
        meta.ecn_threshold = cells;
    }

    /* Egress port → ECN marking threshold in queue cells (the model's `ecn_threshold`). */
    @id(0x02000009)
    table ecn_marking {
        key = { eg_intr_md.egress_port : exact @name("port"); }
        actions = { @id(0x0100000d) set_ecn_threshold; }
        default_action = set_ecn_threshold(0x7ffff);
        size = 512;
    }

    /* A finished sum, read out into the lanes by its readout passes, to its destination. */
    action emit_result() {
        hdr.sg.packet_type = SG_RESULT;
        hdr.sg.src = hdr.pass.dst;
        hdr.sg.dst = hdr.pass.dst;
        hdr.sg.count = hdr.pass.count;
        hdr.sg.worker = hdr.pass.dst_worker;
    }

    /* A contribution its released aggregator did not take, to the destination's owner. */
    action emit_raw() {
        hdr.sg.packet_type = SG_RAW;
        hdr.sg.dst = hdr.pass.dst;
        hdr.sg.count = 1;
    }

    /* A complete all-reduce bank, read out into the lanes, as its result. */
    action emit_reduced() {
        hdr.sg.packet_type = SG_REDUCED;
        hdr.sg.count = hdr.pass.count;
    }

    apply {
        if (meta.mirror_kind == 0x80) {
            /* The acknowledgement of a data packet, back to its sender. */
            hdr.sg.flags = hdr.sg.flags | SG_FLAG_ACK;
            hdr.sg.lanes = 0;   /* (the mirror was truncated after the header: no lanes follow) */
            to_worker = hdr.sg.worker;
        } else if (hdr.pass.out_kind == OUT_GO) {
            hdr.sg.worker = eg_intr_md.egress_rid;   /* the replica's worker rank */
            to_worker = eg_intr_md.egress_rid;
        } else if (hdr.pass.out_kind == OUT_RECIRC) {
            /* A copy coming back for another pass. Ingress wrote the packet as the next pass of
             * its chain sees it; a pass group's other copies say by their replication id what
             * they are instead. */
            if (eg_intr_md.egress_rid == RID_EMIT) {
                hdr.pass.step = hdr.pass.emit_step;           /* read the sum out, or go raw */
            } else if ((eg_intr_md.egress_rid & 0xfffc) == RID_PIPE) {   /* RID_PIPE + 0..3 */
                hdr.pass.pipe = (bit<8>) eg_intr_md.egress_rid[1:0];   /* that pipe's chain */
                hdr.pass.index = 0;
            }
            recirculates = true;
        } else if (hdr.pass.out_kind == OUT_RESULT) {
            emit_result();
            to_worker = hdr.pass.dst_worker;
        } else if (hdr.pass.out_kind == OUT_RAW) {
            emit_raw();
            to_worker = hdr.pass.dst_worker;
        } else if (hdr.pass.out_kind == OUT_REDUCED) {
            /* An all-reduce result: this replica's worker (reduce.rs `send_result`). */
            emit_reduced();
            hdr.sg.worker = eg_intr_md.egress_rid;
            to_worker = eg_intr_md.egress_rid;
        } else if (hdr.pass.out_kind == OUT_REPLAY) {
            emit_reduced();                         /* to the worker that asked again */
            to_worker = hdr.sg.worker;
        } else {
            to_worker = hdr.pass.dst_worker;        /* OUT_FORWARD: raw, fetch, a repeated go */
        }

        if (recirculates) {
            return;   /* the pass header stays in front for the next ingress pass */
        }
        hdr.pass.setInvalid();
        worker_address.apply();
        stamp.apply();   /* sums and raw copies take a number, a question reads it */
        meta.payload = 6w0 ++ hdr.sg.lanes ++ 2w0;   /* lanes · 4 */
        hdr.ipv4.total_len = 20 + 8 + 32 + meta.payload;
        hdr.udp.length = 8 + 32 + meta.payload;
        hdr.udp.checksum = 0;   /* optional for UDP over IPv4; the payload changed */
        copy_qdepth();
        ecn_marking.apply();
        measure_queue();
        if (meta.ecn_excess != 0) {
            hdr.sg.flags = hdr.sg.flags | SG_FLAG_ECN;
        }
    }
}

#endif
