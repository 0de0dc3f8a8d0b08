//! Holes in the switch's numbering of what it sends this worker (sums and raw copies, see
//! `switch/stamp.rs`): a hole still open when the stream falls quiet is a lost packet.
//!
//! A worker cannot otherwise tell a lost sum from a late one, and so waits out the result
//! timeout before it fetches. A hole is evidence of loss: the engine then waits only a few
//! round trips of quiet (`Engine::patience`). Packets may be reordered (several switch cores
//! number one port's output between them), so a hole closes when its number arrives late; only
//! holes still open at the quiet deadline count, and only when they are as many as the sums
//! still missing (`Engine::losses_explain_the_rest`).

use std::collections::BTreeSet;

/// Holes wider than this are not losses but a numbering that started over (a restarted
/// switch, another switch on the path): the tracker starts again from the new number.
const MAX_JUMP: u32 = 4096;

/// The holes seen so far, less those whose packets came late.
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
        if self.advance_to(seq) {
            self.next = Some(seq.wrapping_add(1));
        } else {
            // Behind: a late packet closes its hole (or a duplicate, which changes nothing).
            self.open.remove(&seq);
        }
    }

    /// The switch reports that it has numbered everything below `next` for this worker
    /// (`PacketType::Stamps`): what was not seen of it is a hole too, even with nothing after
    /// it. The first report, before anything was seen, is where the stream starts. (A report
    /// behind what was seen, overtaken by later packets, tells nothing new.)
    pub(super) fn reported(&mut self, next: u32) {
        self.advance_to(next);
    }

    /// Move the end of what was numbered to `to`, every number skipped on the way a hole;
    /// false when `to` is behind it (then nothing changes). A jump too far either way is a
    /// numbering that started over: the tracker starts again from `to`.
    fn advance_to(&mut self, to: u32) -> bool {
        let Some(next) = self.next else {
            self.next = Some(to);
            return true;
        };
        let ahead = to.wrapping_sub(next);
        if ahead < MAX_JUMP {
            self.open.extend((0..ahead).map(|i| next.wrapping_add(i)));
            while self.open.len() > MAX_JUMP as usize {
                self.open.pop_first();
            }
        } else if next.wrapping_sub(to) <= MAX_JUMP {
            return false;
        } else {
            self.open.clear();
        }
        self.next = Some(to);
        true
    }

    /// Whether the start of the stream is known (a report or a packet came).
    pub(super) fn started(&self) -> bool {
        self.next.is_some()
    }

    /// How many holes are open: at most that many packets were lost.
    pub(super) fn count(&self) -> usize {
        self.open.len()
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
        assert_eq!(h.count(), 0);
        h.saw(11);
        assert!(h.count() > 0, "10 skipped");
        h.saw(10);
        assert_eq!(h.count(), 0, "10 came late: no loss");
        h.saw(10);
        assert_eq!(h.count(), 0, "a duplicate opens nothing");
        h.saw(14);
        h.saw(15);
        assert_eq!(h.count(), 2, "12 and 13");
        h.saw(12);
        assert_eq!(h.count(), 1);
    }

    #[test]
    fn a_report_opens_the_tail_and_sets_the_start() {
        let mut h = StreamHoles::default();
        assert!(!h.started());
        h.reported(20);
        assert!(h.started());
        // 20 was lost; 21 came.
        h.saw(21);
        assert_eq!(h.count(), 1, "the first packet of the stream");
        // 22 and 23 sent, both lost: nothing after them but the switch's report.
        h.reported(24);
        assert_eq!(h.count(), 3);
        h.saw(23);
        assert_eq!(h.count(), 2, "23 was late, not lost");
        // An older report, overtaken: nothing changes.
        h.reported(22);
        assert_eq!(h.count(), 2);
        h.reported(24);
        assert_eq!(h.count(), 2, "nothing new numbered");
    }

    #[test]
    fn numbers_wrap_and_restart() {
        let mut h = StreamHoles::default();
        h.saw(u32::MAX - 1);
        h.saw(u32::MAX);
        h.saw(1);
        assert!(h.count() > 0, "0 skipped across the wrap");
        h.saw(0);
        assert_eq!(h.count(), 0);
        // A new numbering far away: not millions of holes.
        h.saw(1 << 30);
        assert_eq!(h.count(), 0);
        h.saw((1 << 30) + 1);
        assert_eq!(h.count(), 0);
    }
}
