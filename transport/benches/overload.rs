//! The overload experiment both ways: a switch process slowed on purpose (a fixed cost per
//! datagram, a 256 KiB receive buffer) fed by eight workers at 10 Gb/s each, with the
//! backlog signal on (ECN while its socket backlog is deep, windows capped at its share of
//! the buffer) and off. Prints time against what the switch's measured capacity allows, and
//! the kernel's drops.
//!
//! `cargo bench -p switchgnn-transport --bench overload [-- SCALE DELAY_US]` (defaults 1.0 and
//! 25: the synthetic small graph at full scale, ~40 K datagrams/s).

#[path = "../tests/support/overload.rs"]
mod overload;

use std::time::Duration;

use switchgnn_transport::ExchangeMode;

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
    for mode in [ExchangeMode::Switchgnn, ExchangeMode::Host] {
        for signal in [true, false] {
            let what = format!(
                "{mode:?}, backlog signal {}",
                if signal { "on" } else { "off" }
            );
            let o = overload::run(mode, scale, delay, signal);
            let (seconds, allowed, drops, packets) = overload::report(&what, &o);
            let exact = o.workers.iter().all(|w| {
                w.as_ref()
                    .is_ok_and(|w| w.exchanges.iter().all(|x| x.mismatched_rows == 0))
            });
            println!(
                "{what}: {seconds:.2} s = {:.2}× the {allowed:.2} s the switch's capacity allows; \
                 {drops} kernel drops = {:.2} % of {packets} datagrams; exact: {exact}",
                seconds / allowed,
                100.0 * drops as f64 / packets.max(1) as f64
            );
        }
    }
}
