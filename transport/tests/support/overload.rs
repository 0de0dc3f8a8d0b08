//! The overload experiment shared by the test (`tests/overload.rs`) and the benchmark
//! (`benches/overload.rs`): a switch process slowed on purpose, with a small receive buffer,
//! fed by eight workers.

use std::sync::Arc;
use std::time::Duration;

use switchgnn_datasets::{Dataset, LoadOptions, NoProgress, Source};
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_transport::loopback::{run_exchange_job, LoopbackOutcome};
use switchgnn_transport::server::ServerConfig;
use switchgnn_transport::{ExchangeKind, Link, Overload, Session, Timeouts};

pub(crate) const WORKERS: u16 = 8;

pub(crate) fn session(mode: ExchangeKind, scale: f64) -> (Arc<Dataset>, Arc<Session>) {
    let source: Source = format!("synthetic:small,scale={scale}").parse().unwrap();
    let dataset = source.load(&LoadOptions::default(), &NoProgress).unwrap();
    let spec =
        PlanSpec::new(dataset.name.clone(), u32::from(WORKERS), vec![128]).switch_memory(1 << 20);
    let plan = Plan::prepare(&dataset, &spec, &|_| {}).unwrap();
    let session = Session::new(&plan, &dataset.graph, mode).unwrap();
    (Arc::new(dataset), Arc::new(session))
}

/// A switch that spends `delay` on every datagram, with a small receive buffer, fed by
/// `WORKERS` senders at 10 Gb/s each.
/// With `backlog_signal`, the switch marks ECN on a deep backlog and caps windows in its
/// welcome; with `congestion_window`, the workers keep one.
pub(crate) fn slow_switch(
    delay: Duration,
    backlog_signal: bool,
    congestion_window: bool,
) -> ServerConfig {
    ServerConfig {
        timeouts: Timeouts::loopback(),
        link: Link {
            congestion_window,
            ..Link::default()
        },
        overload: Overload {
            backlog_signal,
            recv_buffer: Some(256 << 10),
            per_packet_delay: delay,
        },
        ..ServerConfig::loopback(
            1,
            WORKERS,
            ((1 << 20) / switchgnn_dataplane::switch::AGGREGATOR_BYTES) as usize,
        )
    }
}

pub(crate) fn run(
    mode: ExchangeKind,
    scale: f64,
    delay: Duration,
    backlog_signal: bool,
    congestion_window: bool,
) -> LoopbackOutcome {
    let (dataset, session) = session(mode, scale);
    let switch = slow_switch(delay, backlog_signal, congestion_window);
    run_exchange_job(&dataset, &session, switch, 1).unwrap()
}

/// Exchange time: per exchange, the slowest worker's (start-up, handshakes and the final check
/// are left out), summed.
pub(crate) fn exchange_seconds(o: &LoopbackOutcome) -> f64 {
    let workers: Vec<_> = o.workers.iter().flatten().collect();
    let Some(first) = workers.first() else {
        return o.seconds;
    };
    (0..first.exchanges.len())
        .map(|i| {
            workers
                .iter()
                .map(|w| w.exchanges[i].seconds)
                .fold(0.0, f64::max)
        })
        .sum()
}

/// Print what the run did; returns (exchange seconds, seconds the switch's capacity allows,
/// kernel drops, datagrams sent to the switch).
pub(crate) fn report(what: &str, o: &LoopbackOutcome) -> (f64, f64, u64, u64) {
    let i = &o.switch.ingress;
    let packets = o.switch.counters.packets_in + o.switch.malformed_control;
    let allowed = i.datagrams as f64 / i.capacity();
    let seconds = exchange_seconds(o);
    eprintln!(
        "{what}: {seconds:.2} s of exchanges ({:.2} s in all); the switch handled {} datagrams at {:.0}/s (busy {:.2} s), {} \
         kernel drops ({:.2} %), backlog peak {} KiB of {} KiB, {} congested rounds of {}, \
         window {}, {} ECN marks",
        o.seconds,
        i.datagrams,
        i.capacity(),
        i.busy_s,
        i.socket_drops,
        100.0 * i.socket_drops as f64 / (i.datagrams + i.socket_drops).max(1) as f64,
        i.peak_backlog_bytes >> 10,
        i.buffer_bytes >> 10,
        i.congested_rounds,
        i.rounds,
        i.advertised_window,
        o.switch.counters.ecn_marks,
    );
    for w in o.workers.iter().flatten() {
        let (mut rt, mut f, mut fr, mut sent) = (0, 0, 0, 0);
        for x in &w.exchanges {
            rt += x.engine.retransmits;
            f += x.engine.fetches_sent;
            fr += x.engine.fetch_replies;
            sent += x.engine.packets_sent;
        }
        eprintln!(
            "  worker {}: {sent} sent, {rt} retransmits, {f} fetches, {fr} fetch replies",
            w.rank
        );
    }
    (seconds, allowed, i.socket_drops, packets)
}
