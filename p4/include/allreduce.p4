/* switchgnn: the in-switch all-reduce (SwitchML), the bank half.
 *
 * Mirrors `reduce` of `dataplane/src/switch/reduce.rs` (`dataplane/src/allreduce.rs` explains
 * the protocol). A job that has an all-reduce region owns `slots` slots of two banks each;
 * slice position `p` goes to slot `p mod slots`, bank `(p / slots) mod 2`, and the header's
 * block and chunk fields must name them (they index the registers). The slots are a power of
 * two here, so both are bit masks of the position. A bank's lanes are one aggregator of the
 * lane-pair registers in the job's home pipe (aggregation.p4 adds, compares and reads them);
 * this control keeps what the model's `Bank` keeps besides the lanes, in three registers
 * indexed by the bank's word (`bank_base + 2·slot + bank`):
 *
 *   bank_state   {held, next}: the *use* the bank holds (the position with its slot and bank
 *                bits cleared, so that every slice of one pass over the pool has the same use)
 *                and the use it takes next — `held + 2·slots` once its sum is complete,
 *                `held + 1` (never a use: uses are multiples of 2·slots) while it is not;
 *   reduce_seen  {use, bits} per bank and group of 32 workers: who contributed to that use;
 *   reduce_count {use, count}: how many did.
 *
 * A slice whose use is the bank's next one takes the bank (the model's new use: the previous
 * sum is complete, so every worker had it); one whose use the bank holds is counted unless
 * its worker's bit is set — then it is a retransmission: dropped while the sum is incomplete,
 * answered with the stored result (unicast) once it is complete. Anything else is stale. The
 * seen and count words carry the use they belong to, so a new use starts them afresh without
 * a pass over the other words. All three start at zero: the control plane clears a job's
 * region when it installs the job (entries.rs `RegisterClear`), and zero is "use 0 comes next",
 * the first pass of the job's stream.
 *
 * Differences from the model, forced by the hardware and listed in p4/README.md: one stateful
 * ALU output cannot tell a stale slice from one too far ahead (both count as DROP_STALE); the
 * bank keeps no operation and lane count to compare a retransmission with (every worker of a
 * job sends the same geometry); sums wrap instead of raising an overflow notice (the workers'
 * fixed-point scale keeps `n` contributions within int32); and a bank whose sum can never
 * complete after a switch restart is not detected here (the workers' timeouts name it).
 */
#ifndef SWITCHGNN_ALLREDUCE_P4
#define SWITCHGNN_ALLREDUCE_P4

/* What a counted slice does to the bank's lanes. */
const bit<8> REDUCE_ADD      = 1;   /* written (the first) or combined in */
const bit<8> REDUCE_COMPLETE = 2;   /* the last contribution: combined, then the result leaves */
const bit<8> REDUCE_REPLAY   = 3;   /* a counted worker asks again for the complete sum */

struct bank_t {
    bit<32> held;
    bit<32> next;
}

struct stamped_t {
    bit<32> use;
    bit<32> value;
}

control AllReduce(inout headers_t hdr, inout ingress_metadata_t meta) {

    /* Every value the slice's checks and register indices need, each one operation on a
     * header field and a parameter (the offsets' additions follow in the next stage). */
    action set_region(bit<32> agg_base, bit<16> bank_base, bit<16> seen_base, bit<16> slots,
                      bit<16> slot_mask, bit<32> use_mask, bit<32> reuse) {
        meta.reduce_known = true;
        hdr.pass.agg_index = agg_base;
        meta.reduce_bank = (bit<32>) bank_base;
        meta.seen_index = (bit<32>) seen_base;
        /* (16 bits: the masks are, so the position's upper half never reaches them) */
        meta.reduce_slot = hdr.sg.sequence[15:0] & slot_mask;
        meta.reduce_bank_set = hdr.sg.sequence[15:0] & slots;
        meta.reduce_use = hdr.sg.sequence & use_mask;
        meta.reduce_reuse = reuse;
    }

    action no_region() {
        meta.reduce_known = false;
    }

    /* Per job with an all-reduce: its region — the first aggregator of its banks' lanes in the
     * home pipe, its first bank word and first seen word (8 per bank), slots, slots − 1, the
     * mask that clears a position's slot and bank bits, and 2·slots. A job without one drops its slices (DROP_NO_ALLREDUCE), as the model
     * does, and its welcome tells its workers to run the all-reduce over tcp. */
    @id(0x0200000b)
    table allreduce_region {
        key = { hdr.sg.job : exact @name("job"); }
        actions = { @id(0x01000011) set_region; @id(0x01000012) no_region; }
        const default_action = no_region();
        size = MAX_JOBS;
    }

    action set_bit(bit<32> mask) {
        meta.reduce_bit = mask;
    }

    /* A worker's bit in its seen word (the stateful ALU's mask input; no variable shifts). */
    table worker_bit {
        key = { hdr.sg.worker[4:0] : exact @name("worker"); }
        actions = { set_bit; }
        size = 32;
        const entries = {
            0 : set_bit(0x00000001);  1 : set_bit(0x00000002);  2 : set_bit(0x00000004);
            3 : set_bit(0x00000008);  4 : set_bit(0x00000010);  5 : set_bit(0x00000020);
            6 : set_bit(0x00000040);  7 : set_bit(0x00000080);  8 : set_bit(0x00000100);
            9 : set_bit(0x00000200); 10 : set_bit(0x00000400); 11 : set_bit(0x00000800);
           12 : set_bit(0x00001000); 13 : set_bit(0x00002000); 14 : set_bit(0x00004000);
           15 : set_bit(0x00008000); 16 : set_bit(0x00010000); 17 : set_bit(0x00020000);
           18 : set_bit(0x00040000); 19 : set_bit(0x00080000); 20 : set_bit(0x00100000);
           21 : set_bit(0x00200000); 22 : set_bit(0x00400000); 23 : set_bit(0x00800000);
           24 : set_bit(0x01000000); 25 : set_bit(0x02000000); 26 : set_bit(0x04000000);
           27 : set_bit(0x08000000); 28 : set_bit(0x10000000); 29 : set_bit(0x20000000);
           30 : set_bit(0x40000000); 31 : set_bit(0x80000000);
        }
    }

    @id(0x16000001)
    Register<bank_t, bit<32>>(REDUCE_BANKS) bank_state;
    /* Two conditions, both against the slice's use: its next use takes the bank. Returns the
     * use the bank holds afterwards: the slice's own when it took the bank or the bank was
     * already its (else the slice is stale). (Constants per branch could not come out: the
     * taking branch writes both halves of the register, and the ALU gives either the
     * predicate or a value, not constants in some branches and the predicate in others.) */
    RegisterAction<bank_t, bit<32>, bit<32>>(bank_state) claim = {
        void apply(inout bank_t value, out bit<32> held) {
            if (value.next == meta.reduce_use) {
                value.held = meta.reduce_use;
                value.next = meta.reduce_use + 1;
            }
            held = value.held;
        }
    };
    /* The sum is complete (the completing slice's second pass, or a replay's first, which
     * marks it again should the first copy have been lost): the bank's next use may come. */
    RegisterAction<bank_t, bit<32>, bit<8>>(bank_state) mark_complete = {
        /* No output: the ALU's output is claim's predicate, which this action has none of. */
        void apply(inout bank_t value) {
            if (value.held == meta.reduce_use) {
                value.next = value.held + meta.reduce_reuse;
            }
        }
    };

    @id(0x16000002)
    Register<stamped_t, bit<32>>(REDUCE_SEEN_WORDS) reduce_seen;
    /* Set the worker's bit; return the word as it was (0 at a new use), whose worker's bit
     * says whether this is a first sighting. (A two-field register's ALU cannot AND into its
     * output, only into the register: the caller masks the word.) */
    RegisterAction<stamped_t, bit<32>, bit<32>>(reduce_seen) mark_seen = {
        void apply(inout stamped_t value, out bit<32> seen) {
            if (value.use == meta.reduce_use) {
                seen = value.value;
                value.value = value.value | meta.reduce_bit;
            } else {
                seen = 0;
                value.use = meta.reduce_use;
                value.value = meta.reduce_bit;
            }
        }
    };

    @id(0x16000003)
    Register<stamped_t, bit<32>>(REDUCE_BANKS) reduce_count;
    RegisterAction<stamped_t, bit<32>, bit<32>>(reduce_count) count_in = {
        void apply(inout stamped_t value, out bit<32> counted) {
            if (value.use == meta.reduce_use) {
                value.value = value.value + 1;
            } else {
                value.use = meta.reduce_use;
                value.value = 1;
            }
            counted = value.value;
        }
    };
    RegisterAction<stamped_t, bit<32>, bit<32>>(reduce_count) read_count = {
        void apply(inout stamped_t value, out bit<32> counted) {
            if (value.use == meta.reduce_use) {
                counted = value.value;
            } else {
                counted = 0;
            }
        }
    };

    action drop_with(bit<8> reason) {
        meta.drop = true;
        meta.drop_reason = reason;
    }

    /* Identity hashes concatenate their inputs (the first in the highest bits) and widen them
     * with zeros: the header's fields reach the 32-bit offsets without an ALU move, which
     * would put the header's block, chunk and worker bytes into 32-bit containers. */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) bank_offset;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) seen_offset;

    /* One hash per action: an action without a key takes 32 bits of hash output ("the
     * immediate pathway"), and the two offsets in one took 64. */
    action bank_of_slice() {
        /* Slot s, bank b: offset 2·s + b among the region's banks (b is checked below). */
        meta.reduce_offset = bank_offset.get({hdr.sg.block, hdr.sg.chunk[0:0]});
    }
    action seen_word_of_slice() {
        /* Its seen word: 8 per bank, the worker's group of 32 the last three bits. */
        meta.reduce_seen_offset = seen_offset.get({hdr.sg.block, hdr.sg.chunk[0:0], hdr.sg.worker[7:5]});
    }

    apply {
        bank_of_slice();
        seen_word_of_slice();
        allreduce_region.apply();
        worker_bit.apply();
        if (!meta.reduce_known) {
            drop_with(DROP_NO_ALLREDUCE);
            return;
        }
        hdr.pass.agg_index = hdr.pass.agg_index + meta.reduce_offset;
        meta.reduce_bank = meta.reduce_bank + meta.reduce_offset;
        meta.seen_index = meta.seen_index + meta.reduce_seen_offset;
        if (hdr.pass.step == STEP_REDUCE_DONE || hdr.pass.step == STEP_REPLAY_LOW) {
            mark_complete.execute(meta.reduce_bank);
            return;
        }
        if (hdr.pass.step != STEP_CHAIN) {
            return;   /* a replay's second readout pass: aggregation.p4 */
        }
        /* reduce(): the slot and bank fields are the ones the position says, the operation
         * is one the switch knows, and the slice has lanes. */
        bit<8> bank = 0;
        if (meta.reduce_bank_set != 0) {
            bank = 1;
        }
        if (hdr.sg.block != meta.reduce_slot || hdr.sg.chunk != bank
                || hdr.sg.layer > 1) {
            drop_with(DROP_OUT_OF_RANGE);
            return;
        }
        if (hdr.sg.lanes == 0) {
            drop_with(DROP_BAD_LANES);
            return;
        }
        meta.reduce_held = claim.execute(meta.reduce_bank);
        if (meta.reduce_held != meta.reduce_use) {
            drop_with(DROP_STALE);
            return;
        }
        /* The word as it was, then its bit apart: ANDing the stateful ALU's output with a field
         * in one instruction cannot be aligned once the fields are split into 16-bit halves,
         * and a gateway cannot AND two fields. */
        meta.reduce_seen = mark_seen.execute(meta.seen_index);
        meta.reduce_seen = meta.reduce_seen & meta.reduce_bit;
        if (meta.reduce_seen != 0) {
            meta.reduce_count = read_count.execute(meta.reduce_bank);
            if (meta.reduce_count == (bit<32>) meta.workers) {
                meta.reduce_outcome = REDUCE_REPLAY;   /* the result was lost on its way */
            } else {
                drop_with(DROP_DUPLICATE);
            }
            return;
        }
        meta.reduce_count = count_in.execute(meta.reduce_bank);
        if (meta.reduce_count == (bit<32>) meta.workers) {
            meta.reduce_outcome = REDUCE_COMPLETE;
        } else {
            meta.reduce_outcome = REDUCE_ADD;
        }
    }
}

#endif
