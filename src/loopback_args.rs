//! Options of the commands that run a whole job on this machine (`exchange`, `train`): the
//! switch's memory and the emulated links and faults.

use anyhow::{bail, Result};
use switchgnn_partition::size::parse_bytes;
use switchgnn_transport::Link;
use switchgnn_transport::ShimConfig;

#[derive(Debug, clap::Args)]
pub(crate) struct LoopbackArgs {
    /// Aggregator memory of the switch (e.g. 10MB).
    #[arg(long, default_value = "100MB")]
    pub(crate) switch_memory: String,
    /// Probability that the fault shim drops a datagram, on every sender.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) loss: f64,
    /// Seed of the fault shim.
    #[arg(long, default_value_t = 1)]
    pub(crate) fault_seed: u64,
    /// Rate cap (Gbit/s) of every worker and switch port.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) gbps: f64,
    #[command(flatten)]
    pub(crate) framing: crate::framing_args::FramingArgs,
}

impl LoopbackArgs {
    pub(crate) fn check(&self) -> Result<()> {
        if !(0.0..1.0).contains(&self.loss) {
            bail!("--loss {} must be in [0, 1)", self.loss);
        }
        Ok(())
    }

    /// `--exchange tcp` takes no faults: the shim drops UDP datagrams, and the TCP exchange
    /// sends none (the kernel's TCP recovers its own losses).
    pub(crate) fn check_tcp(&self) -> Result<()> {
        if self.loss > 0.0 {
            bail!(
                "--loss drops UDP datagrams, and --exchange tcp sends none (the kernel's TCP \
                 recovers its own losses): run tcp without --loss"
            );
        }
        Ok(())
    }

    /// The switch memory in bytes.
    pub(crate) fn memory(&self) -> Result<u64> {
        Ok(parse_bytes(&self.switch_memory)?)
    }

    /// The links: `--gbps`, the rest as a job file's defaults.
    pub(crate) fn link(&self) -> Link {
        Link {
            gbps: self.gbps,
            mtu: self.framing.mtu,
            ack_every: self.framing.ack_every,
            ..Link::default()
        }
    }

    pub(crate) fn faults(&self) -> ShimConfig {
        ShimConfig {
            loss: self.loss,
            seed: self.fault_seed,
            ..ShimConfig::default()
        }
    }
}
