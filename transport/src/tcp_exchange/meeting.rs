//! How the workers meet: each listens on a free port, the addresses go round through one
//! all-reduce of the collective service, and the lower rank of each pair connects and proves
//! it belongs to the job.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::{io_err, MeshConfig, TcpExchangeError};
use crate::collective::{CollectiveClient, ReduceOp};

pub(super) const MAGIC: [u8; 4] = *b"SGTX";
pub(super) const VERSION: u16 = 1;
/// What a hello's proof signs, before the nonce and the hello's fields.
pub(super) const PROOF_CONTEXT: &[u8] = b"switchgnn tcp exchange proof v1\0";
pub(super) const GREETING_LEN: usize = 22;
pub(super) const HELLO_LEN: usize = 52;
/// How long either side of a handshake waits for the other's next message.
pub(super) const HANDSHAKE_WAIT: Duration = Duration::from_secs(5);
/// Values per worker in the rendezvous all-reduce: the address family (4 or 6), 16 address
/// bytes, and the port's two bytes.
pub(super) const ADDRESS_SLOTS: usize = 19;

/// A worker's listening socket, before it has met its peers.
#[derive(Debug)]
pub struct Listening {
    pub(super) listener: TcpListener,
    pub(super) cfg: MeshConfig,
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

    /// Where this worker listens: the address its peers connect to.
    pub fn local_addr(&self) -> Result<SocketAddr, TcpExchangeError> {
        self.listener
            .local_addr()
            .map_err(io_err("the listening socket"))
    }

    /// Accept ranks `0..rank`, each once, until `deadline`; a connection that fails its
    /// handshake is dropped and the others awaited.
    pub(super) fn accept_lower(
        &self,
        deadline: Instant,
    ) -> Result<Vec<Option<TcpStream>>, TcpExchangeError> {
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
    pub(super) fn connect_higher(
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
pub(super) fn send_hello(
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
pub(super) fn accept_hello(
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
pub(super) fn proof_parts(nonce: &[u8], cfg: &MeshConfig, from: u16, to: u16) -> Vec<u8> {
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
pub(super) fn addresses_via(
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
