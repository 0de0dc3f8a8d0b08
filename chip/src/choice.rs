//! The planner's pick among exchange kinds.
//!
//! Each kind's [`Bound`] gives two figures: the lower bound (the busiest resource alone) and
//! the serial estimate (the hosts' busiest resource plus the switch's, as if they never
//! overlapped). The planner ranks by the lower bound. With the 64-lane program the
//! pre-aggregated exchange recirculates to read its sums out, while its uploads go on: the
//! two overlap, and the simulator lands within 5–60% of the bound, where the serial estimate
//! added them and kept picking the host exchange on graphs where reduce ran 25–40% faster
//! (`docs/sim/reduce`: ranked by the bound, the pick is never slower than the serial
//! estimate's and within 0.07 of the host exchange's time of the best kind on every row but
//! one, where it takes the hybrid for reduce). The serial estimate was
//! chosen when SwitchGNN's per-edge passes on a small graph lost to the host exchange with the
//! least bound; on real chips its bound is now far above the host exchange's there. The host
//! exchange is always a candidate, listed first, so that a tie goes to it.

use std::borrow::Borrow;

use serde::Serialize;

use crate::{Bound, Chip, HostCost, Load};

/// One kind the planner weighed: its name and its bound on the chip.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// The exchange kind's name (`host`, `switchgnn`, `reduce`).
    pub kind: String,
    /// Its lower bound on the chip.
    pub bound: Bound,
}

/// The kinds weighed for one exchange and the one chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    /// The chip, in words.
    pub chip: String,
    /// Every candidate, in the order given.
    pub candidates: Vec<Candidate>,
    /// Index of the chosen one in `candidates`.
    pub chosen: usize,
}

impl Choice {
    /// The kind with the least lower bound among `candidates` (name and load); the first wins
    /// a tie. With the messages' latency counted, the least [`Bound::estimate_seconds`]: the
    /// same latency on top of each kind's whole work.
    /// `None` when there is no candidate.
    pub fn of<'a, L: Borrow<Load>>(
        chip: &Chip,
        cost: &HostCost,
        candidates: impl IntoIterator<Item = (&'a str, L)>,
    ) -> Option<Choice> {
        let candidates: Vec<Candidate> = candidates
            .into_iter()
            .map(|(kind, load)| Candidate {
                kind: kind.to_string(),
                bound: Bound::of(chip, load.borrow(), cost),
            })
            .collect();
        let mut chosen = 0;
        for (i, c) in candidates.iter().enumerate() {
            if c.bound.estimate_seconds < candidates[chosen].bound.estimate_seconds {
                chosen = i;
            }
        }
        (!candidates.is_empty()).then(|| Choice {
            chip: chip.describe(),
            candidates,
            chosen,
        })
    }

    /// The chosen kind's name.
    pub fn kind(&self) -> &str {
        &self.candidates[self.chosen].kind
    }

    /// The chosen kind's bound.
    pub fn bound(&self) -> &Bound {
        &self.candidates[self.chosen].bound
    }

    /// `reduce (0.41–0.43 ms, bound by host link; host 0.80–0.82 ms, switchgnn 3.2–3.3 ms)`:
    /// each kind's lower bound and serial estimate.
    pub fn sentence(&self) -> String {
        let range = |b: &Bound| format!("{:.3}–{:.3} ms", b.seconds * 1e3, b.serial_seconds * 1e3);
        let others: Vec<String> = self
            .candidates
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != self.chosen)
            .map(|(_, c)| format!("{} {}", c.kind, range(&c.bound)))
            .collect();
        format!(
            "{} ({}, bound by {}; {})",
            self.kind(),
            range(self.bound()),
            self.bound().dominant.name(),
            others.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(bytes: u64) -> Load {
        Load {
            sent_bytes: vec![bytes],
            received_bytes: vec![bytes],
            sent_packets: vec![1],
            received_packets: vec![1],
            ..Load::default()
        }
    }

    #[test]
    fn the_least_bound_wins_and_a_tie_goes_to_the_first() {
        let chip = Chip::preset("tofino2").unwrap();
        let cost = HostCost {
            delays: crate::Delays::NONE,
            link_gbps: 100.0,
            per_packet_ns: 0.0,
            frame_overhead: 0,
            framing: Default::default(),
        };
        let c = Choice::of(
            &chip,
            &cost,
            [
                ("host", load(1000)),
                ("reduce", load(500)),
                ("switchgnn", load(800)),
            ],
        )
        .unwrap();
        assert_eq!(c.kind(), "reduce");
        assert!(c.sentence().starts_with("reduce"), "{}", c.sentence());
        let tie = Choice::of(&chip, &cost, [("host", load(500)), ("reduce", load(500))]).unwrap();
        assert_eq!(tie.kind(), "host");
        assert!(Choice::of(&chip, &cost, [] as [(&str, Load); 0]).is_none());
    }

    #[test]
    fn with_latency_more_blocks_cost_more_and_hidden_work_does_not_buy_a_pick() {
        let chip = Chip::preset("tofino2").unwrap();
        let cost = HostCost {
            delays: crate::Delays::star(2_000.0),
            link_gbps: 100.0,
            per_packet_ns: 0.0,
            frame_overhead: 0,
            framing: Default::default(),
        };
        let blocks = |bytes, blocks| Load {
            blocks,
            ..load(bytes)
        };
        // Three blocks wait eight more delays (16 µs) than one: 100 KB more of the host link
        // (8 µs at 100 Gb/s) in one block is the faster plan.
        let c = Choice::of(
            &chip,
            &cost,
            [
                ("host", blocks(200_000, 1)),
                ("switchgnn", blocks(100_000, 3)),
            ],
        )
        .unwrap();
        assert_eq!(c.kind(), "host");
        // Work that may overlap the messages lowers a kind's bound, not its rank: the same
        // whole work with half of it unchained is a tie, which goes to the first.
        let mut hidden = blocks(100_000, 1);
        hidden.unchained.sent_bytes = vec![50_000];
        hidden.unchained.received_bytes = vec![50_000];
        let c = Choice::of(
            &chip,
            &cost,
            [("host", blocks(100_000, 1)), ("hybrid", hidden)],
        )
        .unwrap();
        assert_eq!(c.kind(), "host");
        assert!(
            c.candidates[1].bound.seconds < c.candidates[0].bound.seconds,
            "{c:?}"
        );
    }
}
