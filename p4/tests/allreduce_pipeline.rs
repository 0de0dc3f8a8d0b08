//! The all-reduce of `include/allreduce.p4` and its lane steps in `include/aggregation.p4`,
//! transcribed pass by pass into a switch node and driven by the workers' own engines through
//! a lossy network. No P4 compiler runs here, so this checks the program's design — the use
//! encoding of the banks, the stamped seen and count words, the completion and replay passes,
//! the maximum doubling as the low-half read — against what the switch model guarantees: every
//! worker gets the exact combination, operation after operation, whatever the network and the
//! recirculation ports lose, duplicate or reorder. The transcription follows the program
//! statement by statement; a change to one needs the same change here.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_conformance::allreduce::{combine, engines, every_fault, inputs};
use switchgnn_dataplane::allreduce::ReduceOp;
use switchgnn_dataplane::fault::Faults;
use switchgnn_dataplane::network::{Network, NetworkConfig};
use switchgnn_dataplane::node::{Address, Nanos, Node, Operation, Outbox, SwitchNode, Transmit};
use switchgnn_dataplane::wire::{Packet, PacketType, Repr, MAX_LANES};
use switchgnn_p4::program;

const JOB: u16 = 1;
const HALF: usize = MAX_LANES / 2;

/// The step a recirculated copy carries (`hdr.pass.step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Chain,
    ReduceDone,
    ReplayLow,
    ReplayHigh,
}

/// A packet in the pipeline: its header, its 64 lane words (the absent ones hold whatever the
/// PHV holds: noise here), the pass header's count, and whether it is past its first pass
/// (`hdr.pass.pass != 0`: the aggregation's branch, where the slice is counted and added).
struct InFlight {
    repr: Repr,
    lanes: [i32; MAX_LANES],
    step: Step,
    count: u32,
    checked: bool,
}

/// One job's all-reduce on a Tofino, as the program and its entries set it up.
struct Tofino {
    workers: u32,
    // allreduce_region's parameters (entries.rs).
    agg_base: u32,
    bank_base: u32,
    slots: u32,
    // Registers: bank_state {held, next}, reduce_seen / reduce_count {use, value}, and the
    // lane pairs {low, high} of the region's aggregators. All cleared at install.
    bank_state: Vec<(u32, u32)>,
    reduce_seen: Vec<(u32, u32)>,
    reduce_count: Vec<(u32, u32)>,
    pairs: Vec<[(i32, i32); HALF]>,
    /// Recirculated copies lost (a loaded recirculation port), and the randomness for it and
    /// for the noise in absent lanes.
    recirculation_loss: f64,
    rng: ChaCha8Rng,
    /// The program before review: a replay did not mark the bank complete.
    replay_marks_complete: bool,
    outbox: Outbox,
    passes: u64,
    stale: u64,
    duplicates: u64,
}

impl Tofino {
    fn new(workers: u16, slots: u16, recirculation_loss: f64, seed: u64) -> Tofino {
        let banks = 2 * usize::from(slots);
        assert!(slots.is_power_of_two());
        assert!(banks as u64 <= program::REDUCE_BANKS);
        Tofino {
            workers: u32::from(workers),
            agg_base: 7,
            bank_base: 3,
            slots: u32::from(slots),
            bank_state: vec![(0, 0); 3 + banks],
            reduce_seen: vec![(0, 0); 8 * (3 + banks)],
            reduce_count: vec![(0, 0); 3 + banks],
            pairs: vec![[(0, 0); HALF]; 7 + banks],
            recirculation_loss,
            rng: ChaCha8Rng::seed_from_u64(seed),
            replay_marks_complete: true,
            outbox: Outbox::default(),
            passes: 0,
            stale: 0,
            duplicates: 0,
        }
    }

    /// One ingress pass of a slice, then the copy it recirculates (unless the port loses it).
    fn run(&mut self, mut p: InFlight) {
        loop {
            self.passes += 1;
            let Some(next) = self.pass(&mut p) else {
                return;
            };
            if self.rng.random_bool(self.recirculation_loss) {
                return;
            }
            p.step = next;
        }
    }

    /// A first pass checks the slice and sends it around (`to_aggregation`); every later one
    /// runs `AllReduce.apply` then the reduce branch of `Aggregation.apply`. The step of the
    /// copy that recirculates, if one does.
    fn pass(&mut self, p: &mut InFlight) -> Option<Step> {
        if !p.checked {
            p.checked = true;
            return Some(Step::Chain);
        }
        let r = p.repr;
        // set_region and the additions after it.
        let offset = u32::from(r.block) << 1 | u32::from(r.chunk & 1);
        let agg = (self.agg_base + offset) as usize;
        let bank = (self.bank_base + offset) as usize;
        let seen_index =
            (8 * self.bank_base + (offset << 3 | u32::from(r.worker >> 5) & 7)) as usize;
        let bit = 1u32 << (r.worker & 31);
        let slot = r.sequence & (self.slots - 1);
        let bank_set = r.sequence & self.slots;
        let reuse = 2 * self.slots;
        let use_ = r.sequence & !(reuse - 1);

        if p.step == Step::ReduceDone || (p.step == Step::ReplayLow && self.replay_marks_complete) {
            // mark_complete
            let b = &mut self.bank_state[bank];
            if b.0 == use_ {
                b.1 = b.0.wrapping_add(reuse);
            }
        }
        let n = usize::from(r.lanes);
        match p.step {
            Step::Chain => {}
            Step::ReduceDone => {
                if n > HALF {
                    self.read_high(agg, p);
                }
                for w in 0..self.workers {
                    self.emit(p, w as u16);
                }
                return None;
            }
            Step::ReplayLow => {
                // lanes_to_min, then the maximum with the identity as the low-half read.
                p.lanes = [i32::MIN; MAX_LANES];
                for i in 0..HALF.min(n) {
                    let low = self.max_pair(agg, i, p);
                    p.lanes[i] = low;
                }
                if n > HALF {
                    return Some(Step::ReplayHigh);
                }
                self.emit(p, r.worker);
                return None;
            }
            Step::ReplayHigh => {
                self.read_high(agg, p);
                self.emit(p, r.worker);
                return None;
            }
        }

        // reduce(): checks, then the banks.
        let bank_bit = u8::from(bank_set != 0);
        if u32::from(r.block) != slot || r.chunk != bank_bit || r.layer > 1 || n == 0 {
            return None;
        }
        let held = {
            let b = &mut self.bank_state[bank];
            if b.1 == use_ {
                *b = (use_, use_.wrapping_add(1));
            }
            b.0
        };
        if held != use_ {
            self.stale += 1;
            return None;
        }
        let seen = {
            let s = &mut self.reduce_seen[seen_index];
            if s.0 == use_ {
                let was = s.1 & bit;
                s.1 |= bit;
                was
            } else {
                *s = (use_, bit);
                0
            }
        };
        let c = &mut self.reduce_count[bank];
        if seen != 0 {
            let count = if c.0 == use_ { c.1 } else { 0 };
            if count != self.workers {
                self.duplicates += 1;
                return None;
            }
            p.count = count;
            return Some(Step::ReplayLow);
        }
        if c.0 == use_ {
            c.1 += 1;
        } else {
            *c = (use_, 1);
        }
        let count = c.1;
        p.count = count;
        let complete = count == self.workers;
        // The lane pairs: written by the first, added (sum) or compared (maximum) by the rest;
        // the completing slice takes the low halves back.
        for i in 0..HALF {
            let (lane_i, lane_j) = (p.lanes[i], p.lanes[i + HALF]);
            let pair = &mut self.pairs[agg][i];
            *pair = if count == 1 {
                (lane_i, lane_j)
            } else if r.layer == 0 {
                (pair.0.wrapping_add(lane_i), pair.1.wrapping_add(lane_j))
            } else {
                (pair.0.max(lane_i), pair.1.max(lane_j))
            };
            if complete {
                p.lanes[i] = pair.0;
            }
        }
        complete.then_some(Step::ReduceDone)
    }

    fn max_pair(&mut self, agg: usize, i: usize, p: &InFlight) -> i32 {
        let pair = &mut self.pairs[agg][i];
        *pair = (pair.0.max(p.lanes[i]), pair.1.max(p.lanes[i + HALF]));
        pair.0
    }

    fn read_high(&mut self, agg: usize, p: &mut InFlight) {
        for j in HALF..usize::from(p.repr.lanes) {
            p.lanes[j] = self.pairs[agg][j - HALF].1;
        }
    }

    /// Egress: the result to worker `to` (a replica's rank, or the one that asked again).
    fn emit(&mut self, p: &InFlight, to: u16) {
        let mut r = p.repr;
        r.packet_type = PacketType::Reduced;
        r.worker = to;
        r.count = p.count as u16;
        let lanes = p.lanes;
        self.outbox
            .push_repr(Address::Worker(to), &r, &lanes[..usize::from(r.lanes)]);
    }
}

impl Node for Tofino {
    fn handle_packet(&mut self, _now: Nanos, from: Address, bytes: &[u8]) {
        let Ok(packet) = Packet::new_checked(bytes) else {
            return;
        };
        let Ok(repr) = Repr::parse(&packet) else {
            return;
        };
        // Admission: the job, and the worker on its own port; only slices go up.
        if repr.job != JOB
            || from != Address::Worker(repr.worker)
            || repr.packet_type != PacketType::Reduce
        {
            return;
        }
        let mut lanes = [0i32; MAX_LANES];
        for x in &mut lanes {
            *x = self.rng.random();
        }
        packet.lanes_into(&mut lanes[..usize::from(repr.lanes)]);
        self.run(InFlight {
            repr,
            lanes,
            step: Step::Chain,
            count: 0,
            checked: false,
        });
    }

    fn handle_timeout(&mut self, _now: Nanos) {}

    fn poll_transmit(&mut self, _now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        self.outbox.pop_into(buf)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
}

impl SwitchNode for Tofino {
    fn set_egress_queue(&mut self, _port: u16, _bytes: u64) {}

    fn passes(&self) -> u64 {
        self.passes
    }

    fn aggregators_in_use(&self) -> usize {
        0
    }
}

/// Operations of several lengths and both kinds, one after another in the job's stream, on
/// `tofino` within `until` of simulated time: whether every worker finished every one with
/// the exact combination.
fn stream_is_exact(net: &mut Network, tofino: &mut Tofino, slots: u16, until: Nanos) -> bool {
    let workers = tofino.workers as u16;
    let mut start = 0u32;
    let lengths = [1000usize, 1, 64, 65, 33, 3000, 32];
    for (operation, len) in lengths.into_iter().enumerate() {
        let op = if operation % 3 == 1 {
            ReduceOp::Max
        } else {
            ReduceOp::Sum
        };
        let inputs = inputs(workers, len, operation as u64);
        let mut engines = engines(JOB, slots, op, operation as u32, start, &inputs);
        net.run_while(tofino, &mut engines, until, |e| {
            e.iter().all(|e| e.is_finished())
        })
        .unwrap();
        if !engines.iter().all(|e| e.is_finished()) {
            return false;
        }
        let want = combine(op, &inputs);
        for e in engines {
            assert!(e.failure().is_none(), "{:?}", e.failure());
            start = e.end();
            assert_eq!(e.into_output(), want, "operation {operation} ({op:?})");
        }
    }
    true
}

#[test]
fn the_program_combines_exactly_under_every_fault() {
    // Two words of seen bits (33 workers), one slot, many slots.
    for (name, f) in every_fault() {
        for (workers, slots, recirculation_loss) in
            [(4u16, 8u16, 0.0), (5, 64, 0.02), (3, 1, 0.05), (33, 4, 0.0)]
        {
            let mut net = Network::new(NetworkConfig::new(f, 11), workers);
            let mut tofino = Tofino::new(workers, slots, recirculation_loss, 5);
            assert!(
                stream_is_exact(&mut net, &mut tofino, slots, Nanos::MAX / 4),
                "{name}, {workers} workers, {slots} slots"
            );
            if f.loss == 0.0 && f.duplicate == 0.0 && f.reorder == 0.0 && recirculation_loss == 0.0
            {
                assert_eq!((tofino.stale, tofino.duplicates), (0, 0), "{name}");
            }
        }
    }
}

#[test]
fn a_lost_completion_pass_is_recovered_by_the_replay() {
    // Recirculated copies lost now and then: the completing slice's second pass among them.
    // The replay that answers the workers' retransmissions marks the bank complete; without
    // that, the bank's next use is refused as stale for ever.
    let run = |replay_marks_complete: bool| {
        let mut net = Network::new(NetworkConfig::new(Faults::none(), 3), 4);
        let mut tofino = Tofino::new(4, 2, 0.2, 9);
        tofino.replay_marks_complete = replay_marks_complete;
        let exact = stream_is_exact(&mut net, &mut tofino, 2, 2_000_000_000);
        (exact, tofino.stale)
    };
    let (exact, _) = run(true);
    assert!(exact, "the program as written finishes every operation");
    let (exact, stale) = run(false);
    assert!(
        !exact && stale > 0,
        "without the replay's mark the stream stalls"
    );
}
