//! Several jobs on one switch process at the same time, over UDP on loopback: each job's
//! results are bit-identical to its run alone, and a third job's crafted packets — valid
//! headers carrying its own and the others' job ids, sent from an admitted address and from
//! one that never said hello — change nothing and are counted by reason.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_dataplane::control::{Control, Hello, Secret, CONTROL_VERSION};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::switch::DropReason;
use switchgnn_dataplane::wire::{self, Flags, PacketType, Repr};
use switchgnn_datasets::{LoadOptions, NoProgress, Source};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_transport::loopback::{run_exchanges_together, run_single_exchange, ExchangeJob};
use switchgnn_transport::server::{ServedJob, ServerConfig};
use switchgnn_transport::ShimConfig;
use switchgnn_transport::{ExchangeKind, Session, Timeouts};

const WIDTH: usize = 24;

/// The exchange plan of `kind` for `workers` on a synthetic graph, several blocks per layer.
fn exchange_plan(data: &str, workers: u32, kind: ExchangeKind) -> Arc<ExchangePlan> {
    let source: Source = data.parse().unwrap();
    let dataset = source.load(&LoadOptions::default(), &NoProgress).unwrap();
    let spec = PlanSpec::new(dataset.name.clone(), workers, vec![WIDTH]).switch_memory(32 << 10);
    let plan = Plan::prepare(&dataset, &spec, &|_| {}).unwrap();
    let session = Session::new(&plan, &dataset.graph, kind).unwrap();
    session.layers[0].clone()
}

fn job(
    id: u16,
    kind: ExchangeKind,
    plan: Arc<ExchangePlan>,
    secret: Option<Secret>,
) -> ExchangeJob {
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(id));
    let features: Vec<f32> = (0..plan.owner.len() * WIDTH)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    ExchangeJob {
        job: id,
        kind,
        plan,
        features: Arc::new(features),
        scale: Scale::for_bound(1.0, 64).unwrap(),
        secret,
    }
}

fn server(faults: ShimConfig) -> ServerConfig {
    ServerConfig {
        // A job that stalls fails within seconds (what a broken isolation would show as).
        timeouts: Timeouts {
            join_ms: 60_000,
            peer_ms: 2_000,
            ..Timeouts::loopback()
        },
        faults,
        ..ServerConfig::loopback(1, 1, 1024)
    }
}

/// `job`'s outputs with a switch of its own.
fn alone(
    job: &ExchangeJob,
    faults: ShimConfig,
) -> Vec<switchgnn_dataplane::engine::ExchangeOutput> {
    let cfg = ServerConfig {
        job: job.job,
        world: job.plan.workers,
        secret: job.secret.clone(),
        ..server(faults)
    };
    let (_, outputs) = run_single_exchange(
        job.kind,
        job.plan.clone(),
        &job.features,
        job.scale,
        cfg,
        false,
    )
    .unwrap();
    outputs
}

/// A packet of job `job` from worker `worker` with a plausible header.
fn crafted(packet_type: PacketType, job: u16, worker: u16, seq: u32) -> Vec<u8> {
    let lanes = if packet_type == PacketType::Data || packet_type == PacketType::Reduce {
        8
    } else {
        0
    };
    Repr {
        packet_type,
        flags: Flags::default(),
        layer: 0,
        job,
        src: seq % 50,
        dst: (seq + 1) % 50,
        block: 0,
        count: 1,
        worker,
        chunk: 0,
        lanes,
        epoch: 0,
        sequence: seq,
    }
    .to_bytes(&vec![1 << 20; usize::from(lanes)])
}

#[test]
fn jobs_sharing_a_switch_get_their_own_results_and_nobody_else_can_touch_them() {
    let secret = Secret::new(b"job two's secret, long enough to use".to_vec()).unwrap();
    let jobs = [
        job(
            1,
            ExchangeKind::Switchgnn,
            exchange_plan("synthetic:small,scale=0.25", 3, ExchangeKind::Switchgnn),
            None,
        ),
        job(
            2,
            ExchangeKind::Reduce,
            exchange_plan("synthetic:small,scale=0.2,seed=9", 2, ExchangeKind::Reduce),
            Some(secret),
        ),
    ];
    // Job 3 is served too; its rank 0 is the intruder, its rank 1 never comes.
    let intruder_plan = exchange_plan("synthetic:small,scale=0.1,seed=4", 2, ExchangeKind::Host);
    let intruder_session = Arc::new(Session::from_layers(
        ExchangeKind::Host,
        vec![intruder_plan],
    ));
    for (name, faults) in [
        ("no faults", ShimConfig::default()),
        (
            "1% loss",
            ShimConfig {
                loss: 0.01,
                seed: 3,
                ..ShimConfig::default()
            },
        ),
    ] {
        let idle = ServedJob {
            job: 3,
            world: 2,
            session: intruder_session.clone(),
            timeouts: server(faults).timeouts,
            secret: None,
            allreduce_slots: 8,
            allreduce_best_effort: false,
        };
        let from_member = AtomicU64::new(0);
        let from_stranger = AtomicU64::new(0);
        let hello = Hello {
            control_version: CONTROL_VERSION,
            wire_version: wire::VERSION,
            job: 3,
            rank: 0,
            world: 2,
            mode: intruder_session.mode.name().to_string(),
            plan_checksum: intruder_session.checksum,
            proof: None,
        };
        let (report, together) =
            run_exchanges_together(&server(faults), &jobs, vec![idle], |switch, done| {
                intrude(switch, done, &hello, &from_member, &from_stranger)
            })
            .unwrap();
        for (job, outputs) in jobs.iter().zip(&together) {
            assert_eq!(
                outputs,
                &alone(job, faults),
                "{name}: job {} differs from its run alone",
                job.job
            );
        }
        let k = &report.counters;
        let sent = from_member.load(Ordering::Relaxed);
        let lost = report.ingress.socket_drops;
        let refused = k.dropped(DropReason::NotAdmitted);
        assert!(sent > 0, "{name}: the intruder sent nothing");
        // Every crafted packet from the admitted intruder was dropped as not its own (and
        // nothing else was): only what the kernel itself dropped is missing.
        assert!(
            refused <= sent && refused + lost >= sent,
            "{name}: {refused} packets refused of {sent} crafted ({lost} lost in the kernel): {:?}",
            k.drops()
        );
        let stranger = from_stranger.load(Ordering::Relaxed);
        let unknown: u64 = report.jobs.iter().map(|j| j.unknown_packets).sum();
        assert!(
            unknown <= stranger && unknown + lost >= stranger,
            "{name}: {unknown} packets from the stranger counted of {stranger}"
        );
        let ids: Vec<u16> = report.jobs.iter().map(|j| j.job).collect();
        assert_eq!(ids, [1, 2, 3]);
        let ports: Vec<u16> = report.jobs.iter().map(|j| j.first_port).collect();
        assert_eq!(ports, [0, 3, 5], "each job its own ports");
        assert_eq!(
            report.jobs[2].peers.len(),
            1,
            "the intruder was admitted to job 3"
        );
        assert_eq!(k.exchanges_completed, 2, "{name}");
    }
}

/// Say hello as job 3's rank 0, then until `done` (for 3 s at most): crafted packets for jobs 1 and 2 (and
/// for job 3 as its absent rank 1) from the admitted socket, and the same from a socket
/// that never said hello. Counts what each socket sent.
fn intrude(
    switch: SocketAddr,
    done: &AtomicBool,
    hello: &Hello,
    from_member: &AtomicU64,
    from_stranger: &AtomicU64,
) {
    let member = UdpSocket::bind("127.0.0.1:0").unwrap();
    member
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut welcomed = false;
    let mut buf = [0u8; 2048];
    for _ in 0..50 {
        member
            .send_to(&Control::Hello(hello.clone()).encode(), switch)
            .unwrap();
        if let Ok((n, _)) = member.recv_from(&mut buf) {
            if let Some(Ok(Control::Welcome { .. })) = Control::decode(&buf[..n]) {
                welcomed = true;
                break;
            }
        }
    }
    assert!(welcomed, "job 3 admits its rank 0");
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let kinds = [
        PacketType::Join,
        PacketType::Data,
        PacketType::BlockDone,
        PacketType::Raw,
        PacketType::Fetch,
        PacketType::Reduce,
    ];
    let mut seq = 0u32;
    let started = std::time::Instant::now();
    while !done.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(3) {
        for &t in &kinds {
            for (job, worker) in [(1, 0), (1, 2), (2, 0), (2, 1), (3, 1)] {
                let bytes = crafted(t, job, worker, seq);
                member.send_to(&bytes, switch).unwrap();
                from_member.fetch_add(1, Ordering::Relaxed);
                stranger.send_to(&bytes, switch).unwrap();
                from_stranger.fetch_add(1, Ordering::Relaxed);
            }
        }
        seq += 1;
        std::thread::sleep(Duration::from_micros(500));
    }
}
