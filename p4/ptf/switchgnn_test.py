"""PTF tests of p4/switchgnn.p4 on a Tofino model (tofino-model) or a Tofino switch.

They drive one job installed from a plan's entries and check what the program sends against
what the switch model (dataplane/src/switch.rs) does: malformed and unadmitted packets are
dropped, joins start block 0 with a go to every worker, data is acknowledged and aggregated
with one result per destination at its expected count, duplicates are acknowledged and not
added, block-done reports advance the block, and all-reduce slices are summed once per worker
and the result multicast (replayed to a worker that asks again). Entries of a reduce plan
(`p4 entries --exchange reduce`) run the partial-sum test instead of the pass test.

Set up (see p4/README.md):
    switchgnn prepare synthetic:small,scale=0.25 --workers 2 --feature-dims 24 --out plan
    switchgnn p4 entries --plan plan --format bfrt --out entries.py
    switchgnn p4 entries --plan plan --format p4runtime --out entries.json
    bfshell -b entries.py                       # install them on the model or switch
    ptf --test-dir p4/ptf --pypath $PWD/p4/ptf \\
        --interface 0@veth1 --interface 4@veth3 ... \\
        --test-params="entries='$PWD/entries.json'" switchgnn_test

Each test that starts an exchange runs it to its end (the final go), and the next one opens
with a higher sequence number, as workers do; so they run in any order on one installation.
The all-reduce test uses its job's stream from position 0: it needs a fresh installation (the
entries clear the region's words).
The `--interface` list must map every worker's dev port.
Entries made with `p4 entries --loopback-ports N` run the same tests with the passes spread over
the looped front-panel ports (the bfrt script puts them in MAC loopback; on the model, give them
no `--interface`): every result must come out as without them.
"""
import base64
import json
import struct

import ptf
from ptf import testutils
from ptf.base_tests import BaseTest
from ptf.mask import Mask
from scapy.all import IP, UDP, Ether, Raw

MAGIC, VERSION, UDP_PORT, MAX_LANES = 0x5347, 4, 47000, 64
DATA, RESULT, RAW, FETCH, BLOCK_DONE, BLOCK_GO, JOIN = 1, 2, 3, 4, 5, 6, 7
SEQUENCE_OFFSET = 28   # of the header's sequence field (dataplane/src/wire.rs `field::SEQUENCE`)
REDUCE, REDUCED = 8, 9
STAMPS = 11
ACK, ECN = 0x01, 0x04
MODE_REDUCE = 3
HEADER = struct.Struct("!HBBBBHIIHHHBBII")

TABLES = {  # table id -> name, as in p4/src/program.rs
    0x02000001: "admission", 0x02000002: "exchange_config", 0x02000003: "source_row",
    0x02000004: "destination_slot", 0x02000005: "vertex_aggregators",
    0x0200000a: "partial_aggregator", 0x02000007: "job_config",
    0x02000008: "worker_address", 0x02000009: "ecn_marking", 0x0200000b: "allreduce_region",
    0x0200000c: "recirculation_path",
}


def number(text):
    return int.from_bytes(base64.b64decode(text), "big")


class Job:
    """The installation, read from the P4Runtime JSON of `switchgnn p4 entries`."""

    def __init__(self, path):
        with open(path) as f:
            doc = json.load(f)
        self.job = doc["switchgnn"]["job"]
        self.workers = doc["switchgnn"]["workers"]
        # Dev ports in loopback (recirculation paths): never a worker's.
        self.looped = doc["switchgnn"].get("looped_ports", [])
        rows = {name: [] for name in TABLES.values()}
        for request in doc["write_requests"]:
            for update in request["updates"]:
                entry = update["entity"].get("tableEntry")
                if entry is None:
                    continue
                keys = [number(m["exact"]["value"])
                        for m in sorted(entry["match"], key=lambda m: m["fieldId"])]
                params = [number(p["value"]) for p in
                          sorted(entry["action"]["action"]["params"], key=lambda p: p["paramId"])]
                rows[TABLES[entry["tableId"]]].append((keys, params))
        self.port = {k[1]: k[2] for k, _ in rows["admission"]}
        self.address = {k[1]: p for k, p in rows["worker_address"]}  # mac, ip, udp, sw mac, sw ip
        layer0 = next(p for k, p in rows["exchange_config"] if k[1] == 0)
        self.set, self.chunks, self.last_lanes, self.blocks = layer0[0], layer0[1], layer0[2], layer0[3]
        self.mode = layer0[5]
        self.owner = {k[3]: p[0] for k, p in rows["source_row"] if k[1] == self.set}
        # Block 0's senders, and its partial sums: (destination, worker) -> (owner, expected).
        self.senders0 = {k[3]: p[0] for k, p in rows["source_row"] if k[1] == self.set and k[2] == 0}
        self.partials = {(k[3], k[4]): (p[2], p[4]) for k, p in rows["partial_aggregator"]
                         if k[1] == self.set and k[2] == 0}
        # Block 0's passes: source -> [(pipe, pass, dst, dst_worker, expected)], each pipe's
        # chain in pass order (a home-pipe entry that only fans out adds nothing: skipped).
        self.passes = {}
        for k, p in rows["vertex_aggregators"]:
            if k[1] == self.set and k[2] == 0 and p[5] > 0:
                self.passes.setdefault(k[3], []).append((k[4], k[5], p[1], p[2], p[5]))
        for v in self.passes.values():
            v.sort()
        # The all-reduce region, if the job has one: slots = slot mask + 1.
        region = [p for _, p in rows["allreduce_region"]]
        self.allreduce_slots = region[0][2] + 1 if region else 0

    def lanes(self, chunk):
        return self.last_lanes if chunk == self.chunks - 1 else MAX_LANES


def ip(n):
    return "%d.%d.%d.%d" % ((n >> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255)


def mac(n):
    return ":".join("%02x" % ((n >> s) & 255) for s in range(40, -8, -8))


class SwitchgnnTest(BaseTest):
    epoch = 100
    seq = 0

    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.job = Job(testutils.test_params_get()["entries"])
        looped_workers = set(self.job.looped) & set(self.job.port.values())
        self.assertFalse(looped_workers, "worker ports in loopback")
        SwitchgnnTest.epoch += 1
        self.epoch = SwitchgnnTest.epoch

    def header(self, kind, worker, **f):
        return HEADER.pack(MAGIC, f.get("version", VERSION), kind, f.get("flags", 0),
                           f.get("layer", 0), self.job.job, f.get("src", 0), f.get("dst", 0),
                           f.get("block", 0), f.get("count", 0), worker, f.get("chunk", 0),
                           len(f.get("lanes", [])), self.epoch, f.get("sequence", 0))

    def to_switch(self, worker, payload):
        a = self.job.address[worker]
        return (Ether(src=mac(a[0]), dst=mac(a[3])) / IP(src=ip(a[1]), dst=ip(a[4])) /
                UDP(sport=a[2], dport=UDP_PORT) / Raw(payload))

    def from_switch(self, worker, payload):
        a = self.job.address[worker]
        pkt = (Ether(src=mac(a[3]), dst=mac(a[0])) / IP(src=ip(a[4]), dst=ip(a[1])) /
               UDP(sport=UDP_PORT, dport=a[2], chksum=0) / Raw(payload))
        m = Mask(pkt)
        for field in ("id", "ttl", "chksum", "tos", "flags"):
            m.set_do_not_care_scapy(IP, field)
        if payload[3] in (RESULT, RAW, STAMPS):
            # Sums and raw copies carry the egress port's running number (egress.p4 `stamps`),
            # not the sequence the test wrote: its value depends on what earlier tests sent.
            m.set_do_not_care(8 * (len(pkt) - len(payload) + SEQUENCE_OFFSET), 32)
        return m

    def send(self, worker, payload, port=None):
        port = self.job.port[worker] if port is None else port
        testutils.send_packet(self, port, self.to_switch(worker, payload))

    def packet(self, kind, worker, lanes=(), **f):
        return self.header(kind, worker, lanes=list(lanes), **f) + b"".join(
            struct.pack("!i", x) for x in lanes)

    def expect(self, worker, payload):
        testutils.verify_packet(self, self.from_switch(worker, payload), self.job.port[worker])

    def start(self):
        """Every worker joins the next exchange (layer 0 forward): block 0's go to each."""
        SwitchgnnTest.seq += 1
        self.seq = SwitchgnnTest.seq
        for w in range(self.job.workers):
            self.send(w, self.packet(JOIN, w, sequence=self.seq))
        for w in range(self.job.workers):
            self.expect(w, self.packet(BLOCK_GO, w, sequence=self.seq))
        testutils.verify_no_other_packets(self)

    def report(self, block):
        """Every worker reports `block` done: the go of the next to each."""
        for w in range(self.job.workers):
            self.send(w, self.packet(BLOCK_DONE, w, block=block, sequence=self.seq))
        for w in range(self.job.workers):
            self.expect(w, self.packet(BLOCK_GO, w, block=block + 1, sequence=self.seq))
        testutils.verify_no_other_packets(self)

    def finish(self, block):
        """Run the exchange from `block` to its final go."""
        for b in range(block, self.job.blocks):
            self.report(b)


class MalformedAndUnadmittedAreDropped(SwitchgnnTest):
    def runTest(self):
        bad_magic = bytearray(self.packet(JOIN, 0, sequence=1))
        bad_magic[0] = 0
        self.send(0, bytes(bad_magic))
        self.send(0, self.packet(JOIN, 0, sequence=1)[:20])         # truncated header
        self.send(0, self.packet(JOIN, 0, sequence=1, flags=0x80))  # reserved flag
        self.send(0, self.packet(RESULT, 0, sequence=1))            # only the switch sends it
        if self.job.workers > 1:
            # Worker 1's packet on worker 0's port.
            self.send(1, self.packet(JOIN, 1, sequence=1), port=self.job.port[0])
        testutils.verify_no_other_packets(self)


class StampsAreAnsweredWithTheNextNumberUntaken(SwitchgnnTest):
    def runTest(self):
        # A worker's question comes back to it with the ack flag; its number (the egress
        # port's next, masked by from_switch) depends on what earlier tests sent. The switch
        # sends no question of its own: one with the ack flag set is dropped.
        self.send(0, self.packet(STAMPS, 0))
        self.expect(0, self.packet(STAMPS, 0, flags=ACK))
        self.send(0, self.packet(STAMPS, 0, flags=ACK))
        testutils.verify_no_other_packets(self)


class JoinsStartBlockZero(SwitchgnnTest):
    def runTest(self):
        self.start()
        # A repeated join after the start gets the go again.
        self.send(0, self.packet(JOIN, 0, sequence=self.seq))
        self.expect(0, self.packet(BLOCK_GO, 0, sequence=self.seq))
        testutils.verify_no_other_packets(self)
        self.finish(0)


class DataIsAggregatedAcknowledgedAndDeduplicated(SwitchgnnTest):
    def runTest(self):
        if self.job.mode == MODE_REDUCE:
            return  # PartialSumsAreAddedOncePerWorker covers reduce plans
        self.start()
        counts, sums = {}, {}
        sources = sorted(self.job.passes)
        for src in sources:
            w = self.job.owner[src]
            lanes = [(src * 7 + i) % 101 - 50 for i in range(self.job.lanes(0))]
            data = self.packet(DATA, w, lanes, src=src, block=0, chunk=0, sequence=src + 1)
            self.send(w, data)
            ack = bytearray(self.packet(DATA, w, src=src, block=0, chunk=0, sequence=src + 1))
            ack[4] |= ACK
            self.expect(w, bytes(ack))
            # One pass per destination (in its pipe); a result, once read out, where a
            # destination reaches its count.
            for _, _, dst, dst_worker, expected in self.job.passes[src]:
                counts[dst] = counts.get(dst, 0) + 1
                sums[dst] = [a + b for a, b in zip(sums.get(dst, [0] * len(lanes)), lanes)]
                if counts[dst] == expected:
                    result = self.packet(RESULT, dst_worker, sums[dst], src=dst, dst=dst,
                                         block=0, count=expected, chunk=0, sequence=src + 1)
                    self.expect(dst_worker, result)
            testutils.verify_no_other_packets(self)
        # A repeat is acknowledged again and adds nothing.
        src = sources[0]
        w = self.job.owner[src]
        lanes = [1] * self.job.lanes(0)
        self.send(w, self.packet(DATA, w, lanes, src=src, block=0, chunk=0, sequence=src + 1))
        ack = bytearray(self.packet(DATA, w, src=src, block=0, chunk=0, sequence=src + 1))
        ack[4] |= ACK
        self.expect(w, bytes(ack))
        testutils.verify_no_other_packets(self)
        self.finish(0)


class PartialSumsAreAddedOncePerWorker(SwitchgnnTest):
    """Reduce plans: each worker's partial sum for a destination is acknowledged and added in
    one pass; the sum goes to the destination's owner when every worker's partial is in; a
    repeat is acknowledged and adds nothing."""

    def runTest(self):
        if self.job.mode != MODE_REDUCE:
            return
        self.start()
        workers_of = {}
        for dst, w in sorted(self.job.partials):
            workers_of.setdefault(dst, []).append(w)
        first = None
        for dst, workers in sorted(workers_of.items()):
            sums = None
            for i, w in enumerate(workers):
                dst_worker, expected = self.job.partials[(dst, w)]
                # A partial is named by one of its worker's vertices.
                src = min(v for v, o in self.job.senders0.items() if o == w)
                lanes = [(dst * 5 + w * 3 + j) % 97 - 48 for j in range(self.job.lanes(0))]
                head = dict(src=src, dst=dst, block=0, chunk=0, sequence=dst + 1)
                self.send(w, self.packet(DATA, w, lanes, **head))
                ack = bytearray(self.packet(DATA, w, **head))
                ack[4] |= ACK
                self.expect(w, bytes(ack))
                sums = lanes if sums is None else [a + b for a, b in zip(sums, lanes)]
                if i + 1 == expected:
                    result = self.packet(RESULT, dst_worker, sums, src=dst, dst=dst, block=0,
                                         count=expected, chunk=0, sequence=dst + 1)
                    self.expect(dst_worker, result)
                testutils.verify_no_other_packets(self)
                first = first or (w, lanes, head)
        if first:
            w, lanes, head = first
            self.send(w, self.packet(DATA, w, lanes, **head))
            ack = bytearray(self.packet(DATA, w, **head))
            ack[4] |= ACK
            self.expect(w, bytes(ack))
            testutils.verify_no_other_packets(self)
        self.finish(0)


class BlockDoneAdvancesTheBlock(SwitchgnnTest):
    def runTest(self):
        self.start()
        self.report(0)
        # A report of an earlier block gets the current go again.
        self.send(0, self.packet(BLOCK_DONE, 0, block=0, sequence=self.seq))
        self.expect(0, self.packet(BLOCK_GO, 0, block=1, sequence=self.seq))
        testutils.verify_no_other_packets(self)
        self.finish(1)


class AllReduceSumsOncePerWorkerAndReplays(SwitchgnnTest):
    """The in-switch all-reduce (allreduce.p4, switch/reduce.rs): slot s's bank 0 takes stream
    position s; each worker's slice is counted once; the last one multicasts the sum to every
    worker; a retransmission before then adds nothing and sends nothing, after it gets the sum
    back alone; a slice beyond its bank's next use is dropped."""

    def slice(self, kind, w, position, lanes, count=0):
        slots = self.job.allreduce_slots
        bank = (position // slots) % 2
        return self.packet(kind, w, lanes, block=position % slots, chunk=bank,
                           sequence=position, count=count)

    def runTest(self):
        if self.job.allreduce_slots == 0:
            return  # entries made with --allreduce-slots 0
        workers = self.job.workers
        for position in range(min(2, self.job.allreduce_slots)):
            values = {w: [(w + 1) * (i - 20) + position for i in range(40)] for w in range(workers)}
            total = [sum(v[i] for v in values.values()) for i in range(40)]
            for w in range(workers):
                self.send(w, self.slice(REDUCE, w, position, values[w]))
                if w == 0 and workers > 1:
                    # A retransmission while the sum is incomplete: nothing.
                    self.send(0, self.slice(REDUCE, 0, position, values[0]))
                    testutils.verify_no_other_packets(self)
            for w in range(workers):
                self.expect(w, self.slice(REDUCED, w, position, total, count=workers))
            testutils.verify_no_other_packets(self)
            # Worker 0 missed it: its retransmission gets the stored sum, to it alone.
            self.send(0, self.slice(REDUCE, 0, position, values[0]))
            self.expect(0, self.slice(REDUCED, 0, position, total, count=workers))
            testutils.verify_no_other_packets(self)
        # Slot 0's bank 0 completed position 0 and takes position 2·slots next: a slice two
        # uses beyond that is dropped (the model: out of range; the program: stale).
        self.send(0, self.slice(REDUCE, 0, 4 * self.job.allreduce_slots, [1] * 40))
        testutils.verify_no_other_packets(self)
