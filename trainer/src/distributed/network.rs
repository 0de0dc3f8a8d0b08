//! [`RemoteSums`] over the real network: every exchange runs the dataplane engine of the job's
//! mode (SwitchGNN blocks, strawman or host exchange) through the transport's UDP worker
//! client; all-reduces go to the collective service beside the switch.
//!
//! Fixed point: before each exchange the workers agree on the largest magnitude any of them
//! sends (a max all-reduce), and every worker encodes with the scale SwitchML's bound gives for
//! it and the most contributions any sum of the exchange has. Each decoded sum of `n`
//! contributions is then within `n / (2f)` of the float sum (`f` the scale factor), and bit-
//! identical whatever the order, loss or retransmission on the way.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::engine::{EngineConfig, LocalFeatures, Timers};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::ExchangeId;
use switchgnn_transport::client::WorkerWire;
use switchgnn_transport::collective::{CollectiveClient, ReduceOp};
use switchgnn_transport::runner::new_engine;
use switchgnn_transport::{Session, WorkerClient};

use super::RemoteSums;
use crate::error::{CommError, Result, TrainError};
use crate::train::Traffic;

/// How a worker drives its exchanges.
#[derive(Debug, Clone, Copy)]
pub struct NetworkOptions {
    pub job: u16,
    pub rank: u16,
    /// Sending rate cap (bytes/s).
    pub line_rate: f64,
    /// Unacknowledged data chunks at most.
    pub window: usize,
    pub timers: Timers,
}

/// Totals over a worker's exchanges, for its report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExchangeTotals {
    pub exchanges: u64,
    pub seconds: f64,
    pub packets_sent: u64,
    pub packets_received: u64,
    pub retransmits: u64,
    pub fetches_sent: u64,
    pub host_aggregated: u64,
    pub dropped: u64,
    pub saturated: u64,
    /// The largest bound on one decoded sum's error, `n / (2f)`, over all exchanges.
    pub worst_error_bound: f64,
    pub all_reduces: u64,
}

/// A worker's connection to the switch and the collective service.
#[derive(Debug)]
pub struct NetworkSums {
    client: WorkerClient,
    collective: CollectiveClient,
    session: Arc<Session>,
    opts: NetworkOptions,
    /// The shard's boundary vertices: the rows every exchange sends and receives.
    boundary: Vec<u32>,
    /// The most contributions one sum receives (for the scale). Taken from the graph, not the
    /// plan, so that every exchange mode encodes alike and delivers the same bits.
    contributions: u64,
    seq: u32,
    traffic: Traffic,
    pub totals: ExchangeTotals,
}

impl NetworkSums {
    /// Check that the session's exchanges deliver exactly the `boundary` rows of the shard,
    /// whose sums have at most `contributions` terms.
    pub fn new(
        client: WorkerClient,
        collective: CollectiveClient,
        session: Arc<Session>,
        boundary: &[u32],
        contributions: u64,
        opts: NetworkOptions,
    ) -> Result<NetworkSums> {
        for (layer, plan) in session.layers.iter().enumerate() {
            if plan.receivers(opts.rank) != boundary {
                return Err(TrainError::Config(format!(
                    "layer {layer}'s exchange plan does not cover worker {}'s boundary vertices \
                     (is the plan for this graph and partition?)",
                    opts.rank
                )));
            }
        }
        Ok(NetworkSums {
            client,
            collective,
            session,
            opts,
            boundary: boundary.to_vec(),
            contributions,
            seq: 0,
            traffic: Traffic::default(),
            totals: ExchangeTotals::default(),
        })
    }

    /// Say goodbye to the switch and the service; the traffic as the socket saw it.
    pub fn finish(self) -> Result<WorkerWire> {
        drop(self.collective);
        let rank = self.opts.rank;
        self.client
            .finish()
            .map_err(|source| CommError::Worker { rank, source }.into())
    }

    fn reduce(&mut self, op: ReduceOp, values: &mut [f32]) -> Result<()> {
        let (sent, received) = (self.collective.bytes_sent, self.collective.bytes_received);
        let started = Instant::now();
        let rank = self.opts.rank;
        self.collective
            .all_reduce(op, values)
            .map_err(|source| CommError::Collective { rank, source })?;
        self.traffic.seconds += started.elapsed().as_secs_f64();
        self.traffic.bytes_sent += self.collective.bytes_sent - sent;
        self.traffic.bytes_received += self.collective.bytes_received - received;
        self.totals.all_reduces += 1;
        Ok(())
    }
}

impl RemoteSums for NetworkSums {
    fn workers(&self) -> usize {
        usize::from(self.session.workers())
    }

    fn exchange(
        &mut self,
        layer: usize,
        backward: bool,
        width: usize,
        rows: &[f32],
    ) -> Result<Vec<f32>> {
        let session = self.session.clone();
        let plan = session.layers.get(layer).ok_or_else(|| {
            TrainError::Config(format!(
                "the model has more layers than the plan ({})",
                self.session.layers.len()
            ))
        })?;
        if plan.width != width {
            return Err(TrainError::Config(format!(
                "layer {layer} aggregates width {width}, but the plan exchanges width {} \
                 (prepare the plan with the model's aggregated widths)",
                plan.width
            )));
        }
        let started = Instant::now();
        let mut bound = [rows.iter().fold(0f32, |m, x| m.max(x.abs()))];
        self.reduce(ReduceOp::Max, &mut bound)?;
        let scale = Scale::for_bound(bound[0], self.contributions)
            .map_err(|source| CommError::Scale { layer, source })?;
        self.seq += 1;
        let dir = if backward { "backward" } else { "forward" };
        let during = format!("exchange {} (layer {layer} {dir})", self.seq);
        let cfg = EngineConfig {
            // The sequence number names the exchange: a training pass and an evaluation pass
            // of the same epoch are different exchanges.
            exchange: ExchangeId {
                job: self.opts.job,
                epoch: self.seq,
                layer: layer as u8,
                backward,
            },
            seq: self.seq,
            rank: self.opts.rank,
            scale,
            timers: self.opts.timers,
            window: self.client.window(self.opts.window),
        };
        let local = LocalFeatures {
            vertices: &self.boundary,
            width,
            values: rows,
        };
        let mut engine = new_engine(
            session.mode,
            cfg,
            plan,
            local,
            self.opts.line_rate,
            self.client.congestion_window(),
            self.client.now(),
        )
        .map_err(|source| CommError::Engine {
            during: during.clone(),
            source,
        })?;
        let rank = self.opts.rank;
        self.client
            .run(engine.as_mut(), &during)
            .map_err(|source| CommError::Worker { rank, source })?;
        let out = engine.output();
        if out.vertices != self.boundary {
            return Err(CommError::Mismatch {
                during,
                what: "the result covers other vertices than the plan's".into(),
            }
            .into());
        }
        let s = engine.stats();
        let t = &mut self.totals;
        t.exchanges += 1;
        t.packets_sent += s.packets_sent;
        t.packets_received += s.packets_received;
        t.retransmits += s.retransmits;
        t.fetches_sent += s.fetches_sent;
        t.host_aggregated += s.host_aggregated;
        t.dropped += s.dropped;
        t.saturated += s.saturated;
        t.worst_error_bound = t
            .worst_error_bound
            .max(scale.contributions as f64 / (2.0 * scale.factor));
        let elapsed = started.elapsed().as_secs_f64();
        t.seconds += elapsed;
        self.traffic.seconds += elapsed;
        self.traffic.bytes_sent += s.bytes_sent;
        self.traffic.bytes_received += s.bytes_received;
        Ok(out.decode(&scale))
    }

    fn all_reduce_sum(&mut self, values: &mut [f32]) -> Result<()> {
        self.reduce(ReduceOp::Sum, values)
    }

    fn traffic(&self) -> Traffic {
        self.traffic
    }
}
