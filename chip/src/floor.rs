//! How long a chip needs at least for each block of an exchange: the floor under a receiver's
//! patience. On a recirculation-bound chip a destination's sums leave tens of milliseconds
//! apart; a receiver that fetched in such a gap would only double what crosses the network
//! (see `Exchange::set_block_floors` in the dataplane).

use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::switch::Racks;

use crate::bound::Bound;
use crate::load::Load;
use crate::preset::Chip;
use crate::spread::Spread;

/// The least time `chip` needs for each of `plan`'s blocks alone, ns: the switch's terms of
/// the chip model's bound (lane updates, passes, recirculation; pooled and, on a star, for the
/// busiest pipe and path, [`crate::Spread`]), the hosts' left out. Frames
/// carry `frame_overhead` bytes around each packet. With `racks` (two-level aggregation),
/// the busiest leaf's: every leaf is such a chip and takes its rack's uploads with all their
/// passes (a lower bound on its work: the sums it reads out and the spine's work are left
/// out). Empty on the ideal chip; 0 for a block whose bound is not finite (a chip with no
/// recirculation path never finishes it: no floor rather than an endless one).
pub fn block_floors(
    chip: &Chip,
    plan: &ExchangePlan,
    frame_overhead: u64,
    racks: Option<&Racks>,
) -> Vec<u64> {
    if chip.is_ideal() {
        return Vec::new();
    }
    let switch_ns = |load: &Load| {
        let seconds = Bound::switch_seconds(chip, load);
        if seconds.is_finite() {
            (seconds * 1e9) as u64
        } else {
            0
        }
    };
    (0..plan.blocks.len())
        .map(|b| {
            let load = Load::of_block(plan, b, frame_overhead);
            match racks {
                None => {
                    // A pooled floor let receivers fetch while sums still queued on one pipe's
                    // path (reddit-like at a quarter, 32 workers, tofino1-32, reduce: 125,000
                    // fetches, 44 ms).
                    let blocks = &plan.blocks[b..=b];
                    let spread = Spread::of_blocks(plan, blocks, chip, None, frame_overhead);
                    switch_ns(&Load { spread, ..load })
                }
                Some(racks) => (0..racks.racks())
                    .map(|r| switch_ns(&load.uploads_from(|w| racks.rack_of(w) == r)))
                    .max()
                    .unwrap_or(0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchgnn_dataplane::plan::Mode;

    /// The path 0 - 1 - 2 of `load`'s tests (the ends on worker 0, vertex 1 on worker 1), one
    /// block per copy.
    fn plan(blocks: usize) -> ExchangePlan {
        let one = crate::load::tests::plan(Mode::Blocks);
        let blocks = vec![one.blocks[0].clone(); blocks];
        let workers = u32::from(one.workers);
        ExchangePlan::new(Mode::Blocks, one.width, workers, one.owner.clone(), blocks).unwrap()
    }

    #[test]
    fn every_block_gets_the_time_of_its_switch_work() {
        let chip = Chip::preset("tofino1-32").unwrap();
        let floors = block_floors(&chip, &plan(2), 66, None);
        assert_eq!(floors.len(), 2);
        // Its busiest pipe and path counted: vertex 1's trips and two sums' readouts all go
        // around pipe 1's one port, longer than both ports pooled.
        let p = plan(2);
        let pooled = Bound::switch_seconds(&chip, &Load::of_block(&p, 0, 66));
        let spread = Spread::of_blocks(&p, &p.blocks[..1], &chip, None, 66);
        let load = Load {
            spread,
            ..Load::of_block(&p, 0, 66)
        };
        let one = Bound::switch_seconds(&chip, &load);
        assert_eq!(floors[0], (one * 1e9) as u64);
        assert!(one > pooled, "{one} against {pooled} pooled");
        assert!(floors[0] > 0 && floors[0] == floors[1]);
        assert!(block_floors(&Chip::preset("ideal").unwrap(), &plan(2), 66, None).is_empty());
    }

    #[test]
    fn on_two_levels_the_busiest_leaf_sets_the_floor() {
        let chip = Chip::preset("tofino1-32").unwrap();
        let star = block_floors(&chip, &plan(1), 66, None)[0];
        let racks = Racks::even(2, 2).unwrap();
        let leaves = block_floors(&chip, &plan(1), 66, Some(&racks))[0];
        let busiest = (0..2)
            .map(|r| {
                let l = Load::of_block(&plan(1), 0, 66).uploads_from(|w| w == r);
                (Bound::switch_seconds(&chip, &l) * 1e9) as u64
            })
            .max()
            .unwrap();
        assert_eq!(leaves, busiest);
        assert!(0 < leaves && leaves < star, "{leaves} against {star}");
    }
}
