//! Whole matrices in fixed point: what the direct computation an exchange must equal starts
//! from (`switchgnn_scheduler::exchange::remote_sums` sums them over a graph).

use crate::fixed::Scale;

/// Encode a row-major matrix of width `width`; returns the lanes and how many saturated.
pub fn encode_matrix(scale: &Scale, values: &[f32], width: usize) -> (Vec<i32>, usize) {
    let mut out = vec![0i32; values.len()];
    let mut saturated = 0;
    for (row, o) in values.chunks(width).zip(out.chunks_mut(width)) {
        saturated += scale.encode_row(row, o);
    }
    (out, saturated)
}
