//! The chips: public figures of Tofino 1 and 2, and the paper's ideal switch.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One public figure and where it comes from.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Source {
    /// What the figure is.
    pub figure: &'static str,
    /// Its value.
    pub value: &'static str,
    /// Where it is stated.
    pub source: &'static str,
}

/// The figures the presets use, each with its source.
pub const SOURCES: &[Source] = &[
    Source {
        figure: "Tofino 1 pipes, MAU stages per pipe",
        value: "4 pipes (64 x 100G part), 2 pipes (32 x 100G part); 12 stages",
        source: "p4lang/p4c backends/tofino device.h (getNumPipes 4, getNumStages 12); \
                 p4lang/p4app-switchML issue 19 (folding on a 2-pipe switch)",
    },
    Source {
        figure: "stateful ALUs per stage, lanes per ALU pass",
        value: "4; a 64-bit pair = two int32 lanes",
        source: "p4lang/p4c backends/tofino (METER_ALUS 4), mau/stateful_alu.cpp (MaxDualSize \
                 64); SwitchML adds 64 int32 lanes per pass with 32 pair registers",
    },
    Source {
        figure: "Tofino 1 packet rate",
        value: "1.22 GHz, one packet per clock per pipe",
        source: "p4lang/open-p4studio issue 64; p4c parde_spec.h",
    },
    Source {
        figure: "Tofino 1 internal recirculation ports",
        value: "100 Gb/s per port (a quad of channels); the 2-pipe part has 2 (dev ports \
                68-71, 196-199), the 4-pipe part 6 (68-71, 192-195, 196-199, 324-327, \
                448-451, 452-455); the program uses one per pipe",
        source: "Open-Tofino PUBLIC_Tofino-Native-Arch.pdf section 12.1, tables 8-9; \
                 p4lang/open-p4studio bf_pm_intf.h (bf_pm_recirc_devports_get); \
                 p4lang/p4app-switchML parsers.p4 and issue 33",
    },
    Source {
        figure: "front-panel ports in loopback",
        value: "any port, at its full rate",
        source: "barefootnetworks/Open-Tofino issue 23 (recirculation is sending to a port in \
                 loopback); SwitchML's folded pipe loops the ports of pipes 1-3",
    },
    Source {
        figure: "Tofino 2",
        value: "4 pipes, 20 stages, about 1.5 G packets/s per pipe, 12.8 Tb/s (32 x 400G, \
                128 x 100G with breakout)",
        source: "Intel Tofino 2 product brief; Hot Chips 32 (2020) Tofino2 presentation",
    },
    Source {
        figure: "Tofino 2 recirculation",
        value: "modelled as one 100 Gb/s port per pipe, the program's use: pipes 1-3 have \
                recirculation channels 0-7 of 50 Gb/s (pipe 0 fewer), but no public source \
                states a recirculation port's rate, so 400 Gb/s per pipe would be arithmetic",
        source: "p4lang/open-p4studio bf_pm_intf.h (bf_pm_recirc_devports_get)",
    },
    Source {
        figure: "readout of a finished 64-lane sum",
        value: "Tofino 1: a register action outputs one 32-bit word, so a pair register's two \
                lanes take two passes; Tofino 2: up to four words, so one pass (the tofino2 \
                preset models a program that returns both; p4/ returns one today)",
        source: "p4lang/p4c backends/tofino bf-p4c/mau/stateful_alu.cpp (output words 1 on \
                 Tofino, 4 on Tofino 2)",
    },
    Source {
        figure: "recirculated frames' preamble and inter-frame gap",
        value: "not counted: no public source says whether an internal port pays them \
                (with 20 bytes per pass a 64-lane pass would carry about 6% more)",
        source: "none found",
    },
    Source {
        figure: "host per-packet cost (the default 20 ns is an assumption)",
        value: "kernel stack about 0.7-1.3 us per packet; kernel bypass at least about 67 ns \
                per packet per core (14.88 Mpps); analyze --sweep-packet-ns shows the verdicts \
                over a range",
        source: "Rizzo, netmap (USENIX ATC 2012; ACM Queue 2012); FastClick (ANCS 2015)",
    },
];

/// The preset names.
pub const PRESETS: [&str; 4] = ["tofino1-32", "tofino1-64", "tofino2", "ideal"];

/// A chip preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Tofino 1, 32 ports of 100 Gb/s (2 pipes).
    #[serde(rename = "tofino1-32")]
    Tofino1x32,
    /// Tofino 1, 64 ports of 100 Gb/s (4 pipes).
    #[serde(rename = "tofino1-64")]
    Tofino1x64,
    /// Tofino 2, 32 ports of 400 Gb/s or 128 of 100 Gb/s (4 pipes).
    Tofino2,
    /// The paper's switch: passes and recirculation cost nothing.
    Ideal,
}

impl Preset {
    /// The preset's name, as options and reports give it.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Tofino1x32 => "tofino1-32",
            Preset::Tofino1x64 => "tofino1-64",
            Preset::Tofino2 => "tofino2",
            Preset::Ideal => "ideal",
        }
    }
}

impl std::str::FromStr for Preset {
    type Err = ChipError;

    fn from_str(name: &str) -> Result<Preset, ChipError> {
        Ok(Chip::preset(name)?.preset)
    }
}

/// Front-panel ports the P4 program loops back per pipe at most (`p4/include/parser.p4`, the
/// value set `looped_ports`).
pub const MAX_LOOPED_PER_PIPE: u32 = 31;

/// How a tool picks its chip: a preset by name, or the smallest real chip that hosts the
/// workers at their link rate; and the deployment's options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ChipChoice {
    /// The preset (`None`: the smallest real chip that hosts the workers).
    pub preset: Option<Preset>,
    /// Front-panel ports put in loopback.
    pub loopback_ports: u32,
    /// Dedicated recirculation ports used (`None`: all, one per pipe).
    pub recirculation_ports: Option<u32>,
    /// Put every front-panel port no worker needs in loopback (in place of `loopback_ports`):
    /// the chip's whole recirculation capacity for the job.
    #[serde(default)]
    pub spare_loopback: bool,
}

impl ChipChoice {
    /// The chip for `workers` hosts on links of `link_gbps`.
    pub fn resolve(&self, workers: u32, link_gbps: f64) -> Result<Chip, ChipError> {
        let looped = if self.spare_loopback {
            0
        } else {
            self.loopback_ports
        };
        let mut chip = match self.preset {
            Some(p) => Chip::preset(p.name())?,
            None => Chip::for_workers(workers, link_gbps, looped)?,
        };
        if let Some(n) = self.recirculation_ports {
            chip = chip
                .with_loopback_ports(0, link_gbps)?
                .with_recirculation_ports(n)?;
        }
        let looped = if self.spare_loopback && !chip.is_ideal() {
            // The P4 program loops the same local port numbers in every pipe it uses (at most
            // 31, its value set's size): the idle ports of a pipe, in each pipe used.
            (chip.ports_at(link_gbps).saturating_sub(workers) / chip.pipes).min(MAX_LOOPED_PER_PIPE)
                * chip.aggregator_pipes()
        } else {
            looped
        };
        chip = chip.with_loopback_ports(looped, link_gbps)?;
        if chip.worker_ports(link_gbps) < workers {
            return Err(ChipError::TooFewWorkerPorts {
                chip: chip.preset.name(),
                ports: chip.worker_ports(link_gbps),
                gbps: link_gbps,
                workers,
            });
        }
        Ok(chip)
    }
}

/// A switch chip, as far as an exchange's time is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Chip {
    /// The preset it was made from.
    pub preset: Preset,
    /// Independent pipelines.
    pub pipes: u32,
    /// Match-action stages per pipe.
    pub stages: u32,
    /// Stateful ALUs per stage.
    pub salus_per_stage: u32,
    /// int32 lanes one stateful ALU updates per pass.
    pub lanes_per_salu: u32,
    /// Packets (passes) per second one pipe processes.
    pub pass_rate_per_pipe: f64,
    /// Front-panel ports at the chip's largest port rate.
    pub max_ports: u32,
    /// Largest rate of one front-panel port, Gb/s.
    pub max_port_gbps: f64,
    /// Front-panel capacity, Gb/s (ports broken out share it).
    pub capacity_gbps: f64,
    /// Dedicated recirculation ports used: one per pipe, as the program uses them.
    pub recirculation_ports: u32,
    /// Internal recirculation ports the chip has (more than its pipes on a 4-pipe Tofino 1);
    /// the program reaches each pipe through one.
    pub internal_recirculation_ports: u32,
    /// Rate of one dedicated recirculation port, Gb/s.
    pub recirculation_gbps: f64,
    /// Front-panel ports put in loopback (at `loopback_port_gbps` each): more recirculation
    /// bandwidth, fewer ports for workers.
    pub loopback_ports: u32,
    /// Rate of a looped front-panel port, Gb/s.
    pub loopback_port_gbps: f64,
    /// A register action returns both words of a pair register, so a 64-lane sum is read out
    /// in one pass (Tofino 2), not two (Tofino 1).
    pub reads_pairs: bool,
}

/// Why a chip cannot be had.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ChipError {
    /// No such preset.
    #[error("unknown chip `{0}` (one of: tofino1-32, tofino1-64, tofino2, ideal)")]
    Unknown(String),
    /// Fewer ports of the link rate are left for workers (after loopback) than there are
    /// workers.
    #[error("{chip} has {ports} ports of {gbps} Gb/s for workers, fewer than {workers}")]
    TooFewWorkerPorts {
        /// The preset's name.
        chip: &'static str,
        /// Ports of `gbps` left for workers.
        ports: u32,
        /// The workers' link rate, Gb/s.
        gbps: f64,
        /// Workers asked for.
        workers: u32,
    },
    /// More front-panel ports asked to be put in loopback than the chip has at that rate.
    #[error("{chip} has {ports} ports of {gbps} Gb/s, fewer than the {looped} to put in loopback")]
    TooFewPortsToLoop {
        /// The preset's name.
        chip: &'static str,
        /// Ports the chip has at `gbps`.
        ports: u32,
        /// The looped ports' rate, Gb/s.
        gbps: f64,
        /// Ports asked to be looped.
        looped: u32,
    },
    /// More dedicated recirculation ports asked for than the chip has (one per pipe), or none.
    #[error("{chip} has {has} recirculation ports (one per pipe): use 1 to {has}, not {asked}")]
    TooManyRecirculationPorts {
        /// The preset's name.
        chip: &'static str,
        /// Recirculation ports the chip has.
        has: u32,
        /// Recirculation ports asked for.
        asked: u32,
    },
    /// Looped ports that do not spread evenly over the pipes used: the P4 program loops the
    /// same local port numbers in each of them.
    #[error(
        "{looped} looped ports over the {pipes} pipes {chip} uses: the program loops the same \
         port numbers in every pipe, so give a multiple of {pipes}"
    )]
    LoopedNotPerPipe {
        /// The preset's name.
        chip: &'static str,
        /// Ports asked to be looped.
        looped: u32,
        /// Pipes used (one recirculation port each).
        pipes: u32,
    },
    /// No real chip hosts this many workers at this rate.
    #[error(
        "no chip preset hosts {workers} workers at {gbps} Gb/s (tofino2 has 128 ports of 100 \
         Gb/s); pass --chip ideal to assume the paper's switch"
    )]
    TooManyWorkers {
        /// Workers asked for.
        workers: u32,
        /// Their link rate, Gb/s.
        gbps: f64,
    },
}

impl Chip {
    /// The preset called `name`.
    pub fn preset(name: &str) -> Result<Chip, ChipError> {
        let tofino1 = |preset, pipes: u32, internal_recirculation_ports| Chip {
            preset,
            pipes,
            stages: 12,
            salus_per_stage: 4,
            lanes_per_salu: 2,
            pass_rate_per_pipe: 1.22e9,
            max_ports: 16 * pipes,
            max_port_gbps: 100.0,
            capacity_gbps: 1600.0 * f64::from(pipes),
            recirculation_ports: pipes,
            internal_recirculation_ports,
            recirculation_gbps: 100.0,
            loopback_ports: 0,
            loopback_port_gbps: 100.0,
            reads_pairs: false,
        };
        Ok(match name {
            "tofino1-32" => tofino1(Preset::Tofino1x32, 2, 2),
            "tofino1-64" => tofino1(Preset::Tofino1x64, 4, 6),
            "tofino2" => Chip {
                preset: Preset::Tofino2,
                pipes: 4,
                stages: 20,
                salus_per_stage: 4,
                lanes_per_salu: 2,
                pass_rate_per_pipe: 1.5e9,
                max_ports: 128,
                max_port_gbps: 400.0,
                capacity_gbps: 12_800.0,
                recirculation_ports: 4,
                internal_recirculation_ports: 4,
                recirculation_gbps: 100.0,
                loopback_ports: 0,
                loopback_port_gbps: 100.0,
                reads_pairs: true,
            },
            "ideal" => Chip {
                preset: Preset::Ideal,
                pipes: 1,
                stages: 1,
                salus_per_stage: 1,
                lanes_per_salu: 1,
                pass_rate_per_pipe: f64::INFINITY,
                max_ports: u32::MAX,
                max_port_gbps: f64::INFINITY,
                capacity_gbps: f64::INFINITY,
                recirculation_ports: 1,
                internal_recirculation_ports: 1,
                recirculation_gbps: f64::INFINITY,
                loopback_ports: 0,
                loopback_port_gbps: 100.0,
                reads_pairs: true,
            },
            other => return Err(ChipError::Unknown(other.to_string())),
        })
    }

    /// The smallest real chip that hosts `workers` at `gbps` each (after `loopback_ports`
    /// front-panel ports go to loopback).
    pub fn for_workers(workers: u32, gbps: f64, loopback_ports: u32) -> Result<Chip, ChipError> {
        let mut uneven = None;
        for name in ["tofino1-32", "tofino1-64", "tofino2"] {
            match Chip::preset(name)?.with_loopback_ports(loopback_ports, gbps) {
                Ok(chip) if chip.worker_ports(gbps) >= workers => return Ok(chip),
                Err(e @ ChipError::LoopedNotPerPipe { .. }) => uneven = Some(e),
                _ => {}
            }
        }
        Err(uneven.unwrap_or(ChipError::TooManyWorkers { workers, gbps }))
    }

    /// `ports` front-panel ports of `gbps` put in loopback.
    pub fn with_loopback_ports(mut self, ports: u32, gbps: f64) -> Result<Chip, ChipError> {
        self.loopback_ports = ports;
        self.loopback_port_gbps = gbps;
        if self.is_ideal() || ports == 0 {
            return Ok(self);
        }
        if self.ports_at(gbps) < ports {
            return Err(ChipError::TooFewPortsToLoop {
                chip: self.preset.name(),
                ports: self.ports_at(gbps),
                gbps,
                looped: ports,
            });
        }
        self.looped_spread()?;
        Ok(self)
    }

    /// The looped ports are a whole number per pipe used.
    fn looped_spread(&self) -> Result<(), ChipError> {
        if self.is_ideal() || self.loopback_ports % self.aggregator_pipes() == 0 {
            return Ok(());
        }
        Err(ChipError::LoopedNotPerPipe {
            chip: self.preset.name(),
            looped: self.loopback_ports,
            pipes: self.aggregator_pipes(),
        })
    }

    /// Use `ports` of the dedicated recirculation ports (at most one per pipe).
    pub fn with_recirculation_ports(mut self, ports: u32) -> Result<Chip, ChipError> {
        if (ports > self.pipes || ports == 0) && !self.is_ideal() {
            return Err(ChipError::TooManyRecirculationPorts {
                chip: self.preset.name(),
                has: self.pipes,
                asked: ports,
            });
        }
        self.recirculation_ports = ports;
        self.looped_spread()?;
        Ok(self)
    }

    /// Whether this is the paper's switch (free passes and recirculation).
    pub fn is_ideal(&self) -> bool {
        self.preset == Preset::Ideal
    }

    /// Front-panel ports of `gbps` the chip offers.
    pub fn ports_at(&self, gbps: f64) -> u32 {
        if self.is_ideal() {
            return u32::MAX;
        }
        if !(gbps > 0.0 && gbps <= self.max_port_gbps) {
            return 0;
        }
        ((self.capacity_gbps / gbps).floor() as u32).min(self.max_ports)
    }

    /// Ports of `gbps` left for workers once the looped ones are taken.
    pub fn worker_ports(&self, gbps: f64) -> u32 {
        self.ports_at(gbps).saturating_sub(self.loopback_ports)
    }

    /// Passes per second over all pipes.
    pub fn pass_rate(&self) -> f64 {
        f64::from(self.pipes) * self.pass_rate_per_pipe
    }

    /// int32 lane updates per second over all pipes: every stateful ALU of every stage on
    /// every pass.
    pub fn lane_rate(&self) -> f64 {
        f64::from(self.pipes * self.stages * self.salus_per_stage * self.lanes_per_salu)
            * self.pass_rate_per_pipe
    }

    /// Bytes per second the recirculation paths carry: the dedicated ports used plus the
    /// looped front-panel ports.
    pub fn loopback_bytes_per_s(&self) -> f64 {
        (f64::from(self.recirculation_ports) * self.recirculation_gbps
            + f64::from(self.loopback_ports) * self.loopback_port_gbps)
            * 1e9
            / 8.0
    }

    /// Pipes the program spreads a job's aggregators over (its `--pipes`): one per dedicated
    /// recirculation port used, each pipe's passes going around that pipe's own paths.
    pub fn aggregator_pipes(&self) -> u32 {
        self.recirculation_ports.max(1)
    }

    /// Recirculation paths of each pipe used: its internal port (path 0), then the front-panel
    /// ports looped in it (the same number in every pipe).
    pub fn paths_per_pipe(&self) -> u32 {
        1 + self.loopback_ports / self.aggregator_pipes()
    }

    /// Bytes per second recirculation path `path` of a pipe carries: the internal port's rate
    /// for path 0, a looped port's for the others.
    pub fn path_bytes_per_s(&self, path: u32) -> f64 {
        let gbps = if path == 0 {
            self.recirculation_gbps
        } else {
            self.loopback_port_gbps
        };
        gbps * 1e9 / 8.0
    }

    /// One line naming the chip and its options, for every report.
    pub fn describe(&self) -> String {
        if self.is_ideal() {
            return "ideal (the paper's switch: passes and recirculation cost nothing)".into();
        }
        let mut s = format!(
            "{}: {} pipes at {:.2} G passes/s, {} recirculation ports of {} Gb/s",
            self.preset.name(),
            self.pipes,
            self.pass_rate_per_pipe / 1e9,
            self.recirculation_ports,
            self.recirculation_gbps
        );
        if self.internal_recirculation_ports > self.recirculation_ports {
            s += &format!(" (of {})", self.internal_recirculation_ports);
        }
        if self.loopback_ports > 0 {
            s += &format!(
                ", {} front-panel ports of {} Gb/s in loopback",
                self.loopback_ports, self.loopback_port_gbps
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_their_capacities() {
        let t1 = Chip::preset("tofino1-32").unwrap();
        assert_eq!((t1.pipes, t1.ports_at(100.0)), (2, 32));
        assert_eq!(t1.ports_at(400.0), 0);
        assert_eq!(t1.pass_rate(), 2.0 * 1.22e9);
        // 2 pipes x 12 stages x 4 ALUs x 2 lanes per pass.
        assert_eq!(t1.lane_rate(), 192.0 * 1.22e9);
        assert_eq!(t1.loopback_bytes_per_s(), 2.0 * 100e9 / 8.0);
        let t1_64 = Chip::preset("tofino1-64").unwrap();
        // Six internal ports on the 4-pipe part, one per pipe used by the program.
        assert_eq!(
            (
                t1_64.recirculation_ports,
                t1_64.internal_recirculation_ports
            ),
            (4, 6)
        );
        assert!(t1_64
            .describe()
            .contains("4 recirculation ports of 100 Gb/s (of 6)"));
        assert!(!t1.reads_pairs);
        let t2 = Chip::preset("tofino2").unwrap();
        assert_eq!((t2.ports_at(100.0), t2.ports_at(400.0)), (128, 32));
        // One 100 Gb/s recirculation port per pipe: no source gives a recirculation port more.
        assert_eq!(t2.loopback_bytes_per_s(), 4.0 * 100e9 / 8.0);
        assert!(t2.reads_pairs);
        assert!(Chip::preset("ideal").unwrap().pass_rate().is_infinite());
        assert!(matches!(
            Chip::preset("tomahawk"),
            Err(ChipError::Unknown(_))
        ));
    }

    #[test]
    fn a_choice_resolves_or_says_why_not() {
        let named = ChipChoice {
            preset: Some("tofino1-32".parse().unwrap()),
            ..ChipChoice::default()
        };
        assert_eq!(named.resolve(16, 100.0).unwrap().pipes, 2);
        let err = named.resolve(40, 100.0).unwrap_err().to_string();
        assert!(err.contains("fewer than 40"), "{err}");
        assert!("tofino3".parse::<Preset>().is_err());
        let default = ChipChoice::default().resolve(100, 100.0).unwrap();
        assert_eq!(default.preset, Preset::Tofino2);
    }

    #[test]
    fn spare_ports_are_every_port_no_worker_needs() {
        let spare = |preset: Option<&str>, workers| {
            ChipChoice {
                preset: preset.map(|p| p.parse().unwrap()),
                spare_loopback: true,
                loopback_ports: 7, // ignored: spare wins
                ..ChipChoice::default()
            }
            .resolve(workers, 100.0)
            .unwrap()
        };
        let t2 = spare(Some("tofino2"), 32);
        assert_eq!((t2.loopback_ports, t2.worker_ports(100.0)), (96, 32));
        let t1 = spare(Some("tofino1-32"), 8);
        assert_eq!(t1.loopback_ports, 24);
        // Without a preset: the smallest chip that hosts the workers, then its spare ports.
        let c = spare(None, 40);
        assert_eq!((c.preset, c.loopback_ports), (Preset::Tofino1x64, 24));
        // 30 idle ports over 4 pipes: 7 in each, as the program loops them.
        assert_eq!(spare(None, 34).loopback_ports, 28);
        assert_eq!(spare(Some("tofino1-32"), 32).loopback_ports, 0);
        assert_eq!(spare(Some("ideal"), 32).loopback_ports, 0);
        assert!(
            t2.loopback_bytes_per_s()
                > 20.0 * Chip::preset("tofino2").unwrap().loopback_bytes_per_s()
        );
    }

    #[test]
    fn the_default_chip_hosts_the_workers() {
        let pick = |w| Chip::for_workers(w, 100.0, 0).map(|c| c.preset.name());
        assert_eq!(pick(8).unwrap(), "tofino1-32");
        assert_eq!(pick(32).unwrap(), "tofino1-32");
        assert_eq!(pick(33).unwrap(), "tofino1-64");
        assert_eq!(pick(128).unwrap(), "tofino2");
        assert!(matches!(pick(129), Err(ChipError::TooManyWorkers { .. })));
        // Looped ports take worker ports.
        let c = Chip::for_workers(30, 100.0, 4).unwrap();
        assert_eq!((c.preset, c.worker_ports(100.0)), (Preset::Tofino1x64, 60));
        let c = c.with_recirculation_ports(2).unwrap();
        assert_eq!(c.loopback_bytes_per_s(), 6.0 * 100e9 / 8.0);
        assert!(Chip::preset("tofino1-32")
            .unwrap()
            .with_recirculation_ports(3)
            .is_err());
    }

    #[test]
    fn looped_ports_are_a_whole_number_per_pipe_used() {
        let t1 = Chip::preset("tofino1-32").unwrap();
        let looped = t1.with_loopback_ports(24, 100.0).unwrap();
        assert_eq!(
            (looped.aggregator_pipes(), looped.paths_per_pipe()),
            (2, 13)
        );
        assert_eq!(looped.path_bytes_per_s(0), looped.path_bytes_per_s(5));
        assert!(matches!(
            t1.with_loopback_ports(5, 100.0),
            Err(ChipError::LoopedNotPerPipe { pipes: 2, .. })
        ));
        // One pipe used: all its looped ports there.
        let one = t1.with_recirculation_ports(1).unwrap();
        assert_eq!(
            one.with_loopback_ports(5, 100.0).unwrap().paths_per_pipe(),
            6
        );
        assert!(t1.with_recirculation_ports(0).is_err());
        // Spare ports in each pipe used.
        let spare = ChipChoice {
            preset: Some(Preset::Tofino2),
            spare_loopback: true,
            recirculation_ports: Some(1),
            ..ChipChoice::default()
        }
        .resolve(32, 100.0)
        .unwrap();
        assert_eq!((spare.loopback_ports, spare.paths_per_pipe()), (24, 25));
        let err = Chip::for_workers(8, 100.0, 3).unwrap_err().to_string();
        assert!(err.contains("multiple of"), "{err}");
    }
}
