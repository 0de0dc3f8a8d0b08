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

    /* The lanes, parsed without a parser counter: p4c's back end (34b86e9) stops with an
     * internal error on the counter's load from `sg.lanes` ("counter load allocated to more
     * than 1 registers"). One state per lane at a fixed index (`.next` from states reached
     * at several stack positions is refused: "header stack indices must be contiguous"),
     * each ending the lanes when the count says so; every select reads the whole count byte,
     * so one parser match register holds it for all. Lanes 0-31 are the first stack, 32-63
     * the second. */
    state check_lanes {
        transition select(hdr.sg.lanes) {
            0: accept;
            1 .. 64: lane_0;
            default: too_many_lanes;
        }
    }

    state too_many_lanes {
        meta.drop = true;
        meta.drop_reason = DROP_TOO_MANY_LANES;
        transition accept;
    }

    /* A packet shorter than its lanes ends in a parser error: LanesBeyondBuffer. */
#define LANE_STATE(k, field, count, next)                                                \
    state lane_##k {                                                                     \
        pkt.extract(hdr.field);                                                          \
        transition select(hdr.sg.lanes) { count: accept; default: next; }                \
    }
    LANE_STATE(0, lanes[0], 1, lane_1)
    LANE_STATE(1, lanes[1], 2, lane_2)
    LANE_STATE(2, lanes[2], 3, lane_3)
    LANE_STATE(3, lanes[3], 4, lane_4)
    LANE_STATE(4, lanes[4], 5, lane_5)
    LANE_STATE(5, lanes[5], 6, lane_6)
    LANE_STATE(6, lanes[6], 7, lane_7)
    LANE_STATE(7, lanes[7], 8, lane_8)
    LANE_STATE(8, lanes[8], 9, lane_9)
    LANE_STATE(9, lanes[9], 10, lane_10)
    LANE_STATE(10, lanes[10], 11, lane_11)
    LANE_STATE(11, lanes[11], 12, lane_12)
    LANE_STATE(12, lanes[12], 13, lane_13)
    LANE_STATE(13, lanes[13], 14, lane_14)
    LANE_STATE(14, lanes[14], 15, lane_15)
    LANE_STATE(15, lanes[15], 16, lane_16)
    LANE_STATE(16, lanes[16], 17, lane_17)
    LANE_STATE(17, lanes[17], 18, lane_18)
    LANE_STATE(18, lanes[18], 19, lane_19)
    LANE_STATE(19, lanes[19], 20, lane_20)
    LANE_STATE(20, lanes[20], 21, lane_21)
    LANE_STATE(21, lanes[21], 22, lane_22)
    LANE_STATE(22, lanes[22], 23, lane_23)
    LANE_STATE(23, lanes[23], 24, lane_24)
    LANE_STATE(24, lanes[24], 25, lane_25)
    LANE_STATE(25, lanes[25], 26, lane_26)
    LANE_STATE(26, lanes[26], 27, lane_27)
    LANE_STATE(27, lanes[27], 28, lane_28)
    LANE_STATE(28, lanes[28], 29, lane_29)
    LANE_STATE(29, lanes[29], 30, lane_30)
    LANE_STATE(30, lanes[30], 31, lane_31)
    LANE_STATE(31, lanes[31], 32, lane_32)
    LANE_STATE(32, lanes_high[0], 33, lane_33)
    LANE_STATE(33, lanes_high[1], 34, lane_34)
    LANE_STATE(34, lanes_high[2], 35, lane_35)
    LANE_STATE(35, lanes_high[3], 36, lane_36)
    LANE_STATE(36, lanes_high[4], 37, lane_37)
    LANE_STATE(37, lanes_high[5], 38, lane_38)
    LANE_STATE(38, lanes_high[6], 39, lane_39)
    LANE_STATE(39, lanes_high[7], 40, lane_40)
    LANE_STATE(40, lanes_high[8], 41, lane_41)
    LANE_STATE(41, lanes_high[9], 42, lane_42)
    LANE_STATE(42, lanes_high[10], 43, lane_43)
    LANE_STATE(43, lanes_high[11], 44, lane_44)
    LANE_STATE(44, lanes_high[12], 45, lane_45)
    LANE_STATE(45, lanes_high[13], 46, lane_46)
    LANE_STATE(46, lanes_high[14], 47, lane_47)
    LANE_STATE(47, lanes_high[15], 48, lane_48)
    LANE_STATE(48, lanes_high[16], 49, lane_49)
    LANE_STATE(49, lanes_high[17], 50, lane_50)
    LANE_STATE(50, lanes_high[18], 51, lane_51)
    LANE_STATE(51, lanes_high[19], 52, lane_52)
    LANE_STATE(52, lanes_high[20], 53, lane_53)
    LANE_STATE(53, lanes_high[21], 54, lane_54)
    LANE_STATE(54, lanes_high[22], 55, lane_55)
    LANE_STATE(55, lanes_high[23], 56, lane_56)
    LANE_STATE(56, lanes_high[24], 57, lane_57)
    LANE_STATE(57, lanes_high[25], 58, lane_58)
    LANE_STATE(58, lanes_high[26], 59, lane_59)
    LANE_STATE(59, lanes_high[27], 60, lane_60)
    LANE_STATE(60, lanes_high[28], 61, lane_61)
    LANE_STATE(61, lanes_high[29], 62, lane_62)
    LANE_STATE(62, lanes_high[30], 63, lane_63)
    state lane_63 { pkt.extract(hdr.lanes_high[31]); transition accept; }
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
