//! The simulator's chip runs every pass in the pipe of the aggregator it adds into, over that
//! pipe's recirculation path that the packet's hash picks (`switchgnn_chip::paths`, what `p4
//! entries` installs): sums stay exact with passes over looped ports, and a plan whose trips
//! sit on one pipe takes longer than one server of the chip's pooled bandwidth would.

use switchgnn_chip::{Bound, Chip, Load, Term};
use switchgnn_dataplane::engine::Timers;
use switchgnn_dataplane::fault::Faults;
use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::{BuildOptions, Dataset, Graph, NoProgress, Split, SplitFractions};
use switchgnn_partition::blocks::BlockMethod;
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_sim::modes::{
    direct_sums, exchange_plan, scale_for, simulate_exchange, ExchangeSetup,
};
use switchgnn_sim::sweep::host_cost;
use switchgnn_sim::{SimConfig, SimKind, SimMode, SwitchSpec};

const WORKERS: u16 = 8;
const WIDTH: usize = 64;
const MEMORY: u64 = 64 << 20;

fn plan(d: &Dataset, name: &str) -> Plan {
    let spec = PlanSpec::new(name, u32::from(WORKERS), vec![WIDTH])
        .switch_memory(MEMORY)
        .block_method(BlockMethod::Vertices);
    Plan::prepare(d, &spec, &|_| {}).unwrap()
}

fn setup() -> ExchangeSetup {
    ExchangeSetup {
        bundle: false,
        timers: Timers {
            result: 5_000_000,
            ..Timers::default()
        },
        ..ExchangeSetup::new(SimMode::of(SimKind::SwitchGnn), MEMORY)
    }
}

#[test]
fn sums_stay_exact_with_passes_over_looped_ports() {
    let d = generate(&Preset::Small.spec(1.0, 3).unwrap(), &NoProgress).unwrap();
    let p = plan(&d, "synthetic:small");
    let scale = scale_for(&d.graph);
    let want = direct_sums(&d.graph, &p.assignment, WIDTH, &scale);
    // 12 looped ports in each of the two pipes: 13 paths per pipe.
    let chip = Chip::preset("tofino1-32")
        .unwrap()
        .with_loopback_ports(24, 100.0)
        .unwrap();
    let lossy = Faults {
        loss: 0.01,
        duplicate: 0.01,
        reorder: 0.01,
        reorder_delay: 20_000,
        ..Faults::none()
    };
    let mut times = Vec::new();
    for faults in [Faults::none(), lossy] {
        let xplan =
            exchange_plan(SimMode::of(SimKind::SwitchGnn), &d.graph, &p, 0, 7, None).unwrap();
        let cfg = SimConfig {
            switch: SwitchSpec::on(chip),
            faults,
            fault_seed: 5,
            ..SimConfig::paper(WORKERS)
        };
        let (sim, outputs) = simulate_exchange(xplan, &cfg, &setup(), scale).unwrap();
        for (w, (got, want)) in outputs.iter().zip(&want).enumerate() {
            assert_eq!(got.sums, want.sums, "worker {w}, {faults:?}");
        }
        assert!(sim.run.recirculation.recirculations > 0);
        times.push(sim.run.finish_ns);
    }
    eprintln!("looped ports: {} ns clean, {} ns lossy", times[0], times[1]);
}

/// A hub every other vertex links to: a destination of nearly every remote vertex, whose
/// aggregators the placement puts in one pipe, and the other vertices' in the others.
fn hub(n: u32) -> Dataset {
    let edges: Vec<(u32, u32)> = (1..n).map(|v| (v, 0)).collect();
    let graph = Graph::from_edges(n as usize, &edges, BuildOptions::default()).unwrap();
    let split = Split::random(n as usize, SplitFractions::default(), 0).unwrap();
    Dataset::new("hub", graph, None, None, split).unwrap()
}

#[test]
fn trips_that_sit_on_one_pipe_take_longer_than_the_pooled_bandwidth_says() {
    let d = hub(4_000);
    let p = plan(&d, "hub");
    let run = |chip: Chip| {
        let xplan =
            exchange_plan(SimMode::of(SimKind::SwitchGnn), &d.graph, &p, 0, 7, None).unwrap();
        let cfg = SimConfig {
            switch: SwitchSpec::on(chip),
            ..SimConfig::paper(WORKERS)
        };
        let load = Load::of(&xplan, cfg.frame_overhead);
        let bound = Bound::of(&chip, &load, &host_cost(&cfg));
        // Counted per pipe and path as the simulated chip places the destinations.
        let spread = load.spread_on(&xplan, &chip, Some(MEMORY), cfg.frame_overhead);
        let per_path = Bound::of(&chip, &spread, &host_cost(&cfg));
        let (sim, outputs) = simulate_exchange(xplan, &cfg, &setup(), scale_for(&d.graph)).unwrap();
        assert!(outputs.iter().all(|o| !o.sums.is_empty()));
        // The chip acknowledges a data packet on its first pass, as the program mirrors the
        // ack: a lossless run resends nothing however long its trips queue (acknowledged
        // after the last pass, this run resent thousands of chunks).
        assert_eq!(sim.retransmits, 0);
        (sim.run.finish_ns as f64, bound, per_path)
    };
    // Tofino 2, four pipes of one 100 Gb/s internal port each.
    let four_pipes = Chip::preset("tofino2").unwrap();
    let (t, b, b_path) = run(four_pipes);
    // The pooled model: one server of the four ports' 400 Gb/s, which is what one pipe with a
    // port of that rate is.
    let pooled = Chip {
        recirculation_gbps: 400.0,
        ..four_pipes
    }
    .with_recirculation_ports(1)
    .unwrap();
    let (t_pooled, b_pooled, b_pooled_path) = run(pooled);
    eprintln!(
        "four pipes {:.1} µs (bound {:.1} µs, {}), pooled {:.1} µs (bound {:.1} µs)",
        t / 1e3,
        b.seconds * 1e6,
        b.dominant.name(),
        t_pooled / 1e3,
        b_pooled.seconds * 1e6
    );
    assert_eq!(b.dominant, Term::Recirculation);
    assert_eq!(b.recirculation_s, b_pooled.recirculation_s);
    // The pooled run meets the bound. With the pipes' own ports, every remote vertex's packet
    // makes its trip to the hub in the hub's pipe (after its first pass, which checks it, in
    // the home pipe) and waits for that pipe's port alone, while the other pipes share the
    // hub's chains and the readouts of its neighbours' sums (one pass each on a Tofino 2): the
    // placement evens out passes, not trips. (Measured: 119.9 µs against 92.9 µs pooled; on a
    // Tofino 1, whose neighbours' sums take two readout passes each, the trips come out even.)
    assert!(t_pooled <= 1.1 * b_pooled.seconds * 1e9);
    assert!(t >= b.seconds * 1e9);
    // Counted per pipe and path, the bound sees the one busy pipe and stays below the run;
    // on the one-pipe chip there is nothing more to see.
    eprintln!(
        "per path: bound {:.1} µs ({}), pooled chip {:.1} µs",
        b_path.seconds * 1e6,
        b_path.dominant.name(),
        b_pooled_path.seconds * 1e6
    );
    assert!(t > 1.15 * t_pooled, "{t} ns against {t_pooled} ns pooled");
    assert!(b_path.recirculation_s > 1.15 * b.recirculation_s);
    assert!(t >= b_path.seconds * 1e9);
    assert!(t <= 1.1 * b_path.seconds * 1e9);
    assert_eq!(b_pooled_path.recirculation_s, b_pooled.recirculation_s);
}
