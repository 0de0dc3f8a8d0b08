//! A switch process slower than its senders: its own socket backlog must reach their rate
//! control (ECN on everything it sends, a window capped at its share of the receive buffer),
//! so the exchange finishes near the switch's capacity, exactly, with almost no kernel drops.
//! `cargo bench -p switchgnn-transport --bench overload` runs the same with the signal off.

mod support;

use std::time::Duration;

use support::overload::{report, run};
use switchgnn_transport::loopback::LoopbackOutcome;
use switchgnn_transport::ExchangeKind;

fn assert_exact(o: LoopbackOutcome) {
    for w in o.workers {
        let w = w.unwrap_or_else(|e| panic!("worker: {e}"));
        for x in &w.exchanges {
            assert_eq!(x.mismatched_rows, 0, "worker {} exchange {}", w.rank, x.seq);
        }
    }
}

/// The switch handles at most ~40 K datagrams/s (25 µs each, a tenth of what 8 paced senders
/// offer): with the backlog signal the job takes at most twice what that capacity allows,
/// loses under 1 % of its datagrams in the kernel, and every sum is exact.
#[test]
fn a_slow_switch_slows_its_senders_instead_of_dropping() {
    for mode in [ExchangeKind::Switchgnn, ExchangeKind::Host] {
        let o = run(mode, 0.5, Duration::from_micros(25), true, true);
        let (seconds, allowed, drops, packets) = report(&format!("{mode:?}, signal on"), &o);
        assert!(o.switch.ingress.advertised_window > 0);
        assert!(
            (drops as f64) < 0.01 * packets as f64,
            "{mode:?}: {drops} socket drops of {packets} datagrams"
        );
        assert!(
            seconds <= 2.0 * allowed,
            "{mode:?}: {seconds:.2} s against {allowed:.2} s of switch capacity"
        );
        assert_exact(o);
    }
}
