//! The simulator follows the chip model: on cases where one resource clearly dominates —
//! recirculation, the host links, the pipes' pass rate — the simulated exchange takes the chip
//! model's bound to within 10%, and it never beats the bound.

use switchgnn_chip::{Bound, Chip, Load, Term};
use switchgnn_dataplane::engine::Timers;
use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::{Dataset, NoProgress};
use switchgnn_partition::blocks::BlockMethod;
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_sim::modes::{exchange_plan, scale_for, simulate_exchange, ExchangeSetup};
use switchgnn_sim::sweep::host_cost;
use switchgnn_sim::{HostSpec, LinkSpec, SimConfig, SimMode, SwitchSpec, Topology};

const WORKERS: u16 = 8;
const WIDTH: usize = 64;
/// Aggregator memory that holds every block endpoint at once: one block, no barriers between
/// blocks that the bound does not count.
const MEMORY: u64 = 64 << 20;

fn dataset() -> Dataset {
    generate(&Preset::Small.spec(1.0, 3).unwrap(), &NoProgress).unwrap()
}

fn plan(d: &Dataset) -> Plan {
    let spec = PlanSpec::new("synthetic:small", u32::from(WORKERS), vec![WIDTH])
        .switch_memory(MEMORY)
        .block_method(BlockMethod::Vertices);
    Plan::prepare(d, &spec, &|_| {}).unwrap()
}

/// Simulated and bound times of `mode` on `chip` with hosts spending `per_packet_ns` on each
/// packet, ns, and the bound's dominant term. Links of 100 Gb/s with `delay_ns` of delay.
fn run(
    d: &Dataset,
    p: &Plan,
    mode: SimMode,
    chip: Chip,
    per_packet_ns: u64,
    delay_ns: u64,
) -> (f64, Bound) {
    let xplan = exchange_plan(mode, &d.graph, p, 0, 7, None).unwrap();
    let paper = SimConfig::paper(WORKERS);
    let link = LinkSpec {
        gbps: 100.0,
        delay_ns,
    };
    let cfg = SimConfig {
        topology: Topology::star(WORKERS, link),
        switch: SwitchSpec::on(chip),
        host: HostSpec {
            per_packet_ns,
            ..paper.host
        },
        ..paper
    };
    let bound = Bound::of(
        &chip,
        &Load::of(&xplan, cfg.frame_overhead),
        &host_cost(&cfg),
    );
    let setup = ExchangeSetup {
        mode,
        switch_memory: MEMORY,
        bundle: false,
        window: 512,
        timers: Timers {
            result: 5_000_000,
            ..Timers::default()
        },
        layer: 0,
        backward: false,
        control: None,
        rate_control: Default::default(),
        two_level: false,
    };
    let (sim, _) = simulate_exchange(xplan, &cfg, &setup, scale_for(&d.graph)).unwrap();
    (sim.run.finish_ns as f64, bound)
}

fn assert_follows(what: &str, simulated: f64, bound: &Bound, dominant: Term) {
    let b = bound.seconds * 1e9;
    eprintln!(
        "{what}: simulated {:.1} µs, bound {:.1} µs ({}), ratio {:.3}",
        simulated / 1e3,
        b / 1e3,
        bound.dominant.name(),
        simulated / b
    );
    assert_eq!(bound.dominant, dominant, "{what}: {bound:?}");
    assert!(simulated >= b, "{what}: the simulator beat the bound");
    assert!(
        simulated <= 1.1 * b,
        "{what}: {simulated} ns against a bound of {b} ns"
    );
}

#[test]
fn the_simulator_meets_the_bound_where_one_resource_dominates() {
    let d = dataset();
    let p = plan(&d);
    // SwitchGNN on a Tofino 1 with one recirculation port: every pass after a packet's first
    // goes around 100 Gb/s.
    let one_port = Chip::preset("tofino1-32")
        .unwrap()
        .with_recirculation_ports(1)
        .unwrap();
    let (t, b) = run(&d, &p, SimMode::SwitchGnn, one_port, 20, 2_000);
    assert_follows("recirculation", t, &b, Term::Recirculation);
    // The ideal chip, hosts that spend nothing per packet, and short links (the bound counts
    // no propagation delay, and this exchange takes only tens of microseconds): the links'
    // bandwidth bounds it.
    let ideal = Chip::preset("ideal").unwrap();
    let (t, b) = run(&d, &p, SimMode::SwitchGnn, ideal, 0, 100);
    assert_follows("host links", t, &b, Term::HostLink);
    // A chip with a slow pipeline and free recirculation: the pass rate.
    let slow = Chip {
        pass_rate_per_pipe: 2e7,
        recirculation_gbps: f64::INFINITY,
        ..Chip::preset("tofino1-32").unwrap()
    };
    let (t, b) = run(&d, &p, SimMode::SwitchGnn, slow, 20, 2_000);
    assert_follows("pass rate", t, &b, Term::Passes);
}

#[test]
fn the_ideal_chip_leaves_only_the_hosts() {
    let d = dataset();
    let p = plan(&d);
    let ideal = Chip::preset("ideal").unwrap();
    let (t, b) = run(&d, &p, SimMode::SwitchGnn, ideal, 20, 2_000);
    assert!(matches!(b.dominant, Term::HostLink | Term::HostPackets));
    assert!(t >= b.seconds * 1e9);
    // On a real chip the same exchange is slower: passes and recirculation cost time.
    let real = Chip::preset("tofino1-32").unwrap();
    let (t_real, b_real) = run(&d, &p, SimMode::SwitchGnn, real, 20, 2_000);
    assert!(t_real > t && b_real.seconds > b.seconds);
}
