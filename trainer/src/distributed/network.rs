//! [`RemoteSums`] over the real network: the transport's [`Participant`] (every exchange kind
//! through the switch, all-reduces through the collective service), with the traffic counted
//! the way the trainer reports it.

use switchgnn_transport::client::WorkerWire;
use switchgnn_transport::collective::ReduceOp;
use switchgnn_transport::participant::ExchangeTotals;
use switchgnn_transport::{Participant, ParticipantError};

use super::RemoteSums;
use crate::error::{CommError, Result, TrainError};
use crate::train::Traffic;

/// A worker's connection to the switch and the collective service.
#[derive(Debug)]
pub struct NetworkSums {
    participant: Participant,
}

impl NetworkSums {
    /// Check that the participant's exchanges deliver exactly the `boundary` rows of the shard.
    pub fn new(participant: Participant, boundary: &[u32]) -> Result<NetworkSums> {
        if participant.boundary() != boundary {
            return Err(TrainError::Config(format!(
                "the exchange plan does not cover worker {}'s boundary vertices (is the plan for \
                 this graph and partition?)",
                participant.rank()
            )));
        }
        Ok(NetworkSums { participant })
    }

    /// What the worker's exchanges did so far.
    pub fn totals(&self) -> &ExchangeTotals {
        &self.participant.totals
    }

    /// Say goodbye to the switch and the service; the traffic as the socket saw it.
    pub fn finish(self) -> Result<WorkerWire> {
        self.participant.finish().map_err(comm)
    }
}

/// The trainer's view of a participant's error.
pub(crate) fn comm(e: ParticipantError) -> TrainError {
    match e {
        ParticipantError::Worker { rank, cause } => CommError::Worker { rank, cause }.into(),
        ParticipantError::Collective { rank, cause } => {
            CommError::Collective { rank, cause }.into()
        }
        ParticipantError::Engine { during, cause } => CommError::Engine { during, cause }.into(),
        ParticipantError::Scale { layer, cause } => CommError::Scale { layer, cause }.into(),
        ParticipantError::Mismatch { during, what } => CommError::Mismatch { during, what }.into(),
        ParticipantError::Usage(why) => TrainError::Config(why),
        e @ ParticipantError::AllReduceScale(_) => CommError::AllReduce(e).into(),
        e @ ParticipantError::Tcp { .. } => CommError::Tcp(e).into(),
    }
}

impl RemoteSums for NetworkSums {
    fn workers(&self) -> usize {
        usize::from(self.participant.session().workers())
    }

    fn exchange(
        &mut self,
        layer: usize,
        backward: bool,
        width: usize,
        rows: &[f32],
    ) -> Result<Vec<f32>> {
        let planned = self.participant.width(layer).map_err(|_| {
            TrainError::Config(format!(
                "the model has more layers than the plan ({})",
                self.participant.session().layers.len()
            ))
        })?;
        if planned != width {
            return Err(TrainError::Config(format!(
                "layer {layer} aggregates width {width}, but the plan exchanges width {planned} \
                 (prepare the plan with the model's aggregated widths)"
            )));
        }
        self.participant
            .exchange(layer, backward, rows)
            .map_err(comm)
    }

    fn all_reduce_sum(&mut self, values: &mut [f32]) -> Result<()> {
        self.participant
            .all_reduce(ReduceOp::Sum, values)
            .map_err(comm)
    }

    fn traffic(&self) -> Traffic {
        let t = &self.participant.totals;
        Traffic {
            seconds: t.seconds + t.all_reduce_seconds,
            bytes_sent: t.bytes_sent + t.all_reduce_bytes_sent,
            bytes_received: t.bytes_received + t.all_reduce_bytes_received,
        }
    }
}
