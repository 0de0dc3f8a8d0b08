//! Exchanges through a software switch whose tables came through the control-plane format:
//! plan → entries → P4Runtime JSON → entries → switch tables. The tables read back must be the
//! plan's own, and every exchange over them must be exact under loss, duplication and
//! reordering. Runs on Cora from `../shared/datasets` and on a synthetic graph.

use std::collections::BTreeSet;
use std::sync::Arc;

mod common;

use common::synthetic;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchgnn_dataplane::engine::Timers;
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::network::{run_exchange_through, Faults, NetworkConfig, RunSetup};
use switchgnn_dataplane::plan::ExchangePlan;
use switchgnn_dataplane::reference::encode_matrix;
use switchgnn_dataplane::switch::SwitchConfig;
use switchgnn_dataplane::ExchangeId;
use switchgnn_datasets::testdata::shared_dataset;
use switchgnn_datasets::{load_path, Dataset, LoadOptions};
use switchgnn_p4::entries::{per_block, EntriesError, Part};
use switchgnn_p4::ports::Copies;
use switchgnn_p4::{bfrt, p4runtime, program, Entries, Install};
use switchgnn_partition::{Assignment, Plan, PlanSpec};
use switchgnn_scheduler::exchange::{
    host_hybrid_plan, host_reduce_plan, host_two_level_plan, reduce_plan, remote_sums,
    ExchangePlans,
};

const JOB: u16 = 7;
const CHECKSUM: u64 = 0x5347_0000_1234_abcd;

fn prepare(d: &Dataset, workers: u32, dims: Vec<usize>, memory: u64, table: u64) -> Plan {
    let spec = PlanSpec::new(d.name.clone(), workers, dims)
        .switch_memory(memory)
        .table_entries(Some(table));
    Plan::prepare(d, &spec, &|_| {}).unwrap()
}

fn layers(plan: &Plan) -> Vec<Arc<ExchangePlan>> {
    (0..plan.manifest.spec.feature_dims.len())
        .map(|l| Arc::new(ExchangePlan::from_plan(plan, l).unwrap()))
        .collect()
}

/// The plan's layers installed as entries (with `looped` front-panel ports as recirculation
/// paths) and read back through P4Runtime JSON.
fn through_the_control_plane(
    layers: &[Arc<ExchangePlan>],
    looped: u32,
) -> (Entries, Vec<Arc<ExchangePlan>>) {
    let mut install = Install::defaults(layers[0].workers);
    install.loop_ports(looped).unwrap();
    let entries = Entries::build(JOB, layers, CHECKSUM, &install)
        .and_then(|e| e.part(Part::All))
        .unwrap();
    let json = p4runtime::to_json(&entries);
    let back = p4runtime::from_json(&json).unwrap();
    assert_eq!(back, entries, "P4Runtime JSON round-trips");
    let tables = back.switch_tables().unwrap();
    assert_eq!(tables.plan_checksum, CHECKSUM);
    assert_eq!(tables.ports, install.ports);
    assert_eq!(tables.workers, layers[0].workers);
    (entries, tables.layers)
}

fn setup(scale: Scale, faults: Faults, seed: u64, layer: u8, backward: bool) -> RunSetup {
    let mut network = NetworkConfig::new(faults, seed);
    network.max_events = 5_000_000;
    RunSetup {
        exchange: ExchangeId {
            job: JOB,
            epoch: 1,
            layer,
            backward,
        },
        scale,
        switch: SwitchConfig {
            aggregators: program::AGGREGATORS as usize,
            ecn_threshold: 65_600,
            ports: 64,
        },
        network,
        timers: Timers::default(),
        paced: true,
        window: usize::MAX,
        framing: Default::default(),
    }
}

/// Every layer of `plan`, forward and backward, under faults, with the switch on the tables
/// read back from the entries: each worker's sums equal the direct computation.
fn exact_through_entries(d: &Dataset, plan: &Plan, looped: u32) {
    exact_over_entries(d, &plan.assignment, layers(plan), looped);
}

/// [`exact_through_entries`] for any exchange plans of `d` under `assignment`.
fn exact_over_entries(
    d: &Dataset,
    assignment: &Assignment,
    original: Vec<Arc<ExchangePlan>>,
    looped: u32,
) {
    let (_, loaded) = through_the_control_plane(&original, looped);
    for (l, (host, switch)) in original.iter().zip(&loaded).enumerate() {
        // The switch's tables are the plan's, block for block.
        assert_eq!(switch.blocks.len(), host.blocks.len(), "layer {l}");
        for (b, (x, y)) in switch.blocks.iter().zip(&host.blocks).enumerate() {
            assert_eq!(x.table, y.table, "layer {l} block {b}");
        }
        assert_eq!((switch.width, switch.mode), (host.width, host.mode));

        let graph = &d.graph;
        let n = graph.num_vertices();
        let mut rng = ChaCha8Rng::seed_from_u64(l as u64);
        let values: Vec<f32> = (0..n * host.width)
            .map(|_| rng.random_range(-1.0..=1.0))
            .collect();
        let most = (0..n as u32).map(|v| graph.degree(v)).max().unwrap();
        let scale = Scale::for_bound(1.0, most).unwrap();
        let (encoded, _) = encode_matrix(&scale, &values, host.width);
        let want = remote_sums(graph, assignment, host.width, &encoded);
        let faults = [
            Faults::none(),
            Faults {
                loss: 0.02,
                duplicate: 0.02,
                reorder: 0.05,
                reorder_delay: 30_000,
                ..Faults::none()
            },
        ];
        for (i, f) in faults.into_iter().enumerate() {
            let s = setup(scale, f, i as u64, l as u8, i == 1);
            let run = run_exchange_through(switch.clone(), host.clone(), &values, &s)
                .unwrap_or_else(|e| panic!("layer {l}: {e}"));
            for (w, (got, want)) in run.outputs.iter().zip(&want).enumerate() {
                assert_eq!(got.vertices, want.vertices, "layer {l} worker {w}");
                assert!(got.sums == want.sums, "layer {l} worker {w}: sums differ");
            }
            assert!(run.switch.aggregations > 0);
        }
    }
}

#[test]
fn cora_exchanges_are_exact_on_tables_loaded_from_entries() {
    let Some(path) = shared_dataset("cora.npz") else {
        return;
    };
    let d = load_path(&path, &LoadOptions::default()).unwrap();
    // Two widths (two block sets), aggregator memory for a few hundred vertices, and a table
    // limit that cuts blocks further.
    let plan = prepare(&d, 4, vec![48, 16], 32 * 1024, 1000);
    let blocks: Vec<usize> = plan.block_sets.iter().map(|s| s.blocks.len()).collect();
    assert!(blocks.iter().all(|&b| b > 1), "blocks per set: {blocks:?}");
    exact_through_entries(&d, &plan, 0);
}

#[test]
fn reduce_exchanges_are_exact_on_tables_loaded_from_entries() {
    let d = synthetic(600, 3000, 6);
    let plan = prepare(&d, 3, vec![40, 16], 1 << 20, 100_000);
    // Aggregators for 60 destinations at width 40 (two each): several blocks per layer.
    let original: Vec<Arc<ExchangePlan>> = [40, 16]
        .iter()
        .map(|&w| Arc::new(reduce_plan(&d.graph, &plan.assignment, w, 120).unwrap()))
        .collect();
    assert!(original.iter().all(|p| p.blocks.len() > 1));
    // Its partial sums hop to their aggregators' pipes over looped ports.
    exact_over_entries(&d, &plan.assignment, original, 8);
}

#[test]
fn synthetic_exchanges_are_exact_on_tables_loaded_from_entries() {
    let d = synthetic(600, 3000, 5);
    let plan = prepare(&d, 3, vec![40], 32 * 1024, 400);
    // Two front-panel ports looped in each of the four pipes: three paths per pipe.
    exact_through_entries(&d, &plan, 8);
}

#[test]
fn the_host_exchange_runs_on_tables_loaded_from_entries() {
    let d = synthetic(500, 2500, 9);
    let plan = prepare(&d, 3, vec![24], 32 * 1024, 1 << 40);
    let host = ExchangePlan::whole_graph(
        &d.graph,
        &plan.assignment,
        24,
        switchgnn_dataplane::plan::Mode::Host,
        switchgnn_scheduler::OrderKind::PriorityBfs,
        0,
    )
    .unwrap();
    forwarded_exactly_over_entries(&d, &plan.assignment, host);
}

#[test]
fn the_host_only_pre_aggregated_exchange_runs_on_tables_loaded_from_entries() {
    let d = synthetic(500, 2500, 8);
    let plan = prepare(&d, 3, vec![24], 32 * 1024, 1 << 40);
    let partials = host_reduce_plan(&d.graph, &plan.assignment, 24).unwrap();
    forwarded_exactly_over_entries(&d, &plan.assignment, partials);
}

#[test]
fn the_host_hybrid_runs_on_tables_loaded_from_entries() {
    let d = synthetic(500, 2500, 8);
    let plan = prepare(&d, 3, vec![24], 32 * 1024, 1 << 40);
    let mixed = host_hybrid_plan(&d.graph, &plan.assignment, 24).unwrap();
    let b = &mixed.blocks[0];
    assert!(
        !b.multicast.is_empty() && !b.table.slots.is_empty(),
        "both ways"
    );
    forwarded_exactly_over_entries(&d, &plan.assignment, mixed);
}

#[test]
fn the_host_two_level_exchange_runs_on_tables_loaded_from_entries() {
    // Four workers in two racks: shares go to proxies addressed by the proxies' own vertices,
    // which the entries must route.
    let d = synthetic(500, 2500, 8);
    let plan = prepare(&d, 4, vec![24], 32 * 1024, 1 << 40);
    let racks = switchgnn_dataplane::switch::Racks::even(4, 2).unwrap();
    let two = host_two_level_plan(&d.graph, &plan.assignment, 24, &racks).unwrap();
    let b = &two.blocks[0];
    let gathers = (0..b.table.slots.len()).any(|p| {
        let w = b.table.slots[p] as u16;
        b.partials.of(p).iter().any(|&u| two.owner[u as usize] != w)
    });
    assert!(gathers, "a proxy sums a share");
    forwarded_exactly_over_entries(&d, &plan.assignment, two);
}

/// Run `worker_plan`, an exchange the switch only forwards, at 2% loss with the switch's plan
/// read back from its entries: no aggregator entries, every sum exact.
fn forwarded_exactly_over_entries(d: &Dataset, assignment: &Assignment, worker_plan: ExchangePlan) {
    let width = worker_plan.width;
    let worker_plan = Arc::new(worker_plan);
    let (entries, loaded) = through_the_control_plane(std::slice::from_ref(&worker_plan), 0);
    assert!(entries
        .tables
        .iter()
        .all(|e| e.table.id != program::VERTEX_AGGREGATORS.id));
    let n = d.graph.num_vertices();
    let values: Vec<f32> = (0..n * width)
        .map(|i| (i % 17) as f32 / 17.0 - 0.5)
        .collect();
    let scale =
        Scale::for_bound(1.0, (0..n as u32).map(|v| d.graph.degree(v)).max().unwrap()).unwrap();
    let (encoded, _) = encode_matrix(&scale, &values, width);
    let want = remote_sums(&d.graph, assignment, width, &encoded);
    let faults = Faults::lossy(0.02);
    let run = run_exchange_through(
        loaded[0].clone(),
        worker_plan,
        &values,
        &setup(scale, faults, 4, 0, false),
    )
    .unwrap();
    for (w, (got, want)) in run.outputs.iter().zip(&want).enumerate() {
        assert_eq!(got.vertices, want.vertices, "worker {w}");
        assert!(got.sums == want.sums, "worker {w}: sums differ");
    }
}

#[test]
fn the_bfrt_script_lists_every_entry() {
    let d = synthetic(300, 1200, 6);
    let plan = prepare(&d, 2, vec![32], 16 * 1024, 10_000);
    let entries = Entries::build(JOB, &layers(&plan), CHECKSUM, &Install::defaults(2)).unwrap();
    let script = bfrt::to_script(&entries, false);
    for table in program::TABLES {
        let n = entries
            .tables
            .iter()
            .filter(|e| e.table.id == table.id)
            .count();
        // A table the plan puts nothing into (a SwitchGNN plan's partial sums) is left out.
        if n == 0 {
            assert!(!script.contains(table.name), "{}", table.name);
            continue;
        }
        assert!(
            script.contains(&format!("# {} ({n} entries)", table.name)),
            "{}",
            table.name
        );
    }
    let rows = script.lines().filter(|l| l.starts_with("    (")).count();
    assert_eq!(
        rows,
        entries.tables.len() + entries.groups.len() + entries.sessions.len()
    );
}

#[test]
fn looped_ports_become_recirculation_paths_for_the_program_and_the_operator() {
    let d = synthetic(300, 1200, 6);
    let plan = prepare(&d, 4, vec![32], 16 * 1024, 10_000);
    let layers = layers(&plan);
    let mut install = Install {
        pipes: 2,
        ..Install::defaults(4)
    };
    // Workers on local ports 0, 4, 8 and 12 of pipe 0: the next three 100G numbers are free
    // in both pipes.
    install.loop_ports(6).unwrap();
    assert_eq!(install.looped, [16, 20, 24]);
    assert_eq!(install.looped_ports(), [16, 20, 24, 144, 148, 152]);
    let entries = Entries::build(JOB, &layers, CHECKSUM, &install).unwrap();
    let paths: Vec<&switchgnn_p4::entries::TableEntry> = entries
        .tables
        .iter()
        .filter(|e| e.table.id == program::RECIRCULATION_PATH.id)
        .collect();
    assert_eq!(paths.len() as u64, program::PATH_SLOTS);
    let locals = [program::RECIRC_LOCAL, 16, 20, 24];
    let mut per_path = [0u64; 4];
    for e in &paths {
        let (slot, path, local) = (e.keys[1], e.params[0] as usize, e.params[1] as u16);
        assert_eq!(locals[path], local, "slot {slot}");
        per_path[path] += 1;
    }
    assert_eq!(per_path, [64; 4], "the slots spread evenly over the paths");
    assert_eq!(entries.looped, [16, 20, 24]);
    assert_eq!(entries.meta.looped_ports, [16, 20, 24, 144, 148, 152]);
    // A pass group per path: four times the groups of the internal port alone.
    let alone = Entries::build(
        JOB,
        &layers,
        CHECKSUM,
        &Install {
            pipes: 2,
            ..Install::defaults(4)
        },
    )
    .unwrap();
    assert_eq!(entries.groups.len() - 1, 4 * (alone.groups.len() - 1));

    // Through P4Runtime (the value set written whole) and back; the software switch reads it.
    let json = p4runtime::to_json(&entries);
    assert!(json.contains("valueSetEntry") && json.contains("\"looped_ports\""));
    let back = p4runtime::from_json(&json).unwrap();
    assert_eq!(back, entries);
    back.switch_tables().unwrap();
    // The bfrt script loops the ports and fills the value set before anything replicates.
    let script = bfrt::to_script(&entries, false);
    let looped = script
        .find("LOOPED_PORTS = [16, 20, 24, 144, 148, 152]")
        .unwrap();
    assert!(script.contains("LOOPBACK_MODE=\"BF_LPBK_MAC_NEAR\""));
    assert!(script.contains("for local in [16, 20, 24]:"));
    assert!(looped < script.find("pre.mgid.add").unwrap());

    // A slot naming a port the value set does not list, or a slot missing, is refused.
    let mut bad = entries.clone();
    let i = bad
        .tables
        .iter()
        .position(|e| e.table.id == program::RECIRCULATION_PATH.id && e.params[0] == 2)
        .unwrap();
    bad.tables[i].params[1] = 28;
    match bad.switch_tables().unwrap_err() {
        EntriesError::Entry { index, table, .. } => {
            assert_eq!((index, table), (i, program::RECIRCULATION_PATH.name))
        }
        other => panic!("{other}"),
    }
    let mut bad = entries.clone();
    bad.tables.remove(i);
    let err = bad.switch_tables().unwrap_err().to_string();
    assert!(err.contains("255 hash slots"), "{err}");
    let mut bad = entries.clone();
    bad.looped.pop();
    assert!(bad.switch_tables().is_err());

    // Ports the program cannot loop.
    let mut odd = install.clone();
    let err = odd.loop_ports(5).unwrap_err().to_string();
    assert!(err.contains("multiple of 2"), "{err}");
    let err = odd.loop_ports(26).unwrap_err().to_string();
    assert!(err.contains("free in every pipe"), "{err}");
    let looping_a_worker = Install {
        looped: vec![16, 4],
        ..install.clone()
    };
    let err = Entries::build(JOB, &layers, CHECKSUM, &looping_a_worker)
        .unwrap_err()
        .to_string();
    assert!(err.contains("worker 1 uses dev port 4"), "{err}");
    let internal = Install {
        looped: vec![program::RECIRC_LOCAL],
        ..install
    };
    assert!(Entries::build(JOB, &layers, CHECKSUM, &internal).is_err());
}

#[test]
fn damaged_or_inconsistent_entries_are_refused_with_the_entry_named() {
    let d = synthetic(300, 1200, 7);
    let plan = prepare(&d, 2, vec![32], 16 * 1024, 10_000);
    let entries = Entries::build(JOB, &layers(&plan), CHECKSUM, &Install::defaults(2)).unwrap();
    let json = p4runtime::to_json(&entries);

    // A changed byte fails the checksum; a cut file is not JSON.
    let changed = json.replacen("\"tableId\": 33554437", "\"tableId\": 33554438", 1);
    assert_ne!(changed, json);
    let err = p4runtime::from_json(&changed).unwrap_err().to_string();
    assert!(err.contains("checksum"), "{err}");
    assert!(p4runtime::from_json(&json[..json.len() / 2]).is_err());

    // An aggregator that is not its destination's (with a fresh checksum): the entry is named.
    let mut bad = entries.clone();
    let i = bad
        .tables
        .iter()
        .position(|e| e.table.id == program::VERTEX_AGGREGATORS.id)
        .unwrap();
    bad.tables[i].params[0] += 1;
    let err = p4runtime::from_json(&p4runtime::to_json(&bad))
        .unwrap()
        .switch_tables()
        .unwrap_err();
    match err {
        EntriesError::Entry { index, table, .. } => {
            assert_eq!((index, table), (i, program::VERTEX_AGGREGATORS.name))
        }
        other => panic!("{other}"),
    }

    // A worker without admission cannot be served.
    let mut bad = entries.clone();
    bad.tables
        .retain(|e| e.table.id != program::ADMISSION.id || e.keys[1] != 1);
    let err = bad.switch_tables().unwrap_err().to_string();
    assert!(err.contains("worker 1 has no admission entry"), "{err}");
}

#[test]
fn plans_that_do_not_fit_the_program_are_refused() {
    let d = synthetic(600, 3000, 8);
    let plan = prepare(&d, 2, vec![128], 1 << 20, 1 << 40);
    let layers = layers(&plan);
    // A job placed so near the end of the aggregator registers that its blocks run past them.
    let install = Install {
        agg_base: program::AGGREGATORS - 8,
        ..Install::defaults(2)
    };
    let err = Entries::build(JOB, &layers, CHECKSUM, &install).unwrap_err();
    assert!(err.to_string().contains("--switch-memory"), "{err}");
    // The strawman has no program.
    let a = Assignment::new(plan.assignment.parts().to_vec(), 2).unwrap();
    let strawman = Arc::new(
        ExchangePlan::whole_graph(
            &d.graph,
            &a,
            16,
            switchgnn_dataplane::plan::Mode::Strawman,
            switchgnn_scheduler::OrderKind::Random,
            0,
        )
        .unwrap(),
    );
    let err = Entries::build(JOB, &[strawman], CHECKSUM, &Install::defaults(2)).unwrap_err();
    assert!(matches!(err, EntriesError::Mode { .. }), "{err}");
}

#[test]
fn a_plan_beyond_the_tables_installs_block_by_block() {
    // More (vertex, aggregator) pairs than the pass table holds.
    let d = synthetic(4000, 60_000, 10);
    let plan = prepare(&d, 4, vec![32], 2 << 20, 18_432);
    let layers = layers(&plan);
    let all = Entries::build(JOB, &layers, CHECKSUM, &Install::defaults(4)).unwrap();
    let pairs = all
        .tables
        .iter()
        .filter(|e| e.table.id == program::VERTEX_AGGREGATORS.id)
        .count();
    assert!(pairs as u64 > program::PASS_SIZE, "{pairs} pairs");
    let err = match all.part(Part::All) {
        Ok(_) => panic!("{pairs} pairs fit the pass table"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("--part static"), "{err}");

    // Static plus every block's part is the whole job, each within its share of the tables.
    let fixed = all.part(Part::Static).unwrap();
    assert!(fixed.tables.iter().all(|e| !per_block(e.table)));
    let groups = 1 + switchgnn_p4::resources::pass_group_count(program::MAX_PIPES);
    assert_eq!(
        (fixed.groups.len() as u64, fixed.sessions.len()),
        (groups, 4)
    );
    let mut union = fixed.tables.clone();
    for b in 0..layers[0].blocks.len() as u64 {
        let part = all.part(Part::Block { set: 0, block: b }).unwrap();
        assert!(part.groups.is_empty() && part.tables.iter().all(|e| per_block(e.table)));
        // A part file cannot run the software switch: it is not a whole job.
        let back = p4runtime::from_json(&p4runtime::to_json(&part)).unwrap();
        assert!(back
            .switch_tables()
            .unwrap_err()
            .to_string()
            .contains("block 0:"));
        union.extend(part.tables);
    }
    let key =
        |e: &switchgnn_p4::entries::TableEntry| (e.table.id, e.keys.clone(), e.params.clone());
    let mut want: Vec<_> = all.tables.iter().map(key).collect();
    let mut got: Vec<_> = union.iter().map(key).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert!(all
        .part(Part::Block {
            set: 0,
            block: 1 << 20
        })
        .is_err());

    // The removal script of a block names every key and no action.
    let part = all.part(Part::Block { set: 0, block: 0 }).unwrap();
    let script = bfrt::to_script(&part, true);
    assert!(script.contains("\"delete\"") && !script.contains("add_with_"));
    assert!(!script.contains("pre.mgid"));
}

#[test]
fn passes_spread_over_the_pipes_and_every_pass_group_they_name_exists() {
    let d = synthetic(600, 3000, 8);
    let plan = prepare(&d, 4, vec![128], 1 << 20, 1 << 40);
    let layers = layers(&plan);
    for (pipes, looped) in (1..=program::MAX_PIPES).flat_map(|p| [(p, 0u32), (p, 2)]) {
        // Home pipe 1 where there is one, so that pass 0 is not always in the first pipe.
        let mut install = Install {
            pipes,
            recirc_port: program::RECIRC_PORTS[usize::from(pipes > 1)],
            ..Install::defaults(4)
        };
        install.loop_ports(looped * u32::from(pipes)).unwrap();
        let locals = install.path_locals();
        let entries = Entries::build(JOB, &layers, CHECKSUM, &install).unwrap();
        let tables = entries.switch_tables().unwrap();
        for (back, layer) in tables.layers.iter().zip(&layers) {
            for (x, y) in back.blocks.iter().zip(&layer.blocks) {
                assert_eq!(x.table, y.table, "{pipes} pipes");
            }
        }
        let groups: std::collections::BTreeMap<u16, &switchgnn_p4::entries::MulticastGroup> =
            entries.groups.iter().map(|g| (g.id, g)).collect();
        assert_eq!(groups.len(), entries.groups.len(), "group ids are distinct");
        let home = install.home_pipe();
        let mut per_pipe = vec![0u64; usize::from(pipes)];
        let mut used = std::collections::BTreeSet::new();
        for e in &entries.tables {
            if e.table.id != program::VERTEX_AGGREGATORS.id {
                continue;
            }
            let (pipe, pass) = (e.keys[4] as u8, e.keys[5]);
            let (fanout, expected, last) = (e.params[4] as u8, e.params[5], e.params[6] == 1);
            assert!(pipe < pipes);
            if expected > 0 {
                per_pipe[usize::from(pipe)] += 1;
            }
            // Every group aggregation.p4 can compute for this pass: fan-out on the home pipe's
            // pass 0, the readout copy, the next pass.
            for emits in [false, expected > 0] {
                let copies = Copies::of_pass(pipe == home && pass == 0, fanout, emits, last);
                if !copies.need_group() {
                    continue; // a unicast
                }
                // On every recirculation path: its port in each pipe the copies go to.
                for (path, &local) in locals.iter().enumerate() {
                    let id = install.pass_group(path as u8, pipe, copies);
                    used.insert(id);
                    let g = groups
                        .get(&id)
                        .unwrap_or_else(|| panic!("group {id} of {copies:?}"));
                    let port = |p: u8| u16::from(p) << 7 | local;
                    let mut want = Vec::new();
                    if copies.continues {
                        want.push((port(pipe), program::RID_CONTINUE));
                    }
                    if copies.emits {
                        want.push((port(pipe), program::RID_EMIT));
                    }
                    for q in (0..pipes).filter(|q| copies.fanout & (1 << q) != 0) {
                        want.push((port(q), program::RID_PIPE + u16::from(q)));
                    }
                    let got: Vec<(u16, u16)> = g.replicas.iter().map(|r| (r.port, r.rid)).collect();
                    assert_eq!(got, want, "group {id}");
                }
            }
        }
        // A file without one of those groups is refused, naming the pass that needs it.
        let needed = entries.groups.iter().position(|g| used.contains(&g.id));
        assert!(needed.is_some(), "{pipes} pipes: {used:?}");
        if let Some(i) = needed {
            let mut bad = entries.clone();
            bad.groups.remove(i);
            let err = bad.switch_tables().unwrap_err().to_string();
            assert!(err.contains("multicast group"), "{err}");
        }
        // The placement evens the pipes' passes out: each has at least 4/5 of its share.
        let total: u64 = per_pipe.iter().sum();
        for (p, &n) in per_pipe.iter().enumerate() {
            assert!(
                5 * n * u64::from(pipes) >= 4 * total,
                "pipe {p} has {n} of {total} passes over {pipes} pipes: {per_pipe:?}"
            );
        }
    }
}

#[test]
fn an_install_the_program_cannot_run_is_refused_by_name() {
    let d = synthetic(300, 1500, 8);
    let plan = prepare(&d, 2, vec![64], 1 << 20, 1 << 40);
    let layers = layers(&plan);
    let refused = |install: Install, says: &str| {
        let err = Entries::build(JOB, &layers, CHECKSUM, &install)
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{err}");
    };
    let defaults = Install::defaults(2);
    refused(
        Install {
            recirc_port: 20,
            ..defaults.clone()
        },
        "not a pipe's internal one",
    );
    refused(
        Install {
            pipes: 0,
            ..defaults.clone()
        },
        "0 pipes",
    );
    refused(
        Install {
            pipes: 2,
            recirc_port: program::RECIRC_PORTS[3],
            ..defaults
        },
        "home pipe 3",
    );
}

#[test]
fn an_allreduce_region_is_installed_cleared_and_read_back() {
    let d = synthetic(300, 1500, 9);
    let plan = prepare(&d, 2, vec![64], 1 << 20, 1 << 40);
    let layers = layers(&plan);
    let install = Install {
        allreduce_slots: 16,
        ..Install::defaults(2)
    };
    let entries = Entries::build(JOB, &layers, CHECKSUM, &install).unwrap();
    // Its region: 32 banks at the top of the home pipe, the masks of 16 slots.
    let region: Vec<_> = entries
        .tables
        .iter()
        .filter(|e| e.table.id == program::ALLREDUCE_REGION.id)
        .collect();
    let top = program::AGGREGATORS - 32;
    assert_eq!(region.len(), 1);
    assert_eq!(
        region[0].params,
        vec![top, 0, 0, 16, 15, u64::from(!31u32), 32]
    );
    // A job in another slot gets the next banks and, counted down, the aggregators below.
    let other = Install {
        job_slot: 1,
        ..install.clone()
    };
    assert_eq!(other.allreduce_region(), Some((top - 32, 32, 32)));

    // The exchange's aggregators in the home pipe stay below a region placed low in it: with
    // room for an eighth of the block's destinations there, the placement (which evens the
    // pipes' passes out) fills the home pipe up to the region and not beyond.
    let home = u64::from(install.home_pipe());
    let chunks = layers[0].chunks() as u64;
    let destinations = layers[0]
        .blocks
        .iter()
        .map(|b| b.table.len())
        .max()
        .unwrap() as u64;
    let room = destinations / 8;
    assert!(room >= 2, "{destinations} destinations");
    let low = Install {
        allreduce_slots: 16,
        allreduce_agg_base: Some(room * chunks),
        ..Install::defaults(2)
    };
    let placed = Entries::build(JOB, &layers, CHECKSUM, &low).unwrap();
    let in_home: BTreeSet<u64> = placed
        .tables
        .iter()
        .filter(|e| e.table.id == program::DESTINATION_SLOT.id && e.params[1] == home)
        .map(|e| e.params[0])
        .collect();
    assert_eq!(
        in_home.len() as u64,
        room,
        "the home pipe is filled to the region"
    );
    assert!(in_home.iter().all(|&agg| agg + chunks <= room * chunks));
    // On one pipe that room is too small for the block: refused, naming the switch memory
    // that would fit beside the region, and the region.
    let one_pipe = Install {
        pipes: 1,
        ..low.clone()
    };
    let err = Entries::build(JOB, &layers, CHECKSUM, &one_pipe)
        .unwrap_err()
        .to_string();
    let fitting = program::switch_memory_for(room * chunks);
    assert!(
        err.contains(&fitting) && err.contains("--allreduce-slots"),
        "{err}"
    );
    // Its words start from zero: banks, seen words (8 per bank) and counts.
    let cleared: Vec<(&str, u64, u64)> = entries
        .clears
        .iter()
        .map(|c| (c.register.name, c.first, c.count))
        .collect();
    assert_eq!(
        cleared,
        vec![
            (program::BANK_STATE.name, 0, 32),
            (program::REDUCE_SEEN.name, 0, 256),
            (program::REDUCE_COUNT.name, 0, 32),
        ]
    );
    // Through P4Runtime JSON and back; the software switch learns the slots from it. The
    // clears travel in requests of their own, before any table entry's.
    let json = p4runtime::to_json(&entries);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let requests = doc["write_requests"].as_array().unwrap();
    let has = |r: &serde_json::Value, entity: &str| {
        r["updates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["entity"].get(entity).is_some())
    };
    let last_clear = requests
        .iter()
        .rposition(|r| has(r, "registerEntry"))
        .unwrap();
    let first_table = requests.iter().position(|r| has(r, "tableEntry")).unwrap();
    assert!(last_clear < first_table);
    let back = p4runtime::from_json(&json).unwrap();
    assert_eq!(back, entries);
    assert_eq!(back.switch_tables().unwrap().allreduce_slots, 16);
    // The bfrt script clears the same words before it adds any entry.
    let script = bfrt::to_script(&entries, false);
    let clears = script.find("CLEARS = [").expect("the clears");
    assert!(clears < script.find("# Ingress.check.admission").unwrap());
    assert!(script.contains("(\"Ingress.allreduce.bank_state\", [\"held\", \"next\"], 0, 32),"));
    // Only the static part clears the region; a block's part leaves it alone.
    assert_eq!(entries.part(Part::Static).unwrap().clears, entries.clears);
    assert!(entries
        .part(Part::Block { set: 0, block: 0 })
        .unwrap()
        .clears
        .is_empty());

    // Files of the previous versions (version 2: no region; 3: no looped ports) still read.
    let current =
        p4runtime::to_json(&Entries::build(JOB, &layers, CHECKSUM, &Install::defaults(2)).unwrap());
    assert!(current.contains("\"format_version\": 4"));
    for version in [2, 3] {
        let old = current.replace(
            "\"format_version\": 4",
            &format!("\"format_version\": {version}"),
        );
        assert_eq!(
            p4runtime::from_json(&old)
                .unwrap()
                .switch_tables()
                .unwrap()
                .allreduce_slots,
            0
        );
    }
    // A region whose words are not cleared, or whose masks disagree, is refused.
    let mut bad = entries.clone();
    bad.clears
        .retain(|c| c.register.id != program::REDUCE_SEEN.id);
    let err = bad.switch_tables().unwrap_err().to_string();
    assert!(err.contains("not cleared"), "{err}");
    let bad = entries.clone();
    let i = bad
        .tables
        .iter()
        .position(|e| e.table.id == program::ALLREDUCE_REGION.id)
        .unwrap();
    for (param, value) in [(6, 48), (0, program::AGGREGATORS - 8), (2, 5)] {
        let mut bad = bad.clone();
        bad.tables[i].params[param] = value;
        match bad.switch_tables().unwrap_err() {
            EntriesError::Entry { index, table, .. } => {
                assert_eq!((index, table), (i, program::ALLREDUCE_REGION.name))
            }
            other => panic!("parameter {param}: {other}"),
        }
    }
    // A register word written anything but zero is no clear (the checksum made anew, so that
    // the reader gets to the word).
    let mut doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let member = doc
        .pointer_mut("/write_requests/0/updates")
        .and_then(|u| u.as_array_mut())
        .and_then(|u| u.iter_mut().find(|x| x["type"] == "MODIFY"))
        .and_then(|x| x.pointer_mut("/entity/registerEntry/data/struct/members/1/bitstring"))
        .unwrap();
    *member = "AQ==".into();
    let requests = doc["write_requests"].to_string();
    doc["checksum"] = format!("{:#018x}", xxhash_rust::xxh3::xxh3_64(requests.as_bytes())).into();
    let err = p4runtime::from_json(&doc.to_string())
        .unwrap_err()
        .to_string();
    assert!(err.contains("only clears"), "{err}");

    // Regions the program cannot hold are refused by name.
    let refused = |install: Install, says: &str| {
        let err = Entries::build(JOB, &layers, CHECKSUM, &install)
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{err}");
    };
    refused(
        Install {
            allreduce_slots: 24,
            ..Install::defaults(2)
        },
        "power of two",
    );
    refused(
        Install {
            agg_base: 100,
            allreduce_slots: 16,
            allreduce_agg_base: Some(90),
            ..Install::defaults(2)
        },
        "overlaps",
    );
    refused(
        Install {
            allreduce_slots: 16,
            allreduce_bank_base: Some(program::REDUCE_BANKS - 8),
            ..Install::defaults(2)
        },
        "goes past",
    );
}
