//! A job file's switch: [`ServerConfig::of_job`], the one translation of a job's settings into
//! the switch process's, beside [`crate::WorkerConfig::of_job`] for its workers, so that the
//! `switch` command and the Python package's `Switch` serve a job alike.

use std::net::SocketAddr;

use switchgnn_dataplane::control::Secret;
use switchgnn_dataplane::switch::AGGREGATOR_BYTES;

use crate::job::JobFile;
use crate::server::{AllReducePool, ServerConfig};

impl ServerConfig {
    /// The switch of `job` listening on `listen` with `memory` bytes of aggregators, admitting
    /// the workers that prove `secret`: the job's timeouts, link, faults, transport and
    /// all-reduce region, on one core, with no aggregator quotas, serving until every worker
    /// has left. A best-effort all-reduce (`allreduce.best_effort`) gets the default shared
    /// pool, without which the switch could not serve it; a caller serving several jobs sizes
    /// the pool itself.
    pub fn of_job(
        job: &JobFile,
        listen: SocketAddr,
        memory: u64,
        secret: Option<Secret>,
    ) -> ServerConfig {
        ServerConfig {
            job: job.job,
            world: job.world,
            listen,
            timeouts: job.timeouts,
            link: job.link,
            faults: job.faults,
            aggregators: (memory / AGGREGATOR_BYTES) as usize,
            cores: 1,
            stop_after_exchanges: None,
            overload: Default::default(),
            transport: job.transport(),
            secret,
            allreduce_slots: job.allreduce.slots,
            allreduce_best_effort: job.allreduce.best_effort,
            allreduce_pool: job.allreduce.best_effort.then(AllReducePool::default),
            aggregator_quotas: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExchangeKind;

    #[test]
    fn a_best_effort_job_gets_the_flag_and_a_pool() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 7000));
        let mut job = JobFile::loopback("plan".into(), ExchangeKind::Host, addr, 2);
        let cfg = ServerConfig::of_job(&job, addr, 1 << 20, None);
        assert!(!cfg.allreduce_best_effort);
        assert_eq!(cfg.allreduce_pool, None);
        assert_eq!(cfg.aggregators, (1 << 20) / AGGREGATOR_BYTES as usize);
        job.allreduce.best_effort = true;
        let cfg = ServerConfig::of_job(&job, addr, 1 << 20, None);
        assert!(cfg.allreduce_best_effort);
        assert_eq!(cfg.allreduce_pool, Some(AllReducePool::default()));
    }
}
