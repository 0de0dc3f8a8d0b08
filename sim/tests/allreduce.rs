//! The in-switch all-reduce on the simulated 100 Gb/s star, on the real chip the simulator
//! picks for the host count (SwitchSpec::for_hosts): exact, and within 1.2× of SwitchML's
//! bound — the time one worker's slices need to cross its link once — on simulated time.

use switchgnn_dataplane::fault::Faults;
use switchgnn_sim::allreduce::{allreduce_values, simulate_allreduce};
use switchgnn_sim::SimConfig;

fn sums(workers: u16, values: usize, seed: u64) -> Vec<i32> {
    let inputs: Vec<Vec<i32>> = (0..workers)
        .map(|r| allreduce_values(r, workers, values, seed))
        .collect();
    (0..values)
        .map(|i| inputs.iter().map(|v| i64::from(v[i])).sum::<i64>() as i32)
        .collect()
}

#[test]
fn thirty_two_workers_reach_the_link_bound_exactly() {
    let cfg = SimConfig::paper(32);
    assert!(!cfg.switch.chip.is_ideal(), "a real chip preset");
    let values = 200_000;
    let (sim, outputs) = simulate_allreduce(&cfg, values, 256, 1).unwrap();
    let want = sums(32, values, 1);
    for (rank, out) in outputs.iter().enumerate() {
        assert!(out == &want, "worker {rank}");
    }
    eprintln!(
        "32 workers, {values} values, 256 slots: {} ns, link bound {:.0} ns ({:.3}×)",
        sim.finish_ns,
        sim.link_ns,
        sim.ratio()
    );
    assert_eq!(sim.retransmits, 0);
    assert!(sim.ratio() <= 1.2, "{:.3}× the link bound", sim.ratio());
}

#[test]
fn losses_in_the_fabric_are_recovered_exactly() {
    let cfg = SimConfig {
        faults: Faults {
            duplicate: 0.01,
            reorder: 0.01,
            reorder_delay: 5_000,
            ..Faults::lossy(0.01)
        },
        fault_seed: 3,
        ..SimConfig::paper(8)
    };
    let values = 20_000;
    let (sim, outputs) = simulate_allreduce(&cfg, values, 64, 2).unwrap();
    let want = sums(8, values, 2);
    for (rank, out) in outputs.iter().enumerate() {
        assert!(out == &want, "worker {rank}");
    }
    assert!(sim.retransmits > 0);
}
