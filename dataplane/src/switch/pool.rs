//! The aggregator memory: a pool of 32-lane registers shared by all jobs, each job with a
//! quota holding at most its region of it.

use std::collections::BTreeMap;

use crate::wire::MAX_LANES;

/// The aggregator pool, shared by all jobs; a job with a quota holds at most that many at
/// once (its region of the memory), whatever the others do.
#[derive(Debug)]
pub(super) struct Pool {
    pub(super) lanes: Vec<i32>,
    pub(super) free: Vec<u32>,
    pub(super) capacity: usize,
    /// The job holding each aggregator.
    pub(super) owner: Vec<u16>,
    /// Per job with a quota: (aggregators held, quota).
    pub(super) quotas: BTreeMap<u16, (usize, usize)>,
}

impl Pool {
    pub(super) fn alloc(&mut self, job: u16) -> Option<u32> {
        if let Some((held, quota)) = self.quotas.get_mut(&job) {
            if *held >= *quota || self.free.is_empty() {
                return None;
            }
            *held += 1;
        }
        let a = self.free.pop()?;
        self.owner[a as usize] = job;
        self.lanes[a as usize * MAX_LANES..][..MAX_LANES].fill(0);
        Some(a)
    }

    pub(super) fn release(&mut self, a: u32) {
        if let Some((held, _)) = self.quotas.get_mut(&self.owner[a as usize]) {
            *held -= 1;
        }
        self.free.push(a);
    }

    pub(super) fn in_use(&self) -> usize {
        self.capacity - self.free.len()
    }
}
