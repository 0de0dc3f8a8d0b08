//! Dropout masks and weight initialisation from the trainer's own seeded generators.
//!
//! libtorch's generator is one global state per process: two trainings in one process (tests run
//! in parallel) would draw from each other's stream, and a distributed worker could not draw the
//! masks of its own rows only. So masks come from a counter-based generator: entry `i` of draw
//! `k` is a pure function of `(seed, k, i)`, the same whatever the thread count, and independent
//! of anything else the process does.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use tch::Tensor;

/// SplitMix64's finaliser: a bijective mix of 64 bits, good enough for Bernoulli draws.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Where a process's matrix entries sit among the whole graph's: a distributed worker draws
/// the mask entries of its own rows at their global positions, so that its masks are the rows
/// of the masks the single-process reference draws.
#[derive(Debug, Clone, Default)]
pub struct MaskLayout {
    /// Global ids of the rows (ascending); `None`: every row, in order.
    rows: Option<Vec<u32>>,
    /// Global positions of the input features' mask entries, as `(start, len)` runs; `None`:
    /// `0..len`.
    input: Option<Vec<(u64, usize)>>,
}

impl MaskLayout {
    /// The whole graph in one process.
    pub fn whole() -> MaskLayout {
        MaskLayout::default()
    }

    /// A worker's `rows`, whose input mask entries sit at the `input` runs.
    pub fn rows(rows: Vec<u32>, input: Vec<(u64, usize)>) -> MaskLayout {
        MaskLayout {
            rows: Some(rows),
            input: Some(input),
        }
    }
}

/// Inverted dropout: kept entries are scaled by `1 / (1 - p)` so expectations do not change.
#[derive(Debug, Clone)]
pub struct Dropout {
    p: f64,
    seed: u64,
    draws: u64,
    layout: MaskLayout,
}

impl Dropout {
    /// `p` in `[0, 1)`.
    pub fn new(p: f64, seed: u64) -> Dropout {
        Dropout::with_layout(p, seed, MaskLayout::whole())
    }

    /// [`Dropout::new`] for the rows `layout` names: each mask entry is the whole graph's entry
    /// at the same position, so every worker drops what the reference would.
    ///
    /// # Panics
    /// If `p` is not in `[0, 1)`.
    pub fn with_layout(p: f64, seed: u64, layout: MaskLayout) -> Dropout {
        assert!((0.0..1.0).contains(&p), "dropout rate {p} not in [0, 1)");
        Dropout {
            p,
            seed,
            draws: 0,
            layout,
        }
    }

    /// The share of entries dropped.
    pub fn rate(&self) -> f64 {
        self.p
    }

    /// The next mask of `len` entries, each `0` or `1 / (1 - p)`; `None` when `p` is zero.
    pub fn mask(&mut self, len: usize) -> Option<Tensor> {
        self.draw(&[(0, len)])
    }

    /// The next mask for the input features (`len` entries, at the layout's input positions).
    pub fn mask_input(&mut self, len: usize) -> Option<Tensor> {
        match self.layout.input.take() {
            None => self.mask(len),
            Some(runs) => {
                debug_assert_eq!(runs.iter().map(|r| r.1).sum::<usize>(), len);
                let mask = self.draw(&runs);
                self.layout.input = Some(runs);
                mask
            }
        }
    }

    /// The next mask for a `rows × width` row-major matrix of the layout's rows.
    pub fn mask_matrix(&mut self, rows: usize, width: usize) -> Option<Tensor> {
        match &self.layout.rows {
            None => self.mask(rows * width),
            Some(ids) => {
                debug_assert_eq!(ids.len(), rows);
                let w = width as u64;
                let mut runs: Vec<(u64, usize)> = Vec::with_capacity(ids.len());
                for &v in ids {
                    let start = u64::from(v) * w;
                    match runs.last_mut() {
                        // Consecutive rows make one run.
                        Some(last) if last.0 + last.1 as u64 == start => last.1 += width,
                        _ => runs.push((start, width)),
                    }
                }
                self.draw(&runs)
            }
        }
    }

    /// The entries at global positions `runs`, concatenated; entry `i` of draw `k` is a pure
    /// function of `(seed, k, i)`.
    fn draw(&mut self, runs: &[(u64, usize)]) -> Option<Tensor> {
        if self.p == 0.0 {
            return None;
        }
        let key = mix(self.seed ^ mix(self.draws.wrapping_add(0x9e37_79b9_7f4a_7c15)));
        self.draws += 1;
        // Keep an entry when its 32-bit draw falls below (1 - p) · 2³².
        let threshold = ((1.0 - self.p) * 4_294_967_296.0) as u64;
        let keep = (1.0 / (1.0 - self.p)) as f32;
        // Where each run starts in the output.
        let mut starts = Vec::with_capacity(runs.len());
        let mut len = 0usize;
        for r in runs {
            starts.push(len);
            len += r.1;
        }
        const CHUNK: usize = 1 << 14;
        // Written in blocks straight into the tensor; within a block, chunks in parallel.
        let mask = crate::graph_tensors::filled(len, CHUNK, |block_start, block: &mut [f32]| {
            block
                .par_chunks_mut(CHUNK)
                .enumerate()
                .for_each(|(c, chunk)| {
                    let first = block_start + c * CHUNK;
                    let mut run = starts.partition_point(|&s| s <= first) - 1;
                    for (i, v) in chunk.iter_mut().enumerate() {
                        let at = first + i;
                        while at >= starts[run] + runs[run].1 {
                            run += 1;
                        }
                        let global = runs[run].0 + (at - starts[run]) as u64;
                        let draw =
                            mix(key.wrapping_add(global.wrapping_mul(0x9e37_79b9_7f4a_7c15))) >> 32;
                        *v = if draw < threshold { keep } else { 0.0 };
                    }
                });
        });
        Some(mask)
    }
}

/// Glorot (Xavier) uniform initialisation, as Kipf & Welling use: `U(-a, a)` with
/// `a = √(6 / (fan_in + fan_out))`, drawn from a seeded ChaCha stream.
pub fn glorot(rng: &mut ChaCha8Rng, fan_in: usize, fan_out: usize) -> Tensor {
    let a = (6.0 / (fan_in + fan_out) as f64).sqrt() as f32;
    let values: Vec<f32> = (0..fan_in * fan_out)
        .map(|_| rng.random_range(-a..a))
        .collect();
    Tensor::from_slice(&values).reshape([fan_in as i64, fan_out as i64])
}

/// The initialisation generator of a run.
pub fn init_rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(t).unwrap()
    }

    #[test]
    fn masks_are_seeded_fresh_per_draw_and_keep_the_right_share() {
        let mut a = Dropout::new(0.5, 7);
        let mut b = Dropout::new(0.5, 7);
        let (a1, a2) = (
            values(&a.mask(100_000).unwrap()),
            values(&a.mask(100_000).unwrap()),
        );
        assert_eq!(
            a1,
            values(&b.mask(100_000).unwrap()),
            "same seed, same first mask"
        );
        assert_ne!(a1, a2, "every draw is a new mask");
        assert_ne!(a1, values(&Dropout::new(0.5, 8).mask(100_000).unwrap()));
        assert!(a1.iter().all(|&x| x == 0.0 || x == 2.0));
        // Kept share: binomial(100000, 0.5) has standard deviation 158; allow 5 of them.
        let kept = a1.iter().filter(|&&x| x > 0.0).count() as f64;
        assert!((kept - 50_000.0).abs() < 5.0 * 158.2, "kept {kept}");
        let mut q = Dropout::new(0.9, 1);
        let kept = values(&q.mask(100_000).unwrap())
            .iter()
            .filter(|&&x| x > 0.0)
            .count() as f64;
        // binomial(100000, 0.1): sd 94.9.
        assert!((kept - 10_000.0).abs() < 5.0 * 94.9, "kept {kept}");
        assert!(Dropout::new(0.0, 1).mask(10).is_none());
    }

    /// A worker's masks are the reference's masks at its rows, for matrices and input runs.
    #[test]
    fn layout_masks_are_rows_of_the_whole_mask() {
        let (rows, width) = (50usize, 7usize);
        let mut whole = Dropout::new(0.5, 3);
        let full_input = values(&whole.mask_input(300).unwrap());
        let full_hidden = values(&whole.mask_matrix(rows, width).unwrap());
        let mine = vec![0u32, 1, 2, 9, 30, 49];
        let input_runs = vec![(0u64, 10usize), (150, 1), (290, 10)];
        let mut part =
            Dropout::with_layout(0.5, 3, MaskLayout::rows(mine.clone(), input_runs.clone()));
        let part_input = values(&part.mask_input(21).unwrap());
        let part_hidden = values(&part.mask_matrix(mine.len(), width).unwrap());
        let want_input: Vec<f32> = input_runs
            .iter()
            .flat_map(|&(s, l)| full_input[s as usize..s as usize + l].to_vec())
            .collect();
        assert_eq!(part_input, want_input);
        let want_hidden: Vec<f32> = mine
            .iter()
            .flat_map(|&v| full_hidden[v as usize * width..(v as usize + 1) * width].to_vec())
            .collect();
        assert_eq!(part_hidden, want_hidden);
        // Long runs cross the generator's parallel chunks.
        let mut a = Dropout::new(0.3, 5);
        let all = values(&a.mask(100_000).unwrap());
        let mut b = Dropout::with_layout(
            0.3,
            5,
            MaskLayout::rows(vec![], vec![(17, 40_000), (60_000, 30_000)]),
        );
        let got = values(&b.mask_input(70_000).unwrap());
        assert_eq!(&got[..40_000], &all[17..40_017]);
        assert_eq!(&got[40_000..], &all[60_000..90_000]);
    }

    #[test]
    fn glorot_bounds() {
        let w = values(&glorot(&mut init_rng(3), 30, 10).flatten(0, -1));
        let a = (6.0f32 / 40.0).sqrt();
        assert_eq!(w.len(), 300);
        assert!(w.iter().all(|x| x.abs() <= a));
        // Uniform on (-a, a) has variance a²/3; 300 draws put the sample variance within 20%.
        let var = w.iter().map(|x| x * x).sum::<f32>() / 300.0;
        assert!((var / (a * a / 3.0) - 1.0).abs() < 0.2, "variance {var}");
    }
}
