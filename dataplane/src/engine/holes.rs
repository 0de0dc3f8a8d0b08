//! Holes in the switch's numbering of what it sends this worker (sums and raw copies, see
//! `switch/stamp.rs`): a hole still open when the stream falls quiet is a lost packet.
//!
//! A worker cannot otherwise tell a lost sum from a late one, and so waits out the result
//! timeout before it fetches. A hole is evidence of loss: the engine then waits only a few
//! round trips of quiet (`Engine::patience`). Packets may be reordered (several switch cores
//! number one port's output between them), so a hole closes when its number arrives late; only
//! holes still open at the quiet deadline count.

use std::collections::BTreeSet;

/// Holes wider than this are not losses but a numbering that started over (a restarted
/// switch, another switch on the path): the tracker starts again from the new number.
const MAX_JUMP: u32 = 4096;

/// The holes seen since the last [`StreamHoles::clear`].
#[derive(Debug, Clone, Default)]
pub(super) struct StreamHoles {
    /// The number after the highest seen.
    next: Option<u32>,
    /// Numbers below `next` not seen (at most [`MAX_JUMP`] of them are kept).
    open: BTreeSet<u32>,
}

impl StreamHoles {
    /// Note packet number `seq`.
    pub(super) fn saw(&mut self, seq: u32) {
        let Some(next) = self.next else {
            self.next = Some(seq.wrapping_add(1));
            return;
        };
        let ahead = seq.wrapping_sub(next);
        if ahead < MAX_JUMP {
            // In order, or past a hole: every number skipped is open.
            self.open.extend((0..ahead).map(|i| next.wrapping_add(i)));
            while self.open.len() > MAX_JUMP as usize {
                self.open.pop_first();
            }
            self.next = Some(seq.wrapping_add(1));
        } else if next.wrapping_sub(seq) <= MAX_JUMP {
            // Behind: a late packet closes its hole (or a duplicate, which changes nothing).
            self.open.remove(&seq);
        } else {
            self.open.clear();
            self.next = Some(seq.wrapping_add(1));
        }
    }

    /// Whether a hole is open: a packet lost, or still on its way.
    pub(super) fn any(&self) -> bool {
        !self.open.is_empty()
    }

    /// Forget the holes seen so far (a fetch round has acted on them); later ones count anew.
    pub(super) fn clear(&mut self) {
        self.open.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skipped_number_is_a_hole_until_it_arrives() {
        let mut h = StreamHoles::default();
        for s in [7, 8, 9] {
            h.saw(s);
        }
        assert!(!h.any());
        h.saw(11);
        assert!(h.any(), "10 skipped");
        h.saw(10);
        assert!(!h.any(), "10 came late: no loss");
        h.saw(10);
        assert!(!h.any(), "a duplicate opens nothing");
        h.saw(14);
        h.saw(15);
        assert!(h.any());
        h.clear();
        assert!(!h.any());
        h.saw(12);
        assert!(!h.any(), "a hole forgotten does not come back");
    }

    #[test]
    fn numbers_wrap_and_restart() {
        let mut h = StreamHoles::default();
        h.saw(u32::MAX - 1);
        h.saw(u32::MAX);
        h.saw(1);
        assert!(h.any(), "0 skipped across the wrap");
        h.saw(0);
        assert!(!h.any());
        // A new numbering far away: not millions of holes.
        h.saw(1 << 30);
        assert!(!h.any());
        h.saw((1 << 30) + 1);
        assert!(!h.any());
    }
}
