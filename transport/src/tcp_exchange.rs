//! The host exchange over TCP: the kernel's own transport, as gloo's all-to-all runs it, for a
//! baseline beside the exchanges through the switch.
//!
//! Each worker sends every one of its boundary rows once to every remote worker that needs it
//! — the copies the host exchange's engine sends ([`HostExchange::pairs`]), in its order — and
//! sums what arrives into the same fixed-point output ([`ExchangeOutput`]): for each of its
//! vertices with remote neighbours, the integer sum of their encoded rows, as the plan's
//! tables list them. Integer sums do not depend on the order, so the output is bit-identical
//! to the host engine's.
//!
//! **One connection per unordered pair of workers**, the lower rank connecting to the higher,
//! both directions on it: TCP is full duplex, gloo's pairs hold one socket per peer, and a
//! second connection per pair would only double the handshakes and the kernel's state. The
//! connections are made once per job and carry every exchange after.
//!
//! **Meeting.** Each worker listens on a free port of the address it reaches the collective
//! service from (the service beside the switch), and the workers learn each other's addresses
//! in one sum all-reduce of that service ([`addresses_via`]); a job of threads can hand the
//! addresses out itself ([`Listening::connect`]). Connecting, the lower rank proves it belongs
//! to the job (job, rank, world, the plans' checksum, and an HMAC of the accepting side's nonce
//! under the job's secret if it has one), as the collective's hello does.
//!
//! **Frames** (little-endian), each prefixed by its length (u32, the bytes after it):
//! - rows: kind 1, exchange sequence u32, width u32, count u32, then `count` times the vertex
//!   (u32) and its `width` lanes (i32);
//! - end: kind 2, exchange sequence u32, rows sent in the exchange u32.
//!
//! A worker writes to its peers from one thread, in large buffered writes (frames of about
//! 64 KiB through a 256 KiB buffer), paced at the link rate as the UDP kinds' senders are,
//! while one thread per peer reads: every reader drains its connection whatever the writers
//! do, so two workers writing much to each other cannot deadlock. `TCP_NODELAY` is on: the
//! buffer already coalesces, and Nagle's algorithm could only hold the last partial segment of
//! an exchange back until a delayed acknowledgement. Anything a peer sends that is not what the
//! plan says it sends (a short frame, an unknown or repeated vertex, another width or
//! exchange, a missing row) is an error naming the peer.

use std::collections::HashSet;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::control::Secret;
use switchgnn_dataplane::engine::{
    EngineStats, ExchangeOutput, HostExchange, LocalFeatures, SendStrategy,
};
use switchgnn_dataplane::fixed::Scale;
use switchgnn_dataplane::plan::{ExchangePlan, Mode};
use thiserror::Error;

use crate::collective::{CollectiveClient, CollectiveError, ReduceOp};

const MAGIC: [u8; 4] = *b"SGTX";
const VERSION: u16 = 1;
/// What a hello's proof signs, before the nonce and the hello's fields.
const PROOF_CONTEXT: &[u8] = b"switchgnn tcp exchange proof v1\0";
const GREETING_LEN: usize = 22;
const HELLO_LEN: usize = 52;
/// How long either side of a handshake waits for the other's next message.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(5);
const ROWS: u8 = 1;
const END: u8 = 2;
const ROWS_HEADER: usize = 13;
const END_LEN: usize = 9;
/// Rows go in frames of about this many bytes (one row at least).
const FRAME_TARGET: usize = 64 * 1024;
/// The largest frame a reader takes (a guard against a corrupt length).
const MAX_FRAME: usize = 16 << 20;
const BUFFER: usize = 256 * 1024;
/// Values per worker in the rendezvous all-reduce: the address family (4 or 6), 16 address
/// bytes, and the port's two bytes.
const ADDRESS_SLOTS: usize = 19;

#[derive(Debug, Error)]
pub enum TcpExchangeError {
    #[error("tcp exchange: {what}: {source}")]
    Io { what: String, source: io::Error },
    /// A peer's connection failed.
    #[error("tcp exchange: worker {peer}: {source}")]
    Peer { peer: u16, source: io::Error },
    /// A peer sent something else than the plan says it sends.
    #[error("tcp exchange: worker {peer} sent {what}")]
    Protocol { peer: u16, what: String },
    /// A peer refused this worker's hello, or the workers could not all meet.
    #[error("tcp exchange: {0}")]
    Rendezvous(String),
    #[error("tcp exchange: the rendezvous through the collective service: {0}")]
    Collective(#[from] CollectiveError),
    /// The plan or the rows do not fit the exchange.
    #[error("tcp exchange: {0}")]
    Plan(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> TcpExchangeError {
    let what = what.into();
    move |source| TcpExchangeError::Io { what, source }
}

/// Traffic over a worker's connections, summed over the job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpTotals {
    /// Connections of this worker (one per peer).
    pub connections: u64,
    /// Stream bytes written and read (frames, not TCP/IP headers), handshakes included.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Segments the kernel sent and received on them, pure acknowledgements included
    /// (`TCP_INFO`; 0 where the kernel does not say).
    pub segments_sent: u64,
    pub segments_received: u64,
}

/// Who a worker is to its peers, and how it drives its connections.
#[derive(Debug, Clone)]
pub struct MeshConfig {
    pub job: u16,
    pub rank: u16,
    pub world: u16,
    /// The exchange plans' checksum: workers with other plans refuse each other.
    pub checksum: u64,
    /// The job's admission secret, if it has one.
    pub secret: Option<Secret>,
    /// Every peer must have connected within this.
    pub join: Duration,
    /// A peer silent this long while an exchange waits for it is given up (a dead process
    /// closes its connections at once; this catches a hung one).
    pub idle: Duration,
    /// Sending rate cap (bytes/s) over all peers, as the UDP kinds' senders have; `None`:
    /// as fast as the kernel takes the bytes.
    pub line_rate: Option<f64>,
}

/// A worker's listening socket, before it has met its peers.
#[derive(Debug)]
pub struct Listening {
    listener: TcpListener,
    cfg: MeshConfig,
}

impl Listening {
    /// Listen on a free port of `ip`.
    pub fn bind(ip: IpAddr, cfg: MeshConfig) -> Result<Listening, TcpExchangeError> {
        if cfg.rank >= cfg.world {
            return Err(TcpExchangeError::Plan(format!(
                "rank {} is not a worker of a job of {}",
                cfg.rank, cfg.world
            )));
        }
        let listener = TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(io_err(format!("cannot listen on {ip}")))?;
        Ok(Listening { listener, cfg })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, TcpExchangeError> {
        self.listener
            .local_addr()
            .map_err(io_err("the listening socket"))
    }

    /// Meet every peer: `addrs` holds each rank's listening address (this worker's own
    /// included). Connects to the higher ranks while accepting the lower ones.
    pub fn connect(self, addrs: &[SocketAddr]) -> Result<TcpMesh, TcpExchangeError> {
        let cfg = &self.cfg;
        if addrs.len() != usize::from(cfg.world) {
            return Err(TcpExchangeError::Rendezvous(format!(
                "{} addresses for {} workers",
                addrs.len(),
                cfg.world
            )));
        }
        let deadline = Instant::now() + cfg.join;
        let (lower, higher) = std::thread::scope(|s| {
            let lower = std::thread::Builder::new()
                .name("tcp-accept".into())
                .spawn_scoped(s, || self.accept_lower(deadline))
                .map_err(io_err("cannot start the accepting thread"));
            let higher = self.connect_higher(addrs, deadline);
            let lower = lower.and_then(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(TcpExchangeError::Rendezvous(
                        "the accepting thread panicked".into(),
                    ))
                })
            });
            (lower, higher)
        });
        let mut streams = lower?;
        for (peer, stream) in higher?.into_iter().enumerate() {
            if let Some(stream) = stream {
                streams[peer] = Some(stream);
            }
        }
        TcpMesh::new(self.cfg, streams)
    }

    /// Accept ranks `0..rank`, each once, until `deadline`; a connection that fails its
    /// handshake is dropped and the others awaited.
    fn accept_lower(&self, deadline: Instant) -> Result<Vec<Option<TcpStream>>, TcpExchangeError> {
        let cfg = &self.cfg;
        let mut streams: Vec<Option<TcpStream>> = (0..cfg.world).map(|_| None).collect();
        self.listener
            .set_nonblocking(true)
            .map_err(io_err("the listening socket"))?;
        let mut left = usize::from(cfg.rank);
        while left > 0 {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        let missing: Vec<usize> = (0..usize::from(cfg.rank))
                            .filter(|&r| streams[r].is_none())
                            .collect();
                        return Err(TcpExchangeError::Rendezvous(format!(
                            "workers {missing:?} did not connect to worker {} within {:?}",
                            cfg.rank, cfg.join
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                Err(e) => return Err(io_err("accepting a peer")(e)),
            };
            match accept_hello(stream, cfg, &streams) {
                Ok((peer, stream)) => {
                    streams[usize::from(peer)] = Some(stream);
                    left -= 1;
                }
                Err(why) => tracing::warn!(rank = cfg.rank, "tcp exchange: refused a peer: {why}"),
            }
        }
        Ok(streams)
    }

    /// Connect to ranks `rank + 1..world` (retrying until `deadline`: a peer may not listen
    /// yet) and introduce this worker.
    fn connect_higher(
        &self,
        addrs: &[SocketAddr],
        deadline: Instant,
    ) -> Result<Vec<Option<TcpStream>>, TcpExchangeError> {
        let cfg = &self.cfg;
        let mut streams: Vec<Option<TcpStream>> = (0..cfg.world).map(|_| None).collect();
        for peer in cfg.rank + 1..cfg.world {
            let addr = addrs[usize::from(peer)];
            let stream = loop {
                match TcpStream::connect_timeout(&addr, HANDSHAKE_WAIT) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() > deadline => {
                        return Err(TcpExchangeError::Rendezvous(format!(
                            "cannot connect to worker {peer} at {addr} within {:?}: {e}",
                            cfg.join
                        )))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            };
            streams[usize::from(peer)] = Some(send_hello(stream, cfg, peer)?);
        }
        Ok(streams)
    }
}

/// The lower rank's side of a handshake with `peer`: read its greeting, send the hello, read
/// the verdict.
fn send_hello(
    mut stream: TcpStream,
    cfg: &MeshConfig,
    peer: u16,
) -> Result<TcpStream, TcpExchangeError> {
    let failed = |source| TcpExchangeError::Peer { peer, source };
    stream
        .set_read_timeout(Some(HANDSHAKE_WAIT))
        .map_err(failed)?;
    let mut greeting = [0u8; GREETING_LEN];
    stream.read_exact(&mut greeting).map_err(failed)?;
    let version = u16::from_le_bytes([greeting[4], greeting[5]]);
    if greeting[..4] != MAGIC || version != VERSION {
        return Err(TcpExchangeError::Protocol {
            peer,
            what: format!(
                "a greeting of another protocol (version {version}; this worker speaks {VERSION})"
            ),
        });
    }
    let nonce = &greeting[6..];
    let mut hello = Vec::with_capacity(HELLO_LEN);
    hello.extend_from_slice(&MAGIC);
    for w in [VERSION, cfg.job, cfg.rank, cfg.world] {
        hello.extend_from_slice(&w.to_le_bytes());
    }
    hello.extend_from_slice(&cfg.checksum.to_le_bytes());
    let parts = proof_parts(nonce, cfg, cfg.rank, peer);
    let proof = cfg
        .secret
        .as_ref()
        .map_or([0; 32], |s| s.sign(PROOF_CONTEXT, &[&parts]));
    hello.extend_from_slice(&proof);
    stream.write_all(&hello).map_err(failed)?;
    let mut status = [0u8; 1];
    stream.read_exact(&mut status).map_err(failed)?;
    if status[0] != 0 {
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).map_err(failed)?;
        let len = (u32::from_le_bytes(len) as usize).min(1 << 16);
        let mut text = vec![0u8; len];
        stream.read_exact(&mut text).map_err(failed)?;
        return Err(TcpExchangeError::Rendezvous(format!(
            "worker {peer} refused worker {}: {}",
            cfg.rank,
            String::from_utf8_lossy(&text)
        )));
    }
    Ok(stream)
}

/// The higher rank's side: greet, read the hello, check it; the peer's rank, or why not.
fn accept_hello(
    mut stream: TcpStream,
    cfg: &MeshConfig,
    have: &[Option<TcpStream>],
) -> Result<(u16, TcpStream), String> {
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(HANDSHAKE_WAIT)))
        .map_err(|e| e.to_string())?;
    let nonce: [u8; 16] = rand::random();
    let mut greeting = MAGIC.to_vec();
    greeting.extend_from_slice(&VERSION.to_le_bytes());
    greeting.extend_from_slice(&nonce);
    stream.write_all(&greeting).map_err(|e| e.to_string())?;
    let mut b = [0u8; HELLO_LEN];
    stream
        .read_exact(&mut b)
        .map_err(|e| format!("no hello: {e}"))?;
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let (version, job, peer, world) = (u16_at(4), u16_at(6), u16_at(8), u16_at(10));
    let checksum = u64::from_le_bytes(b[12..20].try_into().expect("8 bytes"));
    let refusal = if b[..4] != MAGIC || version != VERSION {
        Some(format!(
            "another protocol (version {version}; this worker speaks {VERSION})"
        ))
    } else if job != cfg.job || world != cfg.world {
        Some(format!(
            "job {job} of {world} workers, but this worker is in job {} of {}",
            cfg.job, cfg.world
        ))
    } else if peer >= cfg.rank {
        Some(format!(
            "rank {peer}: only lower ranks connect to worker {}",
            cfg.rank
        ))
    } else if have[usize::from(peer)].is_some() {
        Some(format!("rank {peer} is already connected"))
    } else if checksum != cfg.checksum {
        Some(format!(
            "worker {peer} runs other exchange plans (checksum {checksum:#018x}, this worker's \
             {:#018x})",
            cfg.checksum
        ))
    } else if cfg.secret.as_ref().is_some_and(|s| {
        let parts = proof_parts(&nonce, cfg, peer, cfg.rank);
        !s.check(PROOF_CONTEXT, &[&parts], &b[20..HELLO_LEN])
    }) {
        Some(format!(
            "worker {peer}'s admission proof does not verify (give every worker the job's \
             `secret_file`)"
        ))
    } else {
        None
    };
    match refusal {
        Some(reason) => {
            let _ = crate::collective::send_error(&mut stream, &reason);
            Err(reason)
        }
        None => {
            stream.write_all(&[0]).map_err(|e| e.to_string())?;
            Ok((peer, stream))
        }
    }
}

/// What a hello's proof covers: the acceptor's nonce, the job, both ranks, the plans.
fn proof_parts(nonce: &[u8], cfg: &MeshConfig, from: u16, to: u16) -> Vec<u8> {
    let mut parts = nonce.to_vec();
    for w in [cfg.job, from, to, cfg.world] {
        parts.extend_from_slice(&w.to_le_bytes());
    }
    parts.extend_from_slice(&cfg.checksum.to_le_bytes());
    parts
}

/// Every worker's listening address, learnt in one sum all-reduce of the collective service:
/// each worker fills its own 19 slots (family, address bytes, port bytes) and leaves the
/// others zero. Every slot then has one nonzero term, a small integer, which the service's
/// sum (in `f64`, rounded to `f32` once) carries exactly.
fn addresses_via(
    collective: &mut CollectiveClient,
    rank: u16,
    world: u16,
    mine: SocketAddr,
) -> Result<Vec<SocketAddr>, TcpExchangeError> {
    let mut values = vec![0f32; usize::from(world) * ADDRESS_SLOTS];
    let slots = &mut values[usize::from(rank) * ADDRESS_SLOTS..][..ADDRESS_SLOTS];
    let (family, bytes) = match mine.ip() {
        IpAddr::V4(ip) => (4.0, ip.octets().to_vec()),
        IpAddr::V6(ip) => (6.0, ip.octets().to_vec()),
    };
    slots[0] = family;
    for (s, b) in slots[1..17].iter_mut().zip(&bytes) {
        *s = f32::from(*b);
    }
    let [hi, lo] = mine.port().to_be_bytes();
    slots[17] = f32::from(hi);
    slots[18] = f32::from(lo);
    collective.all_reduce(ReduceOp::Sum, &mut values)?;
    values
        .chunks_exact(ADDRESS_SLOTS)
        .enumerate()
        .map(|(r, s)| {
            let byte = |x: f32| {
                (x.fract() == 0.0 && (0.0..=255.0).contains(&x))
                    .then_some(x as u8)
                    .ok_or_else(|| {
                        TcpExchangeError::Rendezvous(format!("worker {r} published no address"))
                    })
            };
            let mut b = [0u8; 16];
            for (o, &x) in b.iter_mut().zip(&s[1..17]) {
                *o = byte(x)?;
            }
            let port = u16::from_be_bytes([byte(s[17])?, byte(s[18])?]);
            let ip = match byte(s[0])? {
                4 => IpAddr::from([b[0], b[1], b[2], b[3]]),
                6 => IpAddr::from(b),
                _ => {
                    return Err(TcpExchangeError::Rendezvous(format!(
                        "worker {r} published no address"
                    )))
                }
            };
            Ok(SocketAddr::new(ip, port))
        })
        .collect()
}

/// One worker's side of one layer's host exchange, from its plan: whom it sends which rows,
/// and what it expects from whom and adds where. Built once per layer.
#[derive(Debug, Clone)]
pub struct TcpRoutes {
    rank: u16,
    width: usize,
    /// The output's vertices: this worker's vertices with remote neighbours, ascending.
    receivers: Vec<u32>,
    /// This worker's vertices that any peer needs, ascending (each encoded once).
    sent: Vec<u32>,
    /// Per peer: indices into `sent`, in the host engine's send order.
    to: Vec<Vec<u32>>,
    /// Per peer: the vertices it sends here, ascending.
    from: Vec<Vec<u32>>,
    /// Per peer, per vertex of `from`: the output rows it adds into,
    /// `into_rows[p][into_start[p][i]..into_start[p][i + 1]]`.
    into_start: Vec<Vec<u32>>,
    into_rows: Vec<Vec<u32>>,
}

impl TcpRoutes {
    /// Worker `rank`'s routes for a host-exchange `plan` (the whole plan or the worker's view
    /// of it).
    pub fn new(plan: &ExchangePlan, rank: u16) -> Result<TcpRoutes, TcpExchangeError> {
        if plan.mode != Mode::Host {
            return Err(TcpExchangeError::Plan(format!(
                "a {} plan: the TCP exchange carries the host exchange's copies",
                plan.mode.name()
            )));
        }
        if rank >= plan.workers {
            return Err(TcpExchangeError::Plan(format!(
                "rank {rank} is not a worker of a plan for {}",
                plan.workers
            )));
        }
        let world = usize::from(plan.workers);
        let owner = |v: u32| -> Result<u16, TcpExchangeError> {
            plan.owner.get(v as usize).copied().ok_or_else(|| {
                TcpExchangeError::Plan(format!("vertex {v} has no owner in the plan"))
            })
        };
        // What to send: the host engine's copies, each (vertex, peer) once over the blocks.
        let mut to_vertices: Vec<Vec<u32>> = vec![Vec::new(); world];
        let mut seen: HashSet<(u16, u32)> = HashSet::new();
        for b in 0..plan.blocks.len() {
            for (u, s) in HostExchange::pairs(plan, rank, b as u16) {
                let peer = owner(s)?;
                if peer != rank && seen.insert((peer, u)) {
                    to_vertices[usize::from(peer)].push(u);
                }
            }
        }
        let mut sent: Vec<u32> = to_vertices.iter().flatten().copied().collect();
        sent.sort_unstable();
        sent.dedup();
        let to = to_vertices
            .iter()
            .map(|vs| {
                vs.iter()
                    .map(|v| sent.binary_search(v).expect("collected above") as u32)
                    .collect()
            })
            .collect();
        // What arrives: for each of this worker's destination rows, its remote sources.
        let receivers = plan.receivers(rank);
        let mut incoming: Vec<(u16, u32, u32)> = Vec::new();
        for b in &plan.blocks {
            let t = &b.table;
            for (row, (&v, &w)) in t.vertices.iter().zip(&t.workers).enumerate() {
                if w != u32::from(rank) {
                    continue;
                }
                let out = receivers.binary_search(&v).expect("a receiver of the plan") as u32;
                for s in b.sources(row) {
                    let peer = owner(s)?;
                    if peer == rank {
                        return Err(TcpExchangeError::Plan(format!(
                            "the plan lists vertex {s} as a remote source of vertex {v}, but \
                             both are worker {rank}'s"
                        )));
                    }
                    incoming.push((peer, s, out));
                }
            }
        }
        incoming.sort_unstable();
        let mut from: Vec<Vec<u32>> = vec![Vec::new(); world];
        let mut into_start: Vec<Vec<u32>> = vec![vec![0]; world];
        let mut into_rows: Vec<Vec<u32>> = vec![Vec::new(); world];
        for (i, &(peer, s, out)) in incoming.iter().enumerate() {
            let p = usize::from(peer);
            into_rows[p].push(out);
            let last = incoming
                .get(i + 1)
                .is_none_or(|&(q, t, _)| (q, t) != (peer, s));
            if last {
                from[p].push(s);
                into_start[p].push(into_rows[p].len() as u32);
            }
        }
        Ok(TcpRoutes {
            rank,
            width: plan.width,
            receivers,
            sent,
            to,
            from,
            into_start,
            into_rows,
        })
    }

    /// Copies this worker sends in one exchange (a row to a peer each).
    pub fn copies_sent(&self) -> usize {
        self.to.iter().map(Vec::len).sum()
    }

    /// Copies it receives.
    fn copies_received(&self) -> usize {
        self.from.iter().map(Vec::len).sum()
    }
}

/// A worker's connections to every peer, made once per job.
#[derive(Debug)]
pub struct TcpMesh {
    cfg: MeshConfig,
    /// Per rank (`None` at this worker's own): the reading half of the connection, and a
    /// handle on it to write with.
    readers: Vec<Option<BufReader<TcpStream>>>,
    writers: Vec<Option<BufWriter<TcpStream>>>,
    /// Each reader's frame buffer, kept from one exchange to the next.
    scratch: Vec<Vec<u8>>,
    totals: TcpTotals,
    /// The latest exchange's time, from when every peer had begun it to its end.
    last_seconds: f64,
}

impl TcpMesh {
    /// Listen, publish the address through `collective` (the job's service, which every
    /// worker has joined) and meet every peer.
    pub fn join(
        collective: &mut CollectiveClient,
        cfg: MeshConfig,
    ) -> Result<TcpMesh, TcpExchangeError> {
        // The address this host reaches the switch's host from: what the peers can reach too.
        let ip = collective
            .local_addr()
            .map_err(io_err("the collective connection"))?
            .ip();
        let (rank, world) = (cfg.rank, cfg.world);
        let listening = Listening::bind(ip, cfg)?;
        let addrs = addresses_via(collective, rank, world, listening.local_addr()?)?;
        listening.connect(&addrs)
    }

    fn new(cfg: MeshConfig, streams: Vec<Option<TcpStream>>) -> Result<TcpMesh, TcpExchangeError> {
        let mut readers = Vec::with_capacity(streams.len());
        let mut writers = Vec::with_capacity(streams.len());
        for (peer, stream) in streams.into_iter().enumerate() {
            let Some(stream) = stream else {
                if peer != usize::from(cfg.rank) {
                    return Err(TcpExchangeError::Rendezvous(format!(
                        "no connection to worker {peer}"
                    )));
                }
                readers.push(None);
                writers.push(None);
                continue;
            };
            let failed = |source| TcpExchangeError::Peer {
                peer: peer as u16,
                source,
            };
            stream.set_nodelay(true).map_err(failed)?;
            stream.set_read_timeout(Some(cfg.idle)).map_err(failed)?;
            stream.set_write_timeout(Some(cfg.idle)).map_err(failed)?;
            let writer = stream.try_clone().map_err(failed)?;
            readers.push(Some(BufReader::with_capacity(BUFFER, stream)));
            writers.push(Some(BufWriter::with_capacity(BUFFER, writer)));
        }
        let connections = u64::from(cfg.world) - 1;
        let handshakes = (u64::from(cfg.rank), connections - u64::from(cfg.rank));
        Ok(TcpMesh {
            scratch: vec![Vec::new(); usize::from(cfg.world)],
            totals: TcpTotals {
                connections,
                // Accepted: greeting and verdict out, hello in; connected: the reverse.
                bytes_sent: handshakes.0 * (GREETING_LEN as u64 + 1)
                    + handshakes.1 * HELLO_LEN as u64,
                bytes_received: handshakes.0 * HELLO_LEN as u64
                    + handshakes.1 * (GREETING_LEN as u64 + 1),
                ..TcpTotals::default()
            },
            readers,
            writers,
            cfg,
            last_seconds: 0.0,
        })
    }

    pub fn rank(&self) -> u16 {
        self.cfg.rank
    }

    /// Traffic over the job so far.
    pub fn totals(&self) -> TcpTotals {
        self.totals
    }

    /// The latest exchange's time in seconds: from the moment every peer had begun it (this
    /// worker's own start, or the first bytes of the latest peer to begin, whichever came
    /// last) to its end. The UDP kinds' time runs from the switch's go, which leaves once
    /// every worker has joined: neither counts the wait for a slower peer to reach the
    /// exchange.
    pub fn last_seconds(&self) -> f64 {
        self.last_seconds
    }

    /// One exchange of `routes`' layer, numbered `seq` (every worker runs the same sequence):
    /// send `local`'s rows (encoded at `scale`) to the peers that need them, and sum what
    /// comes back. The output and the exchange's counters: bytes are stream bytes, packets
    /// the kernel's segments.
    pub fn exchange(
        &mut self,
        routes: &TcpRoutes,
        seq: u32,
        scale: &Scale,
        local: LocalFeatures<'_>,
    ) -> Result<(ExchangeOutput, EngineStats), TcpExchangeError> {
        let (rank, width) = (self.cfg.rank, routes.width);
        if routes.rank != rank || routes.to.len() != self.readers.len() {
            return Err(TcpExchangeError::Plan(format!(
                "routes of worker {} in a plan of {} workers, for worker {rank} of {}",
                routes.rank,
                routes.to.len(),
                self.readers.len()
            )));
        }
        if local.width != width || local.values.len() != local.vertices.len() * width {
            return Err(TcpExchangeError::Plan(format!(
                "rows of width {} ({} values for {} vertices), the layer exchanges width {width}",
                local.width,
                local.values.len(),
                local.vertices.len()
            )));
        }
        let mut stats = EngineStats::default();
        // Each row sent laid out once as it goes on the wire (vertex, lanes), whatever the
        // number of peers it goes to.
        let row_bytes = 4 + 4 * width;
        let mut records = vec![0u8; routes.sent.len() * row_bytes];
        let mut lanes = vec![0i32; width];
        for (&v, record) in routes.sent.iter().zip(records.chunks_exact_mut(row_bytes)) {
            let i = local.vertices.binary_search(&v).map_err(|_| {
                TcpExchangeError::Plan(format!("no row for vertex {v}, which peers need"))
            })?;
            stats.saturated +=
                scale.encode_row(&local.values[i * width..(i + 1) * width], &mut lanes) as u64;
            record[..4].copy_from_slice(&v.to_le_bytes());
            for (b, q) in record[4..].chunks_exact_mut(4).zip(&lanes) {
                b.copy_from_slice(&q.to_le_bytes());
            }
        }
        let segments_before = self.segments();
        let line_rate = self.cfg.line_rate;
        let idle = self.cfg.idle;
        let (readers, writers, scratch) = (&mut self.readers, &mut self.writers, &mut self.scratch);
        let began = Instant::now();
        let (sent, received) = std::thread::scope(|s| {
            let threads: Vec<_> = readers
                .iter_mut()
                .zip(scratch.iter_mut())
                .enumerate()
                .filter_map(|(p, (r, buf))| r.as_mut().map(|r| (p as u16, r, buf)))
                .map(|(peer, reader, buf)| {
                    let want = Incoming {
                        peer,
                        seq,
                        width,
                        from: &routes.from[usize::from(peer)],
                        idle,
                    };
                    let thread = std::thread::Builder::new()
                        .name(format!("tcp-read-{peer}"))
                        .spawn_scoped(s, move || {
                            let got = receive(reader, buf, &want);
                            if got.is_err() {
                                // Whoever writes to us must not block on a full window.
                                let _ = reader.get_ref().shutdown(Shutdown::Both);
                            }
                            got
                        });
                    (peer, thread)
                })
                .collect();
            let sent = send_all(writers, routes, rank, seq, &records, line_rate);
            if sent.is_err() {
                // Wake every reader: the exchange cannot complete.
                for w in writers.iter().flatten() {
                    let _ = w.get_ref().shutdown(Shutdown::Both);
                }
            }
            let received: Vec<_> = threads
                .into_iter()
                .map(|(peer, t)| match t {
                    Ok(handle) => handle.join().unwrap_or_else(|_| {
                        Err(TcpExchangeError::Rendezvous(format!(
                            "the thread reading worker {peer} panicked"
                        )))
                    }),
                    Err(e) => Err(io_err("cannot start a reading thread")(e)),
                })
                .collect();
            (sent, received)
        });
        // A peer's own error says more than the write that failed because of it.
        let received = received.into_iter().collect::<Result<Vec<_>, _>>()?;
        let all_begun = received
            .iter()
            .filter_map(|r| r.first)
            .fold(began, Instant::max);
        self.last_seconds = all_begun.elapsed().as_secs_f64();
        stats.bytes_sent = sent?;
        let mut output = ExchangeOutput::zeros(routes.receivers.clone(), width);
        let peers = (0..self.readers.len()).filter(|&p| p != usize::from(rank));
        for (p, got) in peers.zip(&received) {
            stats.bytes_received += got.bytes;
            let (start, rows) = (&routes.into_start[p], &routes.into_rows[p]);
            for (i, row) in got.lanes.chunks_exact(width).enumerate() {
                for &out in &rows[start[i] as usize..start[i + 1] as usize] {
                    let sum = &mut output.sums[out as usize * width..][..width];
                    for (acc, &q) in sum.iter_mut().zip(row) {
                        *acc += i64::from(q);
                    }
                }
            }
        }
        let lane_bytes = 4 * width as u64;
        stats.payload_sent = routes.copies_sent() as u64 * lane_bytes;
        stats.payload_received = routes.copies_received() as u64 * lane_bytes;
        let segments_after = self.segments();
        stats.packets_sent = segments_after.0.saturating_sub(segments_before.0);
        stats.packets_received = segments_after.1.saturating_sub(segments_before.1);
        let t = &mut self.totals;
        t.bytes_sent += stats.bytes_sent;
        t.bytes_received += stats.bytes_received;
        t.segments_sent += stats.packets_sent;
        t.segments_received += stats.packets_received;
        Ok((output, stats))
    }

    /// Segments sent and received over every connection so far.
    fn segments(&self) -> (u64, u64) {
        self.readers
            .iter()
            .flatten()
            .map(|r| segments(r.get_ref()))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }
}

/// Write every peer's rows (`records`: each row of [`TcpRoutes::sent`] as it goes on the
/// wire) and the end of exchange `seq`, peers in a cyclic order from the next rank (so that
/// not every worker starts on the same peer); the bytes written.
fn send_all(
    writers: &mut [Option<BufWriter<TcpStream>>],
    routes: &TcpRoutes,
    rank: u16,
    seq: u32,
    records: &[u8],
    line_rate: Option<f64>,
) -> Result<u64, TcpExchangeError> {
    let width = routes.width;
    let world = writers.len();
    let row_bytes = 4 + 4 * width;
    let per_frame = (FRAME_TARGET / row_bytes).max(1);
    let started = Instant::now();
    let mut written = 0u64;
    for step in 1..world {
        let peer = (usize::from(rank) + step) % world;
        let Some(w) = writers[peer].as_mut() else {
            continue;
        };
        let failed = |source| TcpExchangeError::Peer {
            peer: peer as u16,
            source,
        };
        let to = &routes.to[peer];
        for batch in to.chunks(per_frame) {
            let len = ROWS_HEADER + batch.len() * row_bytes;
            let mut header = [0u8; 4 + ROWS_HEADER];
            header[..4].copy_from_slice(&(len as u32).to_le_bytes());
            header[4] = ROWS;
            header[5..9].copy_from_slice(&seq.to_le_bytes());
            header[9..13].copy_from_slice(&(width as u32).to_le_bytes());
            header[13..].copy_from_slice(&(batch.len() as u32).to_le_bytes());
            w.write_all(&header).map_err(failed)?;
            // Straight into the buffer, which the kernel takes 256 KiB at a time.
            for &i in batch {
                w.write_all(&records[i as usize * row_bytes..][..row_bytes])
                    .map_err(failed)?;
            }
            written += 4 + len as u64;
            pace(started, written, line_rate);
        }
        let mut end = [0u8; 4 + END_LEN];
        end[..4].copy_from_slice(&(END_LEN as u32).to_le_bytes());
        end[4] = END;
        end[5..9].copy_from_slice(&seq.to_le_bytes());
        end[9..].copy_from_slice(&(to.len() as u32).to_le_bytes());
        w.write_all(&end).map_err(failed)?;
        w.flush().map_err(failed)?;
        written += end.len() as u64;
    }
    Ok(written)
}

/// Hold the sender to `line_rate`: sleep while `written` bytes are ahead of what the rate
/// allows since `started` (by more than a sleep's granularity).
fn pace(started: Instant, written: u64, line_rate: Option<f64>) {
    let Some(rate) = line_rate.filter(|r| r.is_finite() && *r > 0.0) else {
        return;
    };
    let due = Duration::from_secs_f64(written as f64 / rate);
    let ahead = due.saturating_sub(started.elapsed());
    if ahead > Duration::from_micros(100) {
        std::thread::sleep(ahead);
    }
}

/// What one peer must send in one exchange.
#[derive(Debug)]
struct Incoming<'a> {
    peer: u16,
    seq: u32,
    width: usize,
    /// Its vertices that this worker expects, ascending.
    from: &'a [u32],
    idle: Duration,
}

/// One peer's rows, in the order of [`Incoming::from`], and the bytes read.
#[derive(Debug)]
struct Received {
    lanes: Vec<i32>,
    bytes: u64,
    /// When its first bytes arrived.
    first: Option<Instant>,
}

/// Read one peer's frames of exchange `want.seq` up to its end, checking each against the
/// plan.
fn receive(
    reader: &mut impl Read,
    frame: &mut Vec<u8>,
    want: &Incoming<'_>,
) -> Result<Received, TcpExchangeError> {
    let (peer, seq, width) = (want.peer, want.seq, want.width);
    let bad = |what: String| TcpExchangeError::Protocol { peer, what };
    let mut lanes = vec![0i32; want.from.len() * width];
    let mut seen = vec![false; want.from.len()];
    let mut rows = 0usize;
    let mut bytes = 0u64;
    let mut first = None;
    loop {
        let mut len = [0u8; 4];
        reader.read_exact(&mut len).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => bad(format!(
                "nothing more: it closed the connection before the end of exchange {seq}"
            )),
            _ => read_failed(peer, e, want.idle),
        })?;
        first.get_or_insert_with(Instant::now);
        let len = u32::from_le_bytes(len) as usize;
        if !(1..=MAX_FRAME).contains(&len) {
            return Err(bad(format!("a frame of {len} bytes")));
        }
        frame.resize(len, 0);
        reader.read_exact(frame).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => bad(format!(
                "a short frame (the connection closed inside a frame of {len} bytes)"
            )),
            _ => read_failed(peer, e, want.idle),
        })?;
        bytes += 4 + len as u64;
        let u32_at = |i: usize| u32::from_le_bytes(frame[i..i + 4].try_into().expect("4 bytes"));
        match frame[0] {
            ROWS if len >= ROWS_HEADER => {
                let (got_seq, got_width, count) = (u32_at(1), u32_at(5) as usize, u32_at(9));
                if got_seq != seq {
                    return Err(bad(format!(
                        "rows of exchange {got_seq} while exchange {seq} runs"
                    )));
                }
                if got_width != width {
                    return Err(bad(format!(
                        "rows of width {got_width}; exchange {seq} has width {width}"
                    )));
                }
                let row_bytes = 4 + 4 * width;
                if (len - ROWS_HEADER) as u64 != u64::from(count) * row_bytes as u64 {
                    return Err(bad(format!(
                        "a frame of {len} bytes for {count} rows of width {width}"
                    )));
                }
                for row in frame[ROWS_HEADER..].chunks_exact(row_bytes) {
                    let v = u32::from_le_bytes(row[..4].try_into().expect("4 bytes"));
                    let i = want.from.binary_search(&v).map_err(|_| {
                        bad(format!(
                            "vertex {v}, which the plan does not have it send this worker"
                        ))
                    })?;
                    if std::mem::replace(&mut seen[i], true) {
                        return Err(bad(format!("vertex {v} twice in exchange {seq}")));
                    }
                    for (o, q) in lanes[i * width..][..width]
                        .iter_mut()
                        .zip(row[4..].chunks_exact(4))
                    {
                        *o = i32::from_le_bytes(q.try_into().expect("4 bytes"));
                    }
                }
                rows += count as usize;
            }
            END if len == END_LEN => {
                let (got_seq, count) = (u32_at(1), u32_at(5) as usize);
                if got_seq != seq {
                    return Err(bad(format!(
                        "the end of exchange {got_seq} while exchange {seq} runs"
                    )));
                }
                if count != rows || rows != want.from.len() {
                    return Err(bad(format!(
                        "the end of exchange {seq} after {rows} rows (it counts {count}); the \
                         plan has it send {}",
                        want.from.len()
                    )));
                }
                return Ok(Received {
                    lanes,
                    bytes,
                    first,
                });
            }
            kind => {
                return Err(bad(format!(
                    "a frame of kind {kind} and {len} bytes, which is no rows or end frame"
                )))
            }
        }
    }
}

fn read_failed(peer: u16, e: io::Error, idle: Duration) -> TcpExchangeError {
    let source = match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("sent nothing for {idle:?} while this worker waited for its rows"),
        ),
        _ => e,
    };
    TcpExchangeError::Peer { peer, source }
}

/// Segments the kernel sent and received on `stream` (`TCP_INFO`).
#[cfg(target_os = "linux")]
fn segments(stream: &TcpStream) -> (u64, u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: tcp_info is plain data, zero a valid value; getsockopt writes at most `len`
    // bytes into it and says how many.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return (0, 0);
    }
    (u64::from(info.tcpi_segs_out), u64::from(info.tcpi_segs_in))
}

#[cfg(not(target_os = "linux"))]
fn segments(_stream: &TcpStream) -> (u64, u64) {
    (0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(from: &[u32]) -> Incoming<'_> {
        Incoming {
            peer: 3,
            seq: 7,
            width: 2,
            from,
            idle: Duration::from_secs(1),
        }
    }

    fn rows_frame(seq: u32, width: u32, rows: &[(u32, &[i32])]) -> Vec<u8> {
        let mut body = vec![ROWS];
        body.extend_from_slice(&seq.to_le_bytes());
        body.extend_from_slice(&width.to_le_bytes());
        body.extend_from_slice(&(rows.len() as u32).to_le_bytes());
        for (v, lanes) in rows {
            body.extend_from_slice(&v.to_le_bytes());
            for q in lanes.iter() {
                body.extend_from_slice(&q.to_le_bytes());
            }
        }
        let mut f = (body.len() as u32).to_le_bytes().to_vec();
        f.extend(body);
        f
    }

    fn end_frame(seq: u32, rows: u32) -> Vec<u8> {
        let mut f = (END_LEN as u32).to_le_bytes().to_vec();
        f.push(END);
        f.extend_from_slice(&seq.to_le_bytes());
        f.extend_from_slice(&rows.to_le_bytes());
        f
    }

    fn read(bytes: &[u8], from: &[u32]) -> Result<Received, TcpExchangeError> {
        receive(&mut io::Cursor::new(bytes), &mut Vec::new(), &want(from))
    }

    #[test]
    fn rows_arrive_in_the_plans_order_whatever_the_frames() {
        let mut s = rows_frame(7, 2, &[(9, &[3, -4])]);
        s.extend(rows_frame(7, 2, &[(5, &[1, 2])]));
        s.extend(end_frame(7, 2));
        let got = read(&s, &[5, 9]).unwrap();
        assert_eq!(got.lanes, [1, 2, 3, -4]);
        assert_eq!(got.bytes, s.len() as u64);
    }

    #[test]
    fn what_the_plan_does_not_say_is_an_error_naming_the_peer() {
        let good = rows_frame(7, 2, &[(5, &[1, 2])]);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (good[..good.len() - 3].to_vec(), "short frame"),
            (good[..2].to_vec(), "closed the connection"),
            (Vec::new(), "closed the connection"),
            (rows_frame(7, 3, &[(5, &[1, 2, 3])]), "width 3"),
            (rows_frame(8, 2, &[(5, &[1, 2])]), "exchange 8"),
            (rows_frame(7, 2, &[(6, &[1, 2])]), "vertex 6"),
            (
                [rows_frame(7, 2, &[(5, &[1, 2])]), good.clone()].concat(),
                "vertex 5 twice",
            ),
            (
                [good.clone(), end_frame(7, 1)].concat(),
                "plan has it send 2",
            ),
            ([good.clone(), end_frame(7, 2)].concat(), "it counts 2"),
            (vec![5, 0, 0, 0, 9, 0, 0, 0, 0], "kind 9"),
            (vec![0, 0, 0, 0], "frame of 0 bytes"),
            (vec![255, 255, 255, 255], "frame of 4294967295 bytes"),
        ];
        for (bytes, says) in cases {
            let err = read(&bytes, &[5, 9]).unwrap_err().to_string();
            assert!(
                err.contains("worker 3") && err.contains(says),
                "{says}: {err}"
            );
        }
        // A count that does not match the frame's length.
        let mut lying = rows_frame(7, 2, &[(5, &[1, 2])]);
        lying[4 + 9] = 2;
        let err = read(&lying, &[5, 9]).unwrap_err().to_string();
        assert!(err.contains("for 2 rows"), "{err}");
    }
}
