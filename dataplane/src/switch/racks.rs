//! Where a switch sits in a job's fabric: the racks its workers are in and the switch's
//! tier (the star's only switch, a leaf or the spine).

use std::sync::Arc;

use super::SwitchError;

/// The most racks a two-level fabric has: a spine keeps one bit per rack and destination.
pub const MAX_RACKS: u16 = 64;

/// Which rack each worker of a job is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Racks {
    pub(super) rack_of: Vec<u16>,
    pub(super) racks: u16,
}

impl Racks {
    /// Worker `w` in rack `rack_of[w]`; racks are numbered from 0 and none may be empty.
    pub fn new(rack_of: Vec<u16>) -> Result<Racks, SwitchError> {
        let racks = rack_of.iter().max().map_or(0, |&r| r + 1);
        if racks == 0 || racks > MAX_RACKS {
            return Err(SwitchError::BadRacks(format!(
                "{racks} racks; 1 to {MAX_RACKS} are possible"
            )));
        }
        let mut used = vec![false; usize::from(racks)];
        for &r in &rack_of {
            used[usize::from(r)] = true;
        }
        if let Some(empty) = used.iter().position(|u| !u) {
            return Err(SwitchError::BadRacks(format!("rack {empty} has no worker")));
        }
        Ok(Racks { rack_of, racks })
    }

    /// `workers` workers in `racks` racks of consecutive ranks, as even as can be (rack
    /// `⌊w · racks / workers⌋` for worker `w`): `workers / racks` to a rack when it divides.
    pub fn even(workers: u16, racks: u16) -> Result<Racks, SwitchError> {
        if racks == 0 || racks > workers {
            return Err(SwitchError::BadRacks(format!(
                "{workers} workers cannot fill {racks} racks"
            )));
        }
        let rack = |w: u16| (u32::from(w) * u32::from(racks) / u32::from(workers)) as u16;
        Racks::new((0..workers).map(rack).collect())
    }

    /// The rack of worker `w`.
    pub fn rack_of(&self, w: u16) -> u16 {
        self.rack_of[usize::from(w)]
    }

    /// Racks.
    pub fn racks(&self) -> u16 {
        self.racks
    }

    /// Workers.
    pub fn workers(&self) -> u16 {
        self.rack_of.len() as u16
    }
}

/// Where a switch sits: the star's only switch, or one level of a two-level fabric.
#[derive(Debug, Clone, Default)]
pub enum Tier {
    /// One switch with every worker on a port of its own.
    #[default]
    Star,
    /// The leaf of rack `rack`: its workers on their ranks' ports, the spine up its uplink
    /// ([`crate::node::Address::Switch`]).
    Leaf {
        /// The leaf's rack.
        rack: u16,
        /// Every worker's rack.
        racks: Arc<Racks>,
    },
    /// The spine: the leaf of rack `r` on port `first_port + r`.
    Spine(Arc<Racks>),
}

impl Tier {
    /// Ports the job takes from its first port on: one per worker, or per rack at a spine.
    pub(super) fn ports(&self, workers: u16) -> u16 {
        match self {
            Tier::Spine(racks) => racks.racks(),
            _ => workers,
        }
    }

    /// The racks of a tier of a fabric.
    pub(super) fn racks(&self) -> Option<&Racks> {
        match self {
            Tier::Star => None,
            Tier::Leaf { racks, .. } | Tier::Spine(racks) => Some(racks),
        }
    }
}

impl Tier {
    /// Whether `other` is this very tier (the same racks, not an equal copy): a cheap test
    /// that spares a clone per packet.
    pub(super) fn is(&self, other: &Tier) -> bool {
        match (self, other) {
            (Tier::Star, Tier::Star) => true,
            (Tier::Leaf { rack: a, racks: x }, Tier::Leaf { rack: b, racks: y }) => {
                a == b && Arc::ptr_eq(x, y)
            }
            (Tier::Spine(x), Tier::Spine(y)) => Arc::ptr_eq(x, y),
            _ => false,
        }
    }
}
