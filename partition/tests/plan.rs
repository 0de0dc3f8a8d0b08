//! The plan directory: round trip, verification, and damage that must be named.

use std::path::Path;

use switchgnn_datasets::synthetic::{generate, Preset};
use switchgnn_datasets::{Dataset, NoProgress};
use switchgnn_partition::plan::FORMAT_VERSION;
use switchgnn_partition::{Method, Plan, PlanSpec};

fn dataset(seed: u64) -> Dataset {
    generate(&Preset::Small.spec(0.5, seed).unwrap(), &NoProgress).unwrap()
}

fn spec() -> PlanSpec {
    PlanSpec::new("synthetic:small,scale=0.5,seed=1", 4, vec![128, 16, 16]).switch_memory(64 * 1024)
}

fn written(dir: &Path) -> (Dataset, Plan) {
    let d = dataset(1);
    let mut plan = Plan::prepare(&d, &spec(), &|_| {}).unwrap();
    plan.write(dir).unwrap();
    (d, plan)
}

#[test]
fn round_trip_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let (d, plan) = written(dir.path());
    let back = Plan::read(dir.path()).unwrap();
    assert_eq!(back, plan);
    back.verify(&d.graph).unwrap();
    // Widths 16 and 16 share one block set; 128 needs its own.
    assert_eq!(back.block_sets.len(), 2);
    assert_eq!(back.manifest.traffic.len(), 3);
    for t in &back.manifest.traffic {
        assert!(t.ideal_bytes <= t.plan_bytes && t.plan_bytes <= t.host_bytes * 2);
    }
}

#[test]
fn a_plan_does_not_verify_against_another_graph() {
    let dir = tempfile::tempdir().unwrap();
    let (_, plan) = written(dir.path());
    let other = dataset(2);
    let err = plan.verify(&other.graph).unwrap_err();
    assert!(err.to_string().contains("differs"), "{err}");
}

#[test]
fn damaged_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    written(dir.path());
    let blocks = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("blocks-")
        })
        .unwrap();
    let good = std::fs::read(&blocks).unwrap();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    std::fs::write(&blocks, &bad).unwrap();
    let err = Plan::read(dir.path()).unwrap_err().to_string();
    let name = blocks.file_name().unwrap().to_string_lossy().into_owned();
    assert!(err.contains(&name) && err.contains("checksum"), "{err}");

    std::fs::write(&blocks, &good).unwrap();
    let assignment = dir.path().join("assignment.bin");
    let a = std::fs::read(&assignment).unwrap();
    std::fs::write(&assignment, &a[..a.len() - 4]).unwrap();
    let err = Plan::read(dir.path()).unwrap_err().to_string();
    assert!(err.contains("assignment.bin"), "{err}");

    std::fs::write(&assignment, &a).unwrap();
    let manifest = dir.path().join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let version = format!("\"format_version\": {FORMAT_VERSION}");
    assert!(text.contains(&version));
    std::fs::write(&manifest, text.replace(&version, "\"format_version\": 7")).unwrap();
    let err = Plan::read(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("manifest.json") && err.contains("format 7"),
        "{err}"
    );

    std::fs::write(&manifest, &text[..text.len() / 2]).unwrap();
    let err = Plan::read(dir.path()).unwrap_err().to_string();
    assert!(err.contains("manifest.json"), "{err}");

    // Any field changed by hand, each digit of the file in turn: the manifest's own checksum
    // catches every one (issue 45 found 55 of 90 such flips accepted before it had one).
    let digits: Vec<usize> = text
        .char_indices()
        .filter(|(_, c)| c.is_ascii_digit())
        .map(|(i, _)| i)
        .collect();
    assert!(digits.len() > 50);
    for &i in &digits {
        let mut flipped = text.clone().into_bytes();
        flipped[i] = if flipped[i] == b'9' {
            b'1'
        } else {
            flipped[i] + 1
        };
        // (A last digit beyond a float's precision changes no value: nothing to refuse.)
        let value = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).ok();
        if value(&flipped) == value(text.as_bytes()) {
            continue;
        }
        std::fs::write(&manifest, &flipped).unwrap();
        let err = match Plan::read(dir.path()) {
            Ok(_) => panic!("a flipped digit at byte {i} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("manifest.json"), "{err}");
    }
    std::fs::write(&manifest, &text).unwrap();
    Plan::read(dir.path()).unwrap();
}

#[test]
fn part_file_from_elsewhere_is_used_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let d = dataset(1);
    let parts_path = dir.path().join("parts.txt");
    let text: String = (0..d.num_vertices())
        .map(|v| format!("{}\n", (v * 7) % 3))
        .collect();
    std::fs::write(&parts_path, text).unwrap();
    let s = PlanSpec {
        workers: 3,
        partitioner: Method::File {
            path: parts_path.clone(),
        },
        ..spec()
    };
    let plan = Plan::prepare(&d, &s, &|_| {}).unwrap();
    assert_eq!(plan.assignment.part(5), 35 % 3);
    plan.verify(&d.graph).unwrap();

    std::fs::write(&parts_path, "0\n1\nseven\n").unwrap();
    let err = Plan::prepare(&d, &s, &|_| {}).unwrap_err().to_string();
    assert!(err.contains("parts.txt") && err.contains("line 3"), "{err}");
}

#[test]
fn switch_and_worker_tables_reproduce_neighbourhood_sums() {
    let dir = tempfile::tempdir().unwrap();
    let (d, plan) = written(dir.path());
    plan.verify_tables(dir.path()).unwrap();
    let n = d.num_vertices();
    let x: Vec<i64> = (0..n as i64).map(|v| (v * 131) % 97 - 48).collect();
    for set in &plan.block_sets {
        // Local neighbours on the host, remote ones through the switch tables.
        let mut got = vec![0i64; n];
        for v in 0..n as u32 {
            for &u in d.graph.neighbors(v) {
                if plan.assignment.part(u) == plan.assignment.part(v) {
                    got[v as usize] += x[u as usize];
                }
            }
        }
        for block in &set.blocks {
            let table = switchgnn_partition::block_table(block, &plan.assignment);
            // Every worker sends its rows; the switch adds each into the listed slots.
            let mut aggregators = vec![0i64; table.len()];
            let mut arrived = vec![0u32; table.len()];
            for w in 0..plan.manifest.spec.workers {
                let mine = table.for_worker(w);
                for i in 0..mine.len() {
                    assert_eq!(mine.workers[i], w);
                    for &slot in mine.row(i) {
                        aggregators[slot as usize] += x[mine.vertices[i] as usize];
                        arrived[slot as usize] += 1;
                    }
                }
            }
            for i in 0..table.len() {
                assert_eq!(arrived[i], table.expected[i], "slot {i} completes exactly");
                got[table.vertices[i] as usize] += aggregators[i];
            }
        }
        for v in 0..n as u32 {
            let direct: i64 = d.graph.neighbors(v).iter().map(|&u| x[u as usize]).sum();
            assert_eq!(got[v as usize], direct, "vertex {v}");
        }
    }
    // A damaged worker table is found.
    let worker = dir.path().join("worker-2-a1.bin");
    let mut bytes = std::fs::read(&worker).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&worker, bytes).unwrap();
    let err = plan.verify_tables(dir.path()).unwrap_err();
    assert!(err.to_string().contains("worker-2-a1.bin"), "{err}");
}

#[test]
fn orders_are_stored_checked_and_shape_the_worker_tables() {
    let dir = tempfile::tempdir().unwrap();
    let d = dataset(1);
    let mut plan = Plan::prepare(&d, &spec(), &|_| {}).unwrap();
    // Reverse vertex order in every block.
    let orders: Vec<Vec<Vec<u32>>> = plan
        .block_sets
        .iter()
        .map(|set| {
            set.blocks
                .iter()
                .map(|b| b.vertices().into_iter().rev().collect())
                .collect()
        })
        .collect();
    let mut broken = orders.clone();
    broken[0][0].pop();
    let info = switchgnn_partition::OrderInfo {
        kind: "reverse".into(),
        seed: 0,
    };
    assert!(
        plan.set_orders(info.clone(), broken).is_err(),
        "an order must be a permutation"
    );
    plan.set_orders(info, orders.clone()).unwrap();
    plan.write(dir.path()).unwrap();
    let back = Plan::read(dir.path()).unwrap();
    assert_eq!(back.orders.as_ref(), Some(&orders));
    back.verify_tables(dir.path()).unwrap();
    // Worker 0's first block lists its vertices in the block order (descending here).
    let table = switchgnn_partition::block_table(&back.block_sets[0].blocks[0], &back.assignment);
    let mine = table.for_worker_in_order(0, &orders[0][0]);
    assert!(mine.vertices.windows(2).all(|w| w[0] > w[1]));
    // A plan written again without orders drops the stale order files.
    let mut plain = Plan::prepare(&d, &spec(), &|_| {}).unwrap();
    plain.write(dir.path()).unwrap();
    assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| !e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("orders-")));
}
