//! The switchgnn header, carried in a UDP payload, and its int32 lanes.
//!
//! smoltcp-style: [`Packet`] is a zero-copy view over any byte buffer with checked
//! construction and field accessors; [`Repr`] is the validated, owned meaning of a header with
//! `parse` and `emit`. Every malformed input is an [`Error`](enum@Error), never a panic.
//!
//! All fields are big-endian (network byte order). The SwitchGNN paper's fields (src and dst
//! vertex, block, count, the ack/fetch/ECN/resend flags) are kept at their widths; the rest is
//! what a real protocol needs.
//!
//! | offset | bytes | field | meaning |
//! |---|---|---|---|
//! | 0 | 2 | magic | `0x5347` (“SG”) |
//! | 2 | 1 | version | [`VERSION`] |
//! | 3 | 1 | type | [`PacketType`] |
//! | 4 | 1 | flags | bit 0 ack, bit 1 fetch, bit 2 ECN, bit 3 resend/bypass, bit 4 backward direction, bit 5 a leaf's partial sum (the level); other bits must be 0 |
//! | 5 | 1 | layer | GCN layer of the exchange |
//! | 6 | 2 | job | job id (several jobs share a switch) |
//! | 8 | 4 | src vertex | sending vertex (global id) |
//! | 12 | 4 | dst vertex | destination vertex of a result or fetch (global id) |
//! | 16 | 2 | block | block of the plan |
//! | 18 | 2 | count | contributions summed into the lanes |
//! | 20 | 2 | worker | sending worker's rank |
//! | 22 | 1 | chunk | which 64-lane chunk of a wider feature |
//! | 23 | 1 | lanes | int32 lanes that follow, `0..=64` |
//! | 24 | 4 | epoch | training step; stale packets are recognised by it |
//! | 28 | 4 | sequence | per-sender sequence number (duplicate detection, acks); on sums and raw copies from the switch, its running number per worker port |
//! | 32 | 4·lanes | payload | int32 lanes |
//!
//! A [`PacketType::Rows`] packet (version 4) carries no lanes of its own (`lanes` is 0): after
//! the header come `count` records, each one 64-lane chunk of one vertex's row — vertex (4
//! bytes), chunk (1), lanes (1), flags (1), a reserved zero byte, then 4·lanes bytes of int32
//! lanes, or none for a zero record (flag [`RECORD_ZERO`]: every lane zero) ([`Records`]). The switch only forwards such a packet, so it may fill a whole datagram of
//! the link's MTU. Its acknowledgement (the ack flag set) carries `count` ranges of the
//! sequences the receiver holds, each first and last sequence (4 bytes each), ascending
//! ([`AckRanges`]).

use thiserror::Error;

/// The first two bytes of every header, “SG”.
pub const MAGIC: u16 = 0x5347;
/// The header version this crate reads and writes. Version 2: aggregators of 64 lanes (version 1
/// had 32); version 3: host copies packed into [`PacketType::Rows`] packets with acks of ranges;
/// version 4: their records may be zero records ([`RECORD_ZERO`]), which a version 3 peer
/// would refuse as malformed. A peer of another version is refused at its first packet.
pub const VERSION: u8 = 4;
/// Bytes of the header; the lanes follow it.
pub const HEADER_LEN: usize = 32;
/// One aggregator: 64 int32 lanes = 256 bytes, what one pipeline pass of a Tofino adds with 32
/// stateful ALUs on 64-bit pair registers (two lanes each), as SwitchML does.
pub const MAX_LANES: usize = 64;
/// The largest packet: a header and a full aggregator of lanes. Drivers hand nodes buffers of
/// this size to write packets into.
pub const MAX_PACKET_LEN: usize = HEADER_LEN + 4 * MAX_LANES;
/// Bytes a frame adds on the wire around a packet carried in UDP over IPv4 on Ethernet:
/// Ethernet header and FCS (18), preamble and inter-frame gap (20), IPv4 (20), UDP (8).
pub const FRAME_OVERHEAD: u64 = 66;

/// Byte ranges of the fields, in one place.
mod field {
    use std::ops::Range;
    pub(crate) const MAGIC: Range<usize> = 0..2;
    pub(crate) const VERSION: usize = 2;
    pub(crate) const TYPE: usize = 3;
    pub(crate) const FLAGS: usize = 4;
    pub(crate) const LAYER: usize = 5;
    pub(crate) const JOB: Range<usize> = 6..8;
    pub(crate) const SRC: Range<usize> = 8..12;
    pub(crate) const DST: Range<usize> = 12..16;
    pub(crate) const BLOCK: Range<usize> = 16..18;
    pub(crate) const COUNT: Range<usize> = 18..20;
    pub(crate) const WORKER: Range<usize> = 20..22;
    pub(crate) const CHUNK: usize = 22;
    pub(crate) const LANES: usize = 23;
    pub(crate) const EPOCH: Range<usize> = 24..28;
    pub(crate) const SEQUENCE: Range<usize> = 28..32;
}

/// Every header field: its name, byte offset and length, in order. Tools that decode the header
/// elsewhere (the Wireshark dissector in `tools/wireshark/`) are tested against this table.
pub const FIELDS: [(&str, usize, usize); 16] = [
    ("magic", 0, 2),
    ("version", 2, 1),
    ("type", 3, 1),
    ("flags", 4, 1),
    ("layer", 5, 1),
    ("job", 6, 2),
    ("src", 8, 4),
    ("dst", 12, 4),
    ("block", 16, 2),
    ("count", 18, 2),
    ("worker", 20, 2),
    ("chunk", 22, 1),
    ("lanes", 23, 1),
    ("epoch", 24, 4),
    ("sequence", 28, 4),
    ("payload", 32, 0),
];

/// Why a buffer is not a valid packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Error {
    /// The buffer, of this many bytes, is shorter than the header.
    #[error("buffer of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated(usize),
    /// The magic field is not [`MAGIC`].
    #[error("bad magic {0:#06x}")]
    BadMagic(u16),
    /// The version field is not [`VERSION`].
    #[error("unsupported version {0}")]
    BadVersion(u8),
    /// The type field names no [`PacketType`].
    #[error("unknown packet type {0}")]
    UnknownType(u8),
    /// Flag bits beyond the five known ones are set.
    #[error("reserved flag bits set: {0:#04x}")]
    ReservedFlags(u8),
    /// The lanes field is above [`MAX_LANES`].
    #[error("lane count {0} above {MAX_LANES}")]
    TooManyLanes(u8),
    /// The announced lanes run past the end of the buffer.
    #[error("{lanes} lanes need {needed} bytes, the buffer holds {have}")]
    LanesBeyondBuffer {
        /// Lanes the header announces.
        lanes: u8,
        /// Bytes the header and those lanes need.
        needed: usize,
        /// Bytes the buffer holds.
        have: usize,
    },
    /// The records or ranges after a [`PacketType::Rows`] header do not match its count, or
    /// one of them is malformed (more than 64 lanes, reserved bytes set, ranges out of order).
    #[error("malformed row records or ack ranges at byte {at}")]
    BadRecords {
        /// Offset in the payload (after the header) of the first bad byte.
        at: usize,
    },
    /// An id at or beyond the plan's limit (see [`Repr::check_plan`]).
    #[error("{what} {value} out of range for the plan (limit {limit})")]
    OutOfRange {
        /// Which id: "src vertex", "block", "worker" and so on.
        what: &'static str,
        /// The id the packet carries.
        value: u32,
        /// The limit it must stay below.
        limit: u32,
    },
}

/// What a packet is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// A worker's feature (or gradient) chunk going up to be aggregated.
    Data = 1,
    /// An aggregated sum coming down to the destination's worker.
    Result = 2,
    /// A raw feature bypassing the aggregators (resend/fetch reply, overflow, strawman).
    Raw = 3,
    /// A worker asks the owner of a vertex for its raw feature after a timeout.
    Fetch = 4,
    /// A worker reports a block complete.
    BlockDone = 5,
    /// The switch tells every worker to start the next block.
    BlockGo = 6,
    /// Start-up: a worker joins a job.
    Join = 7,
    /// A worker's slice of an all-reduce going up to a slot ([`crate::allreduce`]): `sequence`
    /// is the slice's position in the job's all-reduce stream, `block` its slot, `chunk` its
    /// bank, `layer` the operation (0 sum, 1 max), `epoch` the operation's number.
    Reduce = 8,
    /// A finished slot coming down: the combined slice, `count` its contributions.
    Reduced = 9,
    /// Several host-exchange copies for one worker in one packet: `count` [`Records`] after the
    /// header (`lanes` 0), `dst` a vertex of the receiving worker, `src` the first record's;
    /// with the ack flag, the receiver's [`AckRanges`] of the sender's sequences.
    Rows = 10,
    /// Header only. From a worker: where does the switch's numbering of the sums and raw
    /// copies it sends this worker stand? From the switch (the ack flag set): in `sequence`,
    /// the number the next of them will carry, so every number below it has been sent — a
    /// worker that has not seen one of those lost it, even when nothing came after it (the
    /// tail of a stream). The switch fills in the number as the reply leaves, behind whatever
    /// was numbered before it (`switch/stamp.rs`).
    Stamps = 11,
}

impl PacketType {
    /// The type with wire code `x`, if there is one.
    pub fn from_u8(x: u8) -> Option<PacketType> {
        // Codes run 1, 2, … in `ALL`'s order (a test holds it to that): an index, not a
        // search, for the lookup every packet takes.
        let i = usize::from(x).checked_sub(1)?;
        PacketType::ALL.get(i).copied()
    }

    /// Every type, in code order (codes run from 1 to [`PacketType::CODES`] − 1).
    pub const ALL: [PacketType; 11] = {
        use PacketType::*;
        [
            Data, Result, Raw, Fetch, BlockDone, BlockGo, Join, Reduce, Reduced, Rows, Stamps,
        ]
    };

    /// One past the highest code: the length of a table indexed by code.
    pub const CODES: usize = PacketType::Stamps as usize + 1;

    /// Whether the switch numbers packets of this type per worker port as they leave
    /// (`sequence`, see `switch/stamp.rs`): the ones their receivers do not acknowledge.
    pub fn is_stamped(self) -> bool {
        matches!(self, PacketType::Result | PacketType::Raw)
    }
}

/// The flag bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Flags {
    /// Bit 0: an acknowledgement (of a data chunk or of a host-exchange copy).
    pub ack: bool,
    /// Bit 1: a fetch request; on a result, the switch's overflow notice; on a reduce-mode
    /// data packet, a partial sum too large for 32-bit lanes (nothing to add: release the
    /// destination's aggregator and have its owner fetch).
    pub fetch: bool,
    /// Bit 2: congestion experienced (set by the switch, echoed in acks).
    pub ecn: bool,
    /// Bit 3: a resent raw feature (a fetch reply); it bypasses, and releases, the aggregator.
    /// On a [`PacketType::Rows`] packet: acknowledge at once (the sender waits for it).
    pub resend: bool,
    /// Gradients flowing dst → src (the transposed exchange) rather than features.
    pub backward: bool,
    /// Bit 5, the level: a leaf switch's partial sum on its way up to the spine of a
    /// two-level fabric (`count` contributions of the leaf's rack, `worker` the rack), not a
    /// worker's packet. Only a spine admits it.
    pub partial: bool,
}

impl Flags {
    const KNOWN: u8 = 0b11_1111;

    /// The flags byte as it goes on the wire.
    pub fn to_u8(self) -> u8 {
        u8::from(self.ack)
            | u8::from(self.fetch) << 1
            | u8::from(self.ecn) << 2
            | u8::from(self.resend) << 3
            | u8::from(self.backward) << 4
            | u8::from(self.partial) << 5
    }

    /// Parse a flags byte; reserved bits set are an error.
    pub fn from_u8(x: u8) -> Result<Flags, Error> {
        if x & !Self::KNOWN != 0 {
            return Err(Error::ReservedFlags(x));
        }
        Ok(Flags {
            ack: x & 1 != 0,
            fetch: x & 2 != 0,
            ecn: x & 4 != 0,
            resend: x & 8 != 0,
            backward: x & 16 != 0,
            partial: x & 32 != 0,
        })
    }
}

/// A zero-copy view of a packet in a buffer.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checks; accessors may panic on a short buffer. Use [`Packet::new_checked`]
    /// for anything that came from the network.
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap after checking that the header and the announced lanes fit the buffer.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds the header and the lanes it announces.
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated(b.len()));
        }
        let lanes = b[field::LANES];
        if lanes as usize > MAX_LANES {
            return Err(Error::TooManyLanes(lanes));
        }
        let needed = HEADER_LEN + 4 * lanes as usize;
        if b.len() < needed {
            return Err(Error::LanesBeyondBuffer {
                lanes,
                needed,
                have: b.len(),
            });
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: std::ops::Range<usize>) -> u16 {
        u16::from_be_bytes(self.buffer.as_ref()[r].try_into().expect("2 bytes"))
    }

    fn u32_at(&self, r: std::ops::Range<usize>) -> u32 {
        u32::from_be_bytes(self.buffer.as_ref()[r].try_into().expect("4 bytes"))
    }

    /// The magic field (valid packets carry [`MAGIC`]).
    pub fn magic(&self) -> u16 {
        self.u16_at(field::MAGIC)
    }
    /// The version field.
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    /// The raw type code (see [`PacketType::from_u8`]).
    pub fn packet_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    /// The raw flags byte (see [`Flags::from_u8`]).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// Whether it carries packed host copies (a `Rows` packet that is no ack): its lanes are
    /// in records after the header, not counted in it.
    pub fn is_packed_rows(&self) -> bool {
        self.packet_type() == PacketType::Rows as u8
            && Flags::from_u8(self.flags()).is_ok_and(|f| !f.ack)
    }
    /// GCN layer of the exchange.
    pub fn layer(&self) -> u8 {
        self.buffer.as_ref()[field::LAYER]
    }
    /// Job id.
    pub fn job(&self) -> u16 {
        self.u16_at(field::JOB)
    }
    /// Source vertex (global id).
    pub fn src(&self) -> u32 {
        self.u32_at(field::SRC)
    }
    /// Destination vertex (global id).
    pub fn dst(&self) -> u32 {
        self.u32_at(field::DST)
    }
    /// Block of the plan.
    pub fn block(&self) -> u16 {
        self.u16_at(field::BLOCK)
    }
    /// Contributions summed into the lanes.
    pub fn count(&self) -> u16 {
        self.u16_at(field::COUNT)
    }
    /// Worker rank.
    pub fn worker(&self) -> u16 {
        self.u16_at(field::WORKER)
    }
    /// Which 64-lane chunk of the feature the lanes hold.
    pub fn chunk(&self) -> u8 {
        self.buffer.as_ref()[field::CHUNK]
    }
    /// Number of int32 lanes after the header.
    pub fn lanes(&self) -> u8 {
        self.buffer.as_ref()[field::LANES]
    }
    /// Training step.
    pub fn epoch(&self) -> u32 {
        self.u32_at(field::EPOCH)
    }
    /// Sequence number.
    pub fn sequence(&self) -> u32 {
        self.u32_at(field::SEQUENCE)
    }

    /// Lane `i` of the payload.
    pub fn lane(&self, i: usize) -> i32 {
        let at = HEADER_LEN + 4 * i;
        i32::from_be_bytes(
            self.buffer.as_ref()[at..at + 4]
                .try_into()
                .expect("4 bytes"),
        )
    }

    /// The first `out.len()` lanes, decoded into `out` (the buffer must hold them).
    pub fn lanes_into(&self, out: &mut [i32]) {
        let bytes = &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + 4 * out.len()];
        for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *v = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        }
    }

    /// All lanes, decoded.
    pub fn payload(&self) -> impl Iterator<Item = i32> + '_ {
        (0..self.lanes() as usize).map(|i| self.lane(i))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn put(&mut self, r: std::ops::Range<usize>, bytes: &[u8]) {
        self.buffer.as_mut()[r].copy_from_slice(bytes);
    }

    /// Add `values` into the lanes (wrapping, as switch ALUs do; the fixed-point scale keeps
    /// real sums far from wrapping).
    pub fn add_lanes(&mut self, values: &[i32]) {
        for (i, v) in values.iter().enumerate().take(self.lanes() as usize) {
            let sum = self.lane(i).wrapping_add(*v);
            let at = HEADER_LEN + 4 * i;
            self.put(at..at + 4, &sum.to_be_bytes());
        }
    }

    /// Overwrite lane `i` with `value`.
    pub fn set_lane(&mut self, i: usize, value: i32) {
        let at = HEADER_LEN + 4 * i;
        self.put(at..at + 4, &value.to_be_bytes());
    }

    /// Overwrite the count field.
    pub fn set_count(&mut self, count: u16) {
        self.put(field::COUNT, &count.to_be_bytes());
    }

    /// Overwrite the sequence field.
    pub fn set_sequence(&mut self, sequence: u32) {
        self.put(field::SEQUENCE, &sequence.to_be_bytes());
    }

    /// Overwrite the flags byte.
    pub fn set_flags(&mut self, flags: Flags) {
        self.buffer.as_mut()[field::FLAGS] = flags.to_u8();
    }
}

/// The validated meaning of a header (the payload stays in the buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// What the packet is for.
    pub packet_type: PacketType,
    /// The flag bits.
    pub flags: Flags,
    /// GCN layer of the exchange.
    pub layer: u8,
    /// Job id (several jobs share a switch).
    pub job: u16,
    /// Source vertex (global id): whose feature the packet carries or asks for.
    pub src: u32,
    /// Destination vertex (global id) of a result, raw feature or fetch.
    pub dst: u32,
    /// Block of the plan.
    pub block: u16,
    /// Contributions summed into the lanes.
    pub count: u16,
    /// Worker rank: the sender's, or the addressee's in what the switch sends.
    pub worker: u16,
    /// Which 64-lane chunk of a wider feature.
    pub chunk: u8,
    /// Int32 lanes that follow the header, `0..=64`.
    pub lanes: u8,
    /// Training step; stale packets are recognised by it.
    pub epoch: u32,
    /// Per-sender sequence number of data and copies (duplicate detection, acks); the
    /// exchange's sequence number in joins, block reports and goes; on sums and raw copies
    /// from the switch, its running number of them per worker port (loss detection).
    pub sequence: u32,
}

/// Limits a packet's ids must respect for a given plan; checked by [`Repr::check_plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanLimits {
    /// Vertices in the graph: vertex ids must be below it.
    pub vertices: u32,
    /// Block ids must be below it (taken as at least 1).
    pub blocks: u32,
    /// Workers in the job: ranks must be below it.
    pub workers: u32,
    /// Layer numbers must be below it.
    pub layers: u32,
    /// Chunks per feature: chunk numbers must be below it.
    pub chunks: u32,
}

impl Repr {
    /// Validate a checked packet's header.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, Error> {
        packet.check_len()?;
        if packet.magic() != MAGIC {
            return Err(Error::BadMagic(packet.magic()));
        }
        if packet.version() != VERSION {
            return Err(Error::BadVersion(packet.version()));
        }
        let packet_type = PacketType::from_u8(packet.packet_type())
            .ok_or(Error::UnknownType(packet.packet_type()))?;
        Ok(Repr {
            packet_type,
            flags: Flags::from_u8(packet.flags())?,
            layer: packet.layer(),
            job: packet.job(),
            src: packet.src(),
            dst: packet.dst(),
            block: packet.block(),
            count: packet.count(),
            worker: packet.worker(),
            chunk: packet.chunk(),
            lanes: packet.lanes(),
            epoch: packet.epoch(),
            sequence: packet.sequence(),
        })
    }

    /// Check ids against the plan the receiver holds.
    pub fn check_plan(&self, limits: &PlanLimits) -> Result<(), Error> {
        let check = |what, value: u32, limit: u32| {
            if value >= limit {
                Err(Error::OutOfRange { what, value, limit })
            } else {
                Ok(())
            }
        };
        check("src vertex", self.src, limits.vertices)?;
        check("dst vertex", self.dst, limits.vertices)?;
        check("block", u32::from(self.block), limits.blocks.max(1))?;
        check("worker", u32::from(self.worker), limits.workers)?;
        check("layer", u32::from(self.layer), limits.layers)?;
        check("chunk", u32::from(self.chunk), limits.chunks)
    }

    /// Bytes this header plus its lanes occupy.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + 4 * self.lanes as usize
    }

    /// Write the header into `packet` (lanes are written separately).
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::buffer_len`] or `lanes` exceeds [`MAX_LANES`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        assert!(
            self.lanes as usize <= MAX_LANES,
            "at most {MAX_LANES} lanes"
        );
        packet.put(field::MAGIC, &MAGIC.to_be_bytes());
        let b = packet.buffer.as_mut();
        b[field::VERSION] = VERSION;
        b[field::TYPE] = self.packet_type as u8;
        b[field::FLAGS] = self.flags.to_u8();
        b[field::LAYER] = self.layer;
        b[field::CHUNK] = self.chunk;
        b[field::LANES] = self.lanes;
        packet.put(field::JOB, &self.job.to_be_bytes());
        packet.put(field::SRC, &self.src.to_be_bytes());
        packet.put(field::DST, &self.dst.to_be_bytes());
        packet.put(field::BLOCK, &self.block.to_be_bytes());
        packet.put(field::COUNT, &self.count.to_be_bytes());
        packet.put(field::WORKER, &self.worker.to_be_bytes());
        packet.put(field::EPOCH, &self.epoch.to_be_bytes());
        packet.put(field::SEQUENCE, &self.sequence.to_be_bytes());
    }

    /// Write this header followed by `lanes` into the front of `buf`; the packet's length.
    ///
    /// # Panics
    /// If `lanes` does not hold [`Repr::lanes`] values or `buf` is shorter than the packet.
    pub fn emit_with_lanes(&self, lanes: &[i32], buf: &mut [u8]) -> usize {
        assert_eq!(lanes.len(), self.lanes as usize, "lane count must match");
        let len = self.buffer_len();
        let mut p = Packet::new_unchecked(&mut buf[..len]);
        self.emit(&mut p);
        for (i, &v) in lanes.iter().enumerate() {
            p.set_lane(i, v);
        }
        len
    }

    /// A complete packet in a new buffer: this header followed by `lanes`.
    pub fn to_bytes(&self, lanes: &[i32]) -> Vec<u8> {
        let mut buf = vec![0u8; self.buffer_len()];
        self.emit_with_lanes(lanes, &mut buf);
        buf
    }
}

/// Bytes of a record's own header in a [`PacketType::Rows`] packet: vertex, chunk, lanes,
/// flags and a reserved byte.
pub const RECORD_HEADER_LEN: usize = 8;
/// A record flag: every lane of the record is zero, and none is carried (its lane count says
/// how many it stands for). A row of a worker's sample that was left out (BNS-GCN's boundary
/// sampling sends it as zeros), a gradient that is zero: each costs a record header on the
/// wire instead of 4 bytes a lane.
pub const RECORD_ZERO: u8 = 1;
/// Bytes of one acknowledged range: its first and last sequence.
pub const ACK_RANGE_LEN: usize = 8;

/// One record of a [`PacketType::Rows`] packet: one chunk of one vertex's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The vertex whose row it is (global id).
    pub src: u32,
    /// Which 64-lane chunk of the row.
    pub chunk: u8,
    /// Int32 lanes it stands for.
    count: u8,
    /// The lanes' bytes: none for a zero record ([`RECORD_ZERO`]).
    lanes: &'a [u8],
}

impl Record<'_> {
    /// Int32 lanes the record stands for (a zero record's are not carried).
    pub fn lane_count(&self) -> usize {
        usize::from(self.count)
    }

    /// Bytes of lanes the record carries: 4 a lane, none for a zero record.
    pub fn carried_bytes(&self) -> usize {
        self.lanes.len()
    }

    /// The lanes decoded into the front of `out` (at least [`Record::lane_count`] long); the
    /// decoded part.
    pub fn lanes_into<'o>(&self, out: &'o mut [i32]) -> &'o [i32] {
        let n = self.lane_count();
        if self.lanes.is_empty() {
            out[..n].fill(0);
        }
        for (v, b) in out[..n].iter_mut().zip(self.lanes.chunks_exact(4)) {
            *v = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        }
        &out[..n]
    }
}

/// A record header's lane count and the lane bytes that follow it, or `None` when its flags
/// are not ones this build writes: a zero record ([`RECORD_ZERO`]) stands for at least one lane
/// and carries none.
fn record_shape(head: &[u8]) -> Option<(u8, usize)> {
    let (count, flags) = (head[5], head[6]);
    let carried = match flags {
        0 => 4 * usize::from(count),
        RECORD_ZERO if count > 0 => 0,
        _ => return None,
    };
    (usize::from(count) <= MAX_LANES && head[7] == 0).then_some((count, carried))
}

/// The records after a [`PacketType::Rows`] header, checked as a whole before any is read: a
/// packet with one bad record is dropped entire.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    rest: &'a [u8],
}

impl<'a> Records<'a> {
    /// `payload` (the bytes after the header) must hold exactly `count` records.
    pub fn new_checked(payload: &'a [u8], count: u16) -> Result<Records<'a>, Error> {
        let mut at = 0;
        for _ in 0..count {
            let head = payload
                .get(at..at + RECORD_HEADER_LEN)
                .ok_or(Error::BadRecords { at })?;
            let (_, carried) = record_shape(head).ok_or(Error::BadRecords { at })?;
            at += RECORD_HEADER_LEN + carried;
            if at > payload.len() {
                return Err(Error::BadRecords { at: payload.len() });
            }
        }
        if at != payload.len() {
            return Err(Error::BadRecords { at });
        }
        Ok(Records { rest: payload })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        let head = self.rest.get(..RECORD_HEADER_LEN)?;
        // Checked whole by `new_checked`.
        let (count, carried) = record_shape(head)?;
        let record = Record {
            src: u32::from_be_bytes([head[0], head[1], head[2], head[3]]),
            chunk: head[4],
            count,
            lanes: &self.rest[RECORD_HEADER_LEN..RECORD_HEADER_LEN + carried],
        };
        self.rest = &self.rest[RECORD_HEADER_LEN + carried..];
        Some(record)
    }
}

/// Bytes one record of `lanes` lanes takes in a packet.
pub fn record_len(lanes: usize) -> usize {
    RECORD_HEADER_LEN + 4 * lanes
}

/// Write a zero record ([`RECORD_ZERO`]) of vertex `src`'s chunk `chunk`, standing for `lanes`
/// zero lanes (at least one), at the front of `buf`; its length, [`RECORD_HEADER_LEN`].
///
/// # Panics
/// If `lanes` is 0 or more than [`MAX_LANES`], or `buf` is shorter than a record header.
pub fn emit_zero_record(src: u32, chunk: u8, lanes: usize, buf: &mut [u8]) -> usize {
    assert!((1..=MAX_LANES).contains(&lanes), "1 to {MAX_LANES} lanes");
    buf[..4].copy_from_slice(&src.to_be_bytes());
    buf[4] = chunk;
    buf[5] = lanes as u8;
    buf[6] = RECORD_ZERO;
    buf[7] = 0;
    RECORD_HEADER_LEN
}

/// Write a record of vertex `src`'s chunk `chunk` holding `lanes` at the front of `buf`; its
/// length.
///
/// # Panics
/// If `lanes` holds more than [`MAX_LANES`] values or `buf` is shorter than the record.
pub fn emit_record(src: u32, chunk: u8, lanes: &[i32], buf: &mut [u8]) -> usize {
    assert!(lanes.len() <= MAX_LANES, "at most {MAX_LANES} lanes");
    buf[..4].copy_from_slice(&src.to_be_bytes());
    buf[4] = chunk;
    buf[5] = lanes.len() as u8;
    buf[6..8].fill(0);
    for (b, v) in buf[RECORD_HEADER_LEN..].chunks_exact_mut(4).zip(lanes) {
        b.copy_from_slice(&v.to_be_bytes());
    }
    record_len(lanes.len())
}

/// The ranges of an acknowledgement of [`PacketType::Rows`] packets: `(first, last)` sequence
/// pairs, each `first <= last`, ascending and apart (checked before any is read).
#[derive(Debug, Clone)]
pub struct AckRanges<'a> {
    rest: &'a [u8],
}

impl<'a> AckRanges<'a> {
    /// `payload` must hold exactly `count` ranges, ascending and disjoint.
    pub fn new_checked(payload: &'a [u8], count: u16) -> Result<AckRanges<'a>, Error> {
        let len = usize::from(count) * ACK_RANGE_LEN;
        if payload.len() != len {
            return Err(Error::BadRecords {
                at: payload.len().min(len),
            });
        }
        let ranges = AckRanges { rest: payload };
        let mut next_free = 0u64;
        for (i, (first, last)) in ranges.clone().enumerate() {
            if first > last || u64::from(first) < next_free {
                return Err(Error::BadRecords {
                    at: i * ACK_RANGE_LEN,
                });
            }
            next_free = u64::from(last) + 2;
        }
        Ok(ranges)
    }
}

impl Iterator for AckRanges<'_> {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        let b = self.rest.get(..ACK_RANGE_LEN)?;
        self.rest = &self.rest[ACK_RANGE_LEN..];
        Some((
            u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        ))
    }
}

/// Write `ranges` (ascending, apart) at the front of `buf`; the bytes written.
pub fn emit_ack_ranges(ranges: &[(u32, u32)], buf: &mut [u8]) -> usize {
    for (b, (first, last)) in buf.chunks_exact_mut(ACK_RANGE_LEN).zip(ranges) {
        b[..4].copy_from_slice(&first.to_be_bytes());
        b[4..].copy_from_slice(&last.to_be_bytes());
    }
    ranges.len() * ACK_RANGE_LEN
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_code_below_codes_is_a_type_and_none_past_it() {
        let codes: Vec<usize> = PacketType::ALL.iter().map(|&t| t as usize).collect();
        assert_eq!(codes, (1..PacketType::CODES).collect::<Vec<_>>());
        for t in PacketType::ALL {
            assert_eq!(PacketType::from_u8(t as u8), Some(t));
        }
        assert!(PacketType::from_u8(PacketType::CODES as u8).is_none());
        assert!(PacketType::from_u8(0).is_none());
    }

    fn sample() -> Repr {
        Repr {
            packet_type: PacketType::Data,
            flags: Flags {
                ecn: true,
                backward: true,
                ..Flags::default()
            },
            layer: 2,
            job: 7,
            src: 123_456,
            dst: 654_321,
            block: 9,
            count: 1,
            worker: 3,
            chunk: 4,
            lanes: 3,
            epoch: 77,
            sequence: 99,
        }
    }

    #[test]
    fn the_field_table_is_the_header() {
        let ranges = [
            field::MAGIC,
            field::VERSION..field::VERSION + 1,
            field::TYPE..field::TYPE + 1,
            field::FLAGS..field::FLAGS + 1,
            field::LAYER..field::LAYER + 1,
            field::JOB,
            field::SRC,
            field::DST,
            field::BLOCK,
            field::COUNT,
            field::WORKER,
            field::CHUNK..field::CHUNK + 1,
            field::LANES..field::LANES + 1,
            field::EPOCH,
            field::SEQUENCE,
            HEADER_LEN..HEADER_LEN,
        ];
        for ((name, at, len), r) in FIELDS.iter().zip(ranges) {
            assert_eq!((*at, *len), (r.start, r.len()), "{name}");
        }
    }

    #[test]
    fn emit_then_parse_round_trips() {
        let r = sample();
        let bytes = r.to_bytes(&[1, -2, i32::MAX]);
        assert_eq!(bytes.len(), 44);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), r);
        assert_eq!(p.payload().collect::<Vec<_>>(), [1, -2, i32::MAX]);
        // Network byte order on the wire.
        assert_eq!(&bytes[0..2], &[0x53, 0x47]);
        assert_eq!(&bytes[8..12], &123_456u32.to_be_bytes());
    }

    #[test]
    fn malformed_headers_are_typed_errors() {
        let good = sample().to_bytes(&[1, 2, 3]);
        assert_eq!(
            Packet::new_checked(&good[..10]).unwrap_err(),
            Error::Truncated(10)
        );
        assert!(matches!(
            Packet::new_checked(&good[..40]).unwrap_err(),
            Error::LanesBeyondBuffer {
                lanes: 3,
                needed: 44,
                have: 40
            }
        ));
        let with = |at: usize, v: u8| {
            let mut b = good.clone();
            b[at] = v;
            Repr::parse(&Packet::new_unchecked(&b[..]))
        };
        assert_eq!(with(0, 0), Err(Error::BadMagic(0x0047)));
        assert_eq!(with(2, 9), Err(Error::BadVersion(9)));
        assert_eq!(with(3, 200), Err(Error::UnknownType(200)));
        assert_eq!(with(4, 0x80), Err(Error::ReservedFlags(0x80)));
        assert_eq!(with(23, 65), Err(Error::TooManyLanes(65)));
    }

    #[test]
    fn plan_limits_reject_out_of_range_ids() {
        let limits = PlanLimits {
            vertices: 1_000_000,
            blocks: 10,
            workers: 4,
            layers: 4,
            chunks: 19,
        };
        assert!(sample().check_plan(&limits).is_ok());
        let bad = Repr {
            worker: 4,
            ..sample()
        };
        assert!(matches!(
            bad.check_plan(&limits),
            Err(Error::OutOfRange { what: "worker", .. })
        ));
        let bad = Repr {
            src: 1_000_000,
            ..sample()
        };
        assert!(matches!(
            bad.check_plan(&limits),
            Err(Error::OutOfRange {
                what: "src vertex",
                ..
            })
        ));
    }

    #[test]
    fn lanes_add_in_place_wrapping() {
        let mut bytes = sample().to_bytes(&[1, 2, i32::MAX]);
        let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
        p.add_lanes(&[10, -5, 1]);
        assert_eq!(p.payload().collect::<Vec<_>>(), [11, -3, i32::MIN]);
    }

    #[test]
    fn row_records_round_trip_and_malformed_ones_are_refused() {
        let mut buf = [0u8; 200];
        let mut len = emit_record(7, 1, &[1, -2, 3], &mut buf);
        len += emit_record(u32::MAX, 0, &[], &mut buf[len..]);
        assert_eq!(len, 2 * RECORD_HEADER_LEN + 12);
        let records: Vec<Record> = Records::new_checked(&buf[..len], 2).unwrap().collect();
        assert_eq!((records[0].src, records[0].chunk), (7, 1));
        let mut out = [0i32; MAX_LANES];
        assert_eq!(records[0].lanes_into(&mut out), &[1, -2, 3]);
        assert_eq!((records[1].src, records[1].lane_count()), (u32::MAX, 0));
        // A count that disagrees with the bytes, trailing bytes, too many lanes, reserved bytes.
        assert!(Records::new_checked(&buf[..len], 3).is_err());
        assert!(Records::new_checked(&buf[..len], 1).is_err());
        assert!(Records::new_checked(&buf[..len - 1], 2).is_err());
        let mut bad = buf;
        bad[5] = 65;
        assert_eq!(
            Records::new_checked(&bad[..len], 2).unwrap_err(),
            Error::BadRecords { at: 0 }
        );
        let mut bad = buf;
        bad[7] = 1;
        assert!(Records::new_checked(&bad[..len], 2).is_err());
    }

    #[test]
    fn a_zero_record_carries_no_lanes_and_reads_as_zeros() {
        let mut buf = [0u8; 200];
        let mut len = emit_zero_record(9, 2, 64, &mut buf);
        len += emit_record(7, 0, &[5, 6], &mut buf[len..]);
        assert_eq!(len, 2 * RECORD_HEADER_LEN + 8);
        let records: Vec<Record> = Records::new_checked(&buf[..len], 2).unwrap().collect();
        assert_eq!((records[0].src, records[0].chunk), (9, 2));
        assert_eq!(
            (records[0].lane_count(), records[0].carried_bytes()),
            (64, 0)
        );
        let mut out = [7i32; MAX_LANES];
        assert_eq!(records[0].lanes_into(&mut out), &[0; 64][..]);
        assert_eq!(records[1].lanes_into(&mut out), &[5, 6]);
        // A zero record of no lanes, or another flag, is refused.
        let mut bad = buf;
        bad[5] = 0;
        assert!(Records::new_checked(&bad[..len], 2).is_err());
        let mut bad = buf;
        bad[6] = 2;
        assert!(Records::new_checked(&bad[..len], 2).is_err());
    }

    #[test]
    fn ack_ranges_must_ascend_apart() {
        let mut buf = [0u8; 64];
        let len = emit_ack_ranges(&[(0, 3), (5, 5), (9, 20)], &mut buf);
        let ranges: Vec<(u32, u32)> = AckRanges::new_checked(&buf[..len], 3).unwrap().collect();
        assert_eq!(ranges, [(0, 3), (5, 5), (9, 20)]);
        for bad in [&[(3u32, 2u32)][..], &[(0, 3), (4, 5)], &[(5, 6), (0, 1)]] {
            let len = emit_ack_ranges(bad, &mut buf);
            assert!(
                AckRanges::new_checked(&buf[..len], bad.len() as u16).is_err(),
                "{bad:?}"
            );
        }
        assert!(AckRanges::new_checked(&buf[..7], 1).is_err());
    }

    proptest! {
        /// Whatever follows a Rows header, checking never panics, and what passes iterates
        /// over exactly the payload.
        #[test]
        fn arbitrary_records_never_panic(
            payload in proptest::collection::vec(any::<u8>(), 0..300), count in 0u16..8,
        ) {
            if let Ok(records) = Records::new_checked(&payload, count) {
                let total: usize = records.map(|r| RECORD_HEADER_LEN + r.carried_bytes()).sum();
                prop_assert_eq!(total, payload.len());
            }
            if let Ok(ranges) = AckRanges::new_checked(&payload, count) {
                prop_assert_eq!(ranges.count(), usize::from(count));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                if let Ok(r) = Repr::parse(&p) {
                    // What parses re-emits to the same header bytes.
                    let lanes: Vec<i32> = p.payload().collect();
                    let again = r.to_bytes(&lanes);
                    prop_assert_eq!(&again[..], &bytes[..r.buffer_len()]);
                }
            }
        }

        /// Headers that pass the magic and version checks, with everything else arbitrary:
        /// the deeper checks (type, flags, lanes) must reject without panicking.
        #[test]
        fn arbitrary_headers_after_a_valid_prefix_never_panic(
            rest in proptest::collection::vec(any::<u8>(), 0..170),
        ) {
            let mut bytes = vec![0x53, 0x47, VERSION];
            bytes.extend(rest);
            match Packet::new_checked(&bytes[..]) {
                Ok(p) => match Repr::parse(&p) {
                    Ok(r) => prop_assert!(r.buffer_len() <= bytes.len()),
                    Err(e) => {
                        let expected = matches!(e, Error::UnknownType(_) | Error::ReservedFlags(_));
                        prop_assert!(expected, "{:?}", e);
                    }
                },
                Err(e) => {
                    let expected = matches!(
                        e,
                        Error::Truncated(_) | Error::TooManyLanes(_) | Error::LanesBeyondBuffer { .. }
                    );
                    prop_assert!(expected, "{:?}", e);
                }
            }
        }

        #[test]
        fn any_repr_round_trips(
            t in 1u8..=10, flags in 0u8..32, layer: u8, job: u16, src: u32, dst: u32, block: u16,
            count: u16, worker: u16, chunk: u8, lanes in proptest::collection::vec(any::<i32>(), 0..=32),
            epoch: u32, sequence: u32,
        ) {
            let r = Repr {
                packet_type: PacketType::from_u8(t).unwrap(),
                flags: Flags::from_u8(flags).unwrap(),
                layer, job, src, dst, block, count, worker, chunk,
                lanes: lanes.len() as u8, epoch, sequence,
            };
            let bytes = r.to_bytes(&lanes);
            let p = Packet::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(Repr::parse(&p).unwrap(), r);
            prop_assert_eq!(p.payload().collect::<Vec<_>>(), lanes);
        }
    }
}
