//! The conformance suite on every driver: each exchange kind under each network condition,
//! forward and backward, bit-identical to the direct computation (see the crate's docs).

mod common;

use common::{dataset_of, random_graph};
use std::collections::BTreeMap;

use switchgnn_conformance::{
    cases, Driver, Felt, Fixture, InMemory, InMemorySharded, InMemoryTwoLevel, Simulator,
    SimulatorTwoLevel, Udp, UdpSharded, UdpTwoLevel,
};

/// 240 vertices on 4 workers, width 40 (two chunks, the second short), 16 KiB of aggregators
/// so that the SwitchGNN plan takes several blocks.
fn fixture() -> Fixture {
    let d = dataset_of(random_graph(240, 900, 11));
    let f = Fixture::new(&d, 4, 40, 16 << 10);
    let p = f.plan(switchgnn_dataplane::ExchangeKind::Switchgnn);
    assert!(p.blocks.len() > 1, "the fixture wants several blocks");
    // The host hybrid sends raw copies on some worker pairs and partial sums on others.
    let b = &f.plan(switchgnn_dataplane::ExchangeKind::HostHybrid).blocks[0];
    assert!(
        !b.multicast.is_empty() && !b.table.slots.is_empty(),
        "the fixture wants both ways in the host hybrid"
    );
    // The host two-level exchange (racks of two) has proxies summing a rack peer's share.
    let p = f.plan(switchgnn_dataplane::ExchangeKind::HostTwoLevel);
    let b = &p.blocks[0];
    let gathers = (0..b.table.slots.len()).any(|i| {
        let w = b.table.slots[i] as u16;
        b.partials.of(i).iter().any(|&u| p.owner[u as usize] != w)
    });
    assert!(
        gathers,
        "the fixture wants proxies in the host two-level exchange"
    );
    f
}

fn run_all(driver: &dyn Driver) {
    let f = fixture();
    let mut failures = Vec::new();
    // What each condition did, over the in-network kinds and over all kinds.
    let mut felt: BTreeMap<&str, (Felt, Felt)> = BTreeMap::new();
    let all = cases();
    for (i, case) in all.iter().enumerate() {
        match f.check(driver, case, i as u64 + 1) {
            // The host kinds pack their copies on every driver.
            Ok(x) if !case.kind.in_network() && x.packed == 0 => {
                failures.push(format!("{case}: no packed host copies reached the switch"))
            }
            Ok(x) => {
                let e = felt.entry(case.condition.name).or_default();
                e.1 += x;
                if case.kind.in_network() {
                    e.0 += x;
                }
            }
            Err(e) => failures.push(format!("{case}: {e}")),
        }
    }
    eprintln!(
        "{}: {} cases, {} failed",
        driver.name(),
        all.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{}:\n{}",
        driver.name(),
        failures.join("\n")
    );
    // Each condition was felt: a driver whose faults or pool did nothing would pass the cases
    // above without testing them.
    let of = |name: &str| felt.get(name).copied().unwrap_or_default();
    let unfelt: Vec<String> = [
        ("1% loss", of("1% loss").1.lost, "datagrams lost"),
        ("5% loss", of("5% loss").1.lost, "datagrams lost"),
        (
            "duplication and reordering",
            of("duplication and reordering").1.duplicated,
            "datagrams duplicated",
        ),
        (
            "lane overflow",
            of("lane overflow").0.overflows,
            "aggregators released by an overflow",
        ),
        (
            "tiny aggregator pool",
            of("tiny aggregator pool").0.raw_forwarded,
            "contributions sent raw",
        ),
        (
            "jumbo frames and 5% loss",
            of("jumbo frames and 5% loss").1.lost,
            "datagrams lost",
        ),
        (
            "jumbo frames and 5% loss",
            // Bytes past the largest datagram of a 1,500-byte MTU.
            of("jumbo frames and 5% loss")
                .1
                .largest
                .saturating_sub(1_472),
            "packet larger than a 1,500-byte MTU carries",
        ),
    ]
    .into_iter()
    .filter(|(_, n, _)| *n == 0)
    .map(|(condition, _, what)| format!("{condition}: no {what}"))
    .collect();
    assert!(
        unfelt.is_empty(),
        "{}: conditions not felt: {}",
        driver.name(),
        unfelt.join("; ")
    );
}

#[test]
fn every_case_is_exact_in_memory() {
    run_all(&InMemory);
}

#[test]
fn every_case_is_exact_in_memory_sharded() {
    // Aggregators spread over two and three cores by destination.
    run_all(&InMemorySharded { shards: 2 });
    run_all(&InMemorySharded { shards: 3 });
}

#[test]
fn every_case_is_exact_in_memory_on_two_levels() {
    // Two racks of two workers, and three racks of two, one and one workers.
    run_all(&InMemoryTwoLevel { racks: 2 });
    run_all(&InMemoryTwoLevel { racks: 3 });
}

#[test]
fn every_case_is_exact_in_the_simulator() {
    run_all(&Simulator);
}

#[test]
fn every_case_is_exact_in_the_simulator_on_two_levels() {
    run_all(&SimulatorTwoLevel { racks: 2 });
    run_all(&SimulatorTwoLevel { racks: 4 });
}

#[test]
fn every_case_is_exact_over_udp() {
    run_all(&Udp);
}

#[test]
fn every_case_is_exact_over_udp_sharded() {
    // The switch process's model on three cores.
    run_all(&UdpSharded { cores: 3 });
}

#[test]
fn every_case_is_exact_over_udp_on_two_levels() {
    // A spine and two leaf processes, two workers under each.
    run_all(&UdpTwoLevel { racks: 2 });
}
