//! Packet captures a person can read: an endpoint's capture of real datagrams, decoded by
//! Debian's `tshark` with the project's dissector (`tools/wireshark/switchgnn.lua`), gives back
//! the fields that were sent; and the dissector's field table is the wire module's.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use switchgnn_dataplane::control::Control;
use switchgnn_dataplane::wire::{
    emit_record, emit_zero_record, Flags, PacketType, Repr, FIELDS, VERSION,
};
use switchgnn_transport::capture::Capture;
use switchgnn_transport::{Endpoint, ShimConfig};

fn dissector() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/wireshark/switchgnn.lua")
}

/// Whether `tshark` runs here; in CI it must (the CI script installs it).
fn tshark() -> bool {
    let found = Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").is_err(),
            "tshark is missing but CI is set: install it (apt-get install tshark)"
        );
        eprintln!("skipping: tshark is not installed (apt-get install tshark)");
    }
    found
}

#[test]
fn the_dissector_lays_the_header_out_as_the_wire_module_does() {
    let text = std::fs::read_to_string(dissector()).unwrap();
    // The `layout` table: lines `{ "name", offset, length },`.
    let layout: Vec<(String, usize, usize)> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("{ \"")?.strip_suffix("},")?;
            let (name, rest) = l.split_once('"')?;
            let mut nums = rest.split(',').filter_map(|x| x.trim().parse().ok());
            Some((name.to_string(), nums.next()?, nums.next()?))
        })
        .collect();
    let want: Vec<(String, usize, usize)> = FIELDS
        .iter()
        .map(|&(n, a, l)| (n.to_string(), a, l))
        .collect();
    assert_eq!(layout, want);
    // It decodes the version the wire module writes, and no other.
    assert!(
        text.lines()
            .any(|l| l.trim() == format!("local VERSION = {VERSION}")),
        "the dissector's VERSION is not wire::VERSION ({VERSION})"
    );
}

/// Two endpoints on loopback, the first capturing to `path` (at most `packets`).
fn capturing_pair(path: &Path, packets: u64) -> (Endpoint, Endpoint) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut a = Endpoint::bind(any, ShimConfig::default()).unwrap();
    let b = Endpoint::bind(any, ShimConfig::default()).unwrap();
    a.capture_to(Capture::create(path, packets).unwrap());
    (a, b)
}

/// `tshark`'s reading of the capture at `path` with the project's dissector: the switchgnn
/// `fields`, `;`-separated, a line per packet.
fn tshark_fields(path: &Path, fields: &[&str]) -> String {
    let mut tshark = Command::new("tshark");
    tshark
        .arg("-X")
        .arg(format!("lua_script:{}", dissector().display()))
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "separator=;"]);
    for f in fields {
        tshark.arg("-e").arg(format!("switchgnn.{f}"));
    }
    let out = tshark.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Header `i` of the test's packets: every field different, some flags, a few lanes.
fn packet(i: u32) -> (Repr, Vec<i32>) {
    let lanes: Vec<i32> = (0..(i % 4) as i32).map(|k| k * 1000 - i as i32).collect();
    let repr = Repr {
        packet_type: [PacketType::Data, PacketType::Result, PacketType::Raw][i as usize % 3],
        flags: Flags {
            ack: i % 2 == 1,
            ecn: i % 3 == 0,
            backward: i % 5 == 0,
            partial: i % 7 == 0,
            ..Flags::default()
        },
        layer: (i % 3) as u8,
        job: 7,
        src: 1000 + i,
        dst: 2000 + 3 * i,
        block: (i / 4) as u16,
        count: 1,
        worker: (i % 4) as u16,
        chunk: 0,
        lanes: lanes.len() as u8,
        epoch: 11,
        sequence: 500 + i,
    };
    (repr, lanes)
}

#[test]
fn tshark_reads_back_what_an_endpoint_sent() {
    if !tshark() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exchange.pcap");
    let (mut a, mut b) = capturing_pair(&path, 1_000);
    let to_b = b.local_addr().unwrap();
    let sent: Vec<(Repr, Vec<i32>)> = (0..24).map(packet).collect();
    for (r, lanes) in &sent {
        a.send(to_b, None, r.to_bytes(lanes));
    }
    a.send(to_b, None, Control::Heartbeat.encode());
    a.flush().unwrap();
    // B answers once: A's capture records what it receives too.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = 0;
    while got < sent.len() + 1 && Instant::now() < deadline {
        b.wait(Some(Instant::now() + Duration::from_millis(50)))
            .unwrap();
        got += b.recv(|_| {}).unwrap();
    }
    assert_eq!(got, sent.len() + 1, "the datagrams crossed loopback");
    b.send(
        a.local_addr().unwrap(),
        None,
        sent[1].0.to_bytes(&sent[1].1),
    );
    b.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut back = 0;
    while back == 0 && Instant::now() < deadline {
        a.wait(Some(Instant::now() + Duration::from_millis(50)))
            .unwrap();
        back += a.recv(|_| {}).unwrap();
    }
    let stats = a.finish_capture().unwrap().expect("a capture");
    assert_eq!(stats.packets, sent.len() as u64 + 2);

    let fields = [
        "type", "flags", "layer", "job", "src", "dst", "block", "worker", "lanes", "epoch",
        "sequence", "lane", "control",
    ];
    let text = tshark_fields(&path, &fields);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), sent.len() + 2, "{text}");
    let expect = |r: &Repr, lanes: &[i32]| {
        let lanes: Vec<String> = lanes.iter().map(i32::to_string).collect();
        format!(
            "{};0x{:02x};{};{};{};{};{};{};{};{};{};{};",
            r.packet_type as u8,
            r.flags.to_u8(),
            r.layer,
            r.job,
            r.src,
            r.dst,
            r.block,
            r.worker,
            r.lanes,
            r.epoch,
            r.sequence,
            lanes.join(",")
        )
    };
    for (line, (r, lanes)) in lines.iter().zip(&sent) {
        assert_eq!(*line, expect(r, lanes));
    }
    assert!(
        lines[sent.len()].ends_with(r#"{"type":"heartbeat"}"#),
        "{}",
        lines[sent.len()]
    );
    assert_eq!(lines[sent.len() + 1], expect(&sent[1].0, &sent[1].1));
}

#[test]
fn tshark_reads_a_zero_record_without_lanes() {
    if !tshark() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows.pcap");
    let (mut a, b) = capturing_pair(&path, 10);
    // A zero record of 64 lanes, then a record of two lanes.
    let mut records = [0u8; 64];
    let mut len = emit_zero_record(9, 1, 64, &mut records);
    len += emit_record(7, 0, &[5, -6], &mut records[len..]);
    let repr = Repr {
        packet_type: PacketType::Rows,
        count: 2,
        lanes: 0,
        ..packet(0).0
    };
    let mut bytes = repr.to_bytes(&[]);
    bytes.extend_from_slice(&records[..len]);
    a.send(b.local_addr().unwrap(), None, bytes);
    a.flush().unwrap();
    let stats = a.finish_capture().unwrap().expect("a capture");
    assert_eq!(stats.packets, 1);
    let text = tshark_fields(&path, &["record.src", "record.lanes", "lane"]);
    // Both records named with the lanes they stand for; only the second carries lanes.
    assert_eq!(text.trim(), "9,7;64,2;5,-6");
}
