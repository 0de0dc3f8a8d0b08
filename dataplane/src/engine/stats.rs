//! What an engine counts while it runs, and why it dropped a packet.

use serde::{Deserialize, Serialize};

/// Counters of one engine. Payload counts feature bytes only (4 per lane), as the partition
/// crate's traffic model does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineStats {
    /// Packets sent.
    pub packets_sent: u64,
    /// Bytes sent, headers included.
    pub bytes_sent: u64,
    /// Packets received, dropped ones included.
    pub packets_received: u64,
    /// Bytes received, headers included.
    pub bytes_received: u64,
    /// Feature payload sent the first time (data chunks, or host-exchange copies).
    pub payload_sent: u64,
    /// Feature payload sent again: retransmissions and fetch replies.
    pub payload_resent: u64,
    /// Feature payload received: sums and raw contributions.
    pub payload_received: u64,
    /// Data chunks or copies sent again after a timeout or a detected loss.
    pub retransmits: u64,
    /// Fetch requests sent to the owners of missing contributions.
    pub fetches_sent: u64,
    /// Fetch requests answered with a raw feature.
    pub fetch_replies: u64,
    /// Result packets of the running block received (sums and overflow notices).
    pub results: u64,
    /// Raw feature packets received.
    pub raws: u64,
    /// Wanted contributions taken from the raw-feature cache instead of fetched.
    pub cache_hits: u64,
    /// Destinations (per chunk) completed from raw contributions rather than a switch sum.
    pub host_aggregated: u64,
    /// Overflow notices from the switch (results with the fetch flag).
    pub overflow_notices: u64,
    /// Switch acks of data chunks that carried an ECN mark.
    pub ecn_echoes: u64,
    /// Malformed, stale or unexpected packets dropped, in all and by [`EngineDrop`] (index =
    /// position in [`EngineDrop::ALL`]).
    pub dropped: u64,
    /// Dropped packets per reason (index = position in [`EngineDrop::ALL`]).
    #[serde(default)]
    pub drops: [u64; EngineDrop::COUNT],
    /// Feature values beyond the scale's bound (saturated on encoding).
    pub saturated: u64,
    /// Smoothed round-trip time of data chunks (in-network modes; 0 before the first ack).
    pub srtt_ns: u64,
    /// Acknowledgements of packed host copies this worker sent (one covers several packets).
    #[serde(default)]
    pub acks_sent: u64,
    /// Fetches left unanswered because this worker's queue of replies and requests was full
    /// (the requester asks again).
    #[serde(default)]
    pub fetches_shed: u64,
    /// Times the retransmission timer found packets lost (timed out, or overtaken by later
    /// ones): each is one congestion signal, however many packets it sends again.
    #[serde(default)]
    pub timer_losses: u64,
    /// The host kinds' acknowledgements that showed earlier packets to the same receiver
    /// overtaken (RACK per receiver): each is one congestion signal. (The in-network kinds'
    /// overtaken chunks are found by the timer and count in `timer_losses`.)
    #[serde(default)]
    pub ack_losses: u64,
    /// Questions to the switch where its numbering of what it sends here stands
    /// ([`crate::wire::PacketType::Stamps`]): one when joining, then one per quiet spell that
    /// the holes seen so far do not explain, backing off.
    #[serde(default)]
    pub stamp_queries: u64,
}

/// Why the engine dropped a packet, counted in [`EngineStats::drops`] as the switch counts
/// its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EngineDrop {
    /// Not a valid header (too short, bad magic or version, unknown type, reserved flags).
    Malformed,
    /// Another job, exchange or direction, or a go of another exchange sequence.
    OtherExchange,
    /// Ids beyond the plan (vertex, block, worker, layer, chunk).
    OutOfPlan,
    /// For a block that is not the running one (late, or early before the go).
    Stale,
    /// A fetch for a vertex this worker does not hold.
    NotOwned,
    /// A result for a vertex or count this worker does not expect.
    Unexpected,
    /// A packet type, flag or lane count the engine never receives.
    Unsupported,
}

impl EngineDrop {
    /// Number of drop reasons.
    pub const COUNT: usize = 7;
    /// Every drop reason, in index order.
    pub const ALL: [EngineDrop; EngineDrop::COUNT] = [
        EngineDrop::Malformed,
        EngineDrop::OtherExchange,
        EngineDrop::OutOfPlan,
        EngineDrop::Stale,
        EngineDrop::NotOwned,
        EngineDrop::Unexpected,
        EngineDrop::Unsupported,
    ];
}

impl EngineStats {
    /// Packets dropped for `reason`.
    pub fn dropped_for(&self, reason: EngineDrop) -> u64 {
        self.drops[reason as usize]
    }
}
