//! Fixed point: switches add integers, so hosts convert features to int32 with a scale that
//! every worker agrees on for a layer and direction, and convert sums back.
//!
//! The scale follows SwitchML's bound: with at most `n` contributions per aggregator, each of
//! magnitude at most `B`, a scale `f ≤ (2³¹ − 1 − n) / (n·B)` keeps every partial sum inside
//! int32 even after rounding (each rounded value is at most `f·B + ½`). We take the largest power
//! of two below that bound, so scaling and unscaling are exact in floating point and the only
//! error is the rounding of each contribution: at most `1/(2f)` per value and `n/(2f)` for a
//! sum of `n` values. Integer sums are exact and order-independent, so the aggregated result
//! is bit-identical whatever the arrival order, loss, retransmission or fallback path.
//!
//! Values beyond the agreed bound saturate at ±(2³¹ − 1) and are counted; a caller that sees
//! saturation falls back to host aggregation of the raw floats for those vertices, as ATP does.

use thiserror::Error;

/// Largest int32 magnitude used (the symmetric range keeps negation safe).
pub const LIMIT: i64 = i32::MAX as i64;

/// Why no scale can be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Error)]
pub enum FixedError {
    /// The bound is negative, infinite or NaN.
    #[error("bound {0} is not a finite non-negative number")]
    BadBound(f32),
    /// So many contributions that int32 has no room for their sum.
    #[error("{0} contributions leave no room in int32")]
    TooManyContributions(u64),
}

/// An agreed conversion between `f32` and int32 lanes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// Multiplier, a power of two.
    pub factor: f64,
    /// The magnitude bound it was chosen for.
    pub bound: f32,
    /// The most contributions one sum may have.
    pub contributions: u64,
}

impl Scale {
    /// The largest power-of-two scale for which `contributions` values of magnitude at most
    /// `bound` cannot overflow int32.
    pub fn for_bound(bound: f32, contributions: u64) -> Result<Scale, FixedError> {
        if !bound.is_finite() || bound < 0.0 {
            return Err(FixedError::BadBound(bound));
        }
        let n = contributions.max(1);
        if n as i64 >= LIMIT / 2 {
            return Err(FixedError::TooManyContributions(n));
        }
        let factor = if bound == 0.0 {
            1.0
        } else {
            let max = (LIMIT - n as i64) as f64 / (n as f64 * f64::from(bound));
            2f64.powi(max.log2().floor() as i32)
        };
        Ok(Scale {
            factor,
            bound,
            contributions: n,
        })
    }

    /// Round `x` to a lane; `None` when it saturates (beyond what the scale allows).
    pub fn encode(&self, x: f32) -> Option<i32> {
        let (q, fits) = self.quantise(x);
        fits.then_some(q as i32)
    }

    /// `x` times the factor, rounded half away from zero, and whether that fits a lane — with
    /// no branch on the value: the encoder runs over every feature of every exchange, and
    /// the rounding direction is a coin toss a branch predictor loses half the time.
    #[inline]
    fn quantise(&self, x: f32) -> (i64, bool) {
        // Far beyond any lane, and small enough that the truncation below is exact.
        const CLAMP: f64 = (1u64 << 40) as f64;
        let v = (f64::from(x) * self.factor).clamp(-CLAMP, CLAMP);
        let t = v as i64; // toward zero (NaN: 0)
        let frac = v - t as f64; // exact
        let q = t + i64::from(frac >= 0.5) - i64::from(frac <= -0.5);
        (q, !v.is_nan() && q.abs() <= LIMIT)
    }

    /// Encode a row into `out`, saturating what does not fit; returns how many saturated.
    /// `Scale::quantise` value by value, written so that the compiler vectorises it (the
    /// in-switch all-reduce encodes every value of a gradient): the truncation is to i32, of
    /// values known to fit one, where `quantise`'s saturating i64 cast stays scalar.
    pub fn encode_row(&self, row: &[f32], out: &mut [i32]) -> usize {
        // The magnitudes that round (half away from zero) to at most LIMIT.
        const FITS: f64 = LIMIT as f64 + 0.5;
        let mut saturated = 0;
        for (o, &x) in out.iter_mut().zip(row) {
            let v = f64::from(x) * self.factor;
            let fits = v.abs() < FITS; // NaN does not
            let inside = if fits { v } else { 0.0 };
            // SAFETY: `inside` is finite and within ±(2³¹ − ½): its truncation is an i32.
            let t: i32 = unsafe { inside.to_int_unchecked() };
            // Exact; and the rounded value is at most LIMIT in magnitude when it fits, so the
            // step below cannot overflow.
            let frac = inside - f64::from(t);
            let q = t + i32::from(frac >= 0.5) - i32::from(frac <= -0.5);
            let limit = if x.is_sign_negative() {
                -(LIMIT as i32)
            } else {
                LIMIT as i32
            };
            *o = if fits { q } else { limit };
            saturated += usize::from(!fits);
        }
        saturated
    }

    /// A lane (or a sum of lanes) back to a float.
    pub fn decode(&self, q: i64) -> f32 {
        (q as f64 / self.factor) as f32
    }

    /// [`Scale::decode`] of each lane of `lanes` into `out`.
    pub fn decode_row(&self, lanes: &[i32], out: &mut [f32]) {
        for (o, &q) in out.iter_mut().zip(lanes) {
            *o = self.decode(i64::from(q));
        }
    }

    /// Worst-case absolute error of a decoded sum of `terms` encoded values (rounding only).
    pub fn error_bound(&self, terms: u64) -> f64 {
        terms as f64 * 0.5 / self.factor
    }
}

/// Add `value` to an aggregator lane as the switch does, reporting overflow instead of
/// wrapping: `None` means the sum left int32 and the lane must fall back to the host.
pub fn checked_add(lane: i32, value: i32) -> Option<i32> {
    lane.checked_add(value)
        .filter(|s| i64::from(*s).abs() <= LIMIT)
}

/// [`checked_add`] for a whole aggregator: adds `values` into `lanes` and returns true, or
/// returns false and leaves `lanes` as they were if any sum would leave the lane's range (no
/// partial update). The switch model's hottest loop, so it stays in 32-bit lanes, which every
/// x86-64 vectorises (a 64-bit magnitude check needs SSE4.2): a sum leaves the range exactly
/// when the 32-bit addition overflows (both operands' signs differ from the wrapped sum's) or
/// lands on `i32::MIN`, the one 32-bit value beyond [`LIMIT`].
pub fn checked_add_lanes(lanes: &mut [i32], values: &[i32]) -> bool {
    debug_assert_eq!(lanes.len(), values.len());
    // In unsigned arithmetic: in signed, LLVM turns the overflow test back into an add and a
    // jump on the overflow flag per lane, and the loop no longer vectorises (3x slower on 64
    // lanes; 13% of a busy software switch's time).
    let mut bad = 0u32;
    for (&x, &y) in lanes.iter().zip(values) {
        let (x, y) = (x as u32, y as u32);
        let s = x.wrapping_add(y);
        bad |= (x ^ s) & (y ^ s) | u32::from(s == i32::MIN as u32) << 31;
    }
    if bad >> 31 != 0 {
        return false;
    }
    for (x, &y) in lanes.iter_mut().zip(values) {
        // In range, so no wrapping happens.
        *x = x.wrapping_add(y);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The branch-free encoder is `f64::round` and a range check, for any float and scale:
        /// halves included, NaN and infinities saturating by their sign.
        #[test]
        fn encoding_rounds_half_away_from_zero(
            bits in any::<u32>(),
            small in -1e4f32..1e4,
            exponent in -8i32..24,
        ) {
            let s = Scale { factor: 2f64.powi(exponent), bound: 1.0, contributions: 1 };
            let half = (small.trunc() + 0.5) / s.factor as f32;
            for x in [f32::from_bits(bits), small, half, -half, f32::INFINITY, f32::NAN] {
                let q = (f64::from(x) * s.factor).round();
                let want = (!q.is_nan() && q.abs() <= LIMIT as f64).then_some(q as i32);
                prop_assert_eq!(s.encode(x), want, "{} at factor {}", x, s.factor);
                let mut out = [0];
                let saturated = s.encode_row(&[x], &mut out);
                prop_assert_eq!(saturated, usize::from(want.is_none()));
                if let Some(w) = want {
                    prop_assert_eq!(out[0], w);
                }
            }
        }
    }

    /// What [`Scale::encode_row`] must write for `x`: [`Scale::quantise`], saturating by sign.
    fn encoded_one_by_one(s: &Scale, x: f32) -> (i32, bool) {
        let (q, fits) = s.quantise(x);
        let limit = if x.is_sign_negative() {
            -(LIMIT as i32)
        } else {
            LIMIT as i32
        };
        (if fits { q as i32 } else { limit }, !fits)
    }

    proptest! {
        /// The vectorised row encoder is the scalar `quantise`, bit for bit, over the whole
        /// range of scales `for_bound` gives (2⁻⁹⁷ to 2¹⁸⁰), on random floats and the edges:
        /// zeros, halves, the lane's limit, NaN, infinities, huge and subnormal values.
        /// Rows of any length, so that both the vector loop and its remainder run.
        #[test]
        fn the_row_encoder_is_quantise_value_by_value(
            exponent in -100i32..=182,
            bits in proptest::collection::vec(any::<u32>(), 0..80),
            small in proptest::collection::vec(-1e4f32..1e4, 0..40),
            picks in proptest::collection::vec(any::<u16>(), 0..80),
        ) {
            let s = Scale { factor: 2f64.powi(exponent), bound: 1.0, contributions: 1 };
            let f = s.factor;
            let mut edges = vec![
                0.0f32, -0.0, f32::NAN, -f32::NAN, f32::from_bits(0x7fc0_0001),
                f32::from_bits(0xffa0_0000), f32::INFINITY, f32::NEG_INFINITY, f32::MAX,
                f32::MIN, f32::MIN_POSITIVE, -f32::MIN_POSITIVE, f32::from_bits(1),
                f32::from_bits(0x8000_0001), f32::from_bits(0x007f_ffff), 1.0, -1.0,
            ];
            // The limit of a lane and its rounding boundary, where representable.
            for m in [LIMIT as f64, LIMIT as f64 + 0.5, LIMIT as f64 + 1.0, 0.5, 1.5, 2.5] {
                for x in [(m / f) as f32, (-m / f) as f32] {
                    let (up, down) = (x.to_bits().wrapping_add(1), x.to_bits().wrapping_sub(1));
                    edges.extend([x, f32::from_bits(up), f32::from_bits(down)]);
                }
            }
            for &v in &small {
                // Halves at this scale: a tie to round away from zero.
                let half = ((v.trunc() + 0.5) as f64 / f) as f32;
                edges.extend([v, half, -half]);
            }
            let mut row: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
            row.extend(picks.iter().map(|&p| edges[usize::from(p) % edges.len()]));
            row.extend(&edges);
            let mut out = vec![7i32; row.len()];
            let saturated = s.encode_row(&row, &mut out);
            let mut want_saturated = 0;
            for (x, got) in row.iter().zip(&out) {
                let (want, sat) = encoded_one_by_one(&s, *x);
                prop_assert_eq!(*got, want, "{:e} ({:#x}) at factor 2^{}", x, x.to_bits(), exponent);
                want_saturated += usize::from(sat);
            }
            prop_assert_eq!(saturated, want_saturated);
            // And back: the row decoder is `decode`, lane by lane.
            let mut back = vec![0f32; out.len()];
            s.decode_row(&out, &mut back);
            for (b, &q) in back.iter().zip(&out) {
                prop_assert_eq!(b.to_bits(), s.decode(i64::from(q)).to_bits());
            }
        }
    }

    proptest! {
        /// The whole-aggregator add is the lane-by-lane one: every lane added when every sum
        /// fits, nothing changed when any does not.
        #[test]
        fn whole_aggregator_add_matches_lane_by_lane(
            pairs in proptest::collection::vec((any::<i32>(), any::<i32>()), 1..64),
            near_limit in any::<bool>(),
        ) {
            let (mut lanes, values): (Vec<i32>, Vec<i32>) = if near_limit {
                pairs.iter().map(|&(a, b)| (a.max(-i32::MAX), b)).unzip()
            } else {
                pairs.iter().map(|&(a, b)| ((a >> 2).max(-i32::MAX), b >> 2)).unzip()
            };
            let expected: Option<Vec<i32>> =
                lanes.iter().zip(&values).map(|(&x, &y)| checked_add(x, y)).collect();
            let before = lanes.clone();
            let added = checked_add_lanes(&mut lanes, &values);
            match expected {
                Some(sums) => {
                    prop_assert!(added);
                    prop_assert_eq!(lanes, sums);
                }
                None => {
                    prop_assert!(!added);
                    prop_assert_eq!(lanes, before);
                }
            }
        }
    }

    /// The range's edges, which random pairs rarely hit: a sum of exactly `i32::MIN` fits 32
    /// bits but not the range; `±LIMIT` fit.
    #[test]
    fn whole_aggregator_add_at_the_range_edges() {
        let min = -(LIMIT as i32);
        for (x, y, fits) in [
            (i32::MAX - 1, 1, true),
            (i32::MAX, 1, false),
            (min + 1, -1, true),
            (min, -1, false),
            (-(1 << 30), -(1 << 30), false),
            (1 << 30, 1 << 30, false),
            (min, i32::MAX, true),
        ] {
            let mut lanes = vec![7, x, 0];
            let added = checked_add_lanes(&mut lanes, &[1, y, 0]);
            assert_eq!(added, fits, "{x} + {y}");
            assert_eq!(added, checked_add(x, y).is_some());
            let want = if fits {
                vec![8, x + y, 0]
            } else {
                vec![7, x, 0]
            };
            assert_eq!(lanes, want);
        }
    }

    #[test]
    fn scale_is_the_largest_safe_power_of_two() {
        let s = Scale::for_bound(1.0, 1).unwrap();
        assert_eq!(s.factor, 2f64.powi(30));
        let s = Scale::for_bound(4.0, 128).unwrap();
        // (2^31 - 1 - 128) / 512 ≈ 2^22 - ...: the power of two just below is 2^21.
        assert_eq!(s.factor, 2f64.powi(21));
        assert!(Scale::for_bound(f32::NAN, 4).is_err());
        assert!(Scale::for_bound(-1.0, 4).is_err());
        assert_eq!(Scale::for_bound(0.0, 4).unwrap().factor, 1.0);
    }

    #[test]
    fn out_of_bound_values_saturate_and_are_counted() {
        let s = Scale::for_bound(1.0, 2).unwrap();
        let mut out = [0i32; 3];
        assert_eq!(s.encode_row(&[0.5, 1e9, -1e9], &mut out), 2);
        assert_eq!(out[1], i32::MAX);
        assert_eq!(out[2], -i32::MAX);
        assert_eq!(checked_add(i32::MAX - 1, 1), Some(i32::MAX));
        assert_eq!(checked_add(i32::MAX, 1), None);
        assert_eq!(checked_add(-i32::MAX, -1), None);
    }

    proptest! {
        /// n values within the bound never overflow when summed, and the decoded sum is within
        /// the stated error of the exact sum, whatever the order.
        #[test]
        fn sums_stay_in_range_and_within_the_error_bound(
            bound in 1e-3f32..1e3,
            raw in proptest::collection::vec(-1.0f32..=1.0, 1..300),
        ) {
            let n = raw.len() as u64;
            let s = Scale::for_bound(bound, n).unwrap();
            let values: Vec<f32> = raw.iter().map(|r| r * bound).collect();
            let mut lane = 0i32;
            for &v in &values {
                lane = checked_add(lane, s.encode(v).unwrap()).expect("no overflow within the bound");
            }
            let mut reversed = 0i32;
            for &v in values.iter().rev() {
                reversed = checked_add(reversed, s.encode(v).unwrap()).unwrap();
            }
            prop_assert_eq!(lane, reversed);
            let exact: f64 = values.iter().map(|&v| f64::from(v)).sum();
            let got = lane as f64 / s.factor;
            prop_assert!((got - exact).abs() <= s.error_bound(n) + 1e-12,
                "error {} above bound {}", (got - exact).abs(), s.error_bound(n));
        }
    }
}
