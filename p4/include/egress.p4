/* switchgnn: egress — what each copy becomes, addresses, and ECN.
 *
 * Mirrors the packet construction of switch.rs: the acknowledgement (`ack` in `data`), the
 * result and the raw forward of an emitting pass (`result`, `forward_raw`), the block go to
 * each worker (`Fabric::go`), and `Fabric::send`, which marks ECN on every packet leaving
 * through a queue deeper than the threshold.
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

    action invalidate_sums() {
        hdr.sums[0].setInvalid();  hdr.sums[1].setInvalid();  hdr.sums[2].setInvalid();
        hdr.sums[3].setInvalid();  hdr.sums[4].setInvalid();  hdr.sums[5].setInvalid();
        hdr.sums[6].setInvalid();  hdr.sums[7].setInvalid();  hdr.sums[8].setInvalid();
        hdr.sums[9].setInvalid();  hdr.sums[10].setInvalid(); hdr.sums[11].setInvalid();
        hdr.sums[12].setInvalid(); hdr.sums[13].setInvalid(); hdr.sums[14].setInvalid();
        hdr.sums[15].setInvalid(); hdr.sums[16].setInvalid(); hdr.sums[17].setInvalid();
        hdr.sums[18].setInvalid(); hdr.sums[19].setInvalid(); hdr.sums[20].setInvalid();
        hdr.sums[21].setInvalid(); hdr.sums[22].setInvalid(); hdr.sums[23].setInvalid();
        hdr.sums[24].setInvalid(); hdr.sums[25].setInvalid(); hdr.sums[26].setInvalid();
        hdr.sums[27].setInvalid(); hdr.sums[28].setInvalid(); hdr.sums[29].setInvalid();
        hdr.sums[30].setInvalid(); hdr.sums[31].setInvalid();
    }

    action invalidate_lanes() {
        hdr.lanes[0].setInvalid();  hdr.lanes[1].setInvalid();  hdr.lanes[2].setInvalid();
        hdr.lanes[3].setInvalid();  hdr.lanes[4].setInvalid();  hdr.lanes[5].setInvalid();
        hdr.lanes[6].setInvalid();  hdr.lanes[7].setInvalid();  hdr.lanes[8].setInvalid();
        hdr.lanes[9].setInvalid();  hdr.lanes[10].setInvalid(); hdr.lanes[11].setInvalid();
        hdr.lanes[12].setInvalid(); hdr.lanes[13].setInvalid(); hdr.lanes[14].setInvalid();
        hdr.lanes[15].setInvalid(); hdr.lanes[16].setInvalid(); hdr.lanes[17].setInvalid();
        hdr.lanes[18].setInvalid(); hdr.lanes[19].setInvalid(); hdr.lanes[20].setInvalid();
        hdr.lanes[21].setInvalid(); hdr.lanes[22].setInvalid(); hdr.lanes[23].setInvalid();
        hdr.lanes[24].setInvalid(); hdr.lanes[25].setInvalid(); hdr.lanes[26].setInvalid();
        hdr.lanes[27].setInvalid(); hdr.lanes[28].setInvalid(); hdr.lanes[29].setInvalid();
        hdr.lanes[30].setInvalid(); hdr.lanes[31].setInvalid();
    }

    /* The emitting pass's copy to the destination: its sum, or this contribution raw. */
    action emit_result() {
        hdr.sg.packet_type = SG_RESULT;
        hdr.sg.src = hdr.pass.dst;
        hdr.sg.dst = hdr.pass.dst;
        hdr.sg.count = hdr.pass.count;
        hdr.sg.worker = hdr.pass.dst_worker;
        invalidate_lanes();   /* the sums take their place on the wire */
    }

    action emit_raw() {
        hdr.sg.packet_type = SG_RAW;
        hdr.sg.dst = hdr.pass.dst;
        hdr.sg.count = 1;
        invalidate_sums();
    }

    apply {
        if (meta.mirror_kind == 0x80) {
            /* The acknowledgement of a data packet, back to its sender. */
            hdr.sg.flags = hdr.sg.flags | SG_FLAG_ACK;
            hdr.sg.lanes = 0;
            invalidate_lanes();
            invalidate_sums();
            to_worker = hdr.sg.worker;
        } else if (hdr.pass.out_kind == OUT_GO) {
            hdr.sg.worker = eg_intr_md.egress_rid;   /* the replica's worker rank */
            to_worker = eg_intr_md.egress_rid;
        } else if (hdr.pass.out_kind == OUT_RECIRC
                   || (hdr.pass.out_kind == OUT_PASS && eg_intr_md.egress_rid == RID_CONTINUE)) {
            invalidate_sums();
            recirculates = true;
        } else if (hdr.pass.out_kind == OUT_PASS || hdr.pass.out_kind == OUT_LAST) {
            if (hdr.pass.emit == EMIT_RESULT) { emit_result(); } else { emit_raw(); }
            to_worker = hdr.pass.dst_worker;
        } else {
            to_worker = hdr.pass.dst_worker;        /* OUT_FORWARD: raw, fetch, a repeated go */
        }

        if (recirculates) {
            return;   /* the pass header stays in front for the next ingress pass */
        }
        hdr.pass.setInvalid();
        worker_address.apply();
        bit<16> payload = (bit<16>) hdr.sg.lanes << 2;
        hdr.ipv4.total_len = 20 + 8 + 32 + payload;
        hdr.udp.length = 8 + 32 + payload;
        hdr.udp.checksum = 0;   /* optional for UDP over IPv4; the payload changed */
        ecn_marking.apply();
        if ((bit<19>) eg_intr_md.enq_qdepth > meta.ecn_threshold) {
            hdr.sg.flags = hdr.sg.flags | SG_FLAG_ECN;
        }
    }
}

#endif
