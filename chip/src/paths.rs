//! Where the P4 program (`p4/`) runs a packet's passes: the pipe that holds each destination's
//! aggregators (the control plane's placement), the passes of a source's chains over those
//! pipes, and the recirculation path — the pipe's internal port or one of its looped
//! front-panel ports — that a hash of the packet's source and destination picks. `switchgnn p4
//! entries` installs these decisions and the simulator's chip runs its passes over them; this
//! module is the one place that makes them.

/// Bytes a recirculating copy carries besides the packet: the pass header the P4 program adds
/// (`p4/include/headers.p4`).
pub const PASS_HEADER: u64 = 32;

/// A job's home pipe: that of its recirculation port (`p4 entries`' default, pipe 0's), where
/// its packets arrive and make their first passes.
pub const HOME_PIPE: u8 = 0;

/// Hash slots of `recirculation_path` per job (`PATH_SLOTS` in `p4/include/constants.p4`): the
/// control plane spreads them over the paths.
pub const PATH_SLOTS: u64 = 256;

/// The hash slot of a packet from `src` to `dst` (the header's fields): the program's
/// `path_slot_of`, an 8-bit `Hash` of `HashAlgorithm_t.CRC16` over `{src, dst}`. Tofino's CRC16
/// is CRC-16/ARC (polynomial 0x8005, input and output reflected, initial value and final xor 0;
/// p4lang/p4c `backends/tofino/bf-utils` `bfn_hash_algorithm`, `CRC_16`); the fields go in as
/// the header carries them, big-endian, the first field first, and a hash narrower than the
/// algorithm keeps its low bits.
pub fn path_slot(src: u32, dst: u32) -> u8 {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&src.to_be_bytes());
    bytes[4..].copy_from_slice(&dst.to_be_bytes());
    CRC16.checksum(&bytes) as u8
}

/// Tofino's CRC16.
const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_ARC);

/// The recirculation path of hash slot `slot` among `paths` (path 0 the internal port, then the
/// looped ports): the control plane gives the slots to the paths in turn (`p4 entries`,
/// `recirculation_path`).
pub fn slot_path(slot: u64, paths: u32) -> u32 {
    (slot % u64::from(paths.max(1))) as u32
}

/// The recirculation path, among `paths` per pipe, of every pass of a packet from `src` to
/// `dst`: one lookup names it for whichever pipe a pass is in, so one source's passes keep one
/// path in every pipe and stay in order.
pub fn path_of(src: u32, dst: u32, paths: u32) -> u32 {
    slot_path(u64::from(path_slot(src, dst)), paths)
}

/// The bit mask of `pipes` (bit `p`: pipe `p`), as the program's `fanout` fields carry them.
pub fn pipe_mask(pipes: impl IntoIterator<Item = u8>) -> u8 {
    pipes.into_iter().fold(0, |mask, p| mask | 1 << p)
}

/// Where a block's destinations keep their aggregators: the pipe of each (in slot order) and
/// its slot among that pipe's destinations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The pipe of each destination, in slot order.
    pub pipe: Vec<u8>,
    /// Its slot among that pipe's destinations.
    pub slot: Vec<u32>,
}

/// Place the destinations of a block, expecting `expected[s]` contributions each (the passes
/// that add into its aggregators), over pipes `0..room.len()` that hold `room[p]` destinations
/// each: most passes first, each to the pipe with the fewest passes so far that has room, so
/// that the pipes' chains, which run at once, come out even. `None` when the rooms together hold
/// fewer destinations than the block has.
pub fn place(expected: &[u32], room: &[u64]) -> Option<Placement> {
    let pipes = room.len();
    if room.iter().fold(0u64, |all, &r| all.saturating_add(r)) < expected.len() as u64 {
        return None;
    }
    let mut by_passes: Vec<usize> = (0..expected.len()).collect();
    by_passes.sort_by_key(|&s| (std::cmp::Reverse(expected[s]), s));
    let mut load = vec![0u64; pipes];
    let mut used = vec![0u64; pipes];
    let mut pipe = vec![0u8; expected.len()];
    for s in by_passes {
        let p = (0..pipes)
            .filter(|&p| used[p] < room[p])
            .min_by_key(|&p| (load[p], p))?;
        pipe[s] = p as u8;
        load[p] += u64::from(expected[s]);
        used[p] += 1;
    }
    let mut next = vec![0u32; pipes];
    let slot = pipe
        .iter()
        .map(|&p| {
            next[usize::from(p)] += 1;
            next[usize::from(p)] - 1
        })
        .collect();
    Some(Placement { pipe, slot })
}

/// One pass of a source's packet: its pipe and index in that pipe's chain, the destination slot
/// it adds into (`None`: the home pipe's pass 0 of a source with no destination there, which
/// only fans out), the other pipes pass 0 starts, and whether it ends its chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourcePass {
    /// The pipe it runs in.
    pub pipe: u8,
    /// Its index in that pipe's chain.
    pub index: u64,
    /// The destination slot it adds into.
    pub slot: Option<usize>,
    /// Other pipes whose chains it starts (bit `p`: pipe `p`); only the home pipe's pass 0.
    pub fanout: u8,
    /// Whether it is the last pass of its pipe's chain.
    pub last: bool,
}

/// The passes of a source feeding `slots` (in row order), each destination's aggregator in pipe
/// `pipe_of(slot)`, on a job whose aggregators spread over `pipes` pipes with its first passes in
/// pipe `home`: one chain per pipe, slots in row order within it, pass 0 in the home pipe naming
/// the other pipes' chains (a pass of its own when no destination is in the home pipe).
pub fn source_passes(
    slots: &[u32],
    pipe_of: impl Fn(usize) -> u8,
    home: u8,
    pipes: u8,
) -> Vec<SourcePass> {
    let mut chains: Vec<Vec<usize>> = vec![Vec::new(); usize::from(pipes)];
    for &s in slots {
        chains[usize::from(pipe_of(s as usize))].push(s as usize);
    }
    let fanout = pipe_mask((0..pipes).filter(|&p| p != home && !chains[usize::from(p)].is_empty()));
    let mut out = Vec::with_capacity(slots.len() + 1);
    if chains[usize::from(home)].is_empty() {
        out.push(SourcePass {
            pipe: home,
            index: 0,
            slot: None,
            fanout,
            last: true,
        });
    }
    for (p, chain) in chains.iter().enumerate() {
        for (i, &s) in chain.iter().enumerate() {
            out.push(SourcePass {
                pipe: p as u8,
                index: i as u64,
                slot: Some(s),
                fanout: if p == usize::from(home) && i == 0 {
                    fanout
                } else {
                    0
                },
                last: i + 1 == chain.len(),
            });
        }
    }
    out
}

/// The passes of a packet after its first, which checks it in the home pipe and sends it
/// around (the P4 program's stages hold the checks or the aggregation, not both): a partial sum
/// (`direct`, one slot) goes straight to its destination's pipe; a feature walks its source's
/// chains from the home pipe ([`source_passes`]).
pub fn passes_after_checks(
    slots: &[u32],
    pipe_of: impl Fn(usize) -> u8,
    home: u8,
    pipes: u8,
    direct: bool,
) -> Vec<SourcePass> {
    if !direct {
        return source_passes(slots, pipe_of, home, pipes);
    }
    slots
        .iter()
        .map(|&s| SourcePass {
            pipe: pipe_of(s as usize),
            index: 0,
            slot: Some(s as usize),
            fanout: 0,
            last: true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_crc16_arc_and_spreads_the_slots() {
        // The catalogue's check value of CRC-16/ARC.
        assert_eq!(CRC16.checksum(b"123456789"), 0xBB3D);
        assert_eq!(path_slot(0, 0), 0);
        // Consecutive sources fill every slot, each about equally.
        let mut hits = [0u32; PATH_SLOTS as usize];
        for src in 0..PATH_SLOTS as u32 * 64 {
            hits[usize::from(path_slot(src, 7))] += 1;
        }
        assert!(hits.iter().all(|&h| (32..=96).contains(&h)), "{hits:?}");
        // A path per slot in turn; one path without looped ports.
        assert_eq!(
            (0..5).map(|s| slot_path(s, 3)).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1]
        );
        assert!((0..1000).all(|s| path_of(s, s + 1, 1) == 0));
    }

    #[test]
    fn placement_evens_the_pipes_out_within_their_room() {
        let p = place(&[5, 4, 3, 2, 2], &[10, 10]).unwrap();
        assert_eq!(p.pipe, [0, 1, 1, 0, 0]);
        assert_eq!(p.slot, [0, 0, 1, 1, 2]);
        // Pipe 0 holds one destination: the rest go to pipe 1.
        let p = place(&[5, 4, 3], &[1, 10]).unwrap();
        assert_eq!(p.pipe, [0, 1, 1]);
        assert!(place(&[1, 1, 1], &[1, 1]).is_none());
        assert_eq!(place(&[1, 1, 1], &[u64::MAX; 2]).unwrap().pipe, [0, 1, 0]);
    }

    #[test]
    fn a_source_makes_one_chain_per_pipe_and_fans_out_from_home() {
        let pipe_of = |s: usize| [0u8, 1, 1, 2][s];
        let passes = source_passes(&[3, 1, 2], pipe_of, 0, 3);
        // Nothing in the home pipe: a pass of its own there fans out to pipes 1 and 2.
        assert_eq!(passes[0].slot, None);
        assert_eq!(passes[0].fanout, 0b110);
        let pipes: Vec<u8> = passes.iter().map(|p| p.pipe).collect();
        assert_eq!(pipes, [0, 1, 1, 2]);
        let with_home = source_passes(&[0, 2], pipe_of, 0, 3);
        assert_eq!(with_home.len(), 2);
        assert_eq!((with_home[0].fanout, with_home[0].last), (0b010, true));
    }
}
