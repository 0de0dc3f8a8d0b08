//! One worker's routes of one layer's host exchange, from its plan: which rows go to whom,
//! what comes from whom and which output rows it adds into.

use std::collections::HashSet;

use switchgnn_dataplane::engine::{HostExchange, SendStrategy};
use switchgnn_dataplane::plan::{ExchangePlan, Mode};

use super::TcpExchangeError;

/// One worker's side of one layer's host exchange, from its plan: whom it sends which rows,
/// and what it expects from whom and adds where. Built once per layer.
#[derive(Debug, Clone)]
pub struct TcpRoutes {
    pub(super) rank: u16,
    pub(super) width: usize,
    /// The output's vertices: this worker's vertices with remote neighbours, ascending.
    pub(super) receivers: Vec<u32>,
    /// This worker's vertices that any peer needs, ascending (each encoded once).
    pub(super) sent: Vec<u32>,
    /// Per peer: indices into `sent`, in the host engine's send order.
    pub(super) to: Vec<Vec<u32>>,
    /// Per peer: the vertices it sends here, ascending.
    pub(super) from: Vec<Vec<u32>>,
    /// Per peer, per vertex of `from`: the output rows it adds into,
    /// `into_rows[p][into_start[p][i]..into_start[p][i + 1]]`.
    pub(super) into_start: Vec<Vec<u32>>,
    pub(super) into_rows: Vec<Vec<u32>>,
}

impl TcpRoutes {
    /// Worker `rank`'s routes for a host-exchange `plan` (the whole plan or the worker's view
    /// of it).
    pub fn new(plan: &ExchangePlan, rank: u16) -> Result<TcpRoutes, TcpExchangeError> {
        if plan.mode != Mode::Host {
            return Err(TcpExchangeError::Plan(format!(
                "a {} plan: the TCP exchange carries the host exchange's copies",
                plan.mode.name()
            )));
        }
        if rank >= plan.workers {
            return Err(TcpExchangeError::Plan(format!(
                "rank {rank} is not a worker of a plan for {}",
                plan.workers
            )));
        }
        let world = usize::from(plan.workers);
        let owner = |v: u32| -> Result<u16, TcpExchangeError> {
            plan.owner.get(v as usize).copied().ok_or_else(|| {
                TcpExchangeError::Plan(format!("vertex {v} has no owner in the plan"))
            })
        };
        // What to send: the host engine's copies, each (vertex, peer) once over the blocks.
        let mut to_vertices: Vec<Vec<u32>> = vec![Vec::new(); world];
        let mut seen: HashSet<(u16, u32)> = HashSet::new();
        for b in 0..plan.blocks.len() {
            for (u, s) in HostExchange::pairs(plan, rank, b as u16) {
                let peer = owner(s)?;
                if peer != rank && seen.insert((peer, u)) {
                    to_vertices[usize::from(peer)].push(u);
                }
            }
        }
        let mut sent: Vec<u32> = to_vertices.iter().flatten().copied().collect();
        sent.sort_unstable();
        sent.dedup();
        let to = to_vertices
            .iter()
            .map(|vs| {
                vs.iter()
                    .map(|v| sent.binary_search(v).expect("collected above") as u32)
                    .collect()
            })
            .collect();
        // What arrives: for each of this worker's destination rows, its remote sources.
        let receivers = plan.receivers(rank);
        let mut incoming: Vec<(u16, u32, u32)> = Vec::new();
        for b in &plan.blocks {
            let t = &b.table;
            for (row, (&v, &w)) in t.vertices.iter().zip(&t.workers).enumerate() {
                if w != u32::from(rank) {
                    continue;
                }
                let out = receivers.binary_search(&v).expect("a receiver of the plan") as u32;
                for s in b.sources(row) {
                    let peer = owner(s)?;
                    if peer == rank {
                        return Err(TcpExchangeError::Plan(format!(
                            "the plan lists vertex {s} as a remote source of vertex {v}, but \
                             both are worker {rank}'s"
                        )));
                    }
                    incoming.push((peer, s, out));
                }
            }
        }
        incoming.sort_unstable();
        let mut from: Vec<Vec<u32>> = vec![Vec::new(); world];
        let mut into_start: Vec<Vec<u32>> = vec![vec![0]; world];
        let mut into_rows: Vec<Vec<u32>> = vec![Vec::new(); world];
        for (i, &(peer, s, out)) in incoming.iter().enumerate() {
            let p = usize::from(peer);
            into_rows[p].push(out);
            let last = incoming
                .get(i + 1)
                .is_none_or(|&(q, t, _)| (q, t) != (peer, s));
            if last {
                from[p].push(s);
                into_start[p].push(into_rows[p].len() as u32);
            }
        }
        Ok(TcpRoutes {
            rank,
            width: plan.width,
            receivers,
            sent,
            to,
            from,
            into_start,
            into_rows,
        })
    }

    /// Copies this worker sends in one exchange (a row to a peer each).
    pub fn copies_sent(&self) -> usize {
        self.to.iter().map(Vec::len).sum()
    }

    /// Copies it receives.
    pub(super) fn copies_received(&self) -> usize {
        self.from.iter().map(Vec::len).sum()
    }
}
