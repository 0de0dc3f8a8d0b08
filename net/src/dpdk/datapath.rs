//! DPDK as a [`Datapath`] (cargo feature `dpdk`): Ethernet / IPv4 / UDP frames straight from
//! and to the NIC's rings, past the kernel.
//!
//! - **EAL** is set up once per process from the job file's `[dpdk]` section; the process owns
//!   every port the EAL arguments create (the switch one per worker with memif, a worker one).
//! - **Receive**: bursts from every port; each frame is parsed (a malformed or foreign frame is
//!   counted and dropped), its ECN codepoint read from the IPv4 header, and the port and
//!   Ethernet address it came from remembered for the replies.
//! - **Send**: headers and payload written in place into freshly allocated mbufs, one burst per
//!   run of datagrams for the same port, the ECN codepoint set in the IPv4 header.
//! - **Waiting** polls the rings: a 5 µs spin, then 200 µs yielding the core (a process
//!   sharing it may be the one to answer), then naps, longer and longer up to a millisecond, so
//!   an idle process does not hold a core on a shared machine.
//! - A worker's heartbeats leave from another thread: sends share the port's queue under a lock.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, CString};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dpdk_sys as sys;

use super::affinity;
use super::settings::{DpdkSettings, Role};
use crate::datapath::{
    Datagram, Datapath, DatapathCounters, Outgoing, RxBacklog, Sent, SideSender,
};
use crate::frame::{self, Mac, BROADCAST, HEADERS_V4};

/// Frames taken from a ring, or handed to one, per call.
const BURST: usize = 32;
/// Idle polls spin this long before the datapath starts to sleep.
const SPIN: Duration = Duration::from_micros(5);
/// Then yield the core this long before the naps begin.
const YIELD: Duration = Duration::from_micros(200);
/// The longest nap of an idle datapath.
const MAX_NAP: Duration = Duration::from_millis(1);
/// Data room of a packet buffer: DPDK's headroom, then a frame of up to 2 KiB.
const MBUF_DATA_ROOM: u16 = 2048 + HEADROOM;
/// DPDK's default headroom before the data (`RTE_PKTMBUF_HEADROOM`).
const HEADROOM: u16 = 128;
/// How often the NIC's drop counters are read.
const RING_DROPS_EVERY: Duration = Duration::from_millis(100);
/// How long a closing datapath waits for its peers to read its last frames.
const LINGER: Duration = Duration::from_millis(100);
/// How long a full send ring may hold up the queue before its datagrams are dropped.
const BLOCKED_GRACE: Duration = Duration::from_millis(2);

/// Whether this process has set up its EAL: that happens once, so there is one DPDK datapath
/// per process.
static EAL_STARTED: AtomicBool = AtomicBool::new(false);

fn error(message: String) -> io::Error {
    io::Error::other(message)
}

/// DPDK's text for an error number.
fn strerror(code: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local string.
    unsafe { CStr::from_ptr(sys::rte_strerror(code.abs())) }
        .to_string_lossy()
        .into_owned()
}

/// Whether this build links a real DPDK (the `dpdk-stdlib-sys` crate falls back to stubs that
/// do nothing where no DPDK was found at build time).
pub fn is_real() -> bool {
    sys::is_real_dpdk()
}

/// Set up the EAL with `args` (after the program name), once per process.
fn init_eal(args: &[String]) -> io::Result<()> {
    if !is_real() {
        return Err(error(
            "this build found no DPDK when it was compiled (install Debian's libdpdk-dev and \
             libclang-dev, then rebuild with --features dpdk)"
                .into(),
        ));
    }
    if EAL_STARTED.swap(true, Ordering::SeqCst) {
        return Err(error(
            "DPDK's EAL is already set up in this process: one DPDK datapath per process".into(),
        ));
    }
    let mut argv: Vec<CString> = std::iter::once("switchgnn".to_string())
        .chain(args.iter().cloned())
        .map(|a| CString::new(a).map_err(|e| error(format!("EAL argument: {e}"))))
        .collect::<io::Result<_>>()?;
    let mut ptrs: Vec<*mut libc::c_char> = argv.iter_mut().map(|a| a.as_ptr().cast_mut()).collect();
    // EAL pins the calling thread to its main lcore's CPUs, and every thread it starts later
    // (a trainer's, the heartbeat) would inherit that: give the thread its CPUs back.
    let cpus = affinity::get();
    // SAFETY: argv points at NUL-terminated strings that outlive the call; the EAL may
    // permute the pointer array, which is ours.
    let rc = unsafe { sys::rte_eal_init(ptrs.len() as i32, ptrs.as_mut_ptr()) };
    if let Some(cpus) = cpus {
        affinity::set(&cpus);
    }
    if rc < 0 {
        // SAFETY: reads the thread's DPDK error number.
        let code = unsafe { sys::rte_errno() };
        return Err(error(format!(
            "DPDK's EAL refused the arguments {args:?}: {}",
            strerror(code)
        )));
    }
    Ok(())
}

/// A raw DPDK pointer that may move between threads: the pool and ports are thread-safe for
/// the uses made of them here (a mempool's get and put, one sender at a time per queue).
#[derive(Debug, Clone, Copy)]
struct Pool(*mut sys::rte_mempool);
// SAFETY: see above.
unsafe impl Send for Pool {}

#[derive(Debug, Clone)]
struct PortInfo {
    id: u16,
    name: String,
    mac: Mac,
    /// The largest frame the port sends (its MTU plus the Ethernet header), at most what a
    /// packet buffer holds.
    max_frame: usize,
}

/// Where and how to reach a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    port: usize,
    mac: Mac,
}

/// The sending half: shared with side senders under a lock.
#[derive(Debug)]
struct Tx {
    pool: Pool,
    ports: Vec<PortInfo>,
    local: SocketAddrV4,
    routes: HashMap<SocketAddrV4, Route>,
    arp: BTreeMap<Ipv4Addr, Mac>,
    mbufs: Vec<*mut sys::rte_mbuf>,
    /// Per port, since when its send ring has been full.
    blocked_since: Vec<Option<Instant>>,
    /// Scratch: the destinations of the burst being sent.
    targets: Vec<(SocketAddrV4, Mac)>,
}
// SAFETY: the mbuf pointers are only scratch space, empty between calls.
unsafe impl Send for Tx {}

impl Tx {
    fn route(&self, to: SocketAddrV4) -> Route {
        if let Some(r) = self.routes.get(&to) {
            return *r;
        }
        let mac = self.arp.get(to.ip()).copied().unwrap_or(BROADCAST);
        Route { port: 0, mac }
    }

    /// Send the front of `queue`: a burst of datagrams for one port.
    fn send(&mut self, queue: &[Outgoing]) -> io::Result<Sent> {
        let mut to = std::mem::take(&mut self.targets);
        let sent = self.send_burst(queue, &mut to);
        self.targets = to;
        sent
    }

    /// [`Tx::send`] with `to` (empty) to list the burst's destinations in.
    fn send_burst(
        &mut self,
        queue: &[Outgoing],
        to: &mut Vec<(SocketAddrV4, Mac)>,
    ) -> io::Result<Sent> {
        to.clear();
        let mut port = None;
        for o in queue.iter().take(BURST) {
            let SocketAddr::V4(addr) = o.to else {
                break;
            };
            let route = self.route(addr);
            if HEADERS_V4 + o.bytes.len() > self.ports[route.port].max_frame {
                break;
            }
            if port.is_some_and(|p| p != route.port) {
                break;
            }
            port = Some(route.port);
            to.push((addr, route.mac));
        }
        if to.is_empty() {
            // An IPv6 peer, or a datagram too large for the port: this datapath cannot carry
            // it (no fragmentation; switchgnn datagrams are far smaller).
            return Ok(Sent::Failed(1));
        }
        let n = to.len();
        self.mbufs.resize(n, std::ptr::null_mut());
        // SAFETY: the pool is valid for the process's life; `mbufs` has room for `n`.
        if unsafe { sys::rte_pktmbuf_alloc_bulk(self.pool.0, self.mbufs.as_mut_ptr(), n as u32) }
            != 0
        {
            // No buffer now: the ones in flight come back as the NIC sends them.
            return Ok(Sent::Blocked);
        }
        let port_index = port.expect("a port");
        let port = &self.ports[port_index];
        for ((o, (addr, mac)), &m) in queue.iter().zip(to.iter()).zip(&self.mbufs) {
            let len = HEADERS_V4 + o.bytes.len();
            // SAFETY: a fresh mbuf holds `MBUF_DATA_ROOM - RTE_PKTMBUF_HEADROOM` bytes at
            // `buf_addr + data_off`, and `len` ≤ `max_frame` ≤ that (checked above).
            unsafe {
                let data = mbuf_data(m);
                let frame = std::slice::from_raw_parts_mut(data, len);
                frame::write_ipv4_headers(
                    frame,
                    (port.mac, *mac),
                    self.local,
                    *addr,
                    o.ecn,
                    o.bytes.len(),
                );
                frame[HEADERS_V4..].copy_from_slice(&o.bytes);
                sys::mbuf_set_data_len(m, len as u16);
                sys::mbuf_set_pkt_len(m, len as u32);
            }
        }
        // SAFETY: `mbufs[..n]` are ours; the ones the ring takes belong to the driver after.
        let sent = unsafe { sys::rte_eth_tx_burst(port.id, 0, self.mbufs.as_mut_ptr(), n as u16) };
        let sent = usize::from(sent);
        if sent < n {
            // SAFETY: the rest were not taken: give them back.
            unsafe {
                sys::rte_pktmbuf_free_bulk(self.mbufs[sent..].as_mut_ptr(), (n - sent) as u32)
            };
        }
        let index = port_index;
        Ok(match sent {
            0 if !link_up(port.id) => {
                // A peer whose link is down (a worker gone from its memif): what is queued for
                // it goes nowhere, as a datagram to a closed port would, and must not hold up
                // the datagrams behind it.
                Sent::Failed(n)
            }
            0 => {
                // The ring is full: a busy NIC catches up within microseconds, but a memif peer
                // that stopped reading (a worker computing) would hold up every other port's
                // datagrams behind it. Past a grace period its datagrams are dropped, as the
                // kernel drops datagrams for a full socket.
                let since = *self.blocked_since[index].get_or_insert_with(Instant::now);
                if since.elapsed() > BLOCKED_GRACE {
                    Sent::Failed(n)
                } else {
                    Sent::Blocked
                }
            }
            _ => {
                self.blocked_since[index] = None;
                Sent::Left(sent)
            }
        })
    }
}

/// Whether port `id`'s link is up now.
fn link_up(id: u16) -> bool {
    let mut link = sys::rte_eth_link::default();
    // SAFETY: a valid port and a struct to fill; the call does not wait.
    let rc = unsafe { sys::rte_eth_link_get_nowait(id, &mut link) };
    rc == 0 && link.link_status() != 0
}

/// Where a packet buffer's data starts.
///
/// # Safety
/// `m` must be a valid mbuf.
unsafe fn mbuf_data(m: *mut sys::rte_mbuf) -> *mut u8 {
    // SAFETY: the caller's promise; the data offset lies inside the buffer.
    unsafe {
        (*m).buf_addr
            .cast::<u8>()
            .add(usize::from(sys::mbuf_get_data_off(m)))
    }
}

fn lock(tx: &Mutex<Tx>) -> MutexGuard<'_, Tx> {
    tx.lock().unwrap_or_else(|e| e.into_inner())
}

/// DPDK ports of this process, as one datapath.
#[derive(Debug)]
pub struct DpdkDatapath {
    tx: Arc<Mutex<Tx>>,
    local: SocketAddrV4,
    ports: Vec<PortInfo>,
    /// Received mbufs not yet handed to the endpoint (a wait found them), and the next port
    /// to read.
    pending: Vec<(usize, *mut sys::rte_mbuf)>,
    burst: Vec<*mut sys::rte_mbuf>,
    /// Handled mbufs, freed together.
    done: Vec<*mut sys::rte_mbuf>,
    /// Where each peer's last frame came from (the sending half has a copy).
    known: HashMap<SocketAddrV4, Route>,
    next_port: usize,
    drained: bool,
    ring: u16,
    /// Frames the NIC dropped (full ring, no buffer) at the last reading, and when that was.
    ring_drops: u64,
    ring_drops_read: Option<Instant>,
    /// The EAL's file prefix is one this datapath made up (its runtime folder is ours).
    own_prefix: bool,
    counters: DatapathCounters,
}
// SAFETY: pending mbufs belong to this datapath alone.
unsafe impl Send for DpdkDatapath {}

static POOLS: AtomicU32 = AtomicU32::new(0);

impl DpdkDatapath {
    /// Set up the EAL for `role` of a job and open every port it created, answering at `local`.
    pub fn open(
        settings: &DpdkSettings,
        job: u16,
        world: u16,
        role: Role,
        local: SocketAddr,
    ) -> io::Result<DpdkDatapath> {
        let SocketAddr::V4(local) = local else {
            return Err(error(format!(
                "the DPDK datapath speaks IPv4; {local} is not an IPv4 address"
            )));
        };
        let arp = settings
            .arp_table()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let args = settings.eal_args(job, world, role);
        let devices = args
            .iter()
            .filter(|a| a.starts_with("--vdev") || *a == "-a")
            .count();
        if devices > sys::RTE_MAX_ETHPORTS as usize {
            return Err(error(format!(
                "{devices} DPDK devices, but this DPDK build has at most {} ports \
                 (RTE_MAX_ETHPORTS): a memif switch needs one per worker",
                sys::RTE_MAX_ETHPORTS
            )));
        }
        init_eal(&args)?;
        let name = CString::new(format!(
            "switchgnn-{}",
            POOLS.fetch_add(1, Ordering::Relaxed)
        ))
        .expect("no NUL");
        // SAFETY: plain FFI calls with valid arguments; failures are checked.
        let pool = unsafe {
            sys::rte_pktmbuf_pool_create(
                name.as_ptr(),
                settings.mbufs,
                256,
                0,
                MBUF_DATA_ROOM,
                sys::rte_socket_id() as i32,
            )
        };
        if pool.is_null() {
            // SAFETY: reads the thread's DPDK error number.
            let code = unsafe { sys::rte_errno() };
            return Err(error(format!(
                "cannot create a pool of {} packet buffers: {} (give the EAL more memory, -m)",
                settings.mbufs,
                strerror(code)
            )));
        }
        let mut ports = Vec::new();
        // SAFETY: iterating valid port ids as DPDK hands them out.
        let mut id = unsafe { sys::rte_eth_find_next(0) };
        while u32::from(id) < sys::RTE_MAX_ETHPORTS {
            ports.push(start_port(id, pool, settings.ring)?);
            // SAFETY: as above.
            id = unsafe { sys::rte_eth_find_next(id + 1) };
        }
        if ports.is_empty() {
            return Err(error(
                "DPDK found no port: give devices in the job file's [dpdk] section (memif, \
                 switch_devices / worker_devices) or PCI devices bound to a DPDK driver"
                    .into(),
            ));
        }
        tracing::info!(
            ports = ?ports.iter().map(|p| &p.name).collect::<Vec<_>>(),
            %local,
            "DPDK datapath up"
        );
        Ok(DpdkDatapath {
            tx: Arc::new(Mutex::new(Tx {
                pool: Pool(pool),
                ports: ports.clone(),
                local,
                routes: HashMap::new(),
                arp,
                mbufs: Vec::with_capacity(BURST),
                blocked_since: vec![None; ports.len()],
                targets: Vec::with_capacity(BURST),
            })),
            local,
            ports,
            pending: Vec::with_capacity(BURST),
            burst: vec![std::ptr::null_mut(); BURST],
            done: Vec::new(),
            known: HashMap::new(),
            next_port: 0,
            drained: true,
            ring: settings.ring,
            ring_drops: 0,
            ring_drops_read: None,
            own_prefix: settings.makes_own_prefix(),
            counters: DatapathCounters::default(),
        })
    }

    /// Read one burst from the next port that has frames into `pending`; how many.
    fn poll(&mut self) -> usize {
        for _ in 0..self.ports.len() {
            let p = self.next_port;
            self.next_port = (p + 1) % self.ports.len();
            // SAFETY: `burst` has room for BURST pointers; the port is started.
            let n = unsafe {
                sys::rte_eth_rx_burst(self.ports[p].id, 0, self.burst.as_mut_ptr(), BURST as u16)
            };
            if n > 0 {
                self.pending
                    .extend(self.burst[..usize::from(n)].iter().map(|&m| (p, m)));
                return usize::from(n);
            }
        }
        0
    }
}

/// Configure and start port `id` with one receive and one send queue.
fn start_port(id: u16, pool: *mut sys::rte_mempool, ring: u16) -> io::Result<PortInfo> {
    let mut raw_name = [0 as libc::c_char; 64];
    // SAFETY: the buffer is RTE_ETH_NAME_MAX_LEN (64) bytes.
    unsafe { sys::rte_eth_dev_get_name_by_port(id, raw_name.as_mut_ptr()) };
    // SAFETY: NUL-terminated by DPDK (or all zeros).
    let name = unsafe { CStr::from_ptr(raw_name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let check = |what: &str, rc: i32| {
        if rc < 0 {
            Err(error(format!(
                "DPDK port {id} ({name}): {what}: {}",
                strerror(rc)
            )))
        } else {
            Ok(())
        }
    };
    // SAFETY: plain FFI calls on a valid port id; every result is checked.
    unsafe {
        let conf: sys::rte_eth_conf = std::mem::zeroed();
        check("configure", sys::rte_eth_dev_configure(id, 1, 1, &conf))?;
        // -1 (the port's NUMA node is unknown) is SOCKET_ID_ANY as an unsigned value.
        let socket = sys::rte_eth_dev_socket_id(id) as u32;
        check(
            "receive queue",
            sys::rte_eth_rx_queue_setup(id, 0, ring, socket, std::ptr::null(), pool),
        )?;
        check(
            "send queue",
            sys::rte_eth_tx_queue_setup(id, 0, ring, socket, std::ptr::null()),
        )?;
        check("start", sys::rte_eth_dev_start(id))?;
        // Frames may carry made-up or broadcast destination addresses: take them all (a
        // driver without promiscuous mode still takes its own and broadcast ones).
        let _ = sys::rte_eth_promiscuous_enable(id);
        let mut mac = sys::rte_ether_addr::default();
        check("MAC address", sys::rte_eth_macaddr_get(id, &mut mac))?;
        let mut mtu = 0u16;
        let mtu = if sys::rte_eth_dev_get_mtu(id, &mut mtu) == 0 {
            usize::from(mtu)
        } else {
            1500
        };
        Ok(PortInfo {
            id,
            name,
            mac: mac.addr_bytes,
            max_frame: (mtu + 14).min(usize::from(MBUF_DATA_ROOM - HEADROOM)),
        })
    }
}

impl Datapath for DpdkDatapath {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::V4(self.local))
    }

    fn send(&mut self, queue: &[Outgoing]) -> io::Result<Sent> {
        lock(&self.tx).send(queue)
    }

    fn recv(&mut self, f: &mut dyn FnMut(Datagram<'_>)) -> io::Result<Option<usize>> {
        if self.pending.is_empty() && self.poll() == 0 {
            self.drained = true;
            return Ok(None);
        }
        let mut taken = 0;
        let mut learned = false;
        for &(port, m) in &self.pending {
            // SAFETY: a received mbuf: its data is `data_len` bytes at `buf_addr + data_off`.
            let bytes = unsafe {
                let len = sys::mbuf_get_data_len(m);
                if u32::from(len) != sys::mbuf_get_pkt_len(m) {
                    // A chained buffer: never one of ours (frames are < 2 KiB).
                    self.counters.malformed += 1;
                    continue;
                }
                std::slice::from_raw_parts(mbuf_data(m), usize::from(len))
            };
            match frame::parse(bytes) {
                Ok(r) if r.to == self.local => {
                    let route = Route {
                        port,
                        mac: r.src_mac,
                    };
                    if self.known.get(&r.from) != Some(&route) {
                        self.known.insert(r.from, route);
                        learned = true;
                    }
                    taken += 1;
                    f(Datagram {
                        from: SocketAddr::V4(r.from),
                        ecn: r.ecn,
                        bytes: r.payload,
                    });
                }
                Ok(_) | Err(frame::FrameError::NotUdp) => self.counters.foreign += 1,
                Err(e) => {
                    tracing::debug!(error = %e, "frame dropped");
                    self.counters.malformed += 1;
                }
            }
        }
        self.done.clear();
        self.done.extend(self.pending.drain(..).map(|(_, m)| m));
        // SAFETY: every pending mbuf was handled and is freed once.
        unsafe { sys::rte_pktmbuf_free_bulk(self.done.as_mut_ptr(), self.done.len() as u32) };
        if learned {
            // Peers move rarely (a restarted worker): the sending half copies the table then.
            lock(&self.tx).routes.clone_from(&self.known);
        }
        self.drained = false;
        Ok(Some(taken))
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if !self.pending.is_empty() || !self.drained {
            return Ok(());
        }
        let start = Instant::now();
        let mut nap = Duration::from_micros(10);
        loop {
            if self.poll() > 0 {
                self.drained = false;
                return Ok(());
            }
            let waited = start.elapsed();
            let left = timeout.map(|t| t.saturating_sub(waited));
            if left == Some(Duration::ZERO) {
                return Ok(());
            }
            if waited < SPIN {
                std::hint::spin_loop();
                continue;
            }
            if waited < YIELD {
                // Let a process sharing the core run (its reply may be what we wait for).
                std::thread::yield_now();
                continue;
            }
            std::thread::sleep(left.map_or(nap, |l| l.min(nap)));
            nap = (nap * 2).min(MAX_NAP);
        }
    }

    fn is_drained(&self) -> bool {
        self.drained && self.pending.is_empty()
    }

    /// What every port's frames hold: its MTU, at most a packet buffer's 2 KiB (one segment
    /// per frame: jumbo frames would need buffers four times as large, or chains).
    fn max_datagram(&self) -> usize {
        self.ports
            .iter()
            .map(|p| p.max_frame - HEADERS_V4)
            .min()
            .unwrap_or(0)
    }

    /// The receive ring's depth, as far as it matters: frames are read ahead (kept for the
    /// next receive) until an eighth of the ring is known to wait, so a deep ring is told from
    /// a shallow one without a driver call that DPDK only has inline.
    fn backlog(&mut self) -> Option<RxBacklog> {
        let enough = usize::from(self.ring) / 8 + 1;
        while self.pending.len() < enough && self.poll() > 0 {}
        if !self.pending.is_empty() {
            self.drained = false;
        }
        // The NIC's counters cost a driver call (a sysfs read on some): every few rounds.
        if self
            .ring_drops_read
            .is_none_or(|t| t.elapsed() >= RING_DROPS_EVERY)
        {
            self.ring_drops_read = Some(Instant::now());
            self.ring_drops = 0;
            for p in &self.ports {
                let mut stats = sys::rte_eth_stats::default();
                // SAFETY: a started port and a stats struct to fill.
                if unsafe { sys::rte_eth_stats_get(p.id, &mut stats) } == 0 {
                    self.ring_drops += stats.imissed + stats.rx_nombuf;
                }
            }
        }
        let frame = u64::from(MBUF_DATA_ROOM);
        Some(RxBacklog {
            queued_bytes: self.pending.len() as u64 * frame,
            buffer_bytes: u64::from(self.ring) * frame,
            drops: self.ring_drops,
        })
    }

    fn counters(&mut self) -> DatapathCounters {
        self.counters
    }

    fn side_sender(&self) -> io::Result<Box<dyn SideSender>> {
        Ok(Box::new(DpdkSideSender {
            tx: self.tx.clone(),
            queue: Vec::new(),
        }))
    }
}

impl Drop for DpdkDatapath {
    /// Give the buffers back, let the peers read the last frames, and remove the EAL's runtime
    /// folder when its prefix is ours (a prefix per process would otherwise leave one folder
    /// per run behind).
    fn drop(&mut self) {
        self.done.clear();
        self.done.extend(self.pending.drain(..).map(|(_, m)| m));
        // SAFETY: these mbufs were received and never freed.
        unsafe { sys::rte_pktmbuf_free_bulk(self.done.as_mut_ptr(), self.done.len() as u32) };
        // The last frames (a switch's aborts, a worker's goodbye) may still sit in the rings,
        // and a memif peer drops what is there once this process is gone: a moment to read them.
        std::thread::sleep(LINGER);
        if Arc::strong_count(&self.tx) > 1 || !self.own_prefix {
            return;
        }
        // The EAL itself is left to the process's exit: tearing it down (ports closed,
        // rte_eal_cleanup) crashed now and then with memif's threads still running. Its files
        // can go: the folder's name is unique to this process.
        // SAFETY: a static string of the running EAL.
        let dir = unsafe { CStr::from_ptr(sys::rte_eal_get_runtime_dir()) }
            .to_string_lossy()
            .into_owned();
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Sends through the datapath's queue from another thread, one datagram at a time.
struct DpdkSideSender {
    tx: Arc<Mutex<Tx>>,
    queue: Vec<Outgoing>,
}

impl SideSender for DpdkSideSender {
    fn send_to(&mut self, bytes: &[u8], to: SocketAddr) -> io::Result<()> {
        self.queue.clear();
        self.queue.push(Outgoing {
            to,
            ecn: None,
            bytes: bytes.to_vec(),
        });
        match lock(&self.tx).send(&self.queue)? {
            Sent::Left(_) => Ok(()),
            Sent::Failed(_) | Sent::Blocked => Err(io::Error::from(io::ErrorKind::WouldBlock)),
        }
    }
}
