#!/usr/bin/env python3
"""Check a `switchgnn p4 entries --format p4runtime` file against the P4Runtime protobuf.

Every element of its `write_requests` must parse as a `p4.v1.WriteRequest` (unknown fields,
wrong types and bad enum values are errors), every update must be an INSERT of a table entry,
a multicast group or a clone session, a MODIFY that sets a word of one of the all-reduce's
registers to zero, or a MODIFY of the parser's value set of looped local port numbers (7-bit,
ternary, full mask), and every table entry's action must be listed by its table in the program
(the table/action/register/value-set ids of p4/switchgnn.p4, given here by their @id).

Usage: PYTHONPATH=.p4py python3 p4/ptf/validate_p4runtime.py entries.json
Needs the `p4runtime` and `protobuf` (3.20) packages: scripts/p4py.sh installs them.
"""
import collections
import json
import sys

from google.protobuf import json_format
from p4.v1 import p4runtime_pb2

# table id -> action id, as p4/switchgnn.p4 declares them with @id.
ACTIONS = {
    0x02000001: 0x01000001,  # Ingress.check.admission -> admit
    0x02000002: 0x01000003,  # Ingress.check.exchange_config -> set_exchange
    0x02000003: 0x01000004,  # Ingress.source_row -> set_source_row
    0x02000004: 0x01000005,  # Ingress.destination_slot -> set_destination
    0x02000005: 0x01000006,  # Ingress.aggregation.vertex_aggregators -> aggregate
    0x0200000A: 0x01000010,  # Ingress.partial_aggregator -> aggregate_partial
    0x02000007: 0x01000008,  # Ingress.job_config -> set_job
    0x02000008: 0x0100000B,  # Egress.worker_address -> set_worker_address
    0x02000009: 0x0100000D,  # Egress.ecn_marking -> set_ecn_threshold
    0x0200000B: 0x01000011,  # Ingress.allreduce.allreduce_region -> set_region
    0x0200000C: 0x01000013,  # Ingress.recirculation_path -> set_path
}

# The parser's value set of looped local port numbers (p4/include/parser.p4) and its size.
LOOPED_PORTS = 0x03000001
LOOPED_LOCALS = 31

# register id -> words, as p4/include/allreduce.p4 declares them (pairs of 32-bit fields).
REGISTERS = {
    0x16000001: 1024,  # Ingress.allreduce.bank_state
    0x16000002: 8192,  # Ingress.allreduce.reduce_seen
    0x16000003: 1024,  # Ingress.allreduce.reduce_count
}


def validate(path):
    with open(path) as f:
        doc = json.load(f)
    counts = collections.Counter()
    for i, raw in enumerate(doc["write_requests"]):
        request = p4runtime_pb2.WriteRequest()
        json_format.ParseDict(raw, request)  # raises ParseError on any mismatch
        for update in request.updates:
            kind = update.entity.WhichOneof("entity")
            if kind == "register_entry":
                entry = update.entity.register_entry
                words = REGISTERS.get(entry.register_id)
                members = entry.data.struct.members
                if (update.type != p4runtime_pb2.Update.MODIFY or words is None
                        or not 0 <= entry.index.index < words or len(members) != 2
                        or any(int.from_bytes(m.bitstring, "big") != 0 for m in members)):
                    raise ValueError(f"request {i}: register {entry.register_id:#x} word "
                                     f"{entry.index.index} is not a clear")
                counts[f"register {entry.register_id:#x}"] += 1
                continue
            if kind == "value_set_entry":
                entry = update.entity.value_set_entry
                matches = [m.match for m in entry.members]
                if (update.type != p4runtime_pb2.Update.MODIFY
                        or entry.value_set_id != LOOPED_PORTS
                        or not 0 < len(matches) <= LOOPED_LOCALS
                        or any(len(m) != 1 or m[0].WhichOneof("field_match_type") != "ternary"
                               or int.from_bytes(m[0].ternary.mask, "big") != 0x7F
                               or int.from_bytes(m[0].ternary.value, "big") > 0x7F
                               for m in matches)):
                    raise ValueError(f"request {i}: value set {entry.value_set_id:#x} is not "
                                     f"the looped ports' (7-bit numbers, full mask)")
                counts["value set looped_ports"] += 1
                continue
            if update.type != p4runtime_pb2.Update.INSERT:
                raise ValueError(f"request {i}: an update that is not an INSERT")
            if kind == "table_entry":
                entry = update.entity.table_entry
                want = ACTIONS.get(entry.table_id)
                if want is None or entry.action.action.action_id != want:
                    raise ValueError(f"request {i}: table {entry.table_id:#x} with action "
                                     f"{entry.action.action.action_id:#x}")
                if any(m.WhichOneof("field_match_type") != "exact" for m in entry.match):
                    raise ValueError(f"request {i}: a match that is not exact")
                counts[f"table {entry.table_id:#x}"] += 1
            elif kind == "packet_replication_engine_entry":
                counts[update.entity.packet_replication_engine_entry.WhichOneof("type")] += 1
            else:
                raise ValueError(f"request {i}: unexpected entity {kind}")
    return counts


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for path in sys.argv[1:]:
        counts = validate(path)
        total = sum(counts.values())
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
        print(f"{path}: {total} updates valid ({detail})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
