//! How the host exchange frames its copies: the MTU its packets fill and how often a receiver
//! acknowledges them. The same two options on every command that runs or judges it.

use switchgnn_dataplane::framing::HostFraming;

#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct FramingArgs {
    /// The host links' MTU, bytes (1500; 9000 for jumbo frames): the host exchange packs as
    /// many rows into a packet as fit it, as TCP or a tuned datagram transport sends them.
    #[arg(long, default_value_t = HostFraming::default().mtu,
          value_parser = clap::value_parser!(u32).range(i64::from(HostFraming::MIN_MTU)..=i64::from(HostFraming::MAX_MTU)))]
    pub(crate) mtu: u32,
    /// The host exchange's receivers acknowledge once per this many packets from a sender
    /// (sooner at a gap, a duplicate or the end of a burst; 1: an ack per packet).
    #[arg(long, default_value_t = HostFraming::default().ack_every,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) ack_every: u32,
}

impl FramingArgs {
    pub(crate) fn framing(&self) -> HostFraming {
        HostFraming {
            mtu: self.mtu,
            ack_every: self.ack_every,
        }
    }
}
