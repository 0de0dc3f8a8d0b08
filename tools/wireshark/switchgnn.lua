-- Wireshark dissector for switchgnn: the exchange header (32 bytes and int32 lanes) and the
-- control messages (the magic "SGCT" and JSON), carried in UDP on any port.
--
--   tshark -X lua_script:tools/wireshark/switchgnn.lua -r capture.pcap -V
--   wireshark -X lua_script:tools/wireshark/switchgnn.lua capture.pcap
--
-- Captures come from `--pcap FILE` on `switchgnn switch` and `switchgnn worker`. The field
-- offsets below follow dataplane/src/wire.rs (FIELDS); transport/tests/pcap.rs keeps them in
-- step and decodes a capture with tshark.

local proto = Proto("switchgnn", "switchgnn exchange")

local types = {
    [1] = "data", [2] = "result", [3] = "raw", [4] = "fetch",
    [5] = "block done", [6] = "block go", [7] = "join", [8] = "reduce", [9] = "reduced",
    [10] = "rows", [11] = "stamps",
}

-- name, offset, length: the header as dataplane/src/wire.rs lays it out.
local layout = {
    { "magic", 0, 2 },
    { "version", 2, 1 },
    { "type", 3, 1 },
    { "flags", 4, 1 },
    { "layer", 5, 1 },
    { "job", 6, 2 },
    { "src", 8, 4 },
    { "dst", 12, 4 },
    { "block", 16, 2 },
    { "count", 18, 2 },
    { "worker", 20, 2 },
    { "chunk", 22, 1 },
    { "lanes", 23, 1 },
    { "epoch", 24, 4 },
    { "sequence", 28, 4 },
    { "payload", 32, 0 },
}
local HEADER_LEN = 32
-- The header version it decodes (wire::VERSION).
local VERSION = 4

local f = {
    magic = ProtoField.uint16("switchgnn.magic", "Magic", base.HEX),
    version = ProtoField.uint8("switchgnn.version", "Version"),
    type = ProtoField.uint8("switchgnn.type", "Type", base.DEC, types),
    flags = ProtoField.uint8("switchgnn.flags", "Flags", base.HEX),
    ack = ProtoField.bool("switchgnn.flags.ack", "Acknowledgement", 8, nil, 0x01),
    fetch = ProtoField.bool("switchgnn.flags.fetch", "Fetch / overflow notice / unfit partial sum", 8, nil, 0x02),
    ecn = ProtoField.bool("switchgnn.flags.ecn", "Congestion experienced", 8, nil, 0x04),
    resend = ProtoField.bool("switchgnn.flags.resend", "Resent raw feature", 8, nil, 0x08),
    backward = ProtoField.bool("switchgnn.flags.backward", "Backward (gradients)", 8, nil, 0x10),
    partial = ProtoField.bool("switchgnn.flags.partial", "Leaf's partial sum (level 1)", 8, nil, 0x20),
    layer = ProtoField.uint8("switchgnn.layer", "Layer"),
    job = ProtoField.uint16("switchgnn.job", "Job"),
    src = ProtoField.uint32("switchgnn.src", "Source vertex"),
    dst = ProtoField.uint32("switchgnn.dst", "Destination vertex"),
    block = ProtoField.uint16("switchgnn.block", "Block"),
    count = ProtoField.uint16("switchgnn.count", "Contributions"),
    worker = ProtoField.uint16("switchgnn.worker", "Worker"),
    chunk = ProtoField.uint8("switchgnn.chunk", "Chunk"),
    lanes = ProtoField.uint8("switchgnn.lanes", "Lanes"),
    epoch = ProtoField.uint32("switchgnn.epoch", "Epoch"),
    sequence = ProtoField.uint32("switchgnn.sequence", "Sequence"),
    lane = ProtoField.int32("switchgnn.lane", "Lane"),
    record_src = ProtoField.uint32("switchgnn.record.src", "Record vertex"),
    record_chunk = ProtoField.uint8("switchgnn.record.chunk", "Record chunk"),
    record_lanes = ProtoField.uint8("switchgnn.record.lanes", "Record lanes"),
    range_first = ProtoField.uint32("switchgnn.range.first", "Acknowledged from"),
    range_last = ProtoField.uint32("switchgnn.range.last", "Acknowledged to"),
    control = ProtoField.string("switchgnn.control", "Control message"),
}
local registered = {}
for _, field in pairs(f) do
    table.insert(registered, field)
end
proto.fields = registered

local function dissect(buf, pinfo, tree)
    local len = buf:len()
    if len >= 4 and buf(0, 4):string() == "SGCT" then
        pinfo.cols.protocol = "switchgnn"
        local text = buf(4):string()
        tree:add(proto, buf(), "switchgnn control"):add(f.control, buf(4), text)
        pinfo.cols.info = "control " .. text
        return len
    end
    if len < HEADER_LEN or buf(0, 2):uint() ~= 0x5347 or buf(2, 1):uint() ~= VERSION then
        return 0
    end
    pinfo.cols.protocol = "switchgnn"
    local t = tree:add(proto, buf(), "switchgnn exchange header")
    for _, field in ipairs(layout) do
        local name, at, size = field[1], field[2], field[3]
        if size > 0 then
            local item = t:add(f[name], buf(at, size))
            if name == "flags" then
                for _, bit in ipairs({ "ack", "fetch", "ecn", "resend", "backward", "partial" }) do
                    item:add(f[bit], buf(at, size))
                end
            end
        end
    end
    local lanes = buf(23, 1):uint()
    for i = 0, lanes - 1 do
        local at = HEADER_LEN + 4 * i
        if at + 4 <= len then
            t:add(f.lane, buf(at, 4))
        end
    end
    -- A rows packet (type 10): `count` records (vertex, chunk, lanes, flags, a reserved byte,
    -- lanes; flag 1: every lane zero and none carried), or with the ack flag `count` ranges of
    -- sequences (first, last).
    if buf(3, 1):uint() == 10 then
        local at, count = HEADER_LEN, buf(18, 2):uint()
        local ack = buf(4, 1):uint() % 2 == 1
        for _ = 1, count do
            if ack then
                if at + 8 > len then break end
                local r = t:add(proto, buf(at, 8), "range")
                r:add(f.range_first, buf(at, 4))
                r:add(f.range_last, buf(at + 4, 4))
                at = at + 8
            else
                if at + 8 > len then break end
                local n = buf(at + 5, 1):uint()
                local zero = buf(at + 6, 1):uint() == 1
                local label = "record"
                if zero then
                    label = "zero record"
                end
                -- A zero record stands for `n` zero lanes and carries none.
                local carried = n
                if zero then
                    carried = 0
                end
                local size = math.min(8 + 4 * carried, len - at)
                local r = t:add(proto, buf(at, size), label)
                r:add(f.record_src, buf(at, 4))
                r:add(f.record_chunk, buf(at + 4, 1))
                r:add(f.record_lanes, buf(at + 5, 1))
                n = carried
                for i = 0, n - 1 do
                    local l = at + 8 + 4 * i
                    if l + 4 <= len then
                        r:add(f.lane, buf(l, 4))
                    end
                end
                at = at + 8 + 4 * n
            end
        end
    end
    local kind = types[buf(3, 1):uint()] or "?"
    pinfo.cols.info = string.format(
        "%s job %d layer %d block %d src %d dst %d seq %d",
        kind, buf(6, 2):uint(), buf(5, 1):uint(), buf(16, 2):uint(), buf(8, 4):uint(),
        buf(12, 4):uint(), buf(28, 4):uint())
    return len
end

function proto.dissector(buf, pinfo, tree)
    return dissect(buf, pinfo, tree)
end

-- switchgnn uses whatever ports the job file names: recognise it by its magic on any UDP port.
local function heuristic(buf, pinfo, tree)
    return dissect(buf, pinfo, tree) > 0
end
proto:register_heuristic("udp", heuristic)
