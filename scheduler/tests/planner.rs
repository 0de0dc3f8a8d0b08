//! The planner's two entry points agree: `weigh` (counted-only plans, what `prepare` records)
//! predicts exactly what `choose` (plans that run) predicts, for every candidate kind.

use switchgnn_chip::{Chip, HostCost, Load};
use switchgnn_dataplane::wire::FRAME_OVERHEAD;
use switchgnn_dataplane::ExchangeKind;
use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::NoProgress;
use switchgnn_partition::{Plan, PlanSpec};
use switchgnn_scheduler::exchange::{exchange_plan, PlanOptions};
use switchgnn_scheduler::planner::{choose, weigh, CANDIDATES};

#[test]
fn weighing_counted_only_plans_predicts_what_the_running_plans_do() {
    let d = generate(
        &Preset::from_name("small").unwrap().spec(0.5, 3).unwrap(),
        &NoProgress,
    )
    .unwrap();
    let spec = PlanSpec::new(d.name.clone(), 8, vec![64]).switch_memory(256 << 10);
    let plan = Plan::prepare(&d, &spec, &|_| {}).unwrap();
    let cost = HostCost {
        delays: switchgnn_chip::Delays::NONE,
        link_gbps: 100.0,
        per_packet_ns: 20.0,
        frame_overhead: FRAME_OVERHEAD,
        framing: Default::default(),
    };
    for preset in ["tofino1-32", "tofino2"] {
        let chip = Chip::preset(preset).unwrap();
        let options = PlanOptions::default();
        let weighed = weigh(&d.graph, &plan, 0, &CANDIDATES, &chip, &cost, options).unwrap();
        let (chosen, kind, _) =
            choose(&d.graph, &plan, 0, &CANDIDATES, &chip, &cost, options).unwrap();
        assert_eq!(weighed, chosen, "{preset}");
        assert_eq!(weighed.kind(), kind.name());
        assert_eq!(weighed.candidates.len(), CANDIDATES.len());
    }
    // The host exchange's load does not depend on its send order.
    let counted = PlanOptions {
        counted_only: true,
        ..PlanOptions::default()
    };
    let load = |options| {
        Load::of(
            &exchange_plan(ExchangeKind::Host, &d.graph, &plan, 0, options).unwrap(),
            FRAME_OVERHEAD,
        )
    };
    let (rows, ordered) = (load(counted), load(PlanOptions::default()));
    assert!(rows.packets() > 0);
    assert_eq!(rows, ordered);
}
