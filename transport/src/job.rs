//! The job file: one TOML file describes a run (its id, plan, exchange mode, the switch's
//! address, the number of workers, timers, link rate and injected faults). The same file serves
//! one machine (loopback addresses) and a cluster (LAN addresses); a worker's rank comes from
//! the command line or from the variables launchers set.
//!
//! ```toml
//! job = 1
//! plan = "plans/cora-4"          # a directory written by `switchgnn prepare`
//! dataset = "../shared/datasets/cora.npz"   # optional: default is the plan's dataset
//! mode = "switchgnn"             # or "host", "g3", "strawman", "reduce", "auto"
//! exchange_via = "switch"        # or "tcp": the host exchange over TCP between the workers
//!                                # (mode = "host"; the kernel's own transport, the baseline)
//! switch = "10.0.0.1:47000"
//! world = 4
//! bind = "0.0.0.0:0"             # optional: where workers bind (default: any port)
//! transport = "udp"              # or "dpdk" (a build with the `dpdk` feature; see [dpdk])
//! chip = "tofino1-32"            # optional: the switch is this chip running the P4 program
//!
//! [timeouts]                     # optional, these are the defaults
//! join_ms = 20000                # every worker joins within this of the first one's hello
//! peer_ms = 5000                 # a peer silent this long is declared dead
//! rto_us = 20000                 # data retransmission (floor)
//! control_us = 5000              # join / block-done repetition
//! result_us = 50000              # no contribution this long: fetch what is missing
//!
//! [link]
//! gbps = 10.0                    # sending rate cap of a worker and of each switch port
//! ecn_threshold_bytes = 65536    # switch egress queue depth that marks ECN (default: 50 µs of
//!                                # the link rate, at least 64 KiB)
//! window = 512                   # data chunks a worker keeps unacknowledged at most
//! congestion_window = true       # and a TCP-like congestion window below that
//! mtu = 1500                     # the host exchange packs its copies into packets this large
//! ack_every = 8                  # and its receivers ack once per this many packets
//!
//! [faults]                       # seeded fault shim on every sender (tests)
//! loss = 0.0
//!
//! [allreduce]                    # training's gradient all-reduce
//! via = "switch"                 # or "tcp" (the parameter server beside the switch)
//! slots = 128                    # slices each worker keeps in flight
//! best_effort = false            # true: in the switch's shared pool (ATP), not own slots
//!
//! [dpdk]                         # only with transport = "dpdk"; see `DpdkSettings`
//! eal = ["--no-huge", "--no-pci", "-m", "512"]
//! memif = "/run/switchgnn-1.sock"
//!
//! [fabric]                       # two-level aggregation: `switch` is then the spine
//! leaves = ["10.0.0.2:47000", "10.0.1.2:47000"]   # rack r's leaf switch (its workers join it)
//! racks = [0, 0, 1, 1]           # optional: each rank's rack (default: consecutive ranks)
//! ```

mod rank;
mod sections;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use switchgnn_chip::Chip;
use switchgnn_dataplane::control::Secret;
use switchgnn_dataplane::framing::HostFraming;
use switchgnn_dataplane::switch::Racks;
use switchgnn_dataplane::ExchangeKind;
use switchgnn_net::dpdk::DpdkSettingsError;
use switchgnn_net::ShimConfig;
use thiserror::Error;

pub use rank::resolve_rank;
pub use sections::{
    parse_exchange, AllReduce, AllReduceVia, ExchangeVia, Fabric, Link, MtuTooLarge, Timeouts,
    TransportKind, ECN_SOJOURN_US, ECN_THRESHOLD_FLOOR,
};
pub use switchgnn_net::dpdk::{DpdkSettings, Role};
pub use switchgnn_net::Transport;

/// Why a job file (or a file it names) cannot be used.
#[derive(Debug, Error)]
pub enum JobError {
    /// The file could not be read.
    #[error("cannot read job file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is not a valid job file (TOML, fields, or a setting that cannot work).
    #[error("job file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, as the parser or the checks say it.
        message: String,
    },
    /// A setting that cannot work, named.
    #[error("{0}")]
    Invalid(String),
    /// The `[dpdk]` section cannot work.
    #[error(transparent)]
    Dpdk(#[from] DpdkSettingsError),
}

/// A job file as read: everything the switch process and the workers of one run share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    /// The job's id (default 1): a switch serving several jobs tells them apart by it.
    #[serde(default = "default_job")]
    pub job: u16,
    /// The plan directory, relative to the job file.
    pub plan: PathBuf,
    /// The dataset argument; default: the one the plan was prepared from.
    #[serde(default)]
    pub dataset: Option<String>,
    /// The exchange the job runs (default `switchgnn`).
    #[serde(default = "default_mode")]
    pub mode: ExchangeKind,
    /// What carries the exchanges: packets through the switch, or (with `mode = "host"`) TCP
    /// connections between the workers.
    #[serde(default, skip_serializing_if = "ExchangeVia::is_switch")]
    pub exchange_via: ExchangeVia,
    /// Where the switch listens (the spine, on a two-level fabric).
    pub switch: SocketAddr,
    /// The job's workers.
    pub world: u16,
    /// Where workers bind; default: any address, a free port.
    #[serde(default)]
    pub bind: Option<SocketAddr>,
    /// TCP address of the training all-reduce service beside the switch. Default: the switch's
    /// address; with DPDK, whose switch address the kernel does not know, an address of the
    /// switch's host on a kernel interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<SocketAddr>,
    /// The packet I/O of the switch process and the workers.
    #[serde(default)]
    pub transport: TransportKind,
    /// DPDK's settings, for `transport = "dpdk"`.
    #[serde(default, skip_serializing_if = "DpdkSettings::is_default")]
    pub dpdk: DpdkSettings,
    /// Join, liveness and protocol timers.
    #[serde(default)]
    pub timeouts: Timeouts,
    /// The emulated links.
    #[serde(default)]
    pub link: Link,
    /// Seeded faults on every sender (tests).
    #[serde(default)]
    pub faults: ShimConfig,
    /// A file holding the job's admission secret (its bytes, without a trailing newline; 16 at
    /// least), relative to the job file: the switch then admits only workers that prove they
    /// hold the same secret. Keep it readable by the job's processes only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    /// Where training's all-reduce runs.
    #[serde(default)]
    pub allreduce: AllReduce,
    /// Two-level aggregation: a leaf switch per rack under the spine at `switch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<Fabric>,
    /// The switch is a chip of this preset (`tofino1-32`, `tofino1-64`, `tofino2`) running the
    /// P4 program: the workers fetch nothing before a block has run for the chip's least time
    /// for it (the chip model's floor), since a recirculation-bound chip's sums come late,
    /// not lost. Default: none (a software switch, whose speed is not known ahead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chip: Option<String>,
}

fn default_job() -> u16 {
    1
}

fn default_mode() -> ExchangeKind {
    ExchangeKind::Switchgnn
}

impl JobFile {
    /// A loopback job: the switch at `switch`, workers on 127.0.0.1.
    pub fn loopback(plan: PathBuf, mode: ExchangeKind, switch: SocketAddr, world: u16) -> JobFile {
        JobFile {
            job: default_job(),
            plan,
            dataset: None,
            mode,
            exchange_via: ExchangeVia::Switch,
            switch,
            world,
            bind: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            collective: None,
            transport: TransportKind::Udp,
            dpdk: DpdkSettings::default(),
            timeouts: Timeouts::default(),
            link: Link::default(),
            faults: ShimConfig::default(),
            secret_file: None,
            allreduce: AllReduce::default(),
            fabric: None,
            chip: None,
        }
    }

    /// The exchange's name in reports and on the command line: `tcp` for the host exchange
    /// over TCP, else the kind's.
    pub fn exchange_name(&self) -> &'static str {
        match self.exchange_via {
            ExchangeVia::Tcp => "tcp",
            ExchangeVia::Switch => self.mode.name(),
        }
    }

    /// The switch's chip, when the job names one (checked by [`JobFile::validate`]).
    pub fn chip(&self) -> Option<Chip> {
        self.chip
            .as_deref()
            .and_then(|name| Chip::preset(name).ok())
    }

    /// The worker-to-rack map of a two-level job (`None` without a `[fabric]` section).
    pub fn racks(&self) -> Result<Option<Racks>, JobError> {
        let Some(fabric) = &self.fabric else {
            return Ok(None);
        };
        let leaves = u16::try_from(fabric.leaves.len()).unwrap_or(u16::MAX);
        let racks = match &fabric.racks {
            Some(map) if map.len() != usize::from(self.world) => {
                return Err(JobError::Invalid(format!(
                    "fabric.racks names {} ranks, the job has world = {}",
                    map.len(),
                    self.world
                )))
            }
            Some(map) => Racks::new(map.clone()),
            None => Racks::even(self.world, leaves),
        }
        .map_err(|e| JobError::Invalid(format!("fabric: {e}")))?;
        if racks.racks() != leaves {
            return Err(JobError::Invalid(format!(
                "fabric: {} leaves for {} racks",
                fabric.leaves.len(),
                racks.racks()
            )));
        }
        Ok(Some(racks))
    }

    /// Where a worker that joined the switch at `switch` finds the all-reduce service: the
    /// job's `collective` address, else beside the spine on a two-level fabric (`switch` is a
    /// leaf there), else beside `switch`.
    pub fn collective_at(&self, switch: SocketAddr) -> SocketAddr {
        match (self.collective, &self.fabric) {
            (Some(addr), _) => addr,
            (None, Some(_)) => self.switch,
            (None, None) => switch,
        }
    }

    /// Where worker `rank` joins: its rack's leaf switch on a two-level fabric, else the
    /// switch.
    pub fn switch_of(&self, rank: u16) -> SocketAddr {
        match (self.racks(), &self.fabric) {
            (Ok(Some(racks)), Some(fabric)) if rank < self.world => {
                fabric.leaves[usize::from(racks.rack_of(rank))]
            }
            _ => self.switch,
        }
    }

    /// Read and check a job file; a relative plan path is taken from the file's folder.
    pub fn read(path: &Path) -> Result<JobFile, JobError> {
        let text = std::fs::read_to_string(path).map_err(|source| JobError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut job: JobFile = toml::from_str(&text).map_err(|e| JobError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if let Some(dir) = path.parent() {
            if job.plan.is_relative() {
                job.plan = dir.join(&job.plan);
            }
            if let Some(secret) = job.secret_file.as_mut().filter(|s| s.is_relative()) {
                *secret = dir.join(&*secret);
            }
        }
        job.validate().map_err(|e| JobError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        Ok(job)
    }

    /// The admission secret of `secret_file`, read now.
    pub fn secret(&self) -> Result<Option<Secret>, JobError> {
        let Some(path) = &self.secret_file else {
            return Ok(None);
        };
        let mut bytes = std::fs::read(path).map_err(|source| JobError::Read {
            path: path.clone(),
            source,
        })?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        Secret::new(bytes)
            .map(Some)
            .map_err(|why| JobError::Invalid(format!("secret_file {}: {why}", path.display())))
    }

    /// The transport the switch process and the workers open.
    pub fn transport(&self) -> Transport {
        match self.transport {
            TransportKind::Udp => Transport::Udp,
            TransportKind::Dpdk => Transport::Dpdk(self.dpdk.clone()),
        }
    }

    /// The job file's text (what `read` reads back).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("job files serialise")
    }

    /// Settings that cannot work, named.
    pub fn validate(&self) -> Result<(), JobError> {
        let invalid = |message: String| Err(JobError::Invalid(message));
        if self.world == 0 {
            return invalid("`world` must be at least 1".into());
        }
        match self.transport {
            TransportKind::Udp => {}
            TransportKind::Dpdk if !self.transport.is_available() => {
                return invalid(
                    "transport \"dpdk\" needs a build with DPDK: cargo build --release \
                     --features dpdk (and Debian's libdpdk-dev)"
                        .into(),
                );
            }
            TransportKind::Dpdk => {
                if !self.switch.is_ipv4()
                    || self.switch.ip().is_unspecified()
                    || self.switch.port() == 0
                {
                    return invalid(format!(
                        "transport \"dpdk\" needs the switch's own IPv4 address and port (no \
                         kernel picks them): {} is not one",
                        self.switch
                    ));
                }
                self.dpdk.validate(self.world)?;
            }
        }
        if !self.link.gbps.is_finite() || self.link.gbps <= 0.0 {
            return invalid(format!("link.gbps = {} must be positive", self.link.gbps));
        }
        let mtus = HostFraming::MIN_MTU..=HostFraming::MAX_MTU;
        if !mtus.contains(&self.link.mtu) {
            return invalid(format!(
                "link.mtu = {} must be between {} and {} bytes",
                self.link.mtu,
                mtus.start(),
                mtus.end()
            ));
        }
        if self.link.ack_every == 0 {
            return invalid("link.ack_every must be at least 1".to_string());
        }
        if let Some(name) = &self.chip {
            if let Err(e) = Chip::preset(name) {
                return invalid(format!("chip: {e}"));
            }
            if self.fabric.is_some() {
                return invalid(
                    "chip: not with [fabric] (the workers' floors for a two-level fabric are                      computed in the simulator only)"
                        .into(),
                );
            }
        }
        if self.link.window == 0 {
            return invalid("link.window must be at least 1".into());
        }
        let slots = self.allreduce.slots;
        if slots == 0 || slots > switchgnn_dataplane::switch::MAX_SLOTS {
            return invalid(format!(
                "allreduce.slots = {slots} must be between 1 and {}",
                switchgnn_dataplane::switch::MAX_SLOTS
            ));
        }
        let t = &self.timeouts;
        if [t.join_ms, t.peer_ms, t.rto_us, t.control_us, t.result_us].contains(&0) {
            return invalid("every timeout must be positive".into());
        }
        if self.fabric.is_some() && self.transport != TransportKind::Udp {
            return invalid("a [fabric] (leaf and spine switches) runs over UDP only".into());
        }
        if self.exchange_via == ExchangeVia::Tcp {
            // The TCP exchange carries the host exchange's copies; its workers meet through
            // the collective service on the switch's own address.
            if self.mode != ExchangeKind::Host {
                return invalid(format!(
                    "exchange_via = \"tcp\" carries the host exchange's copies: it needs mode = \
                     \"host\", not \"{}\"",
                    self.mode.name()
                ));
            }
            if self.transport != TransportKind::Udp || self.fabric.is_some() {
                return invalid(
                    "exchange_via = \"tcp\" is supported with transport = \"udp\" and one switch \
                     only (no [fabric])"
                        .into(),
                );
            }
            let f = &self.faults;
            if f.loss > 0.0 || f.duplicate > 0.0 || f.reorder > 0.0 {
                return invalid(
                    "[faults] act on UDP datagrams; exchange_via = \"tcp\" sends none (the \
                     kernel's TCP recovers its own losses): run it without faults"
                        .into(),
                );
            }
        }
        self.racks()?;
        self.faults
            .validate()
            .map_err(|e| JobError::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_ecn_threshold_is_a_queueing_delay_unless_set() {
        let at = |gbps: f64| Link {
            gbps,
            ..Link::default()
        };
        // 50 µs of the link rate, at least 64 KiB.
        assert_eq!(at(10.0).ecn_threshold(), ECN_THRESHOLD_FLOOR);
        assert_eq!(at(100.0).ecn_threshold(), 625_000);
        assert_eq!(at(1000.0).ecn_threshold(), 6_250_000);
        // A depth the job (or the P4 tables) sets is kept as it is.
        let set = Link {
            ecn_threshold_bytes: Some(4096),
            ..at(1000.0)
        };
        assert_eq!(set.ecn_threshold(), 4096);
    }

    #[test]
    fn rank_sources() {
        let none = env_of(&[]);
        assert_eq!(resolve_rank(Some(2), 4, &none).unwrap(), 2);
        assert!(resolve_rank(None, 4, &none).is_err());
        assert!(resolve_rank(Some(4), 4, &none).is_err());
        let slurm = env_of(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4"), ("RANK", "0")]);
        assert_eq!(resolve_rank(None, 4, &slurm).unwrap(), 3);
        // The command line wins over the environment.
        assert_eq!(resolve_rank(Some(1), 4, &slurm).unwrap(), 1);
        let torchrun = env_of(&[("RANK", "1"), ("WORLD_SIZE", "8")]);
        let err = resolve_rank(None, 4, &torchrun).unwrap_err().to_string();
        assert!(err.contains("WORLD_SIZE=8"), "{err}");
        let bad = env_of(&[("PMI_RANK", "x")]);
        assert!(resolve_rank(None, 4, &bad).is_err());
    }

    #[test]
    fn the_tcp_exchange_is_the_host_exchange_over_tcp_and_says_so() {
        assert_eq!(
            parse_exchange("tcp"),
            Some((ExchangeKind::Host, ExchangeVia::Tcp))
        );
        assert_eq!(
            parse_exchange("switch"),
            Some((ExchangeKind::Switchgnn, ExchangeVia::Switch))
        );
        assert_eq!(parse_exchange("udp"), None);
        let text = "plan = \"p\"\nswitch = \"127.0.0.1:1\"\nworld = 2\nmode = \"host\"\n\
                    exchange_via = \"tcp\"\n";
        let job: JobFile = toml::from_str(text).unwrap();
        job.validate().unwrap();
        assert_eq!(job.exchange_name(), "tcp");
        let back: JobFile = toml::from_str(&job.to_toml()).unwrap();
        assert_eq!(back, job);
        // Every kind reads back by the name the command line gives it.
        for kind in ExchangeKind::ALL {
            let text = format!(
                "plan = \"p\"\nswitch = \"127.0.0.1:1\"\nworld = 2\nmode = \"{}\"\n",
                kind.name()
            );
            let job: JobFile = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(job.mode, kind);
            assert_eq!(toml::from_str::<JobFile>(&job.to_toml()).unwrap(), job);
        }
        // A plain job file says nothing of it.
        let plain = JobFile::loopback(PathBuf::from("p"), ExchangeKind::Host, job.switch, 2);
        assert!(!plain.to_toml().contains("exchange_via"));
        assert_eq!(plain.exchange_name(), "host");
        let switchgnn = JobFile {
            mode: ExchangeKind::Switchgnn,
            ..job.clone()
        };
        let err = switchgnn.validate().unwrap_err().to_string();
        assert!(err.contains("needs mode = \"host\""), "{err}");
        let lossy = JobFile {
            faults: ShimConfig {
                loss: 0.01,
                ..ShimConfig::default()
            },
            ..job.clone()
        };
        let err = lossy.validate().unwrap_err().to_string();
        assert!(err.contains("without faults"), "{err}");
        let dpdk = JobFile {
            transport: TransportKind::Dpdk,
            switch: "10.0.0.1:7000".parse().unwrap(),
            ..job
        };
        if dpdk.transport.is_available() {
            let err = dpdk.validate().unwrap_err().to_string();
            assert!(err.contains("transport = \"udp\""), "{err}");
        }
    }

    #[test]
    fn job_file_round_trip_and_errors() {
        let dir = std::env::temp_dir().join(format!("sgnn-job-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let job = JobFile::loopback(
            PathBuf::from("plan"),
            ExchangeKind::Host,
            "127.0.0.1:4700".parse().unwrap(),
            4,
        );
        let path = dir.join("job.toml");
        std::fs::write(&path, job.to_toml()).unwrap();
        let back = JobFile::read(&path).unwrap();
        assert_eq!(back.plan, dir.join("plan"));
        assert_eq!(back.mode, ExchangeKind::Host);
        assert_eq!(back.world, 4);

        std::fs::write(
            &path,
            "plan = \"p\"\nswitch = \"127.0.0.1:1\"\nworld = 2\ncolour = 1\n",
        )
        .unwrap();
        let err = JobFile::read(&path).unwrap_err().to_string();
        assert!(err.contains("job.toml") && err.contains("colour"), "{err}");
        std::fs::write(
            &path,
            "plan = \"p\"\nswitch = \"127.0.0.1:1\"\nworld = 2\n[faults]\nloss = 1.5\n",
        )
        .unwrap();
        let err = JobFile::read(&path).unwrap_err().to_string();
        assert!(err.contains("loss"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fabric_names_each_workers_leaf_or_is_refused_by_name() {
        let text = "plan = \"p\"\nswitch = \"10.0.0.9:7000\"\nworld = 4\n[fabric]\n\
                    leaves = [\"10.0.0.1:7000\", \"10.0.1.1:7000\"]\n";
        let job: JobFile = toml::from_str(text).unwrap();
        job.validate().unwrap();
        // Consecutive ranks by default: 0 and 1 under the first leaf, 2 and 3 the second.
        let leaf = |r| job.switch_of(r).to_string();
        assert_eq!(
            [leaf(0), leaf(1), leaf(2), leaf(3)],
            [
                "10.0.0.1:7000",
                "10.0.0.1:7000",
                "10.0.1.1:7000",
                "10.0.1.1:7000"
            ]
        );
        // The all-reduce service is beside the spine, whatever leaf a worker joined.
        assert_eq!(job.collective_at(job.switch_of(3)), job.switch);
        let mapped: JobFile = toml::from_str(&format!("{text}racks = [1, 0, 1, 0]\n")).unwrap();
        assert_eq!(mapped.switch_of(0).to_string(), "10.0.1.1:7000");
        for (extra, says) in [
            ("racks = [0, 1]\n", "names 2 ranks"),
            ("racks = [0, 0, 0, 0]\n", "2 leaves for 1 racks"),
            ("racks = [0, 0, 2, 2]\n", "rack 1 has no worker"),
        ] {
            let bad: JobFile = toml::from_str(&format!("{text}{extra}")).unwrap();
            let err = bad.validate().unwrap_err().to_string();
            assert!(err.contains(says), "{extra}: {err}");
        }
        let one: JobFile = toml::from_str(&text.replace("world = 4", "world = 1")).unwrap();
        assert!(one
            .validate()
            .unwrap_err()
            .to_string()
            .contains("cannot fill 2 racks"));
    }

    #[test]
    fn a_named_chip_is_a_preset_and_not_beside_a_fabric() {
        let text = "plan = \"p\"\nswitch = \"10.0.0.9:7000\"\nworld = 4\nchip = \"tofino1-32\"\n";
        let job: JobFile = toml::from_str(text).unwrap();
        job.validate().unwrap();
        assert_eq!(job.chip(), Some(Chip::preset("tofino1-32").unwrap()));
        let plain: JobFile = toml::from_str(&text.replace("chip = \"tofino1-32\"\n", "")).unwrap();
        assert_eq!(plain.chip(), None);
        let bad: JobFile = toml::from_str(&text.replace("tofino1-32", "tofino9")).unwrap();
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("chip") && err.contains("tofino9"), "{err}");
        let fabric = format!("{text}[fabric]\nleaves = [\"10.0.0.1:7000\", \"10.0.1.1:7000\"]\n");
        let both: JobFile = toml::from_str(&fabric).unwrap();
        let err = both.validate().unwrap_err().to_string();
        assert!(err.contains("not with [fabric]"), "{err}");
    }

    #[test]
    fn a_dpdk_job_file_is_read_or_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        std::fs::write(
            &path,
            "plan = \"p\"\nswitch = \"10.0.0.1:47000\"\nworld = 2\ntransport = \"dpdk\"\n\
             [dpdk]\nmemif = \"/tmp/x.sock\"\nring = 1000\n",
        )
        .unwrap();
        let err = JobFile::read(&path).unwrap_err().to_string();
        if cfg!(feature = "dpdk") {
            assert!(err.contains("power of two"), "{err}");
        } else {
            assert!(err.contains("--features dpdk"), "{err}");
        }
        std::fs::write(
            &path,
            "plan = \"p\"\nswitch = \"10.0.0.1:47000\"\nworld = 2\ntransport = \"tcp\"\n",
        )
        .unwrap();
        let err = JobFile::read(&path).unwrap_err().to_string();
        assert!(err.contains("tcp"), "{err}");
    }

    #[test]
    fn a_link_fits_a_datapath_by_its_packed_datagrams() {
        let jumbo = Link {
            mtu: 9_000,
            ..Link::default()
        };
        // The kernel's datapath takes a jumbo frame's payload; DPDK's 2 KiB buffers do not.
        assert!(jumbo
            .fits_datapath(switchgnn_net::MAX_DATAGRAM, "w")
            .is_ok());
        let err = jumbo
            .fits_datapath(2_048 - 42, "worker 3")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("8972 bytes") && err.contains("worker 3's") && err.contains("--mtu"),
            "{err}"
        );
        assert!(Link::default().fits_datapath(1_472, "w").is_ok());
        assert!(Link::default().fits_datapath(1_471, "w").is_err());
    }
}
