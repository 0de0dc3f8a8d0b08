//! Entries as P4Runtime JSON: the protobuf JSON mapping of `p4.v1.WriteRequest` messages
//! (INSERT updates of table entries, multicast groups and clone sessions; MODIFY updates that
//! clear a job's all-reduce registers), wrapped with
//! switchgnn's metadata and a checksum:
//!
//! ```json
//! { "switchgnn": { "format": "switchgnn-p4-entries", "format_version": 1, "job": 1, ... },
//!   "checksum": "0x…",   // xxh3 of the compact JSON of "write_requests"
//!   "write_requests": [ { "deviceId": "0", "electionId": {"high": "0", "low": "1"},
//!                         "updates": [ { "type": "INSERT", "entity": { "tableEntry": … } } ] } ] }
//! ```
//!
//! Each element of `write_requests` parses as a `WriteRequest` with
//! `google.protobuf.json_format` (`p4/ptf/validate_p4runtime.py` does exactly that). Values are
//! P4Runtime's canonical bytestrings: big-endian, shortest form, base64.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Map, Value};
use xxhash_rust::xxh3::xxh3_64;

use crate::entries::{
    Entries, EntriesError, Metadata, MirrorSession, MulticastGroup, RegisterClear, Replica,
    TableEntry, FORMAT, FORMAT_VERSION, READS_VERSIONS,
};
use crate::program::{self, Field};

/// Updates per `WriteRequest` (servers bound the size of one message).
pub const BATCH: usize = 5000;

/// The canonical bytestring of `value`: big-endian without leading zero bytes (one byte for 0).
fn bytestring(value: u64) -> String {
    let bytes = value.to_be_bytes();
    let skip = bytes.iter().take(7).take_while(|&&b| b == 0).count();
    STANDARD.encode(&bytes[skip..])
}

fn decode(text: &str, field: &Field) -> Result<u64, String> {
    let bytes = STANDARD
        .decode(text)
        .map_err(|e| format!("`{}`: bad base64 {text:?}: {e}", field.name))?;
    let significant: Vec<u8> = bytes.iter().copied().skip_while(|&b| b == 0).collect();
    if significant.len() > 8 {
        return Err(format!(
            "`{}`: {} bytes is too wide",
            field.name,
            bytes.len()
        ));
    }
    let value = significant
        .iter()
        .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
    if field.bits < 64 && value >> field.bits != 0 {
        return Err(format!(
            "`{}` = {value} does not fit {} bits",
            field.name, field.bits
        ));
    }
    Ok(value)
}

fn table_entry(e: &TableEntry) -> Value {
    let matches: Vec<Value> = e
        .keys
        .iter()
        .enumerate()
        .map(|(i, &v)| json!({"fieldId": i + 1, "exact": {"value": bytestring(v)}}))
        .collect();
    let params: Vec<Value> = e
        .params
        .iter()
        .enumerate()
        .map(|(i, &v)| json!({"paramId": i + 1, "value": bytestring(v)}))
        .collect();
    json!({"tableEntry": {
        "tableId": e.table.id,
        "match": matches,
        "action": {"action": {"actionId": e.table.action.id, "params": params}},
    }})
}

fn group(g: &MulticastGroup) -> Value {
    let replicas: Vec<Value> = g
        .replicas
        .iter()
        .map(|r| json!({"egressPort": r.port, "instance": r.rid}))
        .collect();
    json!({"packetReplicationEngineEntry": {"multicastGroupEntry": {
        "multicastGroupId": g.id, "replicas": replicas,
    }}})
}

fn session(s: &MirrorSession) -> Value {
    json!({"packetReplicationEngineEntry": {"cloneSessionEntry": {
        "sessionId": s.id,
        "replicas": [{"egressPort": s.port, "instance": 0}],
        "packetLengthBytes": s.truncate,
    }}})
}

/// One word of a pair register set to zero (registers are modified, never inserted).
fn zero_word(register: &program::Register, index: u64) -> Value {
    let members: Vec<Value> = register
        .fields
        .iter()
        .map(|_| json!({"bitstring": bytestring(0)}))
        .collect();
    json!({"registerEntry": {
        "registerId": register.id,
        "index": {"index": index.to_string()},
        "data": {"struct": {"members": members}},
    }})
}

/// The parser's value set of looped local port numbers (P4Runtime writes a value set whole,
/// with MODIFY; its members match ternary, as the compiler declares a value set's key).
fn looped_ports(locals: &[u16]) -> Value {
    let members: Vec<Value> = locals
        .iter()
        .map(|&l| {
            json!({"match": [{
                "fieldId": 1,
                "ternary": {"value": bytestring(u64::from(l)), "mask": bytestring(0x7f)},
            }]})
        })
        .collect();
    json!({"valueSetEntry": {"valueSetId": program::LOOPED_PORTS_ID, "members": members}})
}

/// The value set's members back, in their order (the paths' order).
fn read_value_set(entries: &mut Entries, v: &Value) -> Result<(), String> {
    let id = number(v, "valueSetId")? as u32;
    if id != program::LOOPED_PORTS_ID {
        return Err(format!("unknown value set id {id:#x}"));
    }
    if !entries.looped.is_empty() {
        return Err("the looped ports' value set is written twice".into());
    }
    let field = program::Field {
        name: "local",
        bits: 7,
    };
    for member in v
        .get("members")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let m = member
            .pointer("/match/0/ternary")
            .ok_or("a value set member needs one ternary match")?;
        let text = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
        if decode(text("mask"), &field)? != 0x7f {
            return Err("a looped port's mask must cover its 7 bits".into());
        }
        entries.looped.push(decode(text("value"), &field)? as u16);
    }
    Ok(())
}

/// The P4Runtime JSON document of `entries`.
pub fn to_json(entries: &Entries) -> String {
    // Replication state and the cleared register words first, in requests of their own (a
    // server may apply one request's updates in any order): a table entry may name a group
    // or session, and admission must not let a packet meet an uncleared region.
    let first: Vec<Value> = entries
        .groups
        .iter()
        .map(group)
        .chain(entries.sessions.iter().map(session))
        .map(|entity| json!({"type": "INSERT", "entity": entity}))
        .chain(entries.clears.iter().flat_map(|c| {
            (c.first..c.first + c.count)
                .map(|i| json!({"type": "MODIFY", "entity": zero_word(c.register, i)}))
        }))
        .chain(
            (!entries.looped.is_empty())
                .then(|| json!({"type": "MODIFY", "entity": looped_ports(&entries.looped)})),
        )
        .collect();
    let tables: Vec<Value> = entries
        .tables
        .iter()
        .map(|e| json!({"type": "INSERT", "entity": table_entry(e)}))
        .collect();
    let requests: Vec<Value> = first
        .chunks(BATCH)
        .chain(tables.chunks(BATCH))
        .map(|batch| {
            json!({
                "deviceId": "0",
                "electionId": {"high": "0", "low": "1"},
                "updates": batch,
            })
        })
        .collect();
    let requests = Value::Array(requests);
    let mut doc = Map::new();
    doc.insert(
        "switchgnn".into(),
        serde_json::to_value(&entries.meta).expect("metadata serialises"),
    );
    doc.insert("checksum".into(), checksum(&requests).into());
    doc.insert("write_requests".into(), requests);
    let mut text = serde_json::to_string_pretty(&Value::Object(doc)).expect("json");
    text.push('\n');
    text
}

fn checksum(requests: &Value) -> String {
    format!("{:#018x}", xxh3_64(requests.to_string().as_bytes()))
}

/// Read a P4Runtime JSON document written by [`to_json`] (or by hand, with its checksum).
pub fn from_json(text: &str) -> Result<Entries, EntriesError> {
    let fmt = |m: String| EntriesError::Format(m);
    let doc: Value = serde_json::from_str(text).map_err(|e| fmt(format!("not JSON: {e}")))?;
    let meta: Metadata = serde_json::from_value(doc.get("switchgnn").cloned().unwrap_or_default())
        .map_err(|e| fmt(format!("the `switchgnn` metadata: {e}")))?;
    if meta.format != FORMAT || !READS_VERSIONS.contains(&meta.format_version) {
        return Err(fmt(format!(
            "format {} version {}; this build reads {FORMAT} versions {READS_VERSIONS:?} \
             (it writes {FORMAT_VERSION})",
            meta.format, meta.format_version
        )));
    }
    let requests = doc
        .get("write_requests")
        .ok_or_else(|| fmt("no `write_requests`".into()))?;
    let want = doc.get("checksum").and_then(Value::as_str).unwrap_or("");
    let got = checksum(requests);
    if want != got {
        return Err(fmt(format!(
            "checksum {got} does not match the recorded {want:?}: the file was changed or cut short"
        )));
    }
    let mut entries = Entries {
        meta,
        tables: Vec::new(),
        groups: Vec::new(),
        sessions: Vec::new(),
        clears: Vec::new(),
        looped: Vec::new(),
    };
    let updates = requests.as_array().into_iter().flatten().flat_map(|r| {
        r.get("updates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    });
    for (index, update) in updates.enumerate() {
        read_update(&mut entries, update).map_err(|m| fmt(format!("update {index}: {m}")))?;
    }
    Ok(entries)
}

/// Field `key` of `object` as a number (protobuf JSON writes 64-bit integers as strings).
fn number(object: &Value, key: &str) -> Result<u64, String> {
    let v = object.get(key).unwrap_or(&Value::Null);
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| format!("`{key}` is not a number: {v}"))
}

fn read_update(entries: &mut Entries, update: &Value) -> Result<(), String> {
    let entity = update.get("entity").ok_or("no entity")?;
    let kind = update.get("type").and_then(Value::as_str);
    if let Some(r) = entity.get("registerEntry") {
        if kind != Some("MODIFY") {
            return Err("a register entry is written with MODIFY".into());
        }
        return read_clear(entries, r);
    }
    if let Some(v) = entity.get("valueSetEntry") {
        if kind != Some("MODIFY") {
            return Err("a value set is written with MODIFY".into());
        }
        return read_value_set(entries, v);
    }
    if kind != Some("INSERT") {
        return Err("only INSERT updates are expected, and MODIFY of registers".into());
    }
    if let Some(t) = entity.get("tableEntry") {
        let id = number(t, "tableId")? as u32;
        let table = program::table_by_id(id).ok_or(format!("unknown table id {id:#x}"))?;
        let action = t.pointer("/action/action").ok_or("no action")?;
        let action_id = number(action, "actionId")?;
        if action_id != u64::from(table.action.id) {
            return Err(format!(
                "action {action_id:#x} is not {}'s {}",
                table.name, table.action.name
            ));
        }
        let keys = ids_and_values(t.get("match"), "fieldId", table.keys, |m| {
            m.pointer("/exact/value")
        })?;
        let params = ids_and_values(action.get("params"), "paramId", table.action.params, |p| {
            p.get("value")
        })?;
        entries.tables.push(TableEntry {
            table,
            keys,
            params,
        });
    } else if let Some(g) = entity.pointer("/packetReplicationEngineEntry/multicastGroupEntry") {
        let id = number(g, "multicastGroupId")?;
        entries.groups.push(MulticastGroup {
            id: id as u16,
            replicas: replicas(g)?,
        });
    } else if let Some(s) = entity.pointer("/packetReplicationEngineEntry/cloneSessionEntry") {
        let id = number(s, "sessionId")?;
        let r = replicas(s)?;
        let port = match r.as_slice() {
            [one] => one.port,
            _ => return Err("a clone session needs exactly one replica".into()),
        };
        let truncate = number(s, "packetLengthBytes")?;
        entries.sessions.push(MirrorSession {
            id: id as u16,
            port,
            truncate: truncate as u32,
        });
    } else {
        return Err("an entity this reader does not know".into());
    }
    Ok(())
}

/// A register word set to zero, appended to the clear it continues (clears are written as
/// runs of consecutive words).
fn read_clear(entries: &mut Entries, r: &Value) -> Result<(), String> {
    let id = number(r, "registerId")? as u32;
    let register = program::register_by_id(id).ok_or(format!("unknown register id {id:#x}"))?;
    let index = number(r.get("index").unwrap_or(&Value::Null), "index")?;
    if index >= register.size {
        return Err(format!(
            "{} has {} words, not {index}",
            register.name, register.size
        ));
    }
    let members = r
        .pointer("/data/struct/members")
        .and_then(Value::as_array)
        .ok_or("a register word needs its struct members")?;
    if members.len() != register.fields.len() {
        return Err(format!(
            "{} words have {} fields",
            register.name,
            register.fields.len()
        ));
    }
    for (m, field) in members.iter().zip(register.fields) {
        let text = m
            .get("bitstring")
            .and_then(Value::as_str)
            .ok_or(format!("`{}` has no bitstring", field.name))?;
        if decode(text, field)? != 0 {
            return Err(format!(
                "{} word {index}: only clears (zeros) are written",
                register.name
            ));
        }
    }
    match entries.clears.last_mut() {
        Some(c) if c.register.id == id && c.first + c.count == index => c.count += 1,
        _ => entries.clears.push(RegisterClear {
            register,
            first: index,
            count: 1,
        }),
    }
    Ok(())
}

/// Values of a match or params list, each id exactly once, in field order.
fn ids_and_values(
    list: Option<&Value>,
    id_name: &str,
    fields: &[Field],
    value_of: impl Fn(&Value) -> Option<&Value>,
) -> Result<Vec<u64>, String> {
    let list = list.and_then(Value::as_array).ok_or("missing list")?;
    let mut out = vec![None; fields.len()];
    for item in list {
        let id = number(item, id_name)? as usize;
        let field = fields
            .get(id.wrapping_sub(1))
            .ok_or(format!("{id_name} {id} out of range"))?;
        let text = value_of(item)
            .and_then(Value::as_str)
            .ok_or(format!("`{}` has no bytestring value", field.name))?;
        if out[id - 1].replace(decode(text, field)?).is_some() {
            return Err(format!("`{}` given twice", field.name));
        }
    }
    out.into_iter()
        .zip(fields)
        .map(|(v, f)| v.ok_or(format!("`{}` missing", f.name)))
        .collect()
}

fn replicas(v: &Value) -> Result<Vec<Replica>, String> {
    v.get("replicas")
        .and_then(Value::as_array)
        .ok_or("no replicas")?
        .iter()
        .map(|r| {
            Ok(Replica {
                port: number(r, "egressPort")? as u16,
                rid: number(r, "instance")? as u16,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytestrings_are_canonical_and_checked() {
        assert_eq!(bytestring(0), "AA==");
        assert_eq!(bytestring(0x1234), "EjQ=");
        let port = Field {
            name: "port",
            bits: 9,
        };
        assert_eq!(
            decode(
                "EjQ=",
                &Field {
                    name: "x",
                    bits: 16
                }
            ),
            Ok(0x1234)
        );
        // Padded forms are accepted too, values beyond the field's width are not.
        assert_eq!(decode("AAAB/w==", &port), Ok(511));
        assert!(decode("Ag==", &Field { name: "b", bits: 1 }).is_err());
        assert!(decode("AgAA", &port).is_err());
        assert!(decode("not base64!", &port).is_err());
    }
}
