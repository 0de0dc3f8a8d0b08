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

    action set_job(bit<16> workers, MulticastGroupId_t go_group, PortId_t recirc_port,
                   bit<16> job_slot, MulticastGroupId_t pass_groups, bit<8> home_pipe) {
        meta.workers = workers;
        meta.home_pipe = home_pipe;   /* recirc_port's pipe, a byte (a widening costs a step) */
        meta.go_group = go_group;
        meta.pass_groups = pass_groups;
        meta.recirc_port = recirc_port;
        meta.job_slot = job_slot;
    }
    /* A job without a configuration keeps `workers` at 0, and admission drops its packets. */
    action unknown_job() { }

    /* Per job: its worker count, the multicast group of its block go, the recirculation port
     * of its home pipe (where first passes and the barrier run), its index in the barrier
     * registers, the first of its pass groups, and the home pipe's number. Looked up on every
     * pass: the aggregation's passes multicast through its groups too. */
    @id(0x02000007)
    table job_config {
        key = { hdr.sg.job : exact @name("job"); }
        actions = { @id(0x01000008) set_job; @id(0x01000015) unknown_job; }
        const default_action = unknown_job();
        size = MAX_JOBS;
    }

    /* The packet's recirculation path, by a hash of its source and destination: a local port
     * number, looped in every pipe, and its index among the job's paths (which picks the pass
     * group's replicas). Without entries, the internal port. Every pass of one packet, the
     * first included, goes around that pipe's port of the path: one source's in order. */
    Hash<bit<8>>(HashAlgorithm_t.CRC16) path_slot_of;
    action set_path(bit<8> path, bit<7> local) {
        meta.path = path;
        meta.loop_local = local;
    }
    action internal_path() {
        meta.path = 0;
        meta.loop_local = RECIRC_LOCAL;
    }
    @id(0x0200000c)
    table recirculation_path {
        key = {
            hdr.sg.job     : exact @name("job");
            meta.path_slot : exact @name("slot");
        }
        actions = { @id(0x01000013) set_path; @id(0x01000014) @defaultonly internal_path; }
        const default_action = internal_path();
        size = PATH_SIZE;
    }

    /* seen[row word] = phase of the last sighting: a duplicate within this block. The row word
     * is the source's (`source_row`) or, in reduce mode, the pair's (`partial_aggregator`).
     * Only the home pipe's copy is used: every first pass runs there. */
    Register<bit<32>, bit<16>>(SEEN_WORDS) seen;
    RegisterAction<bit<32>, bit<16>, bit<8>>(seen) test_and_set = {
        void apply(inout bit<32> value, out bit<8> duplicate) {
            if (value == hdr.pass.phase) {
                duplicate = 1;
            } else {
                value = hdr.pass.phase;
                duplicate = 0;
            }
        }
    };

    /* Mirror the acknowledgement to the sender. An action of its own: the back end would
     * otherwise fold these constants into the action that runs the seen word's register,
     * whose index goes through the hash unit, and a keyless table's action may take a hash
     * or action data, not both (p4c, Tofino 2). */
    action mark_ack() {
        ig_dprsr_md.mirror_type = MIRROR_ACK;
        meta.ack_kind = 0x80;
    }

    /* Reduce mode: worker `hdr.sg.worker`'s partial sum for `hdr.sg.dst` goes from its first
     * pass straight to the destination's aggregator, in its pipe, on its one aggregator pass,
     * which takes the expected count from the pass header. */
    action aggregate_partial(bit<32> agg_base, bit<8> pipe, bit<16> dst_worker,
                             PortId_t dst_port, bit<16> expected, bit<16> seen_row) {
        meta.has_pass = true;
        hdr.pass.agg_index = hdr.pass.agg_index + agg_base;   /* the chunk, from apply */
        hdr.pass.pipe = pipe;
        hdr.pass.dst = hdr.sg.dst;
        hdr.pass.dst_worker = dst_worker;
        hdr.pass.dst_port = dst_port;
        hdr.pass.count = expected;
        meta.row_word = seen_row + meta.row_word;   /* the chunk, from apply */
    }
    action unknown_pair() { meta.has_pass = false; }

    /* (job, block set, block, destination, worker) → the destination's aggregator and pipe,
     * and the pair's seen word: one entry per partial sum of a reduce block (the model's
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
        actions = { @id(0x01000010) aggregate_partial; @id(0x01000016) unknown_pair; }
        const default_action = unknown_pair();
        size = PARTIAL_SIZE;
    }
    /* The chunk, widened into the aggregator index and the seen word that the partial's
     * action adds its bases to: one hash per action (a keyless table's action takes 32 bits
     * of hash output, and the two together need 48). */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) partial_index;
    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) partial_chunk;
    action partial_index_of_chunk() { hdr.pass.agg_index = partial_index.get({hdr.sg.chunk}); }
    action partial_row_of_chunk() { meta.row_word = partial_chunk.get({hdr.sg.chunk}); }

    /* The first pass is done: around again, through pipe `hdr.pass.pipe`'s port of the
     * packet's path, for its aggregation (pass 1). */
    action to_aggregation() {
        hdr.pass.pass = 1;
        hdr.pass.out_kind = OUT_RECIRC;
        ig_tm_md.ucast_egress_port = (PortId_t) (hdr.pass.pipe[1:0] ++ meta.loop_local);
    }

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
        /* Every pass: the job's configuration and the packet's path, lookups on header fields
         * alone (their actions only write metadata, so they take the first stages at once). */
        job_config.apply();
        meta.path_slot = path_slot_of.get({hdr.sg.src, hdr.sg.dst});
        recirculation_path.apply();
        if (hdr.pass.isValid() && hdr.pass.pass != 0) {
            /* A pass after the first: the aggregation alone, from what the pass header
             * carries. The chip's stages hold the first pass's checks or the aggregation, not
             * both in sequence (p4/README.md, "Where it stands"), so a packet that aggregates
             * is checked on its first pass and sent around: one more pass, which the switch
             * model counts (`SwitchCounters::check_passes`). The two branches share stages. */
#ifndef SWITCHGNN_NO_ALLREDUCE
            if (hdr.sg.packet_type == SG_REDUCE) {
                allreduce.apply(hdr, meta);   /* its region, its bank, its count */
            }
#endif
            aggregation.apply(hdr, meta, ig_dprsr_md, ig_tm_md);
        } else {
            /* A first pass (admission made the pass header, pass 0), a hop into the home pipe,
             * and the barrier's own passes. */
            bool checked_data = false;   /* a data packet that passed every check */
            /* (before admission makes it valid; by branching, as a validity bit cannot be
             * moved into a field) */
            bool first = false;
            if (!hdr.pass.isValid()) {
                first = true;
            }
            check.apply(hdr, meta, ig_intr_md);
            /* The running exchange's registers, read (or, on the barrier's own passes,
             * written) for every packet: a read changes nothing, and ungated it starts as soon
             * as the job's slot is known instead of after every check (barrier.p4). */
            running.apply(hdr, meta);
            /* Registers are per pipe: the job's seen words, barrier and all-reduce banks live
             * in the pipe of its recirculation port (its home pipe), where every first pass
             * runs. A packet admitted in another pipe hops there first (one extra
             * recirculation; p4/README.md); on arriving, its step is a first pass's again.
             * After the running exchange, whose tables the step picks, so that they need not
             * wait for the checks. */
            if (first) {
                if (!meta.drop && ig_intr_md.ingress_port[8:7] != meta.recirc_port[8:7]) {
                    meta.hop = true;
                    hdr.pass.step = STEP_HOP;
                    hdr.pass.out_kind = OUT_RECIRC;
                }
            } else if (hdr.pass.step == STEP_HOP) {
                hdr.pass.step = STEP_CHAIN;
            }
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
                /* Counted and added on its next pass, in the aggregation's branch: the two
                 * must share a pass (a copy lost between them would leave a counted slice
                 * unadded). */
                to_aggregation();
#endif
            } else if (!meta.drop && hdr.sg.packet_type == SG_STAMPS) {
                /* answer_stamps(): a worker asks where the numbering of its port stands. The
                 * reply goes back to it, and the egress fills in the next number as it leaves,
                 * behind everything numbered before it (egress.p4). */
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
                } else {
                    /* running(): data, raw and fetch belong to the running exchange. */
                    source_row.apply();
                    destination_slot.apply();
                    /* (the destination's aggregator, for a resend's release) */
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
                        } else if (meta.mode == SG_MODE_REDUCE) {
                            /* A partial sum: its pair's seen word and aggregator. */
                            partial_index_of_chunk();
                            partial_row_of_chunk();
                            partial_aggregator.apply();
                            if (!meta.has_pass) {
                                drop_with(DROP_NOT_IN_PLAN);
                            } else {
                                hdr.pass.step = STEP_PARTIAL;
                                checked_data = true;
                            }
                        } else {
                            checked_data = true;   /* its chains start in the home pipe */
                        }
                    } else if (hdr.sg.packet_type == SG_ROWS) {
                        /* rows(): packed host copies or their receiver's ack of ranges,
                         * forwarded whole to the owner of dst; the records after the header
                         * are left unparsed (the receiver checks them). */
                        if (meta.mode != SG_MODE_HOST || !meta.src_known
                                || meta.src_owner != hdr.sg.worker || !meta.dst_known) {
                            drop_with(DROP_NOT_IN_PLAN);
                        } else if (hdr.sg.lanes != 0) {
                            drop_with(DROP_BAD_LANES);
                        } else {
                            forward(meta.dst_owner_port, meta.dst_owner);
                        }
                    } else if (hdr.sg.packet_type == SG_RAW) {
                        if (!meta.src_known || meta.src_owner != hdr.sg.worker
                                || !meta.dst_known) {
                            drop_with(DROP_NOT_IN_PLAN);
                        } else if (hdr.sg.lanes != meta.last_lanes) {
                            drop_with(DROP_BAD_LANES);
                        } else if ((hdr.sg.flags & SG_FLAG_RESEND) != 0
                                && meta.mode != SG_MODE_HOST && meta.run == RUN_CURRENT) {
                            /* raw(): a resend of the running block releases the destination's
                             * aggregator, on a pass in its pipe, then goes on to the
                             * destination's owner (aggregation.p4). */
                            hdr.pass.step = STEP_RELEASE;
                            hdr.pass.pipe = meta.dst_pipe;
                            hdr.pass.dst_port = meta.dst_owner_port;
                            hdr.pass.dst_worker = meta.dst_owner;
                            to_aggregation();
                        } else {
                            forward(meta.dst_owner_port, meta.dst_owner);   /* raw() */
                        }
                    } else {
                        /* Fetch: only the destination's owner asks; it goes to the source's. */
                        if (!meta.dst_known || meta.dst_owner != hdr.sg.worker
                                || !meta.src_known) {
                            drop_with(DROP_NOT_IN_PLAN);
                        } else {
                            forward(meta.src_owner_port, meta.src_owner);
                        }
                    }
                }
            }
            if (checked_data) {
                /* data(): acknowledged once counted, and again for a duplicate; counted, it
                 * goes around to aggregate. */
                mark_ack();
                if (test_and_set.execute(meta.row_word) == 1) {
                    drop_with(DROP_DUPLICATE);
                } else {
                    to_aggregation();
                }
            }
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
