//! A training worker's communication with the rest of its job: the boundary exchange of each
//! layer through the switch (any exchange kind) and the all-reduce through the collective
//! service. What the Rust trainer and the Python package both drive, so that there is one
//! place where a float row becomes fixed point, crosses the network and comes back.
//!
//! Fixed point: before each exchange the workers agree on the largest magnitude any of them
//! sends (a max all-reduce), and every worker encodes with the scale SwitchML's bound gives for
//! it and the most contributions any sum of the job has. Each decoded sum of `n`
//! contributions is then within `n / (2f)` of the float sum (`f` the scale factor), and bit-
//! identical whatever the exchange kind, the order, loss or retransmission on the way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use switchgnn_chip::Chip;
use switchgnn_dataplane::allreduce::{from_order_key, order_key};
use switchgnn_dataplane::control::Secret;
use switchgnn_dataplane::engine::{EngineConfig, EngineError, LocalFeatures, Timers};
use switchgnn_dataplane::fixed::{FixedError, Scale};
use switchgnn_dataplane::wire::MAX_LANES;
use switchgnn_dataplane::ExchangeId;
use switchgnn_dataplane::Nanos;
use thiserror::Error;

use crate::client::{WorkerClient, WorkerConfig, WorkerError, WorkerWire};
use crate::collective::{CollectiveClient, CollectiveError, Member, ReduceOp};
use crate::job::{AllReduceVia, ExchangeVia, JobFile};
use crate::runner::{chip_floors, new_engine};
use crate::session::Session;
use crate::tcp_exchange::{MeshConfig, TcpExchangeError, TcpMesh, TcpRoutes};

/// Each variant's message includes its cause (`cause`, not `source`: an error chain printed
/// whole, as `anyhow`'s `{:#}` does, would say it twice).
#[derive(Debug, Error)]
pub enum ParticipantError {
    /// The connection to the switch (handshake, an exchange, goodbye).
    #[error("worker {rank}: {cause}")]
    Worker {
        /// The worker's rank.
        rank: u16,
        /// Why.
        cause: WorkerError,
    },
    /// The connection to the all-reduce service.
    #[error("worker {rank}: {cause}")]
    Collective {
        /// The worker's rank.
        rank: u16,
        /// Why.
        cause: CollectiveError,
    },
    /// An exchange engine refused its inputs.
    #[error("{during}: {cause}")]
    Engine {
        /// Which exchange.
        during: String,
        /// Why.
        cause: EngineError,
    },
    /// No fixed-point scale fits the values of an all-reduce.
    #[error("all-reduce: {0} (are the values finite?)")]
    AllReduceScale(FixedError),
    /// No fixed-point scale fits the values of a layer.
    #[error("layer {layer}: {cause}")]
    Scale {
        /// The layer.
        layer: usize,
        /// Why.
        cause: FixedError,
    },
    /// An exchange returned something else than the plan says.
    #[error("{during}: {what}")]
    Mismatch {
        /// Which exchange.
        during: String,
        /// What differs.
        what: String,
    },
    /// The caller's arguments do not fit the plan.
    #[error("{0}")]
    Usage(String),
    /// The host exchange over TCP between the workers (meeting, an exchange).
    #[error("worker {rank}: {cause}")]
    Tcp {
        /// The worker's rank.
        rank: u16,
        /// Why.
        cause: TcpExchangeError,
    },
}

/// How a worker drives its exchanges.
#[derive(Debug, Clone, Copy)]
pub struct ParticipantOptions {
    /// The job's id.
    pub job: u16,
    /// This worker's rank.
    pub rank: u16,
    /// Sending rate cap (bytes/s).
    pub line_rate: f64,
    /// Unacknowledged data chunks at most.
    pub window: usize,
    /// The engines' protocol timers.
    pub timers: Timers,
    /// How the host exchange packs its copies and acknowledges them.
    pub framing: switchgnn_dataplane::framing::HostFraming,
    /// Where the all-reduce runs (its slots are the switch's, from its welcome).
    pub allreduce: AllReduceVia,
    /// The switch's chip, when known: each exchange's blocks get their floors from it.
    pub chip: Option<Chip>,
}

/// Totals over a worker's exchanges and all-reduces, for its report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExchangeTotals {
    /// Exchanges run.
    pub exchanges: u64,
    /// Wall time in exchanges (the scale's max all-reduce included).
    pub seconds: f64,
    /// The exchanges' packets sent.
    pub packets_sent: u64,
    /// The exchanges' packets received.
    pub packets_received: u64,
    /// Bytes of the exchanges' packets (headers included) and of their scales' agreement.
    pub bytes_sent: u64,
    /// Bytes received, counted alike.
    pub bytes_received: u64,
    /// Data packets sent again after a timeout or a loss signal.
    pub retransmits: u64,
    /// Requests for sums that did not come in time.
    pub fetches_sent: u64,
    /// Contributions summed at a host rather than in the switch.
    pub host_aggregated: u64,
    /// Packets the engines dropped (stale, duplicate, unknown).
    pub dropped: u64,
    /// Sums that saturated the fixed-point range.
    pub saturated: u64,
    /// The largest bound on one decoded sum's error, `n / (2f)`, over all exchanges.
    pub worst_error_bound: f64,
    /// All-reduces the caller asked for (not counting the exchanges' scale agreement).
    pub all_reduces: u64,
    /// Wall time and bytes of those all-reduces.
    pub all_reduce_seconds: f64,
    /// Bytes those all-reduces sent.
    pub all_reduce_bytes_sent: u64,
    /// Bytes they received.
    pub all_reduce_bytes_received: u64,
}

/// A worker's connection to the switch and the collective service.
#[derive(Debug)]
pub struct Participant {
    client: WorkerClient,
    collective: CollectiveClient,
    /// Each layer's block floors (see [`chip_floors`]).
    floors: Vec<Vec<Nanos>>,
    session: Arc<Session>,
    opts: ParticipantOptions,
    /// The worker's boundary vertices: the rows every exchange sends and receives.
    boundary: Vec<u32>,
    /// The most contributions one sum of the job receives (for the scale). Taken from the
    /// graph, not the plan, so that every exchange kind encodes alike and delivers the same bits.
    contributions: u64,
    seq: u32,
    /// Totals so far.
    pub totals: ExchangeTotals,
    /// The in-switch all-reduce's buffers, kept from one call to the next: a gradient's
    /// all-reduce is megabytes, and fresh vectors cost a page fault per page every call.
    /// `keys`: a maximum's order keys, or a sum's group bounds; `lanes`: a sum's fixed point.
    keys: Vec<i32>,
    lanes: Vec<i32>,
    scales: Vec<Scale>,
    /// With `exchange_via = "tcp"`: the connections to the other workers and each layer's
    /// routes over them; the exchanges then bypass the switch.
    tcp: Option<(TcpMesh, Vec<Option<TcpRoutes>>)>,
}

impl Participant {
    /// Join `job`'s switch at `switch` and its collective service as worker `rank`, with
    /// `session` (the worker's view of it will do) and the fingerprint `agreement` of every
    /// setting the workers must share. `contributions` is the most remote neighbours any
    /// vertex of the graph has; `secret` the job's admission secret, if it has one.
    pub fn connect(
        job: &JobFile,
        session: Arc<Session>,
        rank: u16,
        switch: SocketAddr,
        agreement: u64,
        contributions: u64,
        secret: Option<Secret>,
    ) -> Result<Participant, ParticipantError> {
        if rank >= job.world {
            return Err(ParticipantError::Usage(format!(
                "rank {rank} is not a worker of a job of {} workers (ranks 0 to {})",
                job.world,
                job.world.saturating_sub(1)
            )));
        }
        let client = WorkerClient::connect(WorkerConfig::of_job(
            job,
            rank,
            session.checksum,
            switch,
            secret.clone(),
        ))
        .map_err(|cause| ParticipantError::Worker { rank, cause })?;
        let who = Member {
            job: job.job,
            rank,
            world: job.world,
            agreement,
            secret,
        };
        let mut collective = CollectiveClient::connect(
            job.collective_at(switch),
            &who,
            job.timeouts.join(),
            job.timeouts.collective_idle(),
        )
        .map_err(|cause| ParticipantError::Collective { rank, cause })?;
        let tcp = match job.exchange_via {
            ExchangeVia::Switch => None,
            ExchangeVia::Tcp => {
                let cfg = MeshConfig {
                    job: job.job,
                    rank,
                    world: job.world,
                    checksum: session.checksum,
                    secret: who.secret.clone(),
                    join: job.timeouts.join(),
                    idle: job.timeouts.collective_idle(),
                    line_rate: Some(job.link.rate()),
                };
                let mesh = TcpMesh::join(&mut collective, cfg)
                    .map_err(|cause| ParticipantError::Tcp { rank, cause })?;
                Some((mesh, vec![None; session.layers.len()]))
            }
        };
        let opts = ParticipantOptions {
            job: job.job,
            rank,
            line_rate: job.link.rate(),
            window: job.link.window,
            timers: job.timeouts.protocol(),
            framing: job.link.framing(),
            allreduce: job.allreduce.via,
            chip: job.chip(),
        };
        let boundary = session
            .layers
            .first()
            .map(|p| p.receivers(rank))
            .unwrap_or_default();
        let mut participant =
            Participant::new(client, collective, session, &boundary, contributions, opts)?;
        participant.tcp = tcp;
        Ok(participant)
    }

    /// Check that the session's exchanges deliver exactly the `boundary` rows of the worker,
    /// whose sums have at most `contributions` terms.
    pub fn new(
        client: WorkerClient,
        collective: CollectiveClient,
        session: Arc<Session>,
        boundary: &[u32],
        contributions: u64,
        opts: ParticipantOptions,
    ) -> Result<Participant, ParticipantError> {
        for (layer, plan) in session.layers.iter().enumerate() {
            if plan.receivers(opts.rank) != boundary {
                return Err(ParticipantError::Usage(format!(
                    "layer {layer}'s exchange plan does not cover worker {}'s boundary vertices \
                     (is the plan for this graph and partition?)",
                    opts.rank
                )));
            }
        }
        Ok(Participant {
            client,
            collective,
            floors: chip_floors(opts.chip.as_ref(), &session),
            session,
            opts,
            boundary: boundary.to_vec(),
            contributions,
            seq: 0,
            totals: ExchangeTotals::default(),
            keys: Vec::new(),
            lanes: Vec::new(),
            scales: Vec::new(),
            tcp: None,
        })
    }

    /// This worker's rank.
    pub fn rank(&self) -> u16 {
        self.opts.rank
    }

    /// Run the following all-reduces (and scale agreements) in the switch or through the TCP
    /// service. Every worker must switch at the same point of its sequence.
    pub fn set_allreduce_via(&mut self, via: AllReduceVia) {
        self.opts.allreduce = via;
    }

    /// The job's exchange plans.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The vertices (global ids, ascending) whose rows every exchange sends and receives.
    pub fn boundary(&self) -> &[u32] {
        &self.boundary
    }

    /// The width layer `layer` exchanges.
    pub fn width(&self, layer: usize) -> Result<usize, ParticipantError> {
        self.session
            .layers
            .get(layer)
            .map(|p| p.width)
            .ok_or_else(|| {
                ParticipantError::Usage(format!(
                    "layer {layer} is not in the plan, which has {} layers",
                    self.session.layers.len()
                ))
            })
    }

    /// Say goodbye to the switch and the service; the traffic as the socket saw it.
    pub fn finish(self) -> Result<WorkerWire, ParticipantError> {
        drop(self.collective);
        let rank = self.opts.rank;
        self.client
            .finish()
            .map_err(|cause| ParticipantError::Worker { rank, cause })
    }

    /// Combine `values` with every other worker's (same length, same round) in place: bit-
    /// identical on every worker.
    pub fn all_reduce(&mut self, op: ReduceOp, values: &mut [f32]) -> Result<(), ParticipantError> {
        let started = Instant::now();
        let (sent, received) = self.reduce(op, values)?;
        let t = &mut self.totals;
        t.all_reduce_seconds += started.elapsed().as_secs_f64();
        t.all_reduce_bytes_sent += sent;
        t.all_reduce_bytes_received += received;
        t.all_reduces += 1;
        Ok(())
    }

    /// One all-reduce round, where the job runs them; the bytes it sent and received.
    fn reduce(&mut self, op: ReduceOp, values: &mut [f32]) -> Result<(u64, u64), ParticipantError> {
        match self.opts.allreduce {
            AllReduceVia::Tcp => self.reduce_by_service(op, values),
            AllReduceVia::Switch => self.reduce_in_switch(op, values),
        }
    }

    fn reduce_by_service(
        &mut self,
        op: ReduceOp,
        values: &mut [f32],
    ) -> Result<(u64, u64), ParticipantError> {
        let (sent, received) = (self.collective.bytes_sent, self.collective.bytes_received);
        let rank = self.opts.rank;
        self.collective
            .all_reduce(op, values)
            .map_err(|cause| ParticipantError::Collective { rank, cause })?;
        Ok((
            self.collective.bytes_sent - sent,
            self.collective.bytes_received - received,
        ))
    }

    /// The switch adds int32 lanes and takes their maxima: a maximum goes through the floats'
    /// order keys (exact), a sum through fixed point, each group of values at the scale that
    /// its largest magnitude on any worker allows for `world` contributions (SwitchML's
    /// per-block exponent; the groups' bounds are agreed first, by a maximum of one value per
    /// group). Small entries then keep their precision next to large ones: a gradient's
    /// tensors, an epoch's loss next to its vertex counts. Groups are as small as keeps the
    /// bounds within one slice, and one slice (64 values) at most ([`scale_group`]).
    fn reduce_in_switch(
        &mut self,
        op: ReduceOp,
        values: &mut [f32],
    ) -> Result<(u64, u64), ParticipantError> {
        match op {
            ReduceOp::Max => {
                let mut keys = std::mem::take(&mut self.keys);
                keys.clear();
                keys.extend(values.iter().map(|&x| order_key(x)));
                let (maxima, bytes) = self.switch_round(ReduceOp::Max, keys)?;
                for (v, &k) in values.iter_mut().zip(&maxima) {
                    *v = from_order_key(k);
                }
                self.keys = maxima;
                Ok(bytes)
            }
            ReduceOp::Sum => {
                let group = scale_group(values.len());
                // A value that is not finite makes its group's bound infinite on every worker,
                // and so the same error everywhere (no scale fits it).
                let magnitude = |x: &f32| {
                    if x.is_finite() {
                        x.abs()
                    } else {
                        f32::INFINITY
                    }
                };
                let mut bounds = std::mem::take(&mut self.keys);
                bounds.clear();
                bounds.extend(
                    values
                        .chunks(group)
                        .map(|s| order_key(s.iter().map(magnitude).fold(0f32, f32::max))),
                );
                let (agreed, (s1, r1)) = self.switch_round(ReduceOp::Max, bounds)?;
                let world = u64::from(self.session.workers());
                self.scales.clear();
                for &k in &agreed {
                    let scale = Scale::for_bound(from_order_key(k), world)
                        .map_err(ParticipantError::AllReduceScale)?;
                    self.scales.push(scale);
                }
                self.keys = agreed;
                // Resized, not cleared: every lane is encoded over, so only new room is zeroed.
                let mut lanes = std::mem::take(&mut self.lanes);
                lanes.resize(values.len(), 0);
                for ((v, q), scale) in values
                    .chunks(group)
                    .zip(lanes.chunks_mut(group))
                    .zip(&self.scales)
                {
                    scale.encode_row(v, q);
                }
                let (sums, (s2, r2)) = self.switch_round(ReduceOp::Sum, lanes)?;
                for ((v, q), scale) in values
                    .chunks_mut(group)
                    .zip(sums.chunks(group))
                    .zip(&self.scales)
                {
                    scale.decode_row(q, v);
                }
                self.lanes = sums;
                Ok((s1 + s2, r1 + r2))
            }
        }
    }

    /// One in-switch all-reduce over int32 `values`: the combined values (in `values`' own
    /// vector, for the caller to keep) and the bytes sent and received.
    fn switch_round(
        &mut self,
        op: ReduceOp,
        values: Vec<i32>,
    ) -> Result<(Vec<i32>, (u64, u64)), ParticipantError> {
        let rank = self.opts.rank;
        let engine = self
            .client
            .all_reduce(op, values)
            .map_err(|cause| ParticipantError::Worker { rank, cause })?;
        let s = *engine.stats();
        Ok((engine.into_output(), (s.bytes_sent, s.bytes_received)))
    }

    /// Exchange layer `layer`'s boundary rows (`rows`: one row of the layer's width per
    /// boundary vertex, row-major) and write into `out` (same shape) each boundary vertex's sum
    /// of its remote neighbours' rows. `backward` names the transposed exchange of gradients.
    pub fn exchange_into(
        &mut self,
        layer: usize,
        backward: bool,
        rows: &[f32],
        out: &mut [f32],
    ) -> Result<(), ParticipantError> {
        let session = self.session.clone();
        let width = self.width(layer)?;
        let plan = &session.layers[layer];
        let want = self.boundary.len() * width;
        if rows.len() != want || out.len() != want {
            return Err(ParticipantError::Usage(format!(
                "layer {layer} exchanges {} boundary rows of width {width} ({want} values); got \
                 {} values in and room for {} out",
                self.boundary.len(),
                rows.len(),
                out.len()
            )));
        }
        let started = Instant::now();
        let mut bound = [rows.iter().fold(0f32, |m, x| m.max(x.abs()))];
        let (scale_sent, scale_received) = self.reduce(ReduceOp::Max, &mut bound)?;
        let scale = Scale::for_bound(bound[0], self.contributions)
            .map_err(|cause| ParticipantError::Scale { layer, cause })?;
        self.seq += 1;
        let dir = if backward { "backward" } else { "forward" };
        let during = format!("exchange {} (layer {layer} {dir})", self.seq);
        let local = LocalFeatures {
            vertices: &self.boundary,
            width,
            values: rows,
        };
        let rank = self.opts.rank;
        // Whichever ran holds the output: an engine's is not copied out.
        let (over_tcp, engine);
        let (output, s) = match self.tcp.as_mut() {
            Some((mesh, routes)) => {
                let tcp = |cause| ParticipantError::Tcp { rank, cause };
                let r = match &routes[layer] {
                    Some(r) => r,
                    None => routes[layer].insert(TcpRoutes::new(plan, rank).map_err(tcp)?),
                };
                over_tcp = mesh.exchange(r, self.seq, &scale, local).map_err(tcp)?;
                (&over_tcp.0, &over_tcp.1)
            }
            None => {
                let cfg = EngineConfig {
                    // The sequence number names the exchange: a training pass and an
                    // evaluation pass of the same epoch are different exchanges.
                    exchange: ExchangeId {
                        job: self.opts.job,
                        epoch: self.seq,
                        layer: layer as u8,
                        backward,
                    },
                    seq: self.seq,
                    rank,
                    scale,
                    timers: self.opts.timers,
                    window: self.client.window(self.opts.window),
                    framing: self.opts.framing,
                };
                let mut running = new_engine(
                    session.mode,
                    cfg,
                    plan,
                    local,
                    self.opts.line_rate,
                    self.client.congestion_window(),
                    self.client.now(),
                )
                .map_err(|cause| ParticipantError::Engine {
                    during: during.clone(),
                    cause,
                })?;
                running.set_block_floors(self.floors[layer].clone());
                self.client
                    .run(running.as_mut(), &during)
                    .map_err(|cause| ParticipantError::Worker { rank, cause })?;
                engine = running;
                (engine.output(), engine.stats())
            }
        };
        if output.vertices != self.boundary || output.sums.len() != want {
            return Err(ParticipantError::Mismatch {
                during,
                what: "the result covers other vertices than the plan's".into(),
            });
        }
        for (o, &q) in out.iter_mut().zip(&output.sums) {
            *o = scale.decode(q);
        }
        let t = &mut self.totals;
        t.exchanges += 1;
        t.packets_sent += s.packets_sent;
        t.packets_received += s.packets_received;
        t.bytes_sent += s.bytes_sent + scale_sent;
        t.bytes_received += s.bytes_received + scale_received;
        t.retransmits += s.retransmits;
        t.fetches_sent += s.fetches_sent;
        t.host_aggregated += s.host_aggregated;
        t.dropped += s.dropped;
        t.saturated += s.saturated;
        t.worst_error_bound = t
            .worst_error_bound
            .max(scale.contributions as f64 / (2.0 * scale.factor));
        t.seconds += started.elapsed().as_secs_f64();
        Ok(())
    }

    /// [`Participant::exchange_into`] into a new vector.
    pub fn exchange(
        &mut self,
        layer: usize,
        backward: bool,
        rows: &[f32],
    ) -> Result<Vec<f32>, ParticipantError> {
        let mut out = vec![0f32; rows.len()];
        self.exchange_into(layer, backward, rows, &mut out)?;
        Ok(out)
    }
}

/// Values that share one fixed-point scale in an in-switch sum of `len` values: one each up to
/// 64 values, growing so that the bounds fill one slice, 64 from 4096 values on.
pub fn scale_group(len: usize) -> usize {
    len.div_ceil(MAX_LANES).clamp(1, MAX_LANES)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error printed with its whole chain (`anyhow`'s `{:#}`, which the CLI prints) says
    /// its cause once: the train worker's error text used to come out twice.
    #[test]
    fn a_whole_error_chain_says_the_cause_once() {
        let e = ParticipantError::Worker {
            rank: 1,
            cause: WorkerError::Aborted("worker 1 fell silent for 5.2s".into()),
        };
        let mut chain = e.to_string();
        let mut next = std::error::Error::source(&e);
        while let Some(s) = next {
            chain.push_str(&format!(": {s}"));
            next = s.source();
        }
        assert_eq!(chain.matches("fell silent").count(), 1, "{chain}");
    }
}
