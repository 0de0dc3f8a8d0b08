//! The planner: which exchange kind a layer should run on a given chip. It builds the plan of
//! every candidate kind — the host exchange, host-only pre-aggregation, the host hybrid,
//! SwitchGNN's blocks, the pre-aggregated exchange and the hybrid — counts what each puts on
//! the chip and the hosts (`switchgnn_chip::Load`), and picks the least lower bound
//! (`switchgnn_chip::Choice`: the busiest resource of the chip and the hosts; a tie goes to the
//! host exchange, so the pick is never predicted slower than it).

use rayon::prelude::*;
use switchgnn_chip::{Chip, Choice, HostCost, Load};
use switchgnn_dataplane::plan::{ExchangePlan, PlanError};
use switchgnn_dataplane::ExchangeKind;
use switchgnn_datasets::Graph;
use switchgnn_partition::{ExchangeChoice, LayerChoice, Plan, PlannedOn};

use crate::exchange::{exchange_plan, PlanOptions};

/// The kinds `auto` weighs, the host-only ones first (a tie goes to them, the host exchange
/// before host-only pre-aggregation, and both before the host hybrid, which moves no more
/// rows than either on any ordered worker pair).
pub const CANDIDATES: [ExchangeKind; 6] = [
    ExchangeKind::Host,
    ExchangeKind::HostReduce,
    ExchangeKind::HostHybrid,
    ExchangeKind::Switchgnn,
    ExchangeKind::Reduce,
    ExchangeKind::Hybrid,
];

/// The host-only candidates: the baseline every in-network kind is judged against is the
/// fastest of them.
pub const HOST_ONLY: [ExchangeKind; 3] = [
    ExchangeKind::Host,
    ExchangeKind::HostReduce,
    ExchangeKind::HostHybrid,
];

/// The planner's pick for `layer` of `plan` among `kinds` (the host exchange should come first
/// so that it wins a tie), and the chosen kind's exchange plan.
pub fn choose(
    graph: &Graph,
    plan: &Plan,
    layer: usize,
    kinds: &[ExchangeKind],
    chip: &Chip,
    cost: &HostCost,
    options: PlanOptions,
) -> Result<(Choice, ExchangeKind, ExchangePlan), PlanError> {
    let mut best: Option<(ExchangeKind, ExchangePlan, f64)> = None;
    let choice = weigh_each(
        graph,
        plan,
        layer,
        kinds,
        chip,
        cost,
        options,
        |kind, xplan, estimate| {
            // Keep only the best plan so far: large graphs' plans are big.
            if best.as_ref().is_none_or(|b| estimate < b.2) {
                best = Some((kind, xplan, estimate));
            }
        },
    )?;
    let (kind, xplan, _) = best.expect("a candidate, as the choice has one");
    debug_assert_eq!(choice.kind(), kind.name());
    Ok((choice, kind, xplan))
}

/// [`choose`] without the chosen plan (what `prepare` needs to record a choice): the candidates
/// are weighed in parallel, each plan built for counting only (no send order is computed for
/// the host exchange), counted and dropped inside its own task: the plans being built at the
/// moment are in memory, not all of them (on 2 cores, `prepare`'s weighing peak rose from 0.75
/// to 0.85 GiB on reddit-like@0.25, still below METIS's 1.05 GiB, and the stage took 1.8 s, not
/// 2.5 s).
pub fn weigh(
    graph: &Graph,
    plan: &Plan,
    layer: usize,
    kinds: &[ExchangeKind],
    chip: &Chip,
    cost: &HostCost,
    options: PlanOptions,
) -> Result<Choice, PlanError> {
    let counted = PlanOptions {
        counted_only: true,
        ..options
    };
    // Taken from the last kind first: the hybrid, last of `CANDIDATES`, takes longest to build,
    // and on few cores it then starts at once rather than after another kind (0.2 s less on 2).
    let mut weighed: Vec<Result<(&str, Load), PlanError>> = kinds
        .par_iter()
        .rev()
        .map(|&kind| {
            let (xplan, load, _) = weigh_one(graph, plan, layer, kind, chip, cost, counted)?;
            // Dropped here, not collected: large graphs' plans are big.
            drop(xplan);
            Ok((kind.name(), load))
        })
        .collect();
    // Back in the order given: the first kind's error is returned and the first kind wins a tie,
    // as when they were weighed in turn.
    weighed.reverse();
    let loads = weighed.into_iter().collect::<Result<Vec<_>, _>>()?;
    Choice::of(chip, cost, loads).ok_or_else(no_kind)
}

/// Build each kind's plan in turn, count its load, and hand the plan and its ranking
/// estimate (`Bound::estimate_seconds`) to `each`.
#[allow(clippy::too_many_arguments)]
fn weigh_each(
    graph: &Graph,
    plan: &Plan,
    layer: usize,
    kinds: &[ExchangeKind],
    chip: &Chip,
    cost: &HostCost,
    options: PlanOptions,
    mut each: impl FnMut(ExchangeKind, ExchangePlan, f64),
) -> Result<Choice, PlanError> {
    let mut loads = Vec::with_capacity(kinds.len());
    for &kind in kinds {
        let (xplan, load, estimate) = weigh_one(graph, plan, layer, kind, chip, cost, options)?;
        loads.push((kind.name(), load));
        each(kind, xplan, estimate);
    }
    Choice::of(chip, cost, loads).ok_or_else(no_kind)
}

/// Build `kind`'s plan, count its load and its ranking estimate on `chip`.
fn weigh_one(
    graph: &Graph,
    plan: &Plan,
    layer: usize,
    kind: ExchangeKind,
    chip: &Chip,
    cost: &HostCost,
    options: PlanOptions,
) -> Result<(ExchangePlan, Load, f64), PlanError> {
    // The hybrid is mixed for the chip weighed here.
    let on = PlanOptions {
        chip: Some((*chip, *cost)),
        ..options
    };
    let started = std::time::Instant::now();
    let xplan = exchange_plan(kind, graph, plan, layer, on)?;
    let built = started.elapsed();
    // The host kind is judged as the best host-only exchange frames it (MTU packets,
    // coalesced acks), not as the engine's one chunk per packet.
    // Counted per pipe and path as the chip places the blocks in the plan's switch memory:
    // a source's trips all go around one path, which the pooled count does not see.
    let memory = Some(plan.manifest.spec.switch_memory);
    let load = Load::for_cost(&xplan, cost).spread_on(&xplan, chip, memory, cost.frame_overhead);
    // What Choice ranks by (the bound itself where no latency is counted).
    let estimate = switchgnn_chip::Bound::of(chip, &load, cost).estimate_seconds;
    tracing::debug!(kind = kind.name(), ?built, counted = ?started.elapsed() - built, "weighed");
    Ok((xplan, load, estimate))
}

fn no_kind() -> PlanError {
    PlanError::NoChoice("the planner was given no kind to weigh".into())
}

/// A layer's entry in a plan's manifest: the chosen kind and every candidate's bound.
pub fn layer_choice(choice: &Choice) -> LayerChoice {
    LayerChoice {
        kind: choice.kind().to_string(),
        predicted_s: choice
            .candidates
            .iter()
            .map(|c| (c.kind.clone(), c.bound.seconds))
            .collect(),
    }
}

/// What a plan records of its exchange kinds: per layer the planner's pick on `chip` with
/// hosts costing `cost` (every candidate's bound beside it), run as `exchange` (`auto`: the
/// pick itself), and what the pick was made for, so that every process of a job rebuilds the
/// same hybrid plan.
pub fn choose_exchanges(
    plan: &Plan,
    graph: &Graph,
    exchange: ExchangeKind,
    chip: &Chip,
    cost: &HostCost,
) -> Result<ExchangeChoice, PlanError> {
    let mut layers = Vec::new();
    for layer in 0..plan.manifest.spec.feature_dims.len() {
        let choice = weigh(
            graph,
            plan,
            layer,
            &CANDIDATES,
            chip,
            cost,
            PlanOptions::default(),
        )
        .map_err(|e| {
            PlanError::NoChoice(format!(
                "cannot weigh the exchange kinds of layer {layer}: {e}"
            ))
        })?;
        let mut entry = layer_choice(&choice);
        if exchange != ExchangeKind::Auto {
            entry.kind = exchange.name().to_string();
        }
        layers.push(entry);
    }
    Ok(ExchangeChoice {
        by: exchange.name().to_string(),
        chip: chip.describe(),
        layers,
        planned_on: Some(PlannedOn {
            preset: chip.preset.name().to_string(),
            loopback_ports: chip.loopback_ports,
            recirculation_ports: Some(chip.recirculation_ports),
            link_gbps: cost.link_gbps,
            host_packet_ns: cost.per_packet_ns,
            host_mtu: Some(cost.framing.mtu),
            host_ack_every: Some(cost.framing.ack_every),
            to_switch_delay_ns: cost.delays.to_switch_ns,
            host_to_host_delay_ns: cost.delays.host_to_host_ns,
        }),
    })
}
