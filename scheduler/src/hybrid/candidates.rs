//! The units of choice: the partial sums of every destination and the candidates (source,
//! block, worker) with their neighbours, grouped without sorting.

use switchgnn_datasets::Graph;

use super::model::Candidate;

/// The partial sums: per destination `v`, its contributing workers
/// (`workers[first[v]..first[v + 1]]`, ascending) and how many of their sources are still
/// pre-aggregated (`count`, at first all of them).
pub(super) struct Pairs {
    pub(super) first: Vec<u64>,
    pub(super) workers: Vec<u16>,
    pub(super) count: Vec<u32>,
    pub(super) destination: Vec<u32>,
}

impl Pairs {
    pub(super) fn of(
        graph: &Graph,
        part: &impl Fn(u32) -> u16,
        groups: &mut WorkerGroups,
    ) -> Pairs {
        let n = graph.num_vertices();
        let mut p = Pairs {
            first: vec![u64::MAX; n + 1],
            workers: Vec::new(),
            count: Vec::new(),
            destination: Vec::new(),
        };
        for v in 0..n as u32 {
            p.first[v as usize] = p.workers.len() as u64;
            let home = part(v);
            groups.count(graph.neighbors(v), &|y| {
                let w = part(y);
                (w != home).then_some(u32::from(w))
            });
            for &w in &groups.touched {
                p.workers.push(w as u16);
                p.count.push(groups.count[w as usize]);
                p.destination.push(v);
            }
        }
        p.first[n] = p.workers.len() as u64;
        p
    }
}

/// The candidates: each source with its remote neighbours grouped by `key(source, neighbour)`
/// (`block · workers + worker`, ascending), the neighbour lists they index, and where each
/// source's candidates start (one entry more than there are vertices).
pub(super) fn candidates_of(
    graph: &Graph,
    key: &impl Fn(u32, u32) -> Option<u32>,
    workers: usize,
    groups: &mut WorkerGroups,
) -> (Vec<u32>, Vec<Candidate>, Vec<u32>) {
    let n = graph.num_vertices();
    let mut neighbours: Vec<u32> = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut first = Vec::with_capacity(n + 1);
    // The (source, block) pairs seen so far.
    let mut group = 0u32;
    for u in 0..n as u32 {
        first.push(candidates.len() as u32);
        groups.group(graph.neighbors(u), &|y| key(u, y), &mut neighbours);
        let mut block = None;
        for &(k, start, end) in &groups.ranges {
            let b = k as usize / workers;
            if block.is_some_and(|x| x != b) {
                group += 1;
            }
            block = Some(b);
            candidates.push(Candidate {
                u,
                key: k,
                start: start as u32,
                end: end as u32,
                group,
            });
        }
        if block.is_some() {
            group += 1;
        }
    }
    first.push(candidates.len() as u32);
    (neighbours, candidates, first)
}

/// One vertex's neighbours counted, or grouped, per key (a worker, or a block and a worker;
/// `None`: left out): a counting sort over the keys it touches (a stamp per key says whether
/// the current call has seen it). `touched` lists the keys in ascending order and `count[k]`
/// how many neighbours each has, valid for touched keys only; after [`WorkerGroups::group`],
/// `ranges` says where each key's neighbours went.
pub(super) struct WorkerGroups {
    /// The call that last touched each key; calls are numbered from 1.
    pub(super) stamp: Vec<u64>,
    pub(super) call: u64,
    pub(super) count: Vec<u32>,
    pub(super) touched: Vec<u32>,
    pub(super) ranges: Vec<(u32, usize, usize)>,
}

impl WorkerGroups {
    pub(super) fn new(keys: usize) -> WorkerGroups {
        WorkerGroups {
            stamp: vec![0; keys],
            call: 0,
            count: vec![0; keys],
            touched: Vec::new(),
            ranges: Vec::new(),
        }
    }

    /// Count the `neighbours` per `key`.
    pub(super) fn count(&mut self, neighbours: &[u32], key: &impl Fn(u32) -> Option<u32>) {
        self.touched.clear();
        self.call += 1;
        for &y in neighbours {
            let Some(k) = key(y) else {
                continue;
            };
            let i = k as usize;
            if self.stamp[i] != self.call {
                self.stamp[i] = self.call;
                self.count[i] = 0;
                self.touched.push(k);
            }
            self.count[i] += 1;
        }
        self.touched.sort_unstable();
    }

    /// Append the neighbours [`WorkerGroups::count`] counts to `out`, grouped by key in
    /// ascending order, each group in neighbour order.
    pub(super) fn group(
        &mut self,
        neighbours: &[u32],
        key: &impl Fn(u32) -> Option<u32>,
        out: &mut Vec<u32>,
    ) {
        self.count(neighbours, key);
        let base = out.len();
        self.ranges.clear();
        let mut end = 0u32;
        for &k in &self.touched {
            let n = self.count[k as usize];
            self.ranges
                .push((k, base + end as usize, base + (end + n) as usize));
            // From here on, the next free place of the key's group.
            self.count[k as usize] = end;
            end += n;
        }
        out.resize(base + end as usize, 0);
        for &y in neighbours {
            if let Some(k) = key(y) {
                let next = &mut self.count[k as usize];
                out[base + *next as usize] = y;
                *next += 1;
            }
        }
    }
}
