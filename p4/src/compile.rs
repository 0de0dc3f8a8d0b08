//! The program through p4c's Tofino back end (`switchgnn p4 compile`): the sources as this
//! build carries them, the compiler that `scripts/p4c.sh` builds, the figures of its log and of
//! the `context.json` it writes for a program that compiles, and those figures next to the
//! resource model's ([`crate::resources::ProgramModel`]).
//!
//! The compiler is found, not built: the build takes hours (`scripts/p4c.sh`, into
//! `~/.cache/switchgnn/p4c-<commit>`), so a machine without it gets [`CompileError::NoCompiler`]
//! naming the script.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use crate::resources::{ProgramModel, SALUS_PER_STAGE};

/// The p4c commit `scripts/p4c.sh` builds (its `p4c_commit`), whose first seven hex digits name
/// the cache folder.
pub const P4C_COMMIT: &str = "34b86e9bacb932c799aaf1b83495ce1e386ea047";

/// The file `scripts/p4c.sh` writes into the install folder once `p4c-barefoot` runs.
const BUILT_STAMP: &str = ".switchgnn-complete";

/// The program's files, as this build of the control plane knows them (its tables, ids and
/// constants are checked against these by `tests/cross_check.rs`): compiling these, not a
/// checkout's, compiles the program this binary installs entries for.
pub const SOURCES: [(&str, &str); 9] = [
    ("switchgnn.p4", include_str!("../switchgnn.p4")),
    (
        "include/constants.p4",
        include_str!("../include/constants.p4"),
    ),
    ("include/headers.p4", include_str!("../include/headers.p4")),
    ("include/parser.p4", include_str!("../include/parser.p4")),
    (
        "include/admission.p4",
        include_str!("../include/admission.p4"),
    ),
    ("include/barrier.p4", include_str!("../include/barrier.p4")),
    (
        "include/allreduce.p4",
        include_str!("../include/allreduce.p4"),
    ),
    (
        "include/aggregation.p4",
        include_str!("../include/aggregation.p4"),
    ),
    ("include/egress.p4", include_str!("../include/egress.p4")),
];

/// A Tofino generation, as p4c names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// Tofino 1 (TNA): 12 MAU stages.
    Tofino,
    /// Tofino 2 (T2NA): 20 MAU stages.
    Tofino2,
}

impl Target {
    /// The name p4c and bfas take (`--target`).
    pub fn name(self) -> &'static str {
        match self {
            Target::Tofino => "tofino",
            Target::Tofino2 => "tofino2",
        }
    }

    /// The architecture p4c takes (`--arch`).
    pub fn arch(self) -> &'static str {
        match self {
            Target::Tofino => "tna",
            Target::Tofino2 => "t2na",
        }
    }

    /// MAU stages per pipe (p4c `backends/tofino` `device.h`: `getNumStages`).
    pub fn stages(self) -> u32 {
        match self {
            Target::Tofino => 12,
            Target::Tofino2 => 20,
        }
    }
}

impl std::str::FromStr for Target {
    type Err = CompileError;
    fn from_str(s: &str) -> Result<Target, CompileError> {
        match s {
            "tofino" | "tofino1" => Ok(Target::Tofino),
            "tofino2" => Ok(Target::Tofino2),
            other => Err(CompileError::UnknownTarget(other.to_string())),
        }
    }
}

/// What went wrong before the compiler could say anything of the program.
#[derive(Debug, Error)]
pub enum CompileError {
    /// No p4c with the Tofino back end where it was looked for.
    #[error(
        "no p4c with the Tofino back end at {0}: build it with `bash scripts/p4c.sh` (hours on \
         two cores; see p4/README.md), or name an install folder with --p4c"
    )]
    NoCompiler(PathBuf),
    /// Not a target this program is written for.
    #[error("unknown target `{0}` (tofino or tofino2)")]
    UnknownTarget(String),
    /// Writing the sources or reading the outputs failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The compiler's `context.json` is not what this reader expects.
    #[error("{path}: not a context.json this reader knows ({why})")]
    Context {
        /// The file.
        path: PathBuf,
        /// What was missing.
        why: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CompileError + '_ {
    move |source| CompileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where `scripts/p4c.sh` installs p4c: `$SWITCHGNN_P4C/install`, else
/// `$XDG_CACHE_HOME/switchgnn/p4c-<commit>/install` (`~/.cache` without it).
pub fn default_install() -> PathBuf {
    let root = std::env::var_os("SWITCHGNN_P4C")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .unwrap_or_else(|| PathBuf::from(".cache"));
            cache
                .join("switchgnn")
                .join(format!("p4c-{}", &P4C_COMMIT[..7]))
        });
    root.join("install")
}

/// The compiler of an install folder, if `scripts/p4c.sh` finished building it there.
pub fn find_compiler(install: &Path) -> Result<PathBuf, CompileError> {
    let driver = install.join("bin").join("p4c-barefoot");
    if install.join(BUILT_STAMP).is_file() && driver.is_file() {
        Ok(driver)
    } else {
        Err(CompileError::NoCompiler(install.to_path_buf()))
    }
}

/// One compile: the target, and whether the in-switch all-reduce is built in (without it,
/// `-DSWITCHGNN_NO_ALLREDUCE`: the exchange alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Build {
    /// The chip.
    pub target: Target,
    /// With the all-reduce region.
    pub allreduce: bool,
}

impl Build {
    /// A short name for the build's output folder.
    pub fn name(&self) -> String {
        let what = if self.allreduce { "full" } else { "exchange" };
        format!("{}-{what}", self.target.name())
    }
}

/// How a compile ended.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The build.
    pub build: Build,
    /// The folder the compiler wrote into.
    pub out: PathBuf,
    /// The pipe's binary, when there is one: a compile counts only then.
    pub binary: Option<PathBuf>,
    /// The compiler's exit status (the assembler's, when the driver exited 0 without a
    /// binary and the assembler ran).
    pub status: Option<i32>,
    /// What its log says.
    pub log: LogFigures,
    /// What its `context.json` says, for a compile that wrote a binary.
    pub compiled: Option<Compiled>,
}

/// Write the program's sources into `out/src` and compile them with `driver` into `out`,
/// keeping the compiler's messages in `out/compile.log`. The driver can report success
/// without running the assembler: when it exits 0 with no binary, `bfas` (beside it) assembles
/// the `.bfa`. `extra` goes to the driver after the program's own options.
pub fn compile(
    driver: &Path,
    build: Build,
    out: &Path,
    extra: &[String],
) -> Result<Outcome, CompileError> {
    let src = out.join("src");
    for (name, text) in SOURCES {
        let path = src.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    // A binary left by an earlier compile into the same folder must not pass for this one's.
    let pipe = out.join("pipe");
    if pipe.exists() {
        std::fs::remove_dir_all(&pipe).map_err(io(&pipe))?;
    }
    let mut cmd = Command::new(driver);
    cmd.args([
        "--target",
        build.target.name(),
        "--arch",
        build.target.arch(),
    ])
    .arg("-o")
    .arg(out)
    .arg("-Ttable_summary:1");
    if !build.allreduce {
        cmd.arg("-DSWITCHGNN_NO_ALLREDUCE");
    }
    cmd.args(extra).arg(src.join("switchgnn.p4"));
    let run = cmd.output().map_err(io(driver))?;
    let mut log = String::from_utf8_lossy(&run.stdout).into_owned();
    log.push_str(&String::from_utf8_lossy(&run.stderr));
    let mut status = run.status.code();
    let bfa = pipe.join("switchgnn.bfa");
    if status == Some(0) && binary_in(&pipe).is_none() && bfa.is_file() {
        let bfas = driver.with_file_name("bfas");
        let run = Command::new(&bfas)
            .args(["--no-warn", "--target", build.target.name(), "-o"])
            .arg(&pipe)
            .arg(&bfa)
            .output()
            .map_err(io(&bfas))?;
        log.push_str(&String::from_utf8_lossy(&run.stdout));
        log.push_str(&String::from_utf8_lossy(&run.stderr));
        status = run.status.code();
    }
    let log_path = out.join("compile.log");
    std::fs::write(&log_path, &log).map_err(io(&log_path))?;
    let binary = binary_in(&pipe).filter(|_| status == Some(0));
    let compiled = match &binary {
        Some(_) => Some(Compiled::read(&pipe.join("context.json"))?),
        None => None,
    };
    Ok(Outcome {
        build,
        out: out.to_path_buf(),
        binary,
        status,
        log: LogFigures::of(&log),
        compiled,
    })
}

/// One figure of a compiled program beside the resource model's, where the model has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Figure {
    /// What it counts, per pipe.
    pub what: &'static str,
    /// The compiler's.
    pub compiled: u64,
    /// The model's.
    pub model: Option<u64>,
}

/// The compiler's figures of one pipe next to the resource model's for the same build.
pub fn side_by_side(c: &Compiled, model: &ProgramModel) -> Vec<Figure> {
    let f = |what, compiled: u32, model| Figure {
        what,
        compiled: u64::from(compiled),
        model,
    };
    vec![
        f(
            "ingress stages",
            c.ingress_stages,
            Some(model.ingress_stages),
        ),
        f("egress stages", c.egress_stages, None),
        f(
            "ingress stateful ALUs",
            c.ingress_salus,
            Some(model.ingress_salus),
        ),
        f(
            "egress stateful ALUs",
            c.egress_salus,
            Some(model.egress_salus),
        ),
        f(
            "stateful ALUs of the fullest stage",
            c.most_salus_in_a_stage,
            Some(SALUS_PER_STAGE),
        ),
        f(
            "register SRAM blocks",
            c.register_sram_blocks,
            Some(model.register_sram_blocks),
        ),
        f("SRAM blocks, all tables", c.sram_blocks, None),
        f("TCAM blocks", c.tcam_blocks, None),
        f("exact-match hash functions", c.hash_functions, None),
        f("ingress PHV containers", c.ingress_phv.0, None),
        f("ingress PHV bits", c.ingress_phv.1, None),
        f("egress PHV bits", c.egress_phv.1, None),
    ]
}

/// Every `memory_resource_allocation` in `v`, however deep (a match table's ways hold theirs).
fn allocations<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "memory_resource_allocation" && value.is_object() {
                    out.push(value);
                } else {
                    allocations(value, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| allocations(i, out)),
        _ => {}
    }
}

fn binary_in(pipe: &Path) -> Option<PathBuf> {
    std::fs::read_dir(pipe)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "bin"))
}

/// What the compiler's log says, whether or not it compiled: the ingress stages each round of
/// table placement needed, the longest chain of dependent tables, and the lines that name an
/// error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LogFigures {
    /// Ingress stages of each table-placement round, in order.
    pub ingress_stages: Vec<u32>,
    /// Egress stages of each round.
    pub egress_stages: Vec<u32>,
    /// The critical path through the table dependency graph, per round.
    pub critical_path: Vec<u32>,
    /// Lines naming an error (at most 20).
    pub errors: Vec<String>,
}

impl LogFigures {
    /// The figures of a log's text.
    pub fn of(log: &str) -> LogFigures {
        let mut f = LogFigures::default();
        let number = |line: &str| line.rsplit(':').next()?.trim().parse::<u32>().ok();
        for line in log.lines() {
            let t = line.trim();
            if t.starts_with("Number of stages for ingress table allocation:") {
                f.ingress_stages.extend(number(t));
            } else if t.starts_with("Number of stages for egress table allocation:") {
                f.egress_stages.extend(number(t));
            } else if t.starts_with("Critical path length through the table dependency graph:") {
                f.critical_path.extend(number(t));
            } else if (t.contains("error:") || t.contains("Compiler Bug") || t.contains(" error "))
                && f.errors.len() < 20
            {
                f.errors.push(t.to_string());
            }
        }
        f
    }
}

/// The figures of a compiled program's `context.json`, per gress of one pipe.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Compiled {
    /// MAU stages with a table, ingress (the highest stage number plus one).
    pub ingress_stages: u32,
    /// The same for egress.
    pub egress_stages: u32,
    /// Stateful tables (registers: one stateful ALU each), ingress.
    pub ingress_salus: u32,
    /// The same for egress.
    pub egress_salus: u32,
    /// The most stateful ALUs of one ingress stage.
    pub most_salus_in_a_stage: u32,
    /// SRAM blocks the registers hold (their words; the spare bank each stage of registers
    /// takes besides is counted in `sram_blocks`), ingress and egress.
    pub register_sram_blocks: u32,
    /// SRAM blocks of every table, registers and their spare banks included.
    pub sram_blocks: u32,
    /// TCAM blocks.
    pub tcam_blocks: u32,
    /// Hash functions of exact-match ways (distinct per stage).
    pub hash_functions: u32,
    /// PHV containers and their bits, ingress.
    pub ingress_phv: (u32, u32),
    /// The same for egress.
    pub egress_phv: (u32, u32),
    /// Every register and its stage.
    pub registers: BTreeMap<String, i64>,
}

impl Compiled {
    /// Read `context.json`.
    pub fn read(path: &Path) -> Result<Compiled, CompileError> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let json: Value = serde_json::from_str(&text).map_err(|e| CompileError::Context {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
        Compiled::of(&json).map_err(|why| CompileError::Context {
            path: path.to_path_buf(),
            why,
        })
    }

    /// The figures of a parsed `context.json`.
    pub fn of(json: &Value) -> Result<Compiled, String> {
        let tables = json["tables"].as_array().ok_or("no `tables` list")?;
        let mut c = Compiled::default();
        let mut salus_per_stage: BTreeMap<i64, u32> = BTreeMap::new();
        let mut hashes = BTreeSet::new();
        for t in tables {
            let ingress = t["direction"] == "ingress";
            let stage_tables = t["stage_tables"]
                .as_array()
                .or_else(|| t["match_attributes"]["stage_tables"].as_array());
            for s in stage_tables.into_iter().flatten() {
                let stage = s["stage_number"].as_i64().unwrap_or(-1);
                let top = u32::try_from(stage + 1).unwrap_or(0);
                if ingress {
                    c.ingress_stages = c.ingress_stages.max(top);
                } else {
                    c.egress_stages = c.egress_stages.max(top);
                }
                // The stage table's memories, its ways' included.
                let mut memories = Vec::new();
                allocations(s, &mut memories);
                let mut units_of_table = 0;
                for memory in memories {
                    let units: u32 = memory["memory_units_and_vpns"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|u| u["memory_units"].as_array().map_or(0, |a| a.len() as u32))
                        .sum();
                    match memory["memory_type"].as_str() {
                        Some("sram") => c.sram_blocks += units,
                        Some("tcam") => c.tcam_blocks += units,
                        _ => {}
                    }
                    if memory.get("spare_bank_memory_unit").is_some() {
                        c.sram_blocks += 1;
                    }
                    if let Some(h) = memory["hash_function_id"].as_i64() {
                        hashes.insert((ingress, stage, h));
                    }
                    units_of_table += units;
                }
                if t["table_type"] == "stateful" {
                    c.register_sram_blocks += units_of_table;
                    if ingress {
                        *salus_per_stage.entry(stage).or_default() += 1;
                    }
                    let name = t["name"].as_str().unwrap_or("?").to_string();
                    c.registers.insert(name, stage);
                }
            }
            if t["table_type"] == "stateful" {
                if ingress {
                    c.ingress_salus += 1;
                } else {
                    c.egress_salus += 1;
                }
            }
        }
        c.most_salus_in_a_stage = salus_per_stage.values().copied().max().unwrap_or(0);
        c.hash_functions = hashes.len() as u32;
        let phv = json["phv_allocation"]
            .as_array()
            .ok_or("no `phv_allocation` list")?;
        for (gress, into) in [
            ("ingress", &mut c.ingress_phv),
            ("egress", &mut c.egress_phv),
        ] {
            let mut containers = BTreeMap::new();
            for stage in phv {
                for k in stage[gress].as_array().into_iter().flatten() {
                    if let (Some(n), Some(w)) =
                        (k["phv_number"].as_u64(), k["word_bit_width"].as_u64())
                    {
                        containers.insert(n, w as u32);
                    }
                }
            }
            *into = (containers.len() as u32, containers.values().sum());
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_gives_each_rounds_stages_and_the_errors() {
        let log = "\
Number of stages in table allocation: 21
  Number of stages for ingress table allocation: 21
  Number of stages for egress table allocation: 7
Critical path length through the table dependency graph: 14
Invoking table placement without container conflicts
  Number of stages for ingress table allocation: 20
  Number of stages for egress table allocation: 12
Critical path length through the table dependency graph: 14
/x/switchgnn.p4(258): error: : source of modify_field invalid
";
        let f = LogFigures::of(log);
        assert_eq!(f.ingress_stages, [21, 20]);
        assert_eq!(f.egress_stages, [7, 12]);
        assert_eq!(f.critical_path, [14, 14]);
        assert_eq!(f.errors.len(), 1);
    }

    #[test]
    fn the_context_gives_stages_registers_memories_and_phv() {
        let json: Value = serde_json::from_str(
            r#"{
            "tables": [
              {"direction": "ingress", "name": "Ingress.seen", "table_type": "stateful",
               "stage_tables": [{"stage_number": 3, "memory_resource_allocation": {
                 "memory_type": "sram", "spare_bank_memory_unit": 80,
                 "memory_units_and_vpns": [{"memory_units": [1, 2, 3, 4], "vpns": [0]}]}}]},
              {"direction": "ingress", "name": "Ingress.t", "table_type": "match",
               "match_attributes": {"stage_tables": [{"stage_number": 5,
                 "memory_resource_allocation": {"memory_type": "tcam",
                 "memory_units_and_vpns": [{"memory_units": [0, 1]}]}}]}},
              {"direction": "egress", "name": "Egress.stamps", "table_type": "stateful",
               "stage_tables": [{"stage_number": 1, "memory_resource_allocation": {
                 "memory_type": "sram", "hash_function_id": 0,
                 "memory_units_and_vpns": [{"memory_units": [9]}]}}]}
            ],
            "phv_allocation": [
              {"stage_number": 0, "ingress": [{"phv_number": 3, "word_bit_width": 32}],
               "egress": [{"phv_number": 70, "word_bit_width": 8}]},
              {"stage_number": 1, "ingress": [{"phv_number": 3, "word_bit_width": 32},
                                             {"phv_number": 9, "word_bit_width": 16}]}
            ]}"#,
        )
        .unwrap();
        let c = Compiled::of(&json).unwrap();
        assert_eq!((c.ingress_stages, c.egress_stages), (6, 2));
        assert_eq!((c.ingress_salus, c.egress_salus), (1, 1));
        assert_eq!(c.register_sram_blocks, 5);
        assert_eq!((c.sram_blocks, c.tcam_blocks), (6, 2));
        assert_eq!(c.hash_functions, 1);
        assert_eq!((c.ingress_phv, c.egress_phv), ((2, 48), (1, 8)));
        assert_eq!(c.registers["Ingress.seen"], 3);
        assert!(Compiled::of(&serde_json::json!({})).is_err());
    }

    #[test]
    fn the_compiler_is_found_only_once_built() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            find_compiler(dir.path()),
            Err(CompileError::NoCompiler(_))
        ));
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/p4c-barefoot"), "").unwrap();
        assert!(find_compiler(dir.path()).is_err(), "no stamp yet");
        std::fs::write(dir.path().join(BUILT_STAMP), "").unwrap();
        assert!(find_compiler(dir.path()).is_ok());
    }

    #[test]
    fn the_sources_are_every_file_of_the_program() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut on_disk: Vec<String> = std::fs::read_dir(dir.join("include"))
            .unwrap()
            .map(|e| format!("include/{}", e.unwrap().file_name().to_string_lossy()))
            .filter(|n| n.ends_with(".p4"))
            .collect();
        on_disk.push("switchgnn.p4".into());
        on_disk.sort();
        let mut carried: Vec<String> = SOURCES.iter().map(|(n, _)| n.to_string()).collect();
        carried.sort();
        assert_eq!(carried, on_disk);
        // The commit is the script's.
        let script = std::fs::read_to_string(dir.join("../scripts/p4c.sh")).unwrap();
        assert!(script.contains(&format!("p4c_commit={P4C_COMMIT}")));
    }
}
