//! The direct computation an exchange must equal exactly: for every vertex with neighbours on
//! other workers, the integer sum of their encoded features.

use switchgnn_datasets::Graph;
use switchgnn_partition::Assignment;

use crate::engine::ExchangeOutput;
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

/// Per worker, the sum over remote neighbours of `encoded` (one row of `width` per vertex).
pub fn remote_sums(
    graph: &Graph,
    assignment: &Assignment,
    width: usize,
    encoded: &[i32],
) -> Vec<ExchangeOutput> {
    let workers = assignment.num_parts() as usize;
    let mut outputs: Vec<ExchangeOutput> = (0..workers)
        .map(|_| ExchangeOutput::zeros(Vec::new(), width))
        .collect();
    for v in 0..graph.num_vertices() as u32 {
        let w = assignment.part(v);
        let mut row: Option<Vec<i64>> = None;
        for &u in graph.neighbors(v) {
            if assignment.part(u) == w {
                continue;
            }
            let acc = row.get_or_insert_with(|| vec![0; width]);
            let x = &encoded[u as usize * width..(u as usize + 1) * width];
            for (a, &q) in acc.iter_mut().zip(x) {
                *a += i64::from(q);
            }
        }
        if let Some(row) = row {
            let out = &mut outputs[w as usize];
            out.vertices.push(v);
            out.sums.extend(row);
        }
    }
    outputs
}
