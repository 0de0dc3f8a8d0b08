//! A worker's rank: from the command line, or from the variables a launcher sets.

use super::JobError;

/// Where a worker's rank and the world size come from, in order: the command line, then the
/// variables of SLURM (`SLURM_PROCID`, `SLURM_NTASKS`), torchrun-style launchers (`RANK`,
/// `WORLD_SIZE`), Open MPI (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`) and MPICH/PMI
/// (`PMI_RANK`, `PMI_SIZE`).
pub fn resolve_rank(
    cli_rank: Option<u16>,
    world: u16,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<u16, JobError> {
    const LAUNCHERS: [(&str, &str, &str); 4] = [
        ("SLURM", "SLURM_PROCID", "SLURM_NTASKS"),
        ("torchrun", "RANK", "WORLD_SIZE"),
        ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI", "PMI_RANK", "PMI_SIZE"),
    ];
    let parse = |name: &str, text: String| -> Result<u16, JobError> {
        text.trim()
            .parse()
            .map_err(|_| JobError::Invalid(format!("{name}=`{text}` is not a rank or size")))
    };
    let (rank, source) = match cli_rank {
        Some(r) => (r, "--rank".to_string()),
        None => {
            let mut found = None;
            for (launcher, rank_var, size_var) in LAUNCHERS {
                if let Some(text) = env(rank_var) {
                    let rank = parse(rank_var, text)?;
                    if let Some(size) = env(size_var) {
                        let size = parse(size_var, size)?;
                        if size != world {
                            return Err(JobError::Invalid(format!(
                                "{size_var}={size} ({launcher}) but the job has world = {world}"
                            )));
                        }
                    }
                    found = Some((rank, format!("{rank_var} ({launcher})")));
                    break;
                }
            }
            found.ok_or_else(|| {
                JobError::Invalid(
                    "no rank: give --rank, or start the worker under SLURM, torchrun or mpirun"
                        .into(),
                )
            })?
        }
    };
    if rank >= world {
        return Err(JobError::Invalid(format!(
            "rank {rank} from {source} is not below the job's world size {world}"
        )));
    }
    Ok(rank)
}
