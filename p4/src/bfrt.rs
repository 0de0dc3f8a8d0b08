//! Entries as a `bfrt_python` script for the Tofino SDE's `bfshell`
//! (`bfshell -b entries.py`): multicast nodes and groups, mirror sessions, then every table's
//! rows as data and one loop that adds them, so that the script stays readable at any size.

use std::fmt::Write;

use crate::entries::Entries;
use crate::program::TABLES;

/// The script that adds `entries`, or with `remove` the one that deletes their table rows
/// (what a control plane reloading per-block tables runs for a finished block).
pub fn to_script(entries: &Entries, remove: bool) -> String {
    let m = &entries.meta;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# switchgnn control-plane entries ({}): job {} ({} exchange, {} workers), plan checksum {}.\n\
         # Written by {}. Run in the SDE: bfshell -b <this file>\n\
         # The exchange's registers need no initial values: the program's phase stamps make\n\
         # leftovers read as empty; the all-reduce region's words are cleared below (see\n\
         # p4/README.md).",
        m.part, m.job, m.exchange, m.workers, m.plan_checksum, m.created_by
    );
    s.push_str("\np4 = bfrt.switchgnn.pipe\npre = bfrt.pre\n\n");
    if !remove && !entries.looped.is_empty() {
        looped(&mut s, entries);
    }
    if !remove && !entries.groups.is_empty() {
        replication(&mut s, entries);
    }
    s.push_str("def table(name):\n    t = p4\n    for part in name.split(\".\"):\n        t = getattr(t, part)\n    return t\n\n");
    if !remove && !entries.clears.is_empty() {
        clears(&mut s, entries);
    }
    for t in TABLES {
        let rows: Vec<String> = entries
            .tables
            .iter()
            .filter(|e| e.table.id == t.id)
            .map(|e| {
                // A delete names the key only.
                let params = if remove { &[][..] } else { &e.params[..] };
                let values: Vec<String> =
                    e.keys.iter().chain(params).map(|v| v.to_string()).collect();
                format!("    ({}),", values.join(", "))
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        let params = if remove { &[][..] } else { t.action.params };
        let names: Vec<String> = t
            .keys
            .iter()
            .chain(params)
            .map(|f| format!("\"{}\"", f.name))
            .collect();
        let method = if remove {
            "delete".to_string()
        } else {
            format!(
                "add_with_{}",
                t.action.name.rsplit('.').next().expect("a name")
            )
        };
        let _ = writeln!(
            s,
            "# {} ({} entries)\nrows = [\n{}\n]\nop = getattr(table(\"{}\"), \"{method}\")\n\
             names = [{}]\nfor row in rows:\n    op(**dict(zip(names, row)))\n",
            t.name,
            rows.len(),
            rows.join("\n"),
            t.name,
            names.join(", ")
        );
    }
    s.push_str("bfrt.complete_operations()\n");
    s
}

/// The recirculation paths: front-panel ports put in MAC loopback (no cable: the port's MAC
/// turns its packets around), then the parser's value set of their local numbers, before any
/// pass group replicates to them.
fn looped(s: &mut String, entries: &Entries) {
    let ports: Vec<String> = entries
        .meta
        .looped_ports
        .iter()
        .map(u16::to_string)
        .collect();
    let locals: Vec<String> = entries.looped.iter().map(u16::to_string).collect();
    let _ = writeln!(
        s,
        "# Recirculation paths: front-panel ports in MAC loopback (100G), and their local port\n\
         # numbers in the parser's value set (the same numbers in every pipe).\n\
         LOOPED_PORTS = [{}]\n\
         for port in LOOPED_PORTS:\n    \
         bfrt.port.port.add(DEV_PORT=port, SPEED=\"BF_SPEED_100G\", FEC=\"BF_FEC_TYP_NONE\",\n        \
         LOOPBACK_MODE=\"BF_LPBK_MAC_NEAR\", PORT_ENABLE=True)\n\
         for local in [{}]:\n    \
         p4.IngressParser.looped_ports.add(f1=local, f1_mask=0x7f)\n",
        ports.join(", "),
        locals.join(", ")
    );
}

/// Multicast nodes and groups, and the acknowledgements' mirror sessions.
fn replication(s: &mut String, entries: &Entries) {
    s.push_str(
        "# Multicast: the block go (one replica per worker, rid = rank) and the pass groups\n",
    );
    s.push_str("# (copies of a pass to the pipes' recirculation ports; rid says what each is).\n");
    s.push_str("GROUPS = [\n");
    for g in &entries.groups {
        let replicas: Vec<String> = g
            .replicas
            .iter()
            .map(|r| format!("({}, {})", r.port, r.rid))
            .collect();
        let _ = writeln!(s, "    ({}, [{}]),", g.id, replicas.join(", "));
    }
    s.push_str(
        "]\nnode = 1\nfor mgid, replicas in GROUPS:\n    nodes = []\n    for port, rid in replicas:\n        \
         pre.node.add(MULTICAST_NODE_ID=node, MULTICAST_RID=rid, MULTICAST_LAG_ID=[], DEV_PORT=[port])\n        \
         nodes.append(node)\n        node += 1\n    \
         pre.mgid.add(MGID=mgid, MULTICAST_NODE_ID=nodes,\n                 \
         MULTICAST_NODE_L1_XID_VALID=[False] * len(nodes), MULTICAST_NODE_L1_XID=[0] * len(nodes))\n\n",
    );
    s.push_str(
        "# Ingress mirror sessions of the acknowledgements (one per worker port).\nSESSIONS = [\n",
    );
    for x in &entries.sessions {
        let _ = writeln!(s, "    ({}, {}, {}),", x.id, x.port, x.truncate);
    }
    s.push_str(
        "]\nfor sid, port, length in SESSIONS:\n    \
         bfrt.mirror.cfg.add_with_normal(sid=sid, direction=\"INGRESS\", session_enable=True,\n        \
         ucast_egress_port=port, ucast_egress_port_valid=True, max_pkt_len=length)\n\n",
    );
}

/// The register words the job starts from zero, before any table entry admits its packets.
fn clears(s: &mut String, entries: &Entries) {
    s.push_str("# The all-reduce region starts from zero: (register, fields, first word, words).\nCLEARS = [\n");
    for c in &entries.clears {
        let fields: Vec<String> = c
            .register
            .fields
            .iter()
            .map(|f| format!("\"{}\"", f.name))
            .collect();
        let _ = writeln!(
            s,
            "    (\"{}\", [{}], {}, {}),",
            c.register.name,
            fields.join(", "),
            c.first,
            c.count
        );
    }
    s.push_str(
        "]\nfor name, fields, first, count in CLEARS:\n    reg = table(name)\n    \
         zero = {f: 0 for f in fields}\n    \
         for i in range(first, first + count):\n        reg.mod(REGISTER_INDEX=i, **zero)\n\n",
    );
}
