//! `--pcap`: a packet capture of what a process sends and receives, for Wireshark with
//! `tools/wireshark/switchgnn.lua`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use switchgnn_transport::capture::Capture;

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CaptureArgs {
    /// Write every datagram this process sends and receives to this pcap file (Ethernet, IP,
    /// UDP and the switchgnn header; decode it with tools/wireshark/switchgnn.lua).
    #[arg(long, value_name = "FILE")]
    pub(crate) pcap: Option<PathBuf>,
    /// Stop capturing after this many packets.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub(crate) pcap_packets: u64,
}

impl CaptureArgs {
    /// The capture asked for, started.
    pub(crate) fn start(&self) -> Result<Option<Capture>> {
        self.pcap
            .as_ref()
            .map(|path| {
                Capture::create(path, self.pcap_packets)
                    .with_context(|| format!("cannot write the capture {}", path.display()))
            })
            .transpose()
    }
}
