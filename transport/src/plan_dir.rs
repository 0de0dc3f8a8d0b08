//! The prepared plan folder, one owner for every reader and writer of it: `switchgnn prepare`
//! and `shard`, the `switch`, `worker` and `exchange` commands, and the Python package's
//! `switchgnn.prepare`, `Switch` and `Worker`.
//!
//! What a folder holds, and where each thing a job needs comes from:
//!
//! - the plan itself (manifest, assignment, blocks, orders), written by [`Plan::write`];
//! - `shards/rank-NNNN.shard`, one per worker ([`PlanDir::write_shards`]); besides a worker's
//!   slice of the graph, every shard records the most remote neighbours any vertex has, which
//!   is the fixed-point term count every worker must agree on ([`PlanDir::contributions`]);
//! - `shards/exchange-KIND.session` (what the switch installs) and
//!   `shards/exchange-KIND-worker-NNNN.session` (each worker's view) for every exchange kind
//!   whose plans were saved ([`PlanDir::save_kind`]); the kinds saved are the files present
//!   ([`PlanDir::saved_kinds`]). SwitchGNN's plans are the plan's own blocks, so that kind is
//!   always there.
//!
//! Folders written by older builds of the Python package kept the term count and the kinds in
//! a `python.json` beside the plan and had no shards. Such a folder does not open: the error
//! names that file and asks for the plan to be prepared again, since the term count cannot be
//! recovered without the graph and trusting the old file would keep two sources of one fact.

use std::path::{Path, PathBuf};

use switchgnn_datasets::Dataset;
use switchgnn_partition::shard::{self, shard_path, ShardMeta, SHARDS_DIR};
use switchgnn_partition::{PartitionError, Plan};
use thiserror::Error;

use crate::session_file::{self, SessionFileError};
use crate::{ExchangeKind, Session};

/// The file older builds of the Python package wrote beside the plan; see the module docs.
pub const LEGACY_PYTHON_META: &str = "python.json";

/// Why a plan folder could not be opened, read from or written to.
#[derive(Debug, Error)]
pub enum PlanDirError {
    /// The plan's own files are missing or broken.
    #[error("cannot read the plan in {}: {source}", dir.display())]
    ReadPlan {
        /// The folder.
        dir: PathBuf,
        /// What the plan reader said.
        source: PartitionError,
    },
    /// Writing the plan or its shards failed.
    #[error("cannot write the plan to {}: {source}", dir.display())]
    Write {
        /// The folder.
        dir: PathBuf,
        /// What the writer said.
        source: PartitionError,
    },
    /// A folder of an older Python package, which this build does not read.
    #[error(
        "{} was written by an older switchgnn.prepare, which kept the fixed-point term count \
         there; this build reads it from the plan's shards: prepare the plan again (with \
         switchgnn.prepare, or `switchgnn shard --plan {}`)",
        path.display(),
        path.parent().unwrap_or(Path::new(".")).display()
    )]
    LegacyMeta {
        /// The old `python.json`.
        path: PathBuf,
    },
    /// The folder has no shards, where the fixed-point term count is kept.
    #[error(
        "{} holds no shards, where the fixed-point term count every worker shares is kept; run \
         `switchgnn shard --plan {}`",
        dir.display(),
        dir.display()
    )]
    NoShards {
        /// The folder.
        dir: PathBuf,
    },
    /// A shard that cannot be read or does not belong to the plan beside it.
    #[error("the shards in {}: {source}", dir.display())]
    Shard {
        /// The folder.
        dir: PathBuf,
        /// What the shard reader said (the file, and what disagrees).
        source: PartitionError,
    },
    /// No plans of the exchange kind asked for were saved in the folder.
    #[error(
        "the plan in {} has no {kind} exchange plans (it has: {saved}); save them with \
         `switchgnn shard --plan {} --exchange {kind}` or switchgnn.prepare(kinds=[...])",
        dir.display(),
        dir.display()
    )]
    NoKind {
        /// The folder.
        dir: PathBuf,
        /// The kind asked for.
        kind: &'static str,
        /// The kinds the folder has, comma-separated.
        saved: String,
    },
    /// SwitchGNN's plans could not be built from the plan's blocks.
    #[error("cannot build the switchgnn exchange plans of {}: {source}", dir.display())]
    Blocks {
        /// The folder.
        dir: PathBuf,
        /// What the plan builder said.
        source: switchgnn_dataplane::plan::PlanError,
    },
    /// A saved session or view could not be read or written.
    #[error(transparent)]
    SessionFile(#[from] SessionFileError),
    /// A file's size could not be read after writing it.
    #[error("cannot read the size of {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

/// A prepared plan folder and its plan, read once.
#[derive(Debug)]
pub struct PlanDir {
    dir: PathBuf,
    plan: Plan,
}

impl PlanDir {
    /// Open the folder and read its whole plan (blocks included): what the switch, and a
    /// worker that builds its exchange plans itself, need.
    pub fn open(dir: &Path) -> Result<PlanDir, PlanDirError> {
        Self::open_with(dir, Plan::read)
    }

    /// Open the folder reading only the plan's summary (no blocks): enough for a worker that
    /// reads its saved view of the exchange.
    pub fn open_summary(dir: &Path) -> Result<PlanDir, PlanDirError> {
        Self::open_with(dir, Plan::read_summary)
    }

    /// A folder that is not of the old Python layout, its plan read by `read`.
    fn open_with(
        dir: &Path,
        read: impl FnOnce(&Path) -> Result<Plan, PartitionError>,
    ) -> Result<PlanDir, PlanDirError> {
        Self::refuse_legacy(dir)?;
        let plan = read(dir).map_err(|source| PlanDirError::ReadPlan {
            dir: dir.to_path_buf(),
            source,
        })?;
        Ok(PlanDir {
            dir: dir.to_path_buf(),
            plan,
        })
    }

    /// Write `plan` (prepared for `dataset`) to `dir` with every worker's shard: what
    /// `switchgnn prepare` and then `switchgnn shard` leave, in one step. `done` hears each
    /// shard's rank once it is written.
    pub fn create(
        dir: &Path,
        mut plan: Plan,
        dataset: &Dataset,
        done: &(dyn Fn(u32) + Sync),
    ) -> Result<PlanDir, PlanDirError> {
        plan.write(dir).map_err(|source| PlanDirError::Write {
            dir: dir.to_path_buf(),
            source,
        })?;
        let made = PlanDir {
            dir: dir.to_path_buf(),
            plan,
        };
        made.write_shards(dataset, done)?;
        Ok(made)
    }

    /// A folder that only an older Python package could read (see the module docs).
    fn refuse_legacy(dir: &Path) -> Result<(), PlanDirError> {
        let legacy = dir.join(LEGACY_PYTHON_META);
        if legacy.exists() && !shard_path(dir, 0).exists() {
            return Err(PlanDirError::LegacyMeta { path: legacy });
        }
        Ok(())
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The plan read from it.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The plan, the folder no longer needed.
    pub fn into_plan(self) -> Plan {
        self.plan
    }

    /// The workers the plan was prepared for.
    pub fn workers(&self) -> u16 {
        self.plan.manifest.spec.workers as u16
    }

    /// Cut every worker's shard of `dataset` (the graph the plan was prepared for) into
    /// `shards/`; their total size in bytes.
    pub fn write_shards(
        &self,
        dataset: &Dataset,
        done: &(dyn Fn(u32) + Sync),
    ) -> Result<u64, PlanDirError> {
        shard::write_shards(dataset, &self.plan, &self.dir, done).map_err(|source| {
            PlanDirError::Write {
                dir: self.dir.join(SHARDS_DIR),
                source,
            }
        })
    }

    /// The most terms any sum of an exchange has (the most remote neighbours of any vertex):
    /// the fixed-point scale every worker must share. Read from the first shard's header.
    pub fn contributions(&self) -> Result<u64, PlanDirError> {
        let path = shard_path(&self.dir, 0);
        if !path.exists() {
            return Err(PlanDirError::NoShards {
                dir: self.dir.clone(),
            });
        }
        let meta = ShardMeta::read(&path).map_err(|source| PlanDirError::Shard {
            dir: self.dir.clone(),
            source,
        })?;
        meta.check_plan(&self.plan, 0, &path)
            .map_err(|source| PlanDirError::Shard {
                dir: self.dir.clone(),
                source,
            })?;
        Ok(meta.max_remote_degree)
    }

    /// The exchange kinds whose plans the folder holds: SwitchGNN's always (they are the
    /// plan's blocks), every other kind whose switch copy was saved.
    pub fn saved_kinds(&self) -> Vec<ExchangeKind> {
        let others = ExchangeKind::ALL
            .into_iter()
            .chain([ExchangeKind::Auto])
            .filter(|&k| k != ExchangeKind::Switchgnn)
            .filter(|&k| session_file::session_path(&self.dir, k).exists());
        std::iter::once(ExchangeKind::Switchgnn)
            .chain(others)
            .collect()
    }

    /// The kinds saved, as a list for messages.
    fn saved_names(&self) -> String {
        let names: Vec<&str> = self.saved_kinds().iter().map(|k| k.name()).collect();
        names.join(", ")
    }

    /// The whole session of `kind` without the graph, what the switch installs: SwitchGNN's
    /// from the plan's blocks, another kind's from its saved file; `None` when not saved.
    pub fn saved_session(&self, kind: ExchangeKind) -> Result<Option<Session>, PlanDirError> {
        if kind == ExchangeKind::Switchgnn {
            let session =
                Session::switchgnn(&self.plan).map_err(|source| PlanDirError::Blocks {
                    dir: self.dir.clone(),
                    source,
                })?;
            return Ok(Some(session));
        }
        let path = session_file::session_path(&self.dir, kind);
        if !path.exists() {
            return Ok(None);
        }
        Ok(Some(session_file::read(&path, &self.plan, kind)?))
    }

    /// [`PlanDir::saved_session`], its absence an error naming the kinds there are.
    pub fn session(&self, kind: ExchangeKind) -> Result<Session, PlanDirError> {
        self.saved_session(kind)?.ok_or_else(|| self.no_kind(kind))
    }

    fn no_kind(&self, kind: ExchangeKind) -> PlanDirError {
        PlanDirError::NoKind {
            dir: self.dir.clone(),
            kind: kind.name(),
            saved: self.saved_names(),
        }
    }

    /// Where worker `rank`'s saved view of `kind` is (whether or not it exists).
    pub fn view_path(&self, kind: ExchangeKind, rank: u16) -> PathBuf {
        session_file::view_path(&self.dir, kind, rank)
    }

    /// Whether worker `rank`'s view of `kind` was saved.
    pub fn has_view(&self, kind: ExchangeKind, rank: u16) -> bool {
        self.view_path(kind, rank).exists()
    }

    /// Worker `rank`'s view of the session of `kind`: its saved view, else the saved session's
    /// rows for it; `None` when neither is there.
    pub fn saved_view(
        &self,
        kind: ExchangeKind,
        rank: u16,
    ) -> Result<Option<Session>, PlanDirError> {
        let path = self.view_path(kind, rank);
        if path.exists() {
            return Ok(Some(session_file::read_view(
                &path, &self.plan, kind, rank,
            )?));
        }
        Ok(self.saved_session(kind)?.map(|s| s.for_worker(rank)))
    }

    /// [`PlanDir::saved_view`], its absence an error naming the kinds there are.
    pub fn view(&self, kind: ExchangeKind, rank: u16) -> Result<Session, PlanDirError> {
        self.saved_view(kind, rank)?
            .ok_or_else(|| self.no_kind(kind))
    }

    /// Save the switch's copy of `session` (a kind other than SwitchGNN, whose switch reads
    /// the plan's blocks itself); the file's size in bytes, `None` for SwitchGNN.
    pub fn save_session(&self, session: &Session) -> Result<Option<u64>, PlanDirError> {
        if session.mode == ExchangeKind::Switchgnn {
            return Ok(None);
        }
        self.make_shards_dir()?;
        let path = session_file::session_path(&self.dir, session.mode);
        session_file::write(session, &self.plan, &path)?;
        Ok(Some(size(&path)?))
    }

    /// Save worker `rank`'s view of `session` (only the rows its engine reads); the file's
    /// size in bytes.
    pub fn save_view(&self, session: &Session, rank: u16) -> Result<u64, PlanDirError> {
        self.make_shards_dir()?;
        let path = self.view_path(session.mode, rank);
        session_file::write_view(&session.for_worker(rank), rank, &self.plan, &path)?;
        size(&path)
    }

    /// Save `session` whole: the switch's copy and every worker's view, one after another;
    /// the bytes written.
    pub fn save_kind(&self, session: &Session) -> Result<u64, PlanDirError> {
        let mut bytes = self.save_session(session)?.unwrap_or(0);
        for rank in 0..self.workers() {
            bytes += self.save_view(session, rank)?;
        }
        Ok(bytes)
    }

    fn make_shards_dir(&self) -> Result<(), PlanDirError> {
        let shards = self.dir.join(SHARDS_DIR);
        std::fs::create_dir_all(&shards).map_err(|source| PlanDirError::Io {
            path: shards,
            source,
        })
    }

    /// The whole session of `kind` computed from `graph`, the plan's own graph.
    pub fn build_session(
        &self,
        graph: &switchgnn_datasets::Graph,
        kind: ExchangeKind,
    ) -> Result<Session, switchgnn_dataplane::plan::PlanError> {
        if kind == ExchangeKind::Switchgnn {
            Session::switchgnn(&self.plan)
        } else {
            Session::new(&self.plan, graph, kind)
        }
    }
}

/// A written file's size.
fn size(path: &Path) -> Result<u64, PlanDirError> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|source| PlanDirError::Io {
            path: path.to_path_buf(),
            source,
        })
}
