//! A worker's connections to every peer and one exchange over them: rows written in large
//! paced frames from one thread while one thread per peer reads.

use std::io::{BufReader, BufWriter, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use switchgnn_dataplane::engine::{EngineStats, ExchangeOutput, LocalFeatures};
use switchgnn_dataplane::fixed::Scale;

use super::meeting::{addresses_via, Listening, GREETING_LEN, HELLO_LEN};
use super::receive::{receive, segments, Incoming};
use super::routes::TcpRoutes;
use super::{
    io_err, MeshConfig, TcpExchangeError, TcpTotals, BUFFER, END, END_LEN, FRAME_TARGET, ROWS,
    ROWS_HEADER,
};
use crate::collective::CollectiveClient;

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

    /// This worker's rank.
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

impl Listening {
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
}
