//! A whole exchange job in one process: the switch and every worker as threads over UDP on
//! loopback, each worker running the schedule and checking its outputs ([`run_worker`]). What
//! tests and benchmarks of the real-time drivers start from.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use switchgnn_datasets::Dataset;

use crate::client::{WorkerClient, WorkerConfig};
use crate::runner::{run_worker, RunError, RunOptions, WorkerReport};
use crate::server::{ServerConfig, ServerError, ServerReport, SwitchServer};
use crate::session::Session;

/// What a loopback job did.
#[derive(Debug)]
pub struct LoopbackOutcome {
    pub switch: ServerReport,
    pub workers: Vec<Result<WorkerReport, RunError>>,
    /// Wall time from the switch's start to its end.
    pub seconds: f64,
}

/// Run `epochs` rounds of `session`'s schedule with every worker of `server`'s job. The
/// switch listens where `server.listen` says (port 0: a free one); the workers use the same
/// timeouts, link and faults (each with its own seed).
pub fn run_exchange_job(
    dataset: &Arc<Dataset>,
    session: &Arc<Session>,
    server: ServerConfig,
    epochs: u32,
) -> Result<LoopbackOutcome, ServerError> {
    let world = server.world;
    let (timeouts, link, faults, job) = (server.timeouts, server.link, server.faults, server.job);
    let started = Instant::now();
    let mut switch = SwitchServer::bind(server, session.clone())?;
    let addr = switch.local_addr()?;
    let stop = AtomicBool::new(false);
    let (switch, workers) = thread::scope(|s| {
        // Named threads, so that a profile can be read per role (`perf report --comm switch`).
        let switch = thread::Builder::new()
            .name("switch".into())
            .spawn_scoped(s, || switch.run(&stop, None))
            .expect("spawn the switch thread");
        let workers: Vec<_> = (0..world)
            .map(|rank| {
                let worker = thread::Builder::new().name(format!("worker-{rank}"));
                worker
                    .spawn_scoped(s, move || {
                        let client = WorkerClient::connect(WorkerConfig {
                            job,
                            rank,
                            world,
                            mode: session.mode,
                            plan_checksum: session.checksum,
                            switch: addr,
                            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
                            timeouts,
                            link,
                            faults: crate::socket::ShimConfig {
                                seed: faults.seed ^ (u64::from(rank) + 1),
                                ..faults
                            },
                        })?;
                        let opts = RunOptions {
                            job,
                            rank,
                            epochs,
                            line_rate: link.rate(),
                            window: link.window,
                            timers: timeouts.protocol(),
                            compute: std::time::Duration::ZERO,
                        };
                        run_worker(client, session, dataset, opts, &|_| {})
                    })
                    .expect("spawn a worker thread")
            })
            .collect();
        let workers: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().expect("a worker thread panicked"))
            .collect();
        if workers.iter().any(Result::is_err) {
            // The switch would wait for goodbyes that will not come.
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        (switch.join().expect("the switch thread panicked"), workers)
    });
    Ok(LoopbackOutcome {
        switch: switch?,
        workers,
        seconds: started.elapsed().as_secs_f64(),
    })
}
