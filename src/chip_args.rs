//! The chip options of every command that judges a switch (`analyze`, `simulate`, `p4
//! resources`).

use anyhow::Result;
use switchgnn_chip::ChipChoice;

#[derive(Debug, Clone, clap::Args)]
pub struct ChipArgs {
    /// Switch chip: tofino1-32, tofino1-64, tofino2, or ideal (the paper's switch, where
    /// aggregator passes and recirculation cost nothing). Default: the smallest real chip that
    /// hosts the workers at the link rate.
    #[arg(long)]
    pub chip: Option<String>,
    /// Front-panel ports put in loopback: more recirculation bandwidth, fewer worker ports.
    #[arg(long, default_value_t = 0)]
    pub loopback_ports: u32,
    /// Dedicated recirculation ports the program uses (default: all, one per pipe).
    #[arg(long)]
    pub recirculation_ports: Option<u32>,
}

impl ChipArgs {
    pub fn choice(&self) -> Result<ChipChoice> {
        Ok(ChipChoice {
            preset: self.chip.as_deref().map(str::parse).transpose()?,
            loopback_ports: self.loopback_ports,
            recirculation_ports: self.recirculation_ports,
        })
    }
}
