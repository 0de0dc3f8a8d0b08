//! The planner's pick among exchange kinds: the one whose lower bound on the chip is least.
//!
//! The host exchange is always a candidate, and it is listed first so that a tie goes to it: an
//! in-network kind is chosen only where the chip model says it can be faster.

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
    /// The kind with the least bound among `candidates` (name and load); the first wins a tie.
    /// `None` when there is no candidate.
    pub fn of<'a>(
        chip: &Chip,
        cost: &HostCost,
        candidates: impl IntoIterator<Item = (&'a str, Load)>,
    ) -> Option<Choice> {
        let candidates: Vec<Candidate> = candidates
            .into_iter()
            .map(|(kind, load)| Candidate {
                kind: kind.to_string(),
                bound: Bound::of(chip, &load, cost),
            })
            .collect();
        let mut chosen = 0;
        for (i, c) in candidates.iter().enumerate() {
            if c.bound.seconds < candidates[chosen].bound.seconds {
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

    /// `reduce (0.41 ms; host 0.80 ms, switchgnn 3.2 ms)`.
    pub fn sentence(&self) -> String {
        let others: Vec<String> = self
            .candidates
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != self.chosen)
            .map(|(_, c)| format!("{} {:.3} ms", c.kind, c.bound.seconds * 1e3))
            .collect();
        format!(
            "{} ({:.3} ms, bound by {}; {})",
            self.kind(),
            self.bound().seconds * 1e3,
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
            link_gbps: 100.0,
            per_packet_ns: 0.0,
            frame_overhead: 0,
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
        assert!(Choice::of(&chip, &cost, []).is_none());
    }
}
