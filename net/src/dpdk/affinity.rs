//! The calling thread's CPU set (Linux `sched_getaffinity` / `sched_setaffinity`): which
//! CPUs a DPDK lcore may use, and the pinning DPDK's start-up leaves behind, undone.

/// The calling thread's CPU set; `None` where the system does not say.
#[cfg(target_os = "linux")]
pub(super) fn get() -> Option<libc::cpu_set_t> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the set and its size are valid for the call.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    (rc == 0).then_some(set)
}

/// Give the calling thread `set` (a failure leaves its affinity as it was). Only DPDK's
/// start-up needs it.
#[cfg(all(target_os = "linux", feature = "dpdk"))]
pub(super) fn set(set: &libc::cpu_set_t) {
    // SAFETY: the set and its size are valid for the call.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(set), set) };
}

/// The CPUs in `set`, ascending.
#[cfg(target_os = "linux")]
pub(super) fn cpus(set: &libc::cpu_set_t) -> impl Iterator<Item = usize> + '_ {
    // SAFETY: every index is below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize).filter(move |&i| unsafe { libc::CPU_ISSET(i, set) })
}

/// Elsewhere: nothing known (DPDK's own defaults apply).
#[cfg(not(target_os = "linux"))]
pub(super) fn get() -> Option<()> {
    None
}

#[cfg(not(target_os = "linux"))]
pub(super) fn cpus(_set: &()) -> impl Iterator<Item = usize> {
    std::iter::empty()
}
