/* switchgnn: in-network multicast and aggregation for full-graph GNN training.
 *
 * P4_16 for the Tofino Native Architecture (Tofino 1). This is the switch model of
 * `dataplane/src/switch.rs` written for the hardware; every control names the model function
 * it mirrors, and `p4/README.md` lists where the hardware forces a difference. Files by
 * concern:
 *
 *   include/constants.p4    wire constants, drop reasons, sizes
 *   include/headers.p4      Ethernet/IPv4/UDP, the switchgnn header, lanes, pass state
 *   include/parser.p4       parsers and deparsers (wire.rs `Packet::new_checked`, `Repr::parse`)
 *   include/admission.p4    admission and the exchange's limits (`Switch::process`)
 *   include/barrier.p4      the running exchange, joins, block done, block go
 *   include/allreduce.p4    the all-reduce's banks: claim, seen bits, count (`switch/reduce.rs`)
 *   include/aggregation.p4  aggregators in every pipe, passes and readouts (`data`, `raw`), and
 *                           the all-reduce's lanes
 *   include/egress.p4       copies, addresses, ECN (`Fabric::send`, `Fabric::go`)
 *
 * Control-plane entries for a plan: `switchgnn p4 entries --plan DIR`.
 */
#include <core.p4>
#include <tna.p4>

/* Metadata starts at zero (flags such as `drop` and `hop` are only ever set). */
@pa_auto_init_metadata
/* The pass header's mirror session in a 16-bit container of its own, with its padding. */
@pa_container_size("ingress", "hdr.pass.ack_session", 16)
@pa_container_size("ingress", "hdr.pass.pad_ack_session", 16)

#include "include/constants.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/admission.p4"
#include "include/barrier.p4"
#ifndef SWITCHGNN_NO_ALLREDUCE
#include "include/allreduce.p4"
#endif
#include "include/aggregation.p4"
#include "include/egress.p4"

control Ingress(inout headers_t hdr,
                inout ingress_metadata_t meta,
                in ingress_intrinsic_metadata_t ig_intr_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Admission() check;
    RunningExchange() running;
    Barrier() barrier;
#ifndef SWITCHGNN_NO_ALLREDUCE
    AllReduce() allreduce;
#endif
    Aggregation() aggregation;

    /* Drops by reason: the model's `SwitchCounters::drops`, same order. */
    Counter<bit<64>, bit<8>>(DROP_REASONS, CounterType_t.PACKETS) drops;

    /* Row words are 16 bits so that an entry fits one 128-bit SRAM word. */
    action set_source_row(bit<16> worker, PortId_t port, bit<16> seen_row) {
        meta.src_known = true;
        meta.src_owner = worker;
        meta.src_owner_port = port;
        meta.row_word = seen_row + meta.row_word;   /* the chunk (admission.p4): 16-bit sums */
    }
    action set_destination(bit<16> agg_base, bit<8> pipe, bit<16> worker, PortId_t port) {
        meta.dst_known = true;
        meta.dst_pipe = pipe;
        meta.dst_owner = worker;
        meta.dst_owner_port = port;
        meta.dst_agg = agg_base + meta.dst_agg;     /* likewise */
    }
    action unknown_source() { meta.src_known = false; }
    action unknown_destination() { meta.dst_known = false; }

    /* The block's vertices as senders: owner (the model's `plan.owner` for the sender of data
     * and raw, and the source a fetch goes to) and first seen word (row · chunks). Per block,
     * like every table that grows with the graph, so that the control plane can reload it. */
    @id(0x02000003)
    table source_row {
        key = {
            hdr.sg.job     : exact @name("job");
            hdr.pass.set   : exact @name("set");
            hdr.sg.block   : exact @name("block");
            hdr.sg.src     : exact @name("vertex");
        }
        actions = { @id(0x01000004) set_source_row; @id(0x0100000e) unknown_source; }
        const default_action = unknown_source();
        size = ROW_SIZE;
    }

    /* The block's vertices as destinations: their aggregator and its pipe (for a resend's
     * release) and owner (where raw goes, who may fetch). */
    @id(0x02000004)
    table destination_slot {
        key = {
            hdr.sg.job     : exact @name("job");
            hdr.pass.set   : exact @name("set");
            hdr.sg.block   : exact @name("block");
            hdr.sg.dst     : exact @name("vertex");
        }
        actions = { @id(0x01000005) set_destination; @id(0x0100000f) unknown_destination; }
        const default_action = unknown_destination();
        size = ROW_SIZE;
    }

    /* Widens the 16-bit aggregator to the pass header's word without an ALU move (which would
     * put the 16-bit field in a 32-bit container of its own). */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) dst_aggregator;

    action drop_with(bit<8> reason) {
        meta.drop = true;
        meta.drop_reason = reason;
    }

    /* Send the packet unchanged (raw, fetch) to a worker's port. */
    action forward(PortId_t port, bit<16> worker) {
        ig_tm_md.ucast_egress_port = port;
        hdr.pass.out_kind = OUT_FORWARD;
        hdr.pass.dst_worker = worker;
    }

    apply {
        /* Every path that aggregates leaves the packet undropped: the control is applied once,
         * below (the compiler inlines each application, and a table may be applied in one
         * place only). No flag says so: ingress PHV is short. */
        check.apply(hdr, meta, ig_intr_md);
        /* The running exchange's registers, read (or, on the barrier's own passes, written)
         * for every packet: a read changes nothing, and ungated it starts as soon as the job's
         * slot is known instead of after every check (barrier.p4). */
        running.apply(hdr, meta);
        if (ig_prsr_md.parser_err != 0 && !meta.drop) {
            /* (if/else, not ?: — Tofino sets a field from a comparison only by branching) */
            if (hdr.sg.isValid()) {
                drop_with(DROP_LANES_BEYOND);
            } else {
                drop_with(DROP_TRUNCATED);
            }
        }
        if (meta.hop) {
            ig_tm_md.ucast_egress_port = meta.recirc_port;
        } else if (!meta.drop && hdr.sg.packet_type == SG_REDUCE) {
            /* All-reduce slices name no exchange: their job's region checks them. */
#ifdef SWITCHGNN_NO_ALLREDUCE
            drop_with(DROP_NO_ALLREDUCE);   /* built without the region: as a job without one */
#else
            allreduce.apply(hdr, meta);
#endif
        } else if (!meta.drop && hdr.sg.packet_type == SG_STAMPS) {
            /* answer_stamps(): a worker asks where the numbering of its port stands. The reply
             * goes back to it, and the egress fills in the next number as it leaves, behind
             * everything numbered before it (egress.p4). */
            if ((hdr.sg.flags & SG_FLAG_ACK) != 0) {
                drop_with(DROP_WRONG_DIRECTION);
            } else if (hdr.sg.lanes != 0) {
                drop_with(DROP_BAD_LANES);
            } else {
                hdr.sg.flags = hdr.sg.flags | SG_FLAG_ACK;
                forward(hdr.pass.sender_port, hdr.sg.worker);
            }
        } else if (!meta.drop) {
            if (hdr.sg.packet_type == SG_JOIN || hdr.sg.packet_type == SG_BLOCK_DONE) {
                barrier.apply(hdr, meta, ig_dprsr_md, ig_tm_md);
            } else if (hdr.pass.pass == 0) {
                /* (a first pass: admission made the pass header, pass 0) */
                /* running(): data, raw and fetch belong to the running exchange. */
                source_row.apply();
                destination_slot.apply();
                /* (the destination's aggregator, for a resend's release; a data packet's
                 * pass table writes its own over it) */
                hdr.pass.agg_index = dst_aggregator.get({meta.dst_agg});
                /* The lanes this chunk must have: the last chunk's count, else all of them
                 * (kept in last_lanes itself: ingress PHV is short). */
                if (meta.chunks_left != 1) {   /* not the last chunk (admission.p4) */
                    meta.last_lanes = SG_MAX_LANES;
                }
                if (meta.run == RUN_STALE || !meta.started || meta.finished) {
                    drop_with(DROP_STALE);
                } else if (hdr.sg.packet_type == SG_DATA) {
                    if (meta.run != RUN_CURRENT) {
                        drop_with(DROP_STALE);
                    } else if (meta.mode == SG_MODE_HOST) {
                        drop_with(DROP_WRONG_MODE);
                    } else if (!meta.src_known || meta.src_owner != hdr.sg.worker) {
                        drop_with(DROP_NOT_IN_PLAN);
                    } else if (hdr.sg.lanes != meta.last_lanes) {
                        drop_with(DROP_BAD_LANES);
                    }   /* else it aggregates */
                } else if (hdr.sg.packet_type == SG_ROWS) {
                    /* rows(): packed host copies or their receiver's ack of ranges, forwarded
                     * whole to the owner of dst; the records after the header are left
                     * unparsed (the receiver checks them). */
                    if (meta.mode != SG_MODE_HOST || !meta.src_known
                            || meta.src_owner != hdr.sg.worker || !meta.dst_known) {
                        drop_with(DROP_NOT_IN_PLAN);
                    } else if (hdr.sg.lanes != 0) {
                        drop_with(DROP_BAD_LANES);
                    } else {
                        forward(meta.dst_owner_port, meta.dst_owner);
                    }
                } else if (hdr.sg.packet_type == SG_RAW) {
                    if (!meta.src_known || meta.src_owner != hdr.sg.worker || !meta.dst_known) {
                        drop_with(DROP_NOT_IN_PLAN);
                    } else if (hdr.sg.lanes != meta.last_lanes) {
                        drop_with(DROP_BAD_LANES);
                    }   /* else it aggregates, and is forwarded from there */
                } else {
                    /* Fetch: only the destination's owner asks; it goes to the source's. */
                    if (!meta.dst_known || meta.dst_owner != hdr.sg.worker || !meta.src_known) {
                        drop_with(DROP_NOT_IN_PLAN);
                    } else {
                        forward(meta.src_owner_port, meta.src_owner);
                    }
                }
            }   /* else a later pass (of a data packet's chain, a readout, a raw forward or a
                 * release in another pipe): it aggregates */
        }
        /* Data, raw and all-reduce packets that passed their checks, and every later pass. */
        if (!meta.drop && !meta.hop && (hdr.sg.packet_type == SG_DATA
                || hdr.sg.packet_type == SG_RAW || hdr.sg.packet_type == SG_REDUCE)) {
            aggregation.apply(hdr, meta, ig_dprsr_md, ig_tm_md);
        }
        if (meta.drop) {
            drops.count(meta.drop_reason);
            ig_dprsr_md.drop_ctl = 1;   /* a duplicate's acknowledgement is a mirror: it stays */
        } else if (meta.to_sender) {
            ig_tm_md.ucast_egress_port = hdr.pass.sender_port;
        }
    }
}

Pipeline(IngressParser(), Ingress(), IngressDeparser(),
         EgressParser(), Egress(), EgressDeparser()) pipe;

Switch(pipe) main;
