//! The control plane driven by the in-memory network on simulated time: workers join through
//! it, compute between exchanges for longer than the peer timeout while their heartbeats keep
//! them alive, a killed worker is named within the timeout and the others are told, workers
//! rejoin a restarted switch, and a drained switch starts no new exchange. Every exchange that
//! completes is checked against the direct computation.

mod common;

use std::sync::Arc;

use common::{dataset_of, random_graph};
use switchgnn_conformance::Fixture;
use switchgnn_dataplane::cc::Aimd;
use switchgnn_dataplane::control::nodes::{ControlledSwitch, ControlledWorker};
use switchgnn_dataplane::control::{
    ControlTimers, Hello, SwitchControlConfig, SwitchFailure, WorkerControl, WorkerFailure,
    CONTROL_VERSION,
};
use switchgnn_dataplane::engine::ExchangeOutput;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::network::{Faults, Network, NetworkConfig};
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::reference::encode_matrix;
use switchgnn_dataplane::switch::{JobConfig, Switch, SwitchConfig};
use switchgnn_dataplane::{ExchangeId, ExchangeKind, Nanos};
use switchgnn_scheduler::exchange::remote_sums;

const MS: Nanos = 1_000_000;
const KIND: ExchangeKind = ExchangeKind::Switchgnn;

fn timers() -> ControlTimers {
    ControlTimers {
        join: 2_000 * MS,
        peer: 200 * MS,
        retry: 20 * MS,
    }
}

struct Cluster {
    fixture: Fixture,
    scale: Scale,
    want: Vec<ExchangeOutput>,
    net: Network,
    switch: ControlledSwitch,
    workers: Vec<ControlledWorker>,
}

impl Cluster {
    /// Four workers around a fresh switch, with 1% loss on every hop; nobody has joined yet.
    fn new() -> Cluster {
        let dataset = dataset_of(random_graph(400, 1_600, 5));
        let fixture = Fixture::new(&dataset, 4, 40, 16 << 10);
        let most = (0..400).map(|v| dataset.graph.degree(v)).max().unwrap_or(1);
        let scale = Scale::for_bound(1.0, most).unwrap();
        let plan = fixture.plan(KIND).clone();
        let (encoded, _) = encode_matrix(&scale, &fixture.features, plan.width);
        let want = remote_sums(&fixture.graph, &fixture.assignment, plan.width, &encoded);
        let faults = Faults {
            loss: 0.01,
            ..Faults::none()
        };
        let workers = (0..plan.workers)
            .map(|rank| {
                let control = WorkerControl::new(hello(rank, plan.workers), timers(), 0);
                ControlledWorker::new(control)
            })
            .collect();
        Cluster {
            switch: fresh_switch(&plan, 0),
            net: Network::new(NetworkConfig::new(faults, 3), plan.workers),
            fixture,
            scale,
            want,
            workers,
        }
    }

    fn plan(&self) -> Arc<ExchangePlan> {
        self.fixture.plan(KIND).clone()
    }

    /// Run until every live worker has joined.
    fn join(&mut self, live: &[usize]) {
        let until = self.net.now() + timers().join;
        self.net
            .run_while(&mut self.switch, &mut self.workers, until, |w| {
                live.iter().all(|&i| w[i].control.is_joined())
            })
            .unwrap();
        for &i in live {
            assert!(self.workers[i].control.is_joined(), "worker {i} joined");
        }
    }

    /// Exchange `epoch` on every worker; `Ok` once each is exact, `Err` with the time spent
    /// when some worker's control plane failed first.
    fn exchange(&mut self, epoch: u32) -> Result<(), Nanos> {
        let now = self.net.now();
        let rate = NetworkConfig::new(Faults::none(), 0).link.rate;
        let id = ExchangeId {
            job: 1,
            epoch,
            layer: 0,
            backward: false,
        };
        for (w, worker) in self.workers.iter_mut().enumerate() {
            let cc = Box::new(Aimd::new(rate));
            let engine = self
                .fixture
                .engine(KIND, w as u16, id, epoch + 1, self.scale, cc, now);
            worker.start(now, engine);
        }
        let started = self.net.now();
        self.net
            .run_while(
                &mut self.switch,
                &mut self.workers,
                started + 20 * timers().peer,
                |w| {
                    w.iter().all(|w| w.exchange_finished())
                        || w.iter().any(|w| w.control.failure().is_some())
                },
            )
            .unwrap();
        if self.workers.iter().any(|w| !w.exchange_finished()) {
            return Err(self.net.now() - started);
        }
        let now = self.net.now();
        for (w, worker) in self.workers.iter_mut().enumerate() {
            let engine = worker.take_engine(now).unwrap();
            assert_eq!(engine.output(), &self.want[w], "worker {w}, epoch {epoch}");
        }
        Ok(())
    }

    /// Every worker computes (no exchange) for `duration`.
    fn compute(&mut self, duration: Nanos) {
        let until = self.net.now() + duration;
        self.net
            .run_until(&mut self.switch, &mut self.workers, until)
            .unwrap();
    }
}

fn hello(rank: u16, world: u16) -> Hello {
    Hello {
        control_version: CONTROL_VERSION,
        wire_version: switchgnn_dataplane::wire::VERSION,
        job: 1,
        rank,
        world,
        mode: KIND.name().into(),
        plan_checksum: 9,
        proof: None,
    }
}

fn fresh_switch(plan: &Arc<ExchangePlan>, now: Nanos) -> ControlledSwitch {
    let mut switch = Switch::new(SwitchConfig {
        ports: plan.workers,
        ..SwitchConfig::with_memory(16 << 10)
    });
    switch
        .add_job(JobConfig::new(1, vec![plan.clone()]))
        .unwrap();
    let control = SwitchControlConfig {
        job: 1,
        world: plan.workers,
        mode: KIND.name().into(),
        plan_checksum: 9,
        timers: timers(),
        window: 0,
        allreduce_slots: 0,
        rack: None,
    };
    ControlledSwitch::new(switch, control, now)
}

#[test]
fn a_computation_of_three_peer_timeouts_is_not_a_lost_worker() {
    let mut c = Cluster::new();
    c.join(&[0, 1, 2, 3]);
    c.exchange(0).unwrap();
    c.compute(3 * timers().peer + 50 * MS);
    assert_eq!(c.switch.control.failure(), None);
    assert!(c.workers.iter().all(|w| w.control.is_joined()));
    assert!(c.switch.control.counters().heartbeats_received >= 4 * 12);
    c.exchange(1).unwrap();
    assert_eq!(c.switch.switch.counters().exchanges_completed, 2);
}

#[test]
fn a_killed_worker_is_named_within_the_timeout_and_the_others_are_told() {
    let mut c = Cluster::new();
    c.join(&[0, 1, 2, 3]);
    c.exchange(0).unwrap();
    c.compute(10 * MS);
    c.net.kill(2);
    // The others start the next exchange; it cannot finish without worker 2.
    let spent = c.exchange(1).unwrap_err();
    // Let the aborts reach everyone.
    c.compute(10 * MS);
    let Some(SwitchFailure::WorkerLost {
        rank,
        silent,
        during,
        ..
    }) = c.switch.control.failure()
    else {
        panic!("worker lost: {:?}", c.switch.control.failure());
    };
    assert_eq!(*rank, 2);
    assert!(during.contains("waiting for workers [2]"), "{during}");
    // Named at the first check past the timeout: within a heartbeat interval of it.
    assert!(*silent <= timers().peer + timers().quiet(), "{silent}");
    assert!(
        spent <= timers().peer + timers().quiet() + 10 * MS,
        "{spent}"
    );
    for w in [0, 1, 3] {
        let Some(WorkerFailure::Aborted { reason }) = c.workers[w].control.failure() else {
            panic!("worker {w}: {:?}", c.workers[w].control.state());
        };
        assert!(reason.contains("worker 2"), "{reason}");
    }
}

#[test]
fn workers_rejoin_a_restarted_switch() {
    let mut c = Cluster::new();
    c.join(&[0, 1, 2, 3]);
    c.exchange(0).unwrap();
    // The switch restarts while the workers compute: it knows nobody.
    c.switch = fresh_switch(&c.plan(), c.net.now());
    c.compute(5 * MS);
    // The next exchange's first packets are answered `Unknown`; the workers say hello again
    // and the exchange completes on the new switch.
    c.exchange(1).unwrap();
    assert!(c.workers.iter().all(|w| w.control.rejoins() >= 1));
    assert!(c.switch.control.counters().unknown_packets >= 4);
    assert_eq!(c.switch.switch.counters().exchanges_completed, 1);
}

#[test]
fn a_drained_switch_starts_no_new_exchange() {
    let mut c = Cluster::new();
    c.join(&[0, 1, 2, 3]);
    c.exchange(0).unwrap();
    let now = c.net.now();
    c.switch.control.drain(now, 50 * MS);
    let spent = c.exchange(1);
    assert!(spent.is_err(), "no exchange starts on a draining switch");
    assert!(c.switch.control.counters().drained_joins >= 4);
    assert!(c.switch.control.is_finished(c.net.now()));
    assert_eq!(c.switch.switch.counters().exchanges_completed, 1);
}
