//! The P4 sources against the Rust side: the switchgnn header field for field against the wire
//! module's bytes, every protocol constant against its Rust definition, and every table the
//! control plane fills (P4Runtime ids, key fields, action parameters and widths, sizes)
//! against `program.rs`. No P4 compiler runs here, so this is what keeps the two in step.

use std::collections::BTreeMap;
use std::path::PathBuf;

use regex::Regex;
use switchgnn_dataplane::plan::Mode;
use switchgnn_dataplane::switch::DropReason;
use switchgnn_dataplane::wire::{self, Flags, PacketType, Repr};
use switchgnn_p4::program::{self, Table};

/// Every `.p4` file of the program, comments removed, with its name.
fn sources() -> Vec<(String, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("switchgnn.p4")];
    let mut include: Vec<PathBuf> = std::fs::read_dir(root.join("include"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "p4"))
        .collect();
    include.sort();
    files.extend(include);
    let block = Regex::new(r"(?s)/\*.*?\*/").unwrap();
    let line = Regex::new(r"//[^\n]*").unwrap();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let text = block.replace_all(&text, "");
            let text = line.replace_all(&text, "").into_owned();
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect()
}

/// Every file, as the preprocessor leaves it for Tofino 1.
fn all_text() -> String {
    for_target(&source_text(), 1)
}

/// Every file, target conditionals unresolved.
fn source_text() -> String {
    sources()
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The chip generations the program compiles for (`__TARGET_TOFINO__`).
const TARGETS: [u32; 2] = [1, 2];

/// `text` as the preprocessor leaves it for Tofino `generation`: the branches of
/// `#if __TARGET_TOFINO__ >= N` that do not apply are dropped (other conditionals are kept, as
/// they only guard includes).
fn for_target(text: &str, generation: u32) -> String {
    let target_if = Regex::new(r"^\s*#if\s+__TARGET_TOFINO__\s*>=\s*(\d+)").unwrap();
    // One entry per open conditional: Some(taken) for a target test, None for any other.
    let mut open: Vec<Option<bool>> = Vec::new();
    let mut kept = String::new();
    for line in text.lines() {
        let directive = line.trim_start();
        if let Some(c) = target_if.captures(line) {
            open.push(Some(generation >= c[1].parse::<u32>().unwrap()));
            continue;
        }
        if directive.starts_with("#if") {
            open.push(None);
        } else if directive.starts_with("#else") {
            if let Some(Some(taken)) = open.last_mut() {
                *taken = !*taken;
                continue;
            }
        } else if directive.starts_with("#endif") {
            if let Some(Some(_)) = open.pop() {
                continue;
            }
        }
        if open.iter().all(|c| c.unwrap_or(true)) {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// Bits of TNA's mirror session id on Tofino `generation` (tna.p4: 10, t2na.p4: 8).
fn mirror_id_bits(generation: u32) -> u32 {
    if generation >= 2 {
        8
    } else {
        10
    }
}

fn number(text: &str) -> u64 {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => text.parse().unwrap(),
    }
}

/// `const bit<N> NAME = V;` and `const int NAME = V;`.
fn constants(text: &str) -> BTreeMap<String, u64> {
    let re =
        Regex::new(r"const\s+(?:bit<\d+>|int)\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;").unwrap();
    re.captures_iter(text)
        .map(|c| (c[1].to_string(), number(&c[2])))
        .collect()
}

/// The body between the brace after `at` and its matching closing brace.
fn braced(text: &str, at: usize) -> &str {
    let open = at + text[at..].find('{').unwrap();
    let mut depth = 0;
    for (i, ch) in text[open..].char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces");
}

/// `header NAME { bit<N> field; ... }` as (field, bits) in order, on Tofino 1.
fn header(text: &str, name: &str) -> Vec<(String, u32)> {
    header_for(text, name, 1)
}

/// `header NAME { ... }` as (field, bits) on Tofino `generation` (`text` already resolved for it).
fn header_for(text: &str, name: &str, generation: u32) -> Vec<(String, u32)> {
    let at = text
        .find(&format!("header {name} "))
        .unwrap_or_else(|| panic!("header {name}"));
    // Fields are `bit<N>` or one of TNA's port and mirror-session types.
    let re = Regex::new(r"(bit<(\d+)>|PortId_t|MirrorId_t)\s+(\w+)\s*;").unwrap();
    re.captures_iter(braced(text, at))
        .map(|c| {
            let bits = match &c[1] {
                "PortId_t" => program::PORT_BITS,
                "MirrorId_t" => mirror_id_bits(generation),
                _ => c[2].parse().unwrap(),
            };
            (c[3].to_string(), bits)
        })
        .collect()
}

#[test]
fn the_switchgnn_header_is_the_wire_header() {
    let text = all_text();
    let fields = header(&text, "switchgnn_h");
    let bits: u32 = fields.iter().map(|(_, b)| b).sum();
    assert_eq!(bits as usize, 8 * wire::HEADER_LEN);
    // A header whose every field holds a distinct value; each P4 field, at the offset the P4
    // declaration gives it, must read back that value from the bytes the wire module emits.
    let r = Repr {
        packet_type: PacketType::Fetch,
        flags: Flags::from_u8(0b1_0101).unwrap(),
        layer: 0x33,
        job: 0x4455,
        src: 0x6677_8899,
        dst: 0xaabb_ccdd,
        block: 0x1122,
        count: 0x3344,
        worker: 0x5566,
        chunk: 0x77,
        lanes: 2,
        epoch: 0x0102_0304,
        sequence: 0x0506_0708,
    };
    let bytes = r.to_bytes(&[1, 2]);
    let expected: BTreeMap<&str, u64> = [
        ("magic", u64::from(wire::MAGIC)),
        ("version", u64::from(wire::VERSION)),
        ("packet_type", r.packet_type as u64),
        ("flags", u64::from(r.flags.to_u8())),
        ("layer", u64::from(r.layer)),
        ("job", u64::from(r.job)),
        ("src", u64::from(r.src)),
        ("dst", u64::from(r.dst)),
        ("block", u64::from(r.block)),
        ("count", u64::from(r.count)),
        ("worker", u64::from(r.worker)),
        ("chunk", u64::from(r.chunk)),
        ("lanes", u64::from(r.lanes)),
        ("epoch", u64::from(r.epoch)),
        ("sequence", u64::from(r.sequence)),
    ]
    .into_iter()
    .collect();
    assert_eq!(fields.len(), expected.len(), "{fields:?}");
    let mut offset = 0usize;
    for (name, width) in &fields {
        assert_eq!(width % 8, 0, "{name} is not whole bytes");
        let n = *width as usize / 8;
        let value = bytes[offset..offset + n]
            .iter()
            .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        let want = expected
            .get(name.as_str())
            .unwrap_or_else(|| panic!("P4 field {name} is not in the wire header"));
        assert_eq!(value, *want, "field {name} at byte {offset}");
        offset += n;
    }
    // Lanes are 32-bit words right after the header.
    assert_eq!(header(&text, "lane_h"), vec![("value".to_string(), 32)]);
}

#[test]
fn protocol_constants_match_the_rust_definitions() {
    let c = constants(&all_text());
    let get = |name: &str| {
        *c.get(name)
            .unwrap_or_else(|| panic!("constant {name} missing"))
    };
    assert_eq!(get("SG_MAGIC"), u64::from(wire::MAGIC));
    assert_eq!(get("SG_VERSION"), u64::from(wire::VERSION));
    assert_eq!(get("SG_MAX_LANES"), wire::MAX_LANES as u64);
    assert_eq!(get("SG_UDP_PORT"), u64::from(program::SG_UDP_PORT));
    for (name, t) in [
        ("SG_DATA", PacketType::Data),
        ("SG_RESULT", PacketType::Result),
        ("SG_RAW", PacketType::Raw),
        ("SG_FETCH", PacketType::Fetch),
        ("SG_BLOCK_DONE", PacketType::BlockDone),
        ("SG_BLOCK_GO", PacketType::BlockGo),
        ("SG_JOIN", PacketType::Join),
        ("SG_REDUCE", PacketType::Reduce),
        ("SG_REDUCED", PacketType::Reduced),
        ("SG_ROWS", PacketType::Rows),
        ("SG_STAMPS", PacketType::Stamps),
    ] {
        assert_eq!(get(name), t as u64, "{name}");
    }
    assert!(
        PacketType::from_u8(get("SG_STAMPS") as u8 + 1).is_none(),
        "a type past SG_STAMPS"
    );
    let one = |f: fn(&mut Flags)| {
        let mut flags = Flags::default();
        f(&mut flags);
        u64::from(flags.to_u8())
    };
    assert_eq!(get("SG_FLAG_ACK"), one(|f| f.ack = true));
    assert_eq!(get("SG_FLAG_FETCH"), one(|f| f.fetch = true));
    assert_eq!(get("SG_FLAG_ECN"), one(|f| f.ecn = true));
    assert_eq!(get("SG_FLAG_RESEND"), one(|f| f.resend = true));
    assert_eq!(get("SG_FLAG_BACKWARD"), one(|f| f.backward = true));
    assert_eq!(get("SG_FLAG_PARTIAL"), one(|f| f.partial = true));
    let reserved = get("SG_FLAG_RESERVED") as u8;
    assert!(Flags::from_u8(reserved).is_err());
    assert!(
        Flags::from_u8(!reserved).is_ok(),
        "every other bit is a known flag"
    );
    for (name, reason) in [
        ("DROP_TRUNCATED", DropReason::Truncated),
        ("DROP_BAD_MAGIC", DropReason::BadMagic),
        ("DROP_BAD_VERSION", DropReason::BadVersion),
        ("DROP_UNKNOWN_TYPE", DropReason::UnknownType),
        ("DROP_RESERVED_FLAGS", DropReason::ReservedFlags),
        ("DROP_TOO_MANY_LANES", DropReason::TooManyLanes),
        ("DROP_LANES_BEYOND", DropReason::LanesBeyondBuffer),
        ("DROP_OUT_OF_RANGE", DropReason::OutOfRange),
        ("DROP_NOT_ADMITTED", DropReason::NotAdmitted),
        ("DROP_WRONG_DIRECTION", DropReason::WrongDirection),
        ("DROP_STALE", DropReason::Stale),
        ("DROP_WRONG_MODE", DropReason::WrongMode),
        ("DROP_NOT_IN_PLAN", DropReason::NotInPlan),
        ("DROP_BAD_LANES", DropReason::BadLanes),
        ("DROP_DUPLICATE", DropReason::Duplicate),
        ("DROP_NO_ALLREDUCE", DropReason::NoAllReduce),
    ] {
        assert_eq!(get(name), reason as u64, "{name}");
    }
    assert_eq!(get("DROP_REASONS"), DropReason::NoAllReduce as u64 + 1);
    assert_eq!(get("SG_MODE_BLOCKS"), Mode::Blocks as u64);
    assert_eq!(get("SG_MODE_HOST"), Mode::Host as u64);
    assert_eq!(program::MODE_BLOCKS, Mode::Blocks as u64);
    assert_eq!(program::MODE_HOST, Mode::Host as u64);
    assert_eq!(get("SG_MODE_REDUCE"), Mode::Reduce as u64);
    assert_eq!(program::MODE_REDUCE, Mode::Reduce as u64);
    assert_eq!(get("AGGREGATORS"), program::AGGREGATORS);
    assert_eq!(get("SEEN_WORDS"), program::SEEN_WORDS);
    assert_eq!(get("MAX_JOBS"), program::MAX_JOBS);
    assert_eq!(get("MAX_WORKERS"), program::MAX_WORKERS);
    for (i, &port) in program::RECIRC_PORTS.iter().enumerate() {
        assert_eq!(get(&format!("RECIRC_PORT_{i}")), u64::from(port));
    }
    assert_eq!(get("RECIRC_LOCAL"), u64::from(program::RECIRC_LOCAL));
    assert_eq!(get("LOOPED_LOCALS"), program::LOOPED_LOCALS);
    // The chip model's spare ports are what the value set can hold per pipe.
    assert_eq!(
        u64::from(switchgnn_chip::MAX_LOOPED_PER_PIPE),
        program::LOOPED_LOCALS
    );
    assert_eq!(get("PATH_SLOTS"), program::PATH_SLOTS);
    // A path index fits the five bits the pass group's offset gives it, and a job's groups
    // (its block go, then a pass group per path) fit the 16-bit group id.
    const { assert!(program::LOOPED_LOCALS < 32) };
    assert_eq!(
        u32::from(program::PASS_GROUPS_PER_PATH),
        1 << (2 + 4 + 2),
        "path << 8 | pipe << 6 | fan-out << 2 | copies"
    );
    const { assert!(program::PATH_SLOTS <= 1 << 8, "the slot is an 8-bit hash") };
    assert_eq!(get("RID_EMIT"), u64::from(program::RID_EMIT));
    assert_eq!(get("RID_CONTINUE"), u64::from(program::RID_CONTINUE));
    assert_eq!(get("RID_PIPE"), u64::from(program::RID_PIPE));
    assert_eq!(get("LANES_READ_PER_PASS"), program::LANES_READ_PER_PASS);
    assert_eq!(
        program::LANES_READ_PER_PASS as usize,
        switchgnn_dataplane::switch::LANES_READ_PER_PASS
    );
    // Pipe p's recirculation port is p << 7 | RECIRC_LOCAL, as the program computes it.
    for (p, &port) in program::RECIRC_PORTS.iter().enumerate() {
        assert_eq!(port, (p as u16) << 7 | program::RECIRC_LOCAL);
    }
    // Replication ids of the pipes' copies stay clear of the other two.
    let pipe_rids = program::RID_PIPE..program::RID_PIPE + u16::from(program::MAX_PIPES);
    assert!(!pipe_rids.contains(&program::RID_EMIT) && !pipe_rids.contains(&program::RID_CONTINUE));
}

#[test]
fn the_pass_header_is_what_the_chip_model_counts() {
    let text = all_text();
    // An acknowledgement's mirror copy keeps the mirror byte and every header egress parses.
    let bytes = |name: &str| header(&text, name).iter().map(|(_, b)| b).sum::<u32>() / 8;
    let headers: u32 = ["pass_h", "ethernet_h", "ipv4_h", "udp_h", "switchgnn_h"]
        .iter()
        .map(|h| bytes(h))
        .sum();
    assert_eq!(1 + headers, switchgnn_p4::entries::ACK_TRUNCATE);
    // The same bytes on both chips, and whole bytes (Tofino 2 refuses a header that is not).
    for generation in TARGETS {
        let text = for_target(&source_text(), generation);
        let bits: u32 = header_for(&text, "pass_h", generation)
            .iter()
            .map(|(_, b)| b)
            .sum();
        assert_eq!(bits % 8, 0, "pass_h on Tofino {generation}: {bits} bits");
        assert_eq!(
            u64::from(bits) / 8,
            switchgnn_chip::PASS_HEADER,
            "Tofino {generation}"
        );
    }
    // Lanes: stacks of 32 (a stack's validity bits share one container) that hold the wire's
    // most lanes between them, read back in place.
    let stack = Regex::new(r"lane_h\[(\d+)\]\s+(lanes\w*)\s*;").unwrap();
    let stacks: Vec<usize> = stack
        .captures_iter(&text)
        .map(|c| c[1].parse().unwrap())
        .collect();
    assert!(!stacks.is_empty(), "the lane stacks");
    assert!(stacks.iter().all(|&n| n <= 32), "{stacks:?}");
    assert_eq!(stacks.iter().sum::<usize>(), wire::MAX_LANES);
    // One lane-pair register per output word of a pass: lanes i and i + 32 in register i.
    let pairs = Regex::new(r"LANE_PAIR\((\d+),\s*(\d+)\)").unwrap();
    let found: Vec<(usize, usize)> = pairs
        .captures_iter(&text)
        .filter_map(|c| Some((c[1].parse().ok()?, c[2].parse().ok()?)))
        .collect();
    let want: Vec<(usize, usize)> = (0..wire::MAX_LANES / 2)
        .map(|i| (i, i + wire::MAX_LANES / 2))
        .collect();
    assert_eq!(found, want);
}

/// Where each table is declared: its body and the control that encloses it.
fn find_table<'a>(files: &'a [(String, String)], short: &str) -> (&'a str, &'a str, String) {
    let re = Regex::new(&format!(r"@id\((0x[0-9a-fA-F]+)\)\s*table\s+{short}\s*\{{")).unwrap();
    let control = Regex::new(r"control\s+(\w+)\s*\(").unwrap();
    for (_, text) in files {
        if let Some(m) = re.find(text) {
            let id = re.captures(text).unwrap().get(1).unwrap().as_str();
            let enclosing = control
                .captures_iter(&text[..m.start()])
                .last()
                .map(|c| c[1].to_string())
                .unwrap_or_default();
            return (braced(text, m.start()), id, enclosing);
        }
    }
    panic!("table {short} is not declared with an @id");
}

/// Parameters of `action NAME(...)`: (name, bits).
fn action_params(text: &str, short: &str) -> Vec<(String, u32)> {
    let re = Regex::new(&format!(r"action\s+{short}\s*\(([^)]*)\)")).unwrap();
    let params = &re
        .captures(text)
        .unwrap_or_else(|| panic!("action {short}"))[1];
    let param = Regex::new(r"(bit<(\d+)>|PortId_t|MulticastGroupId_t|MirrorId_t)\s+(\w+)").unwrap();
    param
        .captures_iter(params)
        .map(|c| {
            let bits = match &c[1] {
                "PortId_t" => 9,
                "MulticastGroupId_t" => 16,
                "MirrorId_t" => 10,
                _ => c[2].parse().unwrap(),
            };
            (c[3].to_string(), bits)
        })
        .collect()
}

/// Width of a key expression: a header field, an intrinsic port, or a declared local.
fn key_bits(text: &str, expr: &str) -> u32 {
    if expr.ends_with("_port") && (expr.starts_with("ig_intr_md") || expr.starts_with("eg_intr_md"))
    {
        return 9;
    }
    if let Some(rest) = expr.strip_prefix("hdr.") {
        let (member, field) = rest.split_once('.').unwrap();
        let decl = Regex::new(&format!(r"(\w+)(?:\[\d+\])?\s+{member}\s*;")).unwrap();
        let fields = text
            .find("struct headers_t")
            .map(|at| braced(text, at))
            .unwrap();
        let ty = decl.captures(fields).unwrap()[1].to_string();
        return header(text, &ty)
            .into_iter()
            .find(|(f, _)| f == field)
            .unwrap_or_else(|| panic!("{expr}"))
            .1;
    }
    // Ingress metadata: a field of `ingress_metadata_t`.
    let expr = expr.strip_prefix("meta.").unwrap_or(expr);
    let local = Regex::new(&format!(r"bit<(\d+)>\s+{expr}\b")).unwrap();
    local.captures(text).unwrap_or_else(|| panic!("key {expr}"))[1]
        .parse()
        .unwrap()
}

fn check_table(files: &[(String, String)], text: &str, t: &Table) {
    let parts: Vec<&str> = t.name.split('.').collect();
    let short = parts.last().unwrap();
    let (body, id, enclosing) = find_table(files, short);
    assert_eq!(number(id), u64::from(t.id), "{} id", t.name);
    // The control path: `Ingress.check.admission` is table admission in the control type that
    // Ingress instantiates as `check`.
    let want_control = if parts.len() == 3 {
        let re = Regex::new(&format!(r"(\w+)\(\)\s+{}\s*;", parts[1])).unwrap();
        re.captures(text)
            .unwrap_or_else(|| panic!("instance {}", parts[1]))[1]
            .to_string()
    } else {
        parts[0].to_string()
    };
    assert_eq!(
        enclosing, want_control,
        "{} is declared in the wrong control",
        t.name
    );
    let key = Regex::new(r#"([\w.]+)\s*:\s*exact\s*@name\("(\w+)"\)"#).unwrap();
    let keys: Vec<(String, u32)> = key
        .captures_iter(body)
        .map(|c| (c[2].to_string(), key_bits(text, &c[1])))
        .collect();
    let want: Vec<(String, u32)> = t
        .keys
        .iter()
        .map(|f| (f.name.to_string(), f.bits))
        .collect();
    assert_eq!(keys, want, "{} keys", t.name);
    let action_short = t.action.name.rsplit('.').next().unwrap();
    let listed = Regex::new(&format!(r"@id\((0x[0-9a-fA-F]+)\)\s*{action_short}\b")).unwrap();
    let action_id = &listed
        .captures(body)
        .unwrap_or_else(|| panic!("{} lists {action_short}", t.name))[1];
    assert_eq!(
        number(action_id),
        u64::from(t.action.id),
        "{} id",
        t.action.name
    );
    let params = action_params(text, action_short);
    let want: Vec<(String, u32)> = t
        .action
        .params
        .iter()
        .map(|f| (f.name.to_string(), f.bits))
        .collect();
    assert_eq!(params, want, "{} parameters", t.action.name);
    let size = Regex::new(r"size\s*=\s*(\w+)\s*;").unwrap();
    let size = &size
        .captures(body)
        .unwrap_or_else(|| panic!("{} size", t.name))[1];
    let size = constants(text)
        .get(size)
        .copied()
        .unwrap_or_else(|| number(size));
    assert_eq!(size, t.size, "{} size", t.name);
}

#[test]
fn every_table_matches_the_control_plane_schema() {
    let files = sources();
    let text = all_text();
    for t in program::TABLES {
        check_table(&files, &text, t);
    }
    // P4Runtime ids carry their entity type in the top byte, and no two are equal.
    let mut ids: Vec<u32> = program::TABLES
        .iter()
        .flat_map(|t| [t.id, t.action.id])
        .collect();
    assert!(program::TABLES
        .iter()
        .all(|t| t.id >> 24 == 0x02 && t.action.id >> 24 == 0x01));
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 2 * program::TABLES.len());
}

/// The control type `Ingress` instantiates as `instance` (`AllReduce() allreduce;`).
fn control_of_instance(text: &str, instance: &str) -> String {
    let re = Regex::new(&format!(r"(\w+)\(\)\s+{instance}\s*;")).unwrap();
    re.captures(text)
        .unwrap_or_else(|| panic!("instance {instance}"))[1]
        .to_string()
}

#[test]
fn every_register_the_control_plane_clears_is_declared_so() {
    let files = sources();
    let text = all_text();
    let c = constants(&text);
    let control = Regex::new(r"control\s+(\w+)\s*\(").unwrap();
    let field = Regex::new(r"bit<(\d+)>\s+(\w+)\s*;").unwrap();
    for r in program::REGISTERS {
        let parts: Vec<&str> = r.name.split('.').collect();
        assert_eq!(parts.len(), 3, "{}", r.name);
        let decl = Regex::new(&format!(
            r"@id\((0x[0-9a-fA-F]+)\)\s*Register<(\w+),\s*bit<32>>\((\w+)\)\s+{}\s*;",
            parts[2]
        ))
        .unwrap();
        let (file, found) = files
            .iter()
            .find_map(|(_, t)| decl.captures(t).map(|m| (t, m)))
            .unwrap_or_else(|| panic!("register {} is not declared with an @id", r.name));
        assert_eq!(number(&found[1]), u64::from(r.id), "{} id", r.name);
        assert_eq!(r.id >> 24, 0x16, "{}: P4Runtime's register prefix", r.name);
        let at = found.get(0).unwrap().start();
        let enclosing = control.captures_iter(&file[..at]).last().unwrap()[1].to_string();
        assert_eq!(
            enclosing,
            control_of_instance(&text, parts[1]),
            "{}",
            r.name
        );
        let size = c
            .get(&found[3])
            .copied()
            .unwrap_or_else(|| number(&found[3]));
        assert_eq!(size, r.size, "{} size", r.name);
        // Its words: the struct's fields, in order, as the control plane writes them.
        let ty = &found[2];
        let at = text
            .find(&format!("struct {ty} "))
            .unwrap_or_else(|| panic!("struct {ty}"));
        let fields: Vec<(String, u32)> = field
            .captures_iter(braced(&text, at))
            .map(|m| (m[2].to_string(), m[1].parse().unwrap()))
            .collect();
        let want: Vec<(String, u32)> = r
            .fields
            .iter()
            .map(|f| (f.name.to_string(), f.bits))
            .collect();
        assert_eq!(fields, want, "{} fields", r.name);
    }
    assert_eq!(c["REDUCE_BANKS"], program::REDUCE_BANKS);
    assert_eq!(c["REDUCE_SEEN_WORDS"], program::REDUCE_SEEN_WORDS);
    // Every worker of a job has a bit in its bank's seen words.
    assert_eq!(
        program::REDUCE_SEEN_WORDS,
        program::REDUCE_BANKS * program::MAX_WORKERS / 32
    );
    assert!(program::MAX_ALLREDUCE_SLOTS <= u64::from(switchgnn_dataplane::switch::MAX_SLOTS));
}

#[test]
fn the_parser_knows_passes_by_local_port_number() {
    let text = all_text();
    let decl =
        Regex::new(r"@id\((0x[0-9a-fA-F]+)\)\s*value_set<bit<(\d+)>>\((\w+)\)\s+looped_ports\s*;")
            .unwrap();
    let c = decl.captures(&text).expect("the looped_ports value set");
    assert_eq!(number(&c[1]), u64::from(program::LOOPED_PORTS_ID));
    assert_eq!(
        program::LOOPED_PORTS_ID >> 24,
        0x03,
        "a value set's id prefix"
    );
    assert_eq!(&c[2], "7", "local port numbers");
    assert_eq!(constants(&text)[&c[3]], program::LOOPED_LOCALS);
    // The start state sends a packet to parse_pass by its port's local number: the internal
    // port's, or one the value set lists.
    let start = text.find("state start").unwrap();
    let body = braced(&text, start);
    assert!(body.contains("select(ig_intr_md.ingress_port[6:0])"));
    assert!(body.contains("RECIRC_LOCAL: parse_pass;"));
    assert!(body.contains("looped_ports: parse_pass;"));
}

#[test]
fn pass_steps_and_output_kinds_are_each_distinct() {
    let c = constants(&all_text());
    for prefix in ["STEP_", "OUT_", "RUN_", "AGG_", "REDUCE_"] {
        let family: Vec<(&String, &u64)> = c
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .filter(|(name, _)| !matches!(name.as_str(), "REDUCE_BANKS" | "REDUCE_SEEN_WORDS"))
            .collect();
        assert!(family.len() >= 2, "{prefix}: {family:?}");
        let mut values: Vec<u64> = family.iter().map(|(_, v)| **v).collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(
            values.len(),
            family.len(),
            "{prefix} values repeat: {family:?}"
        );
    }
}
