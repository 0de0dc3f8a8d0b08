//! Where a job sits on the switch: dev ports of its workers, their addresses, and the ids the
//! control plane gives its multicast groups, mirror sessions and register regions.

use std::net::Ipv4Addr;
use std::path::Path;

use serde::Deserialize;
use thiserror::Error;

use crate::program;

/// Why a job's port map cannot be installed: it does not fit the program or the workers, or
/// the hosts file that gives it is unreadable.
#[derive(Debug, Error)]
pub enum PortMapError {
    /// The map breaks one of the program's layout rules; the text says which and how to fix it.
    #[error("{0}")]
    Layout(String),
    /// The hosts file could not be read, or a record of it is malformed.
    #[error("{0}")]
    HostsFile(String),
}

/// A worker's (or the switch's) addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostAddress {
    /// 48-bit MAC.
    pub mac: u64,
    /// IPv4 address.
    pub ip: u32,
    /// UDP port.
    pub udp_port: u16,
}

impl HostAddress {
    /// The default address of worker `rank`: MAC 02:53:47:00:hi:lo, IP 10.0.hi.(lo+1) of
    /// rank + 1, UDP port 47000.
    pub fn default_for(rank: u16) -> HostAddress {
        let n = u32::from(rank) + 1;
        HostAddress {
            mac: 0x02_53_47_00_00_00 | u64::from(n),
            ip: u32::from(Ipv4Addr::new(10, 0, (n >> 8) as u8, n as u8)),
            udp_port: program::SG_UDP_PORT,
        }
    }
}

/// How a job is installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    /// The job's index in the barrier registers (`< MAX_JOBS`).
    pub job_slot: u16,
    /// First aggregator of the job's region.
    pub agg_base: u64,
    /// First seen word of the job's region.
    pub seen_base: u64,
    /// Dev port of each worker rank.
    pub ports: Vec<u16>,
    /// Addresses of each worker rank.
    pub hosts: Vec<HostAddress>,
    /// The switch's own addresses (the source of what it sends).
    pub switch: HostAddress,
    /// The internal recirculation port of the job's home pipe, where its first passes, seen
    /// words and barrier run.
    pub recirc_port: u16,
    /// Pipes whose registers hold the job's aggregators: `0..pipes`, each reached through its
    /// own recirculation paths.
    pub pipes: u8,
    /// Local port numbers put in loopback in each of those pipes (front-panel ports in MAC
    /// loopback, the same numbers in every pipe): recirculation paths besides the internal
    /// port. Empty: the internal ports only. The parser knows passes by these numbers in every
    /// pipe, so no worker's port may have one of them ([`Install::check`]).
    pub looped: Vec<u16>,
    /// Egress queue depth (bytes) above which a worker's port marks ECN.
    pub ecn_threshold_bytes: u64,
    /// The block go's multicast group; the job's pass groups follow it ([`Install::pass_group`]).
    /// It also carries the all-reduce's results, one copy per worker.
    pub go_group: u16,
    /// The in-switch all-reduce: slots of the job's region (a power of two; 0: none, and the
    /// workers then run it over tcp).
    pub allreduce_slots: u16,
    /// First aggregator of the region's banks in the home pipe (`None`: counted down from the
    /// top of the pipe as the bank words count up, `AGGREGATORS − bank_base − 2·slots`, so that
    /// jobs with disjoint bank words get disjoint aggregators, above the exchange's).
    pub allreduce_agg_base: Option<u64>,
    /// First word of the region in the bank registers (`None`: `job_slot · 2·slots`, disjoint
    /// for jobs of distinct slots and equal sizes).
    pub allreduce_bank_base: Option<u64>,
}

/// The pipe of a dev port (Tofino numbers ports `pipe << 7 | local`).
pub fn pipe_of(port: u64) -> u8 {
    (port >> 7) as u8
}

pub use switchgnn_chip::paths::pipe_mask;

/// The copies a pass sends on, which a pass group replicates when there are several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Copies {
    /// Other pipes whose chains start here (bit `p`: pipe `p`); only pass 0 fans out.
    pub fanout: u8,
    /// A copy that reads the finished sum out (or forwards the contribution raw).
    pub emits: bool,
    /// The next pass of this pipe's chain.
    pub continues: bool,
}

impl Copies {
    /// What a pass of a chain sends on (`aggregation.p4`): on the home pipe's pass 0 the
    /// fan-out, a readout copy if it `emits`, the next pass unless it is the chain's `last`.
    pub fn of_pass(first_in_home: bool, fanout: u8, emits: bool, last: bool) -> Copies {
        Copies {
            fanout: if first_in_home { fanout } else { 0 },
            emits,
            continues: !last,
        }
    }

    /// Whether the copies go through a pass group (otherwise one unicast, or none).
    pub fn need_group(&self) -> bool {
        self.fanout != 0 || (self.emits && self.continues)
    }

    /// The group id as `aggregation.p4` computes it from the job's first pass group `base`:
    /// `base + pipe · 64 + fanout · 4 + emits · 2 + continues`.
    pub fn group_id(&self, base: u16, pipe: u8) -> u16 {
        base + (u16::from(pipe) << 6)
            + (u16::from(self.fanout) << 2)
            + (u16::from(self.emits) << 1)
            + u16::from(self.continues)
    }
}

impl Install {
    /// Defaults for `workers` workers: Tofino 1 ports in front-panel order (100G ports
    /// 0, 4, 8, ... of each pipe up to 64 workers, every 25G lane beyond), default addresses,
    /// pipe 0's recirculation port, the job file's 64 KiB ECN threshold, slot 0.
    pub fn defaults(workers: u16) -> Install {
        Install {
            job_slot: 0,
            agg_base: 0,
            seen_base: 0,
            ports: tofino1_ports(workers),
            hosts: (0..workers).map(HostAddress::default_for).collect(),
            switch: HostAddress {
                mac: 0x02_53_47_ff_ff_ff,
                ip: u32::from(Ipv4Addr::new(10, 0, 255, 254)),
                udp_port: program::SG_UDP_PORT,
            },
            recirc_port: program::RECIRC_PORTS[0],
            pipes: program::MAX_PIPES,
            looped: Vec::new(),
            ecn_threshold_bytes: 64 * 1024,
            go_group: 1,
            allreduce_slots: 0,
            allreduce_agg_base: None,
            allreduce_bank_base: None,
        }
    }

    /// The all-reduce region's banks: their first aggregator in the home pipe and first bank
    /// word, `2·slots` of each; `None` without an all-reduce.
    pub fn allreduce_region(&self) -> Option<(u64, u64, u64)> {
        let banks = 2 * u64::from(self.allreduce_slots);
        (banks > 0).then(|| {
            let bank = self
                .allreduce_bank_base
                .unwrap_or(u64::from(self.job_slot) * banks);
            let agg = self
                .allreduce_agg_base
                .unwrap_or(program::AGGREGATORS.saturating_sub(bank + banks));
            (agg, bank, banks)
        })
    }

    /// Where the exchange's aggregators of `pipe` must end: the pipe's last aggregator, or in
    /// the home pipe the all-reduce region when it lies above `agg_base`.
    pub fn aggregator_top(&self, pipe: u8) -> u64 {
        match self.allreduce_region() {
            Some((agg, _, _)) if pipe == self.home_pipe() && agg >= self.agg_base => agg,
            _ => program::AGGREGATORS,
        }
    }

    /// The job's home pipe: that of its recirculation port.
    pub fn home_pipe(&self) -> u8 {
        pipe_of(u64::from(self.recirc_port))
    }

    /// The first of the job's pass groups, right after its block go.
    pub fn pass_groups(&self) -> u16 {
        self.go_group + 1
    }

    /// The local port number of each recirculation path: the internal port's (path 0), then
    /// the looped ones.
    pub fn path_locals(&self) -> Vec<u16> {
        std::iter::once(program::RECIRC_LOCAL)
            .chain(self.looped.iter().copied())
            .collect()
    }

    /// Every dev port put in loopback: the looped local numbers in each pipe the job uses.
    pub fn looped_ports(&self) -> Vec<u16> {
        (0..self.pipes)
            .flat_map(|p| self.looped.iter().map(move |&l| u16::from(p) << 7 | l))
            .collect()
    }

    /// The multicast group a pass in `pipe` on recirculation path `path` uses for `copies`.
    pub fn pass_group(&self, path: u8, pipe: u8, copies: Copies) -> u16 {
        copies.group_id(self.pass_groups(), pipe) + u16::from(path) * program::PASS_GROUPS_PER_PATH
    }

    /// Multicast group ids the job takes: its block go and a set of pass groups per path.
    pub fn group_ids(&self) -> u32 {
        1 + (1 + self.looped.len() as u32) * u32::from(program::PASS_GROUPS_PER_PATH)
    }

    /// Put `ports` front-panel ports in loopback, `ports / pipes` in each pipe the job uses:
    /// the lowest 100G port numbers (every fourth local number below 64, a Tofino 1 pipe's
    /// front panel) that no worker's port has in any pipe.
    pub fn loop_ports(&mut self, ports: u32) -> Result<(), PortMapError> {
        let pipes = u32::from(self.pipes.max(1));
        if ports % pipes != 0 {
            return Err(PortMapError::Layout(format!(
                "{ports} looped ports over {pipes} pipes: the program loops the same local port \
                 numbers in every pipe, so give a multiple of {pipes}"
            )));
        }
        let per_pipe = (ports / pipes) as usize;
        let used: Vec<u16> = self.ports.iter().map(|p| p & 0x7f).collect();
        let free: Vec<u16> = (0..64).step_by(4).filter(|l| !used.contains(l)).collect();
        if free.len() < per_pipe {
            return Err(PortMapError::Layout(format!(
                "{ports} looped ports need {per_pipe} local port numbers free in every pipe, and \
                 the workers' ports leave {} ({free:?}); spread the workers over the pipes \
                 (--hosts) or loop fewer",
                free.len()
            )));
        }
        self.looped = free[..per_pipe].to_vec();
        Ok(())
    }

    /// The acknowledgement mirror session towards a worker: one per dev port, shared by jobs.
    pub fn ack_session(&self, worker: u16) -> u16 {
        self.ports[usize::from(worker)] + 1
    }

    /// Check the map against the program and `workers` workers: ports distinct and in range,
    /// the recirculation port an internal one, pipes, looped ports, groups and the all-reduce
    /// region within the program's limits.
    pub fn check(&self, workers: u16) -> Result<(), PortMapError> {
        let n = usize::from(workers);
        if self.ports.len() != n || self.hosts.len() != n {
            return Err(PortMapError::Layout(format!(
                "{} ports and {} host addresses for {workers} workers",
                self.ports.len(),
                self.hosts.len()
            )));
        }
        let mut seen = self.ports.clone();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != n {
            return Err(PortMapError::Layout("two workers share a port".into()));
        }
        if let Some(p) = self
            .ports
            .iter()
            .chain([&self.recirc_port])
            .find(|&&p| p >= 512)
        {
            return Err(PortMapError::Layout(format!(
                "port {p} does not fit the 9-bit port id"
            )));
        }
        if !program::RECIRC_PORTS.contains(&self.recirc_port) {
            return Err(PortMapError::Layout(format!(
                "recirculation port {} is not a pipe's internal one ({:?}): the parser knows \
                 recirculated passes by those ports",
                self.recirc_port,
                program::RECIRC_PORTS
            )));
        }
        if self.pipes == 0 || self.pipes > program::MAX_PIPES {
            return Err(PortMapError::Layout(format!(
                "{} pipes: the program spreads aggregators over 1 to {}",
                self.pipes,
                program::MAX_PIPES
            )));
        }
        if self.home_pipe() >= self.pipes {
            return Err(PortMapError::Layout(format!(
                "the home pipe {} (of recirculation port {}) is not one of the {} pipes used",
                self.home_pipe(),
                self.recirc_port,
                self.pipes
            )));
        }
        self.check_looped()?;
        if self.go_group == 0 || u32::from(self.go_group) + self.group_ids() > 65536 {
            return Err(PortMapError::Layout(format!(
                "multicast groups from {}: a job's {} group ids (its block go and {} pass groups \
                 for each of its {} recirculation paths) must lie in 1..=65535",
                self.go_group,
                self.group_ids(),
                program::PASS_GROUPS_PER_PATH,
                1 + self.looped.len()
            )));
        }
        let slots = u64::from(self.allreduce_slots);
        if slots > 0 && (!slots.is_power_of_two() || slots > program::MAX_ALLREDUCE_SLOTS) {
            return Err(PortMapError::Layout(format!(
                "{slots} all-reduce slots: the program takes a power of two up to {} (it finds \
                 a slice's slot and bank with bit masks)",
                program::MAX_ALLREDUCE_SLOTS
            )));
        }
        if let Some((agg, bank, banks)) = self.allreduce_region() {
            if agg < self.agg_base && agg + banks > self.agg_base {
                return Err(PortMapError::Layout(format!(
                    "the all-reduce region (aggregators {agg}..{}) overlaps the exchange's, \
                     which start at {}",
                    agg + banks,
                    self.agg_base
                )));
            }
            if agg + banks > program::AGGREGATORS || bank + banks > program::REDUCE_BANKS {
                return Err(PortMapError::Layout(format!(
                    "the all-reduce region ({banks} banks at aggregator {agg}, bank word {bank}) \
                     goes past the program's {} aggregators per pipe or {} bank words \
                     (--allreduce-bank-base, --allreduce-base, fewer --allreduce-slots)",
                    program::AGGREGATORS,
                    program::REDUCE_BANKS
                )));
            }
        }
        Ok(())
    }

    /// The looped local numbers: distinct, at most the value set's size, 7-bit, not the internal
    /// port's, and no worker's (the parser would take that worker's packets for passes).
    pub(crate) fn check_looped(&self) -> Result<(), PortMapError> {
        let mut distinct = self.looped.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != self.looped.len() {
            return Err(PortMapError::Layout(
                "a looped port number is given twice".into(),
            ));
        }
        if self.looped.len() as u64 > program::LOOPED_LOCALS {
            return Err(PortMapError::Layout(format!(
                "{} looped ports per pipe: the parser's value set holds {}",
                self.looped.len(),
                program::LOOPED_LOCALS
            )));
        }
        for &l in &self.looped {
            if l > 0x7f || l == program::RECIRC_LOCAL {
                return Err(PortMapError::Layout(format!(
                    "looped port number {l} is not a front-panel port's local number (below 128, \
                     not the internal port {})",
                    program::RECIRC_LOCAL
                )));
            }
            if let Some(w) = self.ports.iter().position(|p| p & 0x7f == l) {
                return Err(PortMapError::Layout(format!(
                    "the port map loops local port {l} in every pipe, and worker {w} uses dev \
                     port {} (local {l}): the parser would take its packets for passes",
                    self.ports[w]
                )));
            }
        }
        Ok(())
    }

    /// Read worker ports and addresses from a CSV file with the header
    /// `rank,port,mac,ip,udp_port` (one row per worker, every rank once).
    pub fn read_hosts(&mut self, path: &Path, workers: u16) -> Result<(), PortMapError> {
        #[derive(Deserialize)]
        struct Row {
            rank: u16,
            port: u16,
            mac: String,
            ip: Ipv4Addr,
            udp_port: u16,
        }
        let err = |m: String| PortMapError::HostsFile(format!("{}: {m}", path.display()));
        let mut reader = csv::Reader::from_path(path).map_err(|e| err(e.to_string()))?;
        let mut ports = vec![None; usize::from(workers)];
        let mut hosts = vec![None; usize::from(workers)];
        for (i, row) in reader.deserialize::<Row>().enumerate() {
            let record = i + 2; // the header is line 1
            let row = row.map_err(|e| err(format!("record {record}: {e}")))?;
            let r = usize::from(row.rank);
            if r >= ports.len() || ports[r].is_some() {
                return Err(err(format!(
                    "record {record}: rank {} is out of range or repeated",
                    row.rank
                )));
            }
            let mac = parse_mac(&row.mac)
                .ok_or_else(|| err(format!("record {record}: bad MAC `{}`", row.mac)))?;
            ports[r] = Some(row.port);
            hosts[r] = Some(HostAddress {
                mac,
                ip: u32::from(row.ip),
                udp_port: row.udp_port,
            });
        }
        if let Some(r) = ports.iter().position(Option::is_none) {
            return Err(err(format!("no row for rank {r}")));
        }
        self.ports = ports.into_iter().flatten().collect();
        self.hosts = hosts.into_iter().flatten().collect();
        Ok(())
    }
}

/// `aa:bb:cc:dd:ee:ff` as a 48-bit number.
pub fn parse_mac(text: &str) -> Option<u64> {
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    parts.iter().try_fold(0u64, |acc, p| {
        (p.len() == 2)
            .then(|| u8::from_str_radix(p, 16).ok())
            .flatten()
            .map(|b| acc << 8 | u64::from(b))
    })
}

/// Dev ports of a 4-pipe Tofino 1 in front-panel order: the 16 100G ports of each pipe
/// (`pipe << 7 | 4·i`) while they suffice, else every 25G lane of breakout cables.
pub fn tofino1_ports(workers: u16) -> Vec<u16> {
    (0..workers)
        .map(|r| {
            if workers <= 64 {
                ((r / 16) << 7) | ((r % 16) * 4)
            } else {
                ((r / 64) << 7) | (r % 64)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_and_ports_are_distinct() {
        assert_eq!(parse_mac("02:53:47:00:01:0a"), Some(0x0253_4700_010a));
        assert_eq!(parse_mac("02:53:47:00:01"), None);
        assert_eq!(parse_mac("02:53:47:00:01:zz"), None);
        for w in [1, 32, 64, 65, 128, 256] {
            let mut p = tofino1_ports(w);
            assert!(p
                .iter()
                .all(|&x| x < 512 && !program::RECIRC_PORTS.contains(&x)));
            p.sort_unstable();
            p.dedup();
            assert_eq!(p.len(), usize::from(w));
        }
        assert_eq!(tofino1_ports(32)[16], 128);
    }
}
