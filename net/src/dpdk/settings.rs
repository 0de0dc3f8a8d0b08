//! How the processes of a job reach DPDK: the `[dpdk]` section of a job file as plain
//! settings, and what each process makes of them — its EAL arguments, its devices, its static
//! ARP table and the CPUs its lcore may use. Plain data: a build without the `dpdk` feature
//! reads and checks them too.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::frame::Mac;

/// DPDK settings that cannot work, named as the job file names them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DpdkSettingsError {
    /// An ARP entry whose Ethernet address does not parse.
    #[error("dpdk.arp: `{text}` (for {ip}) is not an Ethernet address like 02:00:00:00:00:01")]
    BadMac {
        /// The IPv4 address of the entry.
        ip: Ipv4Addr,
        /// What was given for its Ethernet address.
        text: String,
    },
    /// Fewer packet buffers than the per-core caches take.
    #[error("dpdk.mbufs = {0} is too few (at least 512: each core keeps a cache of 256)")]
    TooFewMbufs(u32),
    /// `workers` lists a different number of addresses than the job has workers.
    #[error("dpdk.workers names {given} addresses for {world} workers")]
    WorkerCount {
        /// Addresses listed.
        given: usize,
        /// The job's workers.
        world: u16,
    },
    /// Too few packet buffers to fill the receive ring and still send.
    #[error("dpdk.mbufs = {mbufs} cannot fill a receive ring of {ring} and still send")]
    MbufsBelowRing {
        /// Packet buffers in the pool.
        mbufs: u32,
        /// Descriptors of each ring.
        ring: u16,
    },
    /// DPDK's rings take only powers of two.
    #[error("dpdk.ring = {0} must be a power of two")]
    RingNotPowerOfTwo(u16),
}

/// Who opens a DPDK datapath: its devices and EAL file prefix differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The switch process: one port per worker where memif makes them.
    Switch,
    /// The worker of this rank.
    Worker(u16),
}

/// How the processes of a job reach DPDK. Every process of the job reads the same section;
/// `{rank}` in an EAL argument or a device becomes the worker's rank (`switch` at the switch),
/// and a switch device naming `{worker}` is repeated once per worker.
///
/// A device whose name starts with `net_` is a virtual device (EAL `--vdev`), anything else a
/// PCI address to use (EAL `-a`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DpdkSettings {
    /// EAL arguments of every process (e.g. `--no-huge`, `-m 512`, `--no-pci`). Unless given,
    /// a file prefix of its own per process, and an lcore that may run on any CPU (so that
    /// several processes on one machine do not share a core).
    pub eal: Vec<String>,
    /// A memif socket path: the switch serves one memif interface per worker on it (ids
    /// 0..world), each worker connects to it as a client with its rank as id.
    pub memif: Option<PathBuf>,
    /// Devices of the switch process.
    pub switch_devices: Vec<String>,
    /// Devices of each worker process.
    pub worker_devices: Vec<String>,
    /// The workers' IPv4 addresses by rank. Default: the switch's IP, port switch + 1 + rank —
    /// enough where workers are told apart by port (memif, veth pairs on one machine); a
    /// cluster names each host's address.
    pub workers: Vec<SocketAddrV4>,
    /// Static ARP: the Ethernet address of an IPv4 address. A peer not listed is reached at
    /// the address its last frame came from, and before any frame at the broadcast address.
    pub arp: BTreeMap<Ipv4Addr, String>,
    /// Packet buffers in each process's pool.
    pub mbufs: u32,
    /// Descriptors of each receive and send ring.
    pub ring: u16,
}

impl Default for DpdkSettings {
    fn default() -> Self {
        DpdkSettings {
            eal: Vec::new(),
            memif: None,
            switch_devices: Vec::new(),
            worker_devices: Vec::new(),
            workers: Vec::new(),
            arp: BTreeMap::new(),
            mbufs: 16_383,
            ring: 1024,
        }
    }
}

impl DpdkSettings {
    /// Whether nothing was set (a job file then leaves the section out).
    pub fn is_default(&self) -> bool {
        *self == DpdkSettings::default()
    }

    /// The address of worker `rank` of a job whose switch is at `switch`.
    pub fn worker_addr(&self, rank: u16, switch: SocketAddrV4) -> SocketAddrV4 {
        self.workers
            .get(usize::from(rank))
            .copied()
            .unwrap_or_else(|| {
                SocketAddrV4::new(*switch.ip(), switch.port().wrapping_add(1 + rank))
            })
    }

    /// Whether the `eal` arguments give one of the options `names`: as `--name`,
    /// `--name=value`, or a short option with its value attached (`-l3`).
    fn gives(&self, names: &[&str]) -> bool {
        self.eal.iter().any(|a| {
            names.iter().any(|n| {
                a == n
                    || a.starts_with(&format!("{n}="))
                    || (!n.starts_with("--") && a.starts_with(n))
            })
        })
    }

    /// Whether each process gets an EAL file prefix of its own (its pid in it): unless the
    /// `eal` arguments name one or run in memory. The process's runtime folder is then its own.
    pub fn makes_own_prefix(&self) -> bool {
        !self.gives(&["--file-prefix", "--in-memory"])
    }

    /// The EAL arguments (after the program name) of `role` in a job of `world` workers.
    pub fn eal_args(&self, job: u16, world: u16, role: Role) -> Vec<String> {
        let who = match role {
            Role::Switch => "switch".to_string(),
            Role::Worker(r) => r.to_string(),
        };
        let fill = |s: &str| s.replace("{rank}", &who);
        let mut args: Vec<String> = self.eal.iter().map(|a| fill(a)).collect();
        if self.makes_own_prefix() {
            args.push(format!(
                "--file-prefix=switchgnn-{job}-{who}-{}",
                std::process::id()
            ));
        }
        if !self.gives(&["-l", "-c", "--lcores"]) {
            args.push(format!("--lcores=0@({})", allowed_cpus()));
        }
        let mut devices = Vec::new();
        match role {
            Role::Switch => {
                if let Some(path) = &self.memif {
                    for w in 0..world {
                        devices.push(format!(
                            "net_memif{w},role=server,id={w},socket={}",
                            path.display()
                        ));
                    }
                }
                for d in &self.switch_devices {
                    if d.contains("{worker}") {
                        devices.extend((0..world).map(|w| d.replace("{worker}", &w.to_string())));
                    } else {
                        devices.push(fill(d));
                    }
                }
            }
            Role::Worker(rank) => {
                if let Some(path) = &self.memif {
                    devices.push(format!(
                        "net_memif0,role=client,id={rank},socket={}",
                        path.display()
                    ));
                }
                devices.extend(self.worker_devices.iter().map(|d| fill(d)));
            }
        }
        for d in devices {
            if d.starts_with("net_") {
                args.push(format!("--vdev={d}"));
            } else {
                // A short option takes its value as the next argument.
                args.extend(["-a".to_string(), d]);
            }
        }
        args
    }

    /// The static ARP table, parsed.
    pub fn arp_table(&self) -> Result<BTreeMap<Ipv4Addr, Mac>, DpdkSettingsError> {
        self.arp
            .iter()
            .map(|(ip, text)| {
                parse_mac(text)
                    .map(|mac| (*ip, mac))
                    .ok_or_else(|| DpdkSettingsError::BadMac {
                        ip: *ip,
                        text: text.clone(),
                    })
            })
            .collect()
    }

    /// Settings that cannot work for a job of `world` workers, named.
    pub fn validate(&self, world: u16) -> Result<(), DpdkSettingsError> {
        self.arp_table()?;
        if self.mbufs < 512 {
            return Err(DpdkSettingsError::TooFewMbufs(self.mbufs));
        }
        if !self.workers.is_empty() && self.workers.len() != usize::from(world) {
            return Err(DpdkSettingsError::WorkerCount {
                given: self.workers.len(),
                world,
            });
        }
        if self.mbufs < 2 * u32::from(self.ring) {
            return Err(DpdkSettingsError::MbufsBelowRing {
                mbufs: self.mbufs,
                ring: self.ring,
            });
        }
        if !self.ring.is_power_of_two() {
            return Err(DpdkSettingsError::RingNotPowerOfTwo(self.ring));
        }
        Ok(())
    }
}

/// The CPUs this process may run on, as EAL's lcore syntax lists them (`0,1,4`): an lcore
/// allowed on all of them, rather than pinned to CPU 0, whatever cpuset the process got.
fn allowed_cpus() -> String {
    let cpus: Vec<String> = super::affinity::get()
        .map(|set| super::affinity::cpus(&set).map(|i| i.to_string()).collect())
        .unwrap_or_default();
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, usize::from);
        return format!("0-{}", n - 1);
    }
    cpus.join(",")
}

/// `aa:bb:cc:dd:ee:ff` (or with dashes).
pub fn parse_mac(text: &str) -> Option<Mac> {
    let parts: Vec<&str> = text.split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        if p.len() != 2 {
            return None;
        }
        *m = u8::from_str_radix(p, 16).ok()?;
    }
    Some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpdk_settings_become_each_process_eal_arguments() {
        let settings = DpdkSettings {
            eal: vec!["--no-huge".into(), "--log-level={rank}:info".into()],
            memif: Some(PathBuf::from("/tmp/j.sock")),
            switch_devices: vec!["net_af_packet{worker},iface=sw{worker}".into()],
            worker_devices: vec!["0000:3b:00.{rank}".into()],
            ..DpdkSettings::default()
        };
        let switch = settings.eal_args(1, 2, Role::Switch);
        assert!(switch.contains(&"--log-level=switch:info".to_string()));
        assert!(switch
            .iter()
            .any(|a| a.starts_with("--file-prefix=switchgnn-1-switch-")));
        assert!(switch.iter().any(|a| a.starts_with("--lcores=0@(")));
        for w in 0..2 {
            let memif = format!("--vdev=net_memif{w},role=server,id={w},socket=/tmp/j.sock");
            assert!(switch.contains(&memif), "{switch:?}");
            let veth = format!("--vdev=net_af_packet{w},iface=sw{w}");
            assert!(switch.contains(&veth), "{switch:?}");
        }
        let worker = settings.eal_args(1, 2, Role::Worker(1));
        assert!(worker.contains(&"--vdev=net_memif0,role=client,id=1,socket=/tmp/j.sock".into()));
        assert!(
            worker.ends_with(&["-a".to_string(), "0000:3b:00.1".to_string()]),
            "{worker:?}"
        );
        // A prefix or lcores the user gave are kept, not doubled.
        let own = DpdkSettings {
            eal: vec!["--in-memory".into(), "-l".into(), "3".into()],
            ..DpdkSettings::default()
        };
        let args = own.eal_args(1, 2, Role::Worker(0));
        assert_eq!(args, ["--in-memory", "-l", "3"]);
        let attached = DpdkSettings {
            eal: vec!["-l3".into(), "--file-prefix=mine".into()],
            ..DpdkSettings::default()
        };
        assert_eq!(
            attached.eal_args(1, 2, Role::Switch),
            ["-l3", "--file-prefix=mine"]
        );

        let switch_at: SocketAddrV4 = "10.0.0.1:47000".parse().unwrap();
        assert_eq!(
            own.worker_addr(1, switch_at),
            "10.0.0.1:47002".parse::<SocketAddrV4>().unwrap()
        );
        assert_eq!(parse_mac("02:00:0a:FF:00:01"), Some([2, 0, 10, 255, 0, 1]));
        for bad in ["02:00:0a:ff:00", "02:00:0a:ff:00:0g", "0200:0a:ff:00:01:02"] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
        let bad_arp = DpdkSettings {
            arp: [("10.0.0.1".parse().unwrap(), "nope".to_string())].into(),
            ..DpdkSettings::default()
        };
        let err = bad_arp.validate(2).unwrap_err().to_string();
        assert!(err.contains("nope") && err.contains("10.0.0.1"), "{err}");
    }
}
