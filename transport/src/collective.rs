//! The all-reduce a training job needs beside its exchanges: the sum of every worker's weight
//! gradients each step, and the maximum magnitude each exchange's fixed-point scale is agreed
//! on. For now it is a parameter server in the switch process, over TCP on the switch's own
//! address and port number; a later step moves the gradient sum into the switch's aggregators.
//!
//! The reduction runs in rank order in `f64` and is rounded to `f32` once, so every worker
//! receives bit-identical values, whatever the timing — which is what lets every worker apply
//! the same optimiser step and keep identical weights.
//!
//! Frames (little-endian):
//! - greeting, server → worker on connect: `SGAR`, version u16, nonce (16 random bytes);
//! - hello, worker → server: `SGAR`, version u16, job u16, rank u16, world u16, agreement u64
//!   (a fingerprint of everything the workers must share, e.g. the training settings), proof
//!   (32 bytes: HMAC-SHA256 under the job's admission secret of the nonce and the hello's
//!   fields; zeros without a secret). A service with a secret refuses a hello whose proof does
//!   not verify, so nobody without it can take a rank or add to the sums;
//! - round, worker → server: op u8 (0 sum, 1 max), round u32, count u32, count × f32;
//! - reply, server → worker: status u8 (0 ok, 1 error); ok: count u32 and count × f32 for a
//!   round, nothing for a hello; error: length u32 and a UTF-8 reason. Before it, any number
//!   of keepalive bytes (2): the service is alive and still waiting for other workers.
//!
//! No fixed deadline ends a round that is making progress. Inside the switch process the
//! service waits for a worker as long as the switch hears from it ([`Liveness`](crate::liveness::Liveness): workers send
//! heartbeats while they compute), and names the worker that fell silent; workers waiting for
//! a round hear a keepalive every second, so their own patience counts silence, not the
//! length of the round. Standalone (no liveness table), a worker may take `idle` per round.

mod admission;
mod client;
mod frames;
mod service;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::control::Secret;
use thiserror::Error;

pub use client::CollectiveClient;
pub(crate) use frames::send_error;
pub use service::{CollectiveService, RunningService};

/// Why an all-reduce through the service, or the service itself, failed.
#[derive(Debug, Error)]
pub enum CollectiveError {
    /// A connection to or at the service failed.
    #[error("collective service at {addr}: {source}")]
    Io {
        /// The other end.
        addr: SocketAddr,
        /// What the system said.
        source: io::Error,
    },
    /// Nobody listened at the service's address in time.
    #[error("no collective service answered at {addr} within {waited:.1?}: {last}")]
    NoService {
        /// Where the worker tried.
        addr: SocketAddr,
        /// How long it tried.
        waited: Duration,
        /// The last attempt's error.
        last: io::Error,
    },
    /// The service refused the worker's hello.
    #[error("the collective service refused worker {rank}: {reason}")]
    Refused {
        /// The worker's rank.
        rank: u16,
        /// The service's reason.
        reason: String,
    },
    /// The service ended the round with an error (a worker lost, mismatched rounds).
    #[error("the collective service failed: {0}")]
    Failed(String),
    /// Something on the wire was not what the protocol says.
    #[error("collective: {0}")]
    Protocol(String),
    /// The service was told to stop while workers were still connected.
    #[error("the collective service was stopped with {connected} workers connected")]
    Stopped {
        /// Workers connected then.
        connected: usize,
    },
}

pub use switchgnn_dataplane::allreduce::ReduceOp;

/// What the service did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectiveReport {
    /// Rounds reduced.
    pub rounds: u64,
    /// Values received from all workers together.
    pub values_in: u64,
    /// Connections that sent no valid hello in time, or whose hello was refused.
    #[serde(default)]
    pub bad_connections: u64,
    /// Connections closed before their hello to make room for newer ones (over
    /// `PENDING_PER_IP` from one address, or `PENDING_MAX` in all).
    #[serde(default)]
    pub evicted_connections: u64,
}

/// The service's settings.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The job's id: a hello for another job is refused.
    pub job: u16,
    /// The workers every round waits for.
    pub world: u16,
    /// Every worker must have connected by then.
    pub join: Duration,
    /// A worker that sends nothing this long is given up (a dead process closes its connection
    /// at once; this catches a hung one).
    pub idle: Duration,
    /// The job's admission secret: workers must prove they hold it.
    pub secret: Option<Secret>,
}

impl ServiceConfig {
    /// The settings of job `job` of `world` workers under the job's timeouts (no secret).
    pub fn of(job: u16, world: u16, timeouts: &crate::Timeouts) -> ServiceConfig {
        ServiceConfig {
            job,
            world,
            join: timeouts.join(),
            idle: timeouts.collective_idle(),
            secret: None,
        }
    }

    /// Admit only workers that prove they hold `secret` (if any).
    pub fn with_secret(mut self, secret: Option<Secret>) -> ServiceConfig {
        self.secret = secret;
        self
    }
}

/// Who a worker is to the service.
#[derive(Debug, Clone)]
pub struct Member {
    /// The job's id.
    pub job: u16,
    /// The worker's rank.
    pub rank: u16,
    /// The job's workers.
    pub world: u16,
    /// A fingerprint of every setting the workers must share.
    pub agreement: u64,
    /// The job's admission secret, if it has one.
    pub secret: Option<Secret>,
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    use super::admission::{Complaints, Pending, HELLO_WAIT, PENDING_PER_IP};
    use super::frames::HELLO_LEN;
    use super::service::KEEPALIVE_EVERY;
    use super::*;
    use crate::liveness::Liveness;

    fn service(
        world: u16,
    ) -> (
        SocketAddr,
        std::thread::JoinHandle<Result<CollectiveReport, CollectiveError>>,
    ) {
        let cfg = ServiceConfig {
            job: 3,
            world,
            join: Duration::from_secs(10),
            idle: Duration::from_secs(10),
            secret: None,
        };
        let s = CollectiveService::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
        let addr = s.local_addr().unwrap();
        (addr, s.spawn(Arc::new(AtomicBool::new(false))))
    }

    fn connect(
        addr: SocketAddr,
        rank: u16,
        world: u16,
        agreement: u64,
    ) -> Result<CollectiveClient, CollectiveError> {
        let who = Member {
            job: 3,
            rank,
            world,
            agreement,
            secret: None,
        };
        CollectiveClient::connect(addr, &who, Duration::from_secs(10), Duration::from_secs(10))
    }

    /// While the service waits for worker 0's next round, worker 1 hears keepalives it never
    /// reads (it is done); closing with them unread resets its connection. That is a goodbye,
    /// not a failure.
    #[test]
    fn workers_leaving_at_different_times_end_the_service_cleanly() {
        let (addr, server) = service(2);
        let early = std::thread::spawn(move || {
            let mut c = connect(addr, 1, 2, 0).unwrap();
            c.all_reduce(ReduceOp::Sum, &mut [1.0f32]).unwrap();
            std::thread::sleep(KEEPALIVE_EVERY + Duration::from_millis(300));
        });
        let mut late = connect(addr, 0, 2, 0).unwrap();
        late.all_reduce(ReduceOp::Sum, &mut [1.0f32]).unwrap();
        early.join().unwrap();
        // Before the next keepalive, whose failed write would swallow the reset.
        std::thread::sleep(Duration::from_millis(300));
        drop(late);
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 1);
    }

    /// A connection that never says hello is dropped after `HELLO_WAIT`, not at the join
    /// deadline: the workers behind it get in.
    #[test]
    fn a_silent_connection_does_not_hold_up_the_others() {
        let (addr, server) = service(1);
        let silent = TcpStream::connect(addr).unwrap();
        let started = Instant::now();
        let mut c = connect(addr, 0, 1, 0).unwrap();
        let waited = started.elapsed();
        assert!(waited < HELLO_WAIT + Duration::from_secs(1), "{waited:?}");
        assert_eq!(c.max(1.5).unwrap(), 1.5);
        drop((c, silent));
        assert_eq!(server.join().unwrap().unwrap().rounds, 1);
    }

    /// 64 idle and 64 garbage connections opened before a 4-worker job hold nobody up: every
    /// worker joins before an idle connection's hello deadline would even have passed once
    /// (when hellos were read one at a time, they waited 64 of those, two minutes), and the
    /// rounds come back right.
    #[test]
    fn idle_and_garbage_connections_hold_up_nobody() {
        let world = 4u16;
        let (addr, server) = service(world);
        let idle: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let garbage: Vec<TcpStream> = (0..64u8)
            .map(|i| {
                let mut s = TcpStream::connect(addr).unwrap();
                // Some not even a whole hello, some a whole one of nonsense.
                let _ = s.write_all(&vec![i; if i % 2 == 0 { 7 } else { HELLO_LEN }]);
                s
            })
            .collect();
        let started = Instant::now();
        let workers: Vec<_> = (0..world)
            .map(|rank| {
                std::thread::spawn(move || {
                    let mut c = connect(addr, rank, world, 7).unwrap();
                    let joined = started.elapsed();
                    let mut v = vec![f32::from(rank); 3];
                    for _ in 0..3 {
                        c.all_reduce(ReduceOp::Sum, &mut v).unwrap();
                    }
                    (joined, v)
                })
            })
            .collect();
        for w in workers {
            let (joined, v) = w.join().unwrap();
            assert!(joined < HELLO_WAIT, "a worker joined after {joined:?}");
            // 0+1+2+3, then summed twice more.
            assert_eq!(v, vec![6.0 * 16.0; 3]);
        }
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 3);
        // The first 48 idle connections made room for newer ones from the same address.
        assert!(
            report.evicted_connections + report.bad_connections >= 48,
            "{report:?}"
        );
        drop((idle, garbage));
    }

    /// A flood of bad connections logs one warning per `COMPLAIN_EVERY`, not one each.
    #[test]
    fn bad_connections_are_warned_about_once_in_a_while() {
        let mut complaints = Complaints::default();
        let logged = (0..1000)
            .filter(|i| complaints.note(format_args!("bad connection {i}")))
            .count();
        assert_eq!(logged, 1);
        assert_eq!(complaints.held, 999);
    }

    /// Every worker of a large job on one host may be saying hello at once: the cap per
    /// address leaves room for twice the job's workers.
    #[test]
    fn the_cap_per_address_fits_the_job() {
        assert_eq!(Pending::for_workers(4).per_ip, PENDING_PER_IP);
        assert_eq!(Pending::for_workers(40).per_ip, 80);
    }

    /// Connections still saying hello are capped per address (the oldest goes) and in all.
    #[test]
    fn pending_connections_are_capped() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut pending = Pending::for_workers(0);
        let mut evicted = 0;
        let mut kept = Vec::new();
        for _ in 0..PENDING_PER_IP + 5 {
            let client = TcpStream::connect(addr).unwrap();
            let (server_side, from) = listener.accept().unwrap();
            evicted += pending.make_room(from);
            let id = pending.next_id();
            pending.add(id, from, server_side);
            kept.push(client);
        }
        assert_eq!(evicted, 5);
        assert_eq!(pending.waiting.len(), PENDING_PER_IP);
        // The oldest five were shut down: their clients read the end of the stream.
        for (i, mut c) in kept.into_iter().enumerate() {
            c.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let closed = matches!(c.read(&mut [0u8; 1]), Ok(0));
            assert_eq!(closed, i < 5, "connection {i}");
        }
    }

    /// With a secret, a worker without it (or with another) is refused by name and never
    /// adds to the sums; one with it joins.
    #[test]
    fn a_secret_keeps_strangers_out_of_the_sums() {
        let secret = Secret::new(b"the job's secret, long enough".to_vec()).unwrap();
        let cfg = ServiceConfig {
            job: 3,
            world: 1,
            join: Duration::from_secs(10),
            idle: Duration::from_secs(10),
            secret: Some(secret.clone()),
        };
        let s = CollectiveService::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
        let addr = s.local_addr().unwrap();
        let server = s.spawn(Arc::new(AtomicBool::new(false)));
        let other = Secret::new(b"a stranger's guess, long enough".to_vec()).unwrap();
        for stranger in [None, Some(other)] {
            let who = Member {
                job: 3,
                rank: 0,
                world: 1,
                agreement: 0,
                secret: stranger,
            };
            let err = CollectiveClient::connect(
                addr,
                &who,
                Duration::from_secs(5),
                Duration::from_secs(5),
            )
            .unwrap_err();
            assert!(
                matches!(&err, CollectiveError::Refused { reason, .. } if reason.contains("does not verify")),
                "{err}"
            );
        }
        let who = Member {
            job: 3,
            rank: 0,
            world: 1,
            agreement: 0,
            secret: Some(secret),
        };
        let mut c =
            CollectiveClient::connect(addr, &who, Duration::from_secs(5), Duration::from_secs(5))
                .unwrap();
        assert_eq!(c.max(2.5).unwrap(), 2.5);
        drop(c);
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 1);
    }

    /// Sums and maxima come back identical to every worker, in any arrival order.
    #[test]
    fn sums_and_maxima_reach_every_worker() {
        let world = 3u16;
        let (addr, server) = service(world);
        let workers: Vec<_> = (0..world)
            .map(|rank| {
                std::thread::spawn(move || {
                    // Join in reverse order to show that rank, not arrival, orders the sum.
                    std::thread::sleep(Duration::from_millis(20 * u64::from(world - rank)));
                    let mut c = connect(addr, rank, world, 7).unwrap();
                    let r = f32::from(rank);
                    let mut v = vec![r, 0.1 * r, -r, 1e-8];
                    c.all_reduce(ReduceOp::Sum, &mut v).unwrap();
                    let m = c.max(r * 2.0 - 3.0).unwrap();
                    (v, m)
                })
            })
            .collect();
        let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        for (v, m) in &results {
            assert_eq!(v, &results[0].0, "every worker holds the same bits");
            assert_eq!(v[0], 3.0);
            assert_eq!(v[2], -3.0);
            // Summed in f64, rounded once.
            let tenth = |r: f32| f64::from(0.1 * r);
            assert_eq!(v[1], (tenth(1.0) + tenth(2.0)) as f32);
            assert_eq!(v[3], (3.0 * f64::from(1e-8f32)) as f32);
            assert_eq!(*m, 1.0);
        }
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 2);
        assert_eq!(report.values_in, 3 * 5);
    }

    /// Two jobs at one address: each job's rounds sum its own workers only, one job's round
    /// never waits for the other's workers, and a hello for a job the service does not run is
    /// refused by name.
    #[test]
    fn jobs_sharing_the_service_sum_apart() {
        let cfg = |job, world| ServiceConfig {
            job,
            world,
            join: Duration::from_secs(10),
            idle: Duration::from_secs(10),
            secret: None,
        };
        let s = CollectiveService::bind_jobs(
            "127.0.0.1:0".parse().unwrap(),
            vec![(cfg(3, 2), None), (cfg(4, 3), None)],
        )
        .unwrap();
        let addr = s.local_addr().unwrap();
        let server = s.spawn(Arc::new(AtomicBool::new(false)));
        let member = |job, rank, world| Member {
            job,
            rank,
            world,
            agreement: 0,
            secret: None,
        };
        let wait = Duration::from_secs(10);
        let err = CollectiveClient::connect(addr, &member(9, 0, 2), wait, wait).unwrap_err();
        assert!(
            matches!(&err, CollectiveError::Refused { reason, .. } if reason.contains("runs jobs 3, 4")),
            "{err}"
        );
        // Job 4 finishes three rounds while job 3's worker 1 has not even connected.
        let job4: Vec<_> = (0..3u16)
            .map(|rank| {
                std::thread::spawn(move || {
                    let mut c =
                        CollectiveClient::connect(addr, &member(4, rank, 3), wait, wait).unwrap();
                    (0..3)
                        .map(|round| {
                            let mut v = vec![f32::from(rank) + round as f32];
                            c.all_reduce(ReduceOp::Sum, &mut v).unwrap();
                            v[0]
                        })
                        .collect::<Vec<f32>>()
                })
            })
            .collect();
        let early = std::thread::spawn(move || {
            let mut c = CollectiveClient::connect(addr, &member(3, 0, 2), wait, wait).unwrap();
            let mut v = vec![100.0];
            c.all_reduce(ReduceOp::Sum, &mut v).unwrap();
            v[0]
        });
        for w in job4 {
            assert_eq!(w.join().unwrap(), vec![3.0, 6.0, 9.0]);
        }
        let mut late = CollectiveClient::connect(addr, &member(3, 1, 2), wait, wait).unwrap();
        let mut v = vec![1.0];
        late.all_reduce(ReduceOp::Sum, &mut v).unwrap();
        assert_eq!(v[0], 101.0);
        assert_eq!(early.join().unwrap(), 101.0);
        drop(late);
        let report = server.join().unwrap().unwrap();
        assert_eq!(report.rounds, 3 + 1);
        assert_eq!(report.values_in, 3 * 3 + 2);
    }

    #[test]
    fn workers_with_other_settings_are_refused() {
        let (addr, server) = service(2);
        let a = std::thread::spawn(move || connect(addr, 0, 2, 1));
        std::thread::sleep(Duration::from_millis(50));
        match connect(addr, 1, 2, 2) {
            Err(CollectiveError::Refused { reason, .. }) => {
                assert!(reason.contains("other settings"), "{reason}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // A second worker 0 is refused too; then the right worker 1 completes the job.
        match connect(addr, 0, 2, 1) {
            Err(CollectiveError::Refused { reason, .. }) => {
                assert!(reason.contains("already connected"), "{reason}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let b = connect(addr, 1, 2, 1).unwrap();
        let a = a.join().unwrap().unwrap();
        drop((a, b));
        assert_eq!(server.join().unwrap().unwrap().rounds, 0);
    }

    /// A worker that dies mid-job ends the round for everyone with its name.
    #[test]
    fn a_lost_worker_fails_the_others() {
        let (addr, server) = service(2);
        let a = std::thread::spawn(move || {
            let mut c = connect(addr, 0, 2, 0).unwrap();
            let mut v = [1.0f32; 4];
            c.all_reduce(ReduceOp::Sum, &mut v)
        });
        let b = connect(addr, 1, 2, 0).unwrap();
        drop(b);
        let err = a.join().unwrap().unwrap_err().to_string();
        assert!(err.contains("worker 1"), "{err}");
        let err = server.join().unwrap().unwrap_err().to_string();
        assert!(err.contains("worker 1"), "{err}");
    }

    /// With the switch's liveness table, a round waits for a worker as long as the switch
    /// hears from it — far past `idle` — and names it once it falls silent.
    #[test]
    fn a_live_worker_is_waited_for_and_a_silent_one_named() {
        let world = 2;
        let cfg = ServiceConfig {
            job: 3,
            world,
            join: Duration::from_secs(10),
            idle: Duration::from_millis(100),
            secret: None,
        };
        let liveness = Arc::new(Liveness::new(world, Duration::from_millis(300)));
        let service = CollectiveService::bind("127.0.0.1:0".parse().unwrap(), cfg)
            .unwrap()
            .with_liveness(liveness.clone());
        let addr = service.local_addr().unwrap();
        let server = service.spawn(Arc::new(AtomicBool::new(false)));
        // The switch hears both workers until `quiet` is set, then only worker 0.
        let quiet = Arc::new(AtomicBool::new(false));
        let hearing = {
            let (liveness, quiet) = (liveness.clone(), quiet.clone());
            std::thread::spawn(move || {
                for _ in 0..200 {
                    liveness.heard(0, Instant::now());
                    if !quiet.load(Ordering::Relaxed) {
                        liveness.heard(1, Instant::now());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let slow = std::thread::spawn(move || {
            let mut c = connect(addr, 1, world, 0).unwrap();
            // Ten times the service's idle time computing, then a round.
            std::thread::sleep(Duration::from_secs(1));
            c.all_reduce(ReduceOp::Sum, &mut [2.0f32]).unwrap();
            c
        });
        let mut fast = connect(addr, 0, world, 0).unwrap();
        let mut v = [1.0f32];
        fast.all_reduce(ReduceOp::Sum, &mut v).unwrap();
        assert_eq!(v, [3.0]);
        let slow = slow.join().unwrap();
        // Worker 1 falls silent (alive but unheard: a hung process) and sends nothing.
        quiet.store(true, Ordering::Relaxed);
        let err = fast
            .all_reduce(ReduceOp::Sum, &mut v)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("worker 1") && err.contains("heard nothing"),
            "{err}"
        );
        drop(slow);
        hearing.join().unwrap();
        let err = server.join().unwrap().unwrap_err().to_string();
        assert!(err.contains("worker 1"), "{err}");
    }

    #[test]
    fn disagreeing_rounds_are_an_error() {
        let (addr, server) = service(2);
        let a = std::thread::spawn(move || {
            let mut c = connect(addr, 0, 2, 0).unwrap();
            c.all_reduce(ReduceOp::Sum, &mut [1.0f32; 4])
        });
        let mut b = connect(addr, 1, 2, 0).unwrap();
        let err = b.all_reduce(ReduceOp::Sum, &mut [1.0f32; 3]).unwrap_err();
        assert!(err.to_string().contains("disagree"), "{err}");
        assert!(a.join().unwrap().is_err());
        assert!(server.join().unwrap().is_err());
    }
}
