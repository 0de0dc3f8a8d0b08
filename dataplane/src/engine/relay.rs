//! A proxy's side of the host two-level exchange ([`Mode::HostTwoLevel`]): the partial sums
//! the other workers of its rack send it for the destinations it relays, gathered per
//! (destination, chunk) until every one is in.
//!
//! A relayed destination is a row of the block whose pair names this worker while the pair's
//! sources are owned by other workers too (the rack's workers that feed it). Each of them
//! sends its share once (its own sources' partial sum, retransmitted until acknowledged, a
//! duplicate counted once by a bitmap over the peers); the proxy adds them to its own share
//! when it builds the rack's partial, which leaves only once they are all in
//! ([`super::reliable::Reliable::set_ready`]). A share that did not fit 32-bit lanes arrives
//! without lanes: the rack's partial then goes without lanes too, and the destination's owner
//! fetches the plain features of every source of the pair (exact either way).

use bitvec::vec::BitVec;

use crate::plan::{ExchangePlan, Mode};

/// What one proxy gathers in one block.
#[derive(Debug, Default)]
pub(super) struct Relay {
    /// Relayed destinations, ascending (global ids).
    dests: Vec<u32>,
    /// Per destination, where its peers start in `peers` (one more entry than destinations).
    peer_starts: Vec<u32>,
    /// The other workers feeding each destination's pair, ascending per destination.
    peers: Vec<u16>,
    chunks: usize,
    width: usize,
    /// Per (peer entry, chunk): whether its share arrived.
    seen: BitVec,
    /// Per (destination, chunk): shares still missing.
    missing: Vec<u32>,
    /// Per (destination, chunk): a share came without lanes (it overflowed 32 bits).
    overflowed: BitVec,
    /// Per destination, `width` lanes: the shares summed so far (chunk `c` at `c · 64`).
    sums: Vec<i64>,
}

impl Relay {
    /// Worker `rank`'s relayed destinations in `block` of `plan` (none outside
    /// [`Mode::HostTwoLevel`]).
    pub(crate) fn new(plan: &ExchangePlan, rank: u16, block: u16) -> Relay {
        let mut r = Relay {
            chunks: plan.chunks(),
            width: plan.width,
            peer_starts: vec![0],
            ..Relay::default()
        };
        if plan.mode != Mode::HostTwoLevel {
            return r;
        }
        let b = &plan.blocks[usize::from(block)];
        if !b.partials.known() {
            return r;
        }
        let t = &b.table;
        let mut peers: Vec<u16> = Vec::new();
        for row in 0..t.len() {
            if t.workers[row] == u32::from(rank) {
                continue;
            }
            let Some(p) = b.pair(row, rank) else {
                continue;
            };
            peers.clear();
            peers.extend(
                b.partials
                    .of(p)
                    .iter()
                    .map(|&u| plan.owner[u as usize])
                    .filter(|&w| w != rank),
            );
            if peers.is_empty() {
                continue;
            }
            peers.sort_unstable();
            peers.dedup();
            r.dests.push(t.vertices[row]);
            r.peers.extend_from_slice(&peers);
            r.peer_starts.push(r.peers.len() as u32);
        }
        let n = r.dests.len();
        r.seen = BitVec::repeat(false, r.peers.len() * r.chunks);
        r.missing = (0..n)
            .flat_map(|i| {
                let k = r.peer_starts[i + 1] - r.peer_starts[i];
                std::iter::repeat_n(k, r.chunks)
            })
            .collect();
        r.overflowed = BitVec::repeat(false, n * r.chunks);
        r.sums = vec![0; n * r.width];
        r
    }

    fn position(&self, v: u32) -> Option<usize> {
        self.dests.binary_search(&v).ok()
    }

    fn peer_index(&self, i: usize, w: u16) -> Option<usize> {
        let (a, z) = (
            self.peer_starts[i] as usize,
            self.peer_starts[i + 1] as usize,
        );
        self.peers[a..z].binary_search(&w).ok().map(|j| a + j)
    }

    /// Whether worker `w` sends this proxy a share of destination `v`.
    pub(crate) fn expects(&self, v: u32, w: u16) -> bool {
        self.position(v)
            .is_some_and(|i| self.peer_index(i, w).is_some())
    }

    /// Worker `w`'s share of `v`'s chunk `c` (no lanes: it overflowed): whether it was new;
    /// `None` when it is not expected.
    pub(crate) fn on_share(&mut self, v: u32, w: u16, c: usize, values: &[i32]) -> Option<bool> {
        let i = self.position(v)?;
        let j = self.peer_index(i, w)?;
        if c >= self.chunks || self.seen.replace(j * self.chunks + c, true) {
            return Some(false);
        }
        let key = i * self.chunks + c;
        if values.is_empty() {
            self.overflowed.set(key, true);
        } else {
            let start = i * self.width + c * crate::wire::MAX_LANES;
            for (s, &x) in self.sums[start..].iter_mut().zip(values) {
                *s += i64::from(x);
            }
        }
        self.missing[key] -= 1;
        Some(true)
    }

    /// Whether `v`'s chunk `c` may leave: every share is in, or `v` is not relayed here.
    pub(crate) fn complete(&self, v: u32, c: usize) -> bool {
        self.position(v)
            .is_none_or(|i| self.missing[i * self.chunks + c] == 0)
    }

    /// The other workers' shares of `v`'s chunk `c` summed (`lanes` of them): `None` when
    /// `v` is not relayed here, `Some(None)` when a share overflowed.
    pub(crate) fn shares(&self, v: u32, c: usize, lanes: usize) -> Option<Option<&[i64]>> {
        let i = self.position(v)?;
        if self.overflowed[i * self.chunks + c] {
            return Some(None);
        }
        let start = i * self.width + c * crate::wire::MAX_LANES;
        Some(Some(&self.sums[start..start + lanes]))
    }
}
