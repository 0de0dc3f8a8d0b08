//! The overload experiment, each protection on and off: a switch process slowed on purpose (a
//! fixed cost per datagram, a 256 KiB receive buffer) fed by eight workers at 10 Gb/s each,
//! with and without the switch's backlog signal (ECN while its socket backlog is deep, windows
//! capped at its share of the buffer) and the workers' congestion window. Prints time against
//! what the switch's measured capacity allows, and the kernel's drops.
//!
//! `cargo bench -p switchgnn-transport --bench overload [-- SCALE DELAY_US]` (defaults 1.0 and
//! 25: the synthetic small graph at full scale, ~40 K datagrams/s).

#[path = "../tests/support/overload.rs"]
mod overload;

use std::time::Duration;

use switchgnn_transport::ExchangeKind;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let scale: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let delay_us: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(25);
    let delay = Duration::from_micros(delay_us);
    println!(
        "overload: synthetic small ×{scale}, {} workers, {delay_us} µs per datagram at the switch",
        overload::WORKERS
    );
    for mode in [ExchangeKind::Switchgnn, ExchangeKind::Host] {
        let variants = [
            ("backlog signal and congestion window", true, true),
            ("congestion window only", false, true),
            ("backlog signal only", true, false),
            ("neither (rate-only AIMD)", false, false),
        ];
        // The work of the first, fully protected run: the datagrams the exchange needs.
        let mut needed = None;
        for (name, signal, cwnd) in variants {
            let what = format!("{mode:?}, {name}");
            let o = overload::run(mode, scale, delay, signal, cwnd);
            let (seconds, allowed, drops, _) = overload::report(&what, &o);
            let i = &o.switch.ingress;
            let needed = *needed.get_or_insert(i.datagrams);
            let exact = o.workers.iter().all(|w| {
                w.as_ref()
                    .is_ok_and(|w| w.exchanges.iter().all(|x| x.mismatched_rows == 0))
            });
            println!(
                "{what}: {seconds:.2} s = {:.2}× its own {allowed:.2} s of switch work, {:.2}× the \
                 {:.2} s the protected run's {needed} datagrams need at {:.0}/s; {drops} kernel \
                 drops = {:.2} % of the datagrams that reached the socket; exact: {exact}",
                seconds / allowed,
                seconds * i.capacity() / needed as f64,
                needed as f64 / i.capacity(),
                i.capacity(),
                100.0 * drops as f64 / (i.datagrams + drops).max(1) as f64
            );
        }
    }
}
