//! Train / validation / test vertex sets.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::Invalid;

/// Where a split came from, kept so results can say which split they used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum SplitSource {
    /// Shipped with the dataset (e.g. Planetoid masks, Yandex split 0, OGB `split/<name>`).
    Given {
        /// The shipped split's name, as its loader calls it.
        name: String,
    },
    /// Drawn by [`Split::random`].
    Random {
        /// The seed it was drawn with.
        seed: u64,
        /// Share of vertices drawn for training.
        train: f64,
        /// Share of vertices drawn for validation.
        val: f64,
    },
}

/// Sorted, disjoint vertex id lists.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Vertices the loss is computed on.
    pub train: Vec<u32>,
    /// Vertices for model selection and early stopping.
    pub val: Vec<u32>,
    /// Vertices for the reported accuracy.
    pub test: Vec<u32>,
    /// Where the split came from.
    pub source: SplitSource,
}

/// Fractions for a random split; the test set gets the rest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitFractions {
    /// Share of vertices in the training set.
    pub train: f64,
    /// Share of vertices in the validation set.
    pub val: f64,
}

impl Default for SplitFractions {
    /// 60 / 20 / 20, the split Shchur et al. and most later work use for graphs that ship none.
    fn default() -> Self {
        SplitFractions {
            train: 0.6,
            val: 0.2,
        }
    }
}

impl SplitFractions {
    /// Both fractions in `[0, 1]`, their sum at most 1.
    pub fn check(&self) -> Result<(), Invalid> {
        let ok = |x: f64| (0.0..=1.0).contains(&x);
        if !ok(self.train) || !ok(self.val) || self.train + self.val > 1.0 {
            return Err(Invalid::new(
                "split",
                format!(
                    "fractions train {} and val {} must be in [0, 1] and sum to at most 1",
                    self.train, self.val
                ),
            ));
        }
        Ok(())
    }
}

impl Split {
    /// A seeded uniform random split of `n` vertices.
    pub fn random(n: usize, fractions: SplitFractions, seed: u64) -> Result<Split, Invalid> {
        fractions.check()?;
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        let n_train = (fractions.train * n as f64).round() as usize;
        let n_val = ((fractions.val * n as f64).round() as usize).min(n - n_train);
        let sorted = |s: &[u32]| {
            let mut v = s.to_vec();
            v.sort_unstable();
            v
        };
        Ok(Split {
            train: sorted(&order[..n_train]),
            val: sorted(&order[n_train..n_train + n_val]),
            test: sorted(&order[n_train + n_val..]),
            source: SplitSource::Random {
                seed,
                train: fractions.train,
                val: fractions.val,
            },
        })
    }

    /// Build from boolean masks of equal length `n`.
    pub fn from_masks(
        train: &[bool],
        val: &[bool],
        test: &[bool],
        source: SplitSource,
    ) -> Result<Split, Invalid> {
        let ids = |m: &[bool]| {
            m.iter()
                .enumerate()
                .filter(|(_, &b)| b)
                .map(|(i, _)| i as u32)
                .collect::<Vec<_>>()
        };
        let split = Split {
            train: ids(train),
            val: ids(val),
            test: ids(test),
            source,
        };
        split.validate(train.len())?;
        Ok(split)
    }

    /// Build from id lists (any order); they are sorted and checked.
    pub fn from_ids(
        n: usize,
        mut train: Vec<u32>,
        mut val: Vec<u32>,
        mut test: Vec<u32>,
        source: SplitSource,
    ) -> Result<Split, Invalid> {
        train.sort_unstable();
        val.sort_unstable();
        test.sort_unstable();
        let split = Split {
            train,
            val,
            test,
            source,
        };
        split.validate(n)?;
        Ok(split)
    }

    /// Ids in range for `n` vertices, sorted, no repeats, and the three sets disjoint.
    pub fn validate(&self, n: usize) -> Result<(), Invalid> {
        let mut owner = vec![None::<&str>; n];
        for (name, ids) in [
            ("train", &self.train),
            ("val", &self.val),
            ("test", &self.test),
        ] {
            for (i, &v) in ids.iter().enumerate() {
                if v as usize >= n {
                    return Err(Invalid::new(
                        format!("{name} split entry {i}"),
                        format!("vertex {v} out of range for {n} vertices"),
                    ));
                }
                if let Some(other) = owner[v as usize] {
                    return Err(Invalid::new(
                        format!("{name} split entry {i}"),
                        format!("vertex {v} is already in the {other} split"),
                    ));
                }
                owner[v as usize] = Some(name);
            }
        }
        Ok(())
    }

    /// One boolean per vertex.
    pub fn mask(ids: &[u32], n: usize) -> Vec<bool> {
        let mut m = vec![false; n];
        for &v in ids {
            m[v as usize] = true;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_split_is_seeded_disjoint_and_complete() {
        let a = Split::random(1000, SplitFractions::default(), 7).unwrap();
        let b = Split::random(1000, SplitFractions::default(), 7).unwrap();
        let c = Split::random(1000, SplitFractions::default(), 8).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.train, c.train);
        assert_eq!((a.train.len(), a.val.len(), a.test.len()), (600, 200, 200));
        a.validate(1000).unwrap();
    }

    #[test]
    fn overlapping_masks_are_rejected() {
        let t = [true, false, true];
        let v = [false, false, true];
        let e = [false, true, false];
        let source = SplitSource::Given { name: "x".into() };
        let err = Split::from_masks(&t, &v, &e, source).unwrap_err();
        assert!(err.reason.contains("already in the train split"), "{err}");
    }

    #[test]
    fn bad_fractions_are_rejected() {
        let f = SplitFractions {
            train: 0.8,
            val: 0.3,
        };
        assert!(Split::random(10, f, 0).is_err());
    }
}
