/* switchgnn: parsers and deparsers.
 *
 * Mirrors `Packet::new_checked` and `Repr::parse` (wire.rs): a header shorter than 32 bytes,
 * a bad magic or version, more than 64 lanes or lanes beyond the packet's end are recorded as
 * the drop reason the switch model counts, and the ingress control drops them.
 */
#ifndef SWITCHGNN_PARSER_P4
#define SWITCHGNN_PARSER_P4

parser IngressParser(packet_in pkt,
                     out headers_t hdr,
                     out ingress_metadata_t meta,
                     out ingress_intrinsic_metadata_t ig_intr_md) {
    ParserCounter() lanes_left;
    /* Local port numbers looped back in every pipe: passes come back on them too. */
    @id(0x03000001) value_set<bit<7>>(LOOPED_LOCALS) looped_ports;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.drop_reason = 0;
        meta.drop = false;
        /* A pipe's recirculation paths have the same local numbers in every pipe: its
         * internal port (RECIRC_PORT_0..3) and the looped front-panel ports. */
        transition select(ig_intr_md.ingress_port[6:0]) {
            RECIRC_LOCAL: parse_pass;
            looped_ports: parse_pass;
            default: parse_ethernet;
        }
    }

    /* A recirculated pass carries its state in front of Ethernet. */
    state parse_pass {
        pkt.extract(hdr.pass);
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: not_switchgnn;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, 17): parse_udp;
            default: not_switchgnn;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            SG_UDP_PORT: extract_switchgnn;
            default: not_switchgnn;
        }
    }

    /* Traffic that is not switchgnn's is not admitted (the model sees only its own socket). */
    state not_switchgnn {
        meta.drop = true;
        meta.drop_reason = DROP_NOT_ADMITTED;
        transition accept;
    }

    /* Fewer than 32 bytes left ends in a parser error with `sg` invalid: Truncated. */
    state extract_switchgnn {
        pkt.extract(hdr.sg);
        transition select(hdr.sg.magic, hdr.sg.version) {
            (SG_MAGIC, SG_VERSION): check_lanes;
            (SG_MAGIC, _): bad_version;
            default: bad_magic;
        }
    }

    state bad_magic {
        meta.drop = true;
        meta.drop_reason = DROP_BAD_MAGIC;
        transition accept;
    }

    state bad_version {
        meta.drop = true;
        meta.drop_reason = DROP_BAD_VERSION;
        transition accept;
    }

    state check_lanes {
        lanes_left.set(hdr.sg.lanes);
        transition select(hdr.sg.lanes) {
            0: accept;
            1 .. 32: parse_lane;
            33 .. 64: parse_low_lanes;
            default: too_many_lanes;
        }
    }

    state too_many_lanes {
        meta.drop = true;
        meta.drop_reason = DROP_TOO_MANY_LANES;
        transition accept;
    }

    /* A packet shorter than its lanes ends in a parser error: LanesBeyondBuffer. The lanes are
     * two stacks of 32 (headers.p4): up to 32 lanes fill the first one by one; more fill it
     * whole, then the second one by one. */
    state parse_lane {
        pkt.extract(hdr.lanes.next);
        lanes_left.decrement(1);
        transition select(lanes_left.is_zero()) {
            true: accept;
            false: parse_lane;
        }
    }

    state parse_low_lanes {
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        pkt.extract(hdr.lanes.next);
        lanes_left.decrement(32);
        transition parse_high_lane;
    }

    state parse_high_lane {
        pkt.extract(hdr.lanes_high.next);
        lanes_left.decrement(1);
        transition select(lanes_left.is_zero()) {
            true: accept;
            false: parse_high_lane;
        }
    }
}

control IngressDeparser(packet_out pkt,
                        inout headers_t hdr,
                        in ingress_metadata_t meta,
                        in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Mirror() mirror;

    apply {
        /* The acknowledgement to the sender is a truncated mirror copy (switch.rs `data`: every
         * data packet is acknowledged once it is counted). */
        if (ig_dprsr_md.mirror_type == MIRROR_ACK) {
            mirror.emit<ack_mirror_h>(hdr.pass.ack_session, {meta.ack_kind});
        }
        pkt.emit(hdr.pass);       /* bridged to egress */
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.sg);
        pkt.emit(hdr.lanes);
        pkt.emit(hdr.lanes_high);
    }
}

parser EgressParser(packet_in pkt,
                    out headers_t hdr,
                    out egress_metadata_t meta,
                    out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        meta.mirror_kind = 0;
        transition select(pkt.lookahead<bit<8>>()) {
            0x80: parse_ack_mirror;
            default: parse_bridged;
        }
    }

    /* The mirrored copy is the ingress deparser's output, truncated after the switchgnn
     * header (entries.rs `ACK_TRUNCATE`): the bridged header and the headers follow, no lanes. */
    state parse_ack_mirror {
        ack_mirror_h m;
        pkt.extract(m);
        meta.mirror_kind = m.kind;
        pkt.extract(hdr.pass);
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.sg);
        transition accept;
    }

    state parse_bridged {
        pkt.extract(hdr.pass);
        transition parse_ethernet;
    }

    /* Only admitted switchgnn packets reach egress: no checks left to make. The lanes are
     * not parsed: egress changes headers only (a sum was read out into the lanes in
     * ingress), and the lanes behind them leave as they came. Parsing them took the egress
     * parser 389 bytes deep, past Tofino's 160 (p4c's Tofino back end, first compile). */
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.sg);
        transition accept;
    }
}

control EgressDeparser(packet_out pkt,
                       inout headers_t hdr,
                       in egress_metadata_t meta,
                       in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        pkt.emit(hdr.pass);       /* valid on recirculating copies only */
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.sg);
        /* The lanes were never parsed in egress: they follow as the payload. Emitting (or
         * invalidating) them here made the back end place 64 words of egress PHV it never
         * fills, which Tofino 2, without Tofino 1's tagalong containers, has no room for. */
    }
}

#endif
