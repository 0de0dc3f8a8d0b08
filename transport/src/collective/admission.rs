//! Admitting connections: each new one is greeted on a thread of its own and given a short
//! time for its hello; connections that have not said hello are bounded per address and in
//! all, and complaints about strangers are rate-limited.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::frames::{read_hello, until, Hello, MAGIC, VERSION};

/// How long a new connection may take to send its hello; a worker sends it as soon as the
/// greeting arrives. Each connection says hello in a thread of its own, so a silent one holds
/// nobody up: it only holds a place among the pending ones until then.
pub(super) const HELLO_WAIT: Duration = Duration::from_secs(2);
/// Connections still saying hello from one IP address: a new one beyond this closes that
/// address's oldest (a worker's hello takes a round trip; an idle connection, `HELLO_WAIT`).
/// At least twice the job's workers: every worker of a job on one host may connect at once.
pub(super) const PENDING_PER_IP: usize = 16;
/// Connections still saying hello from everywhere: a new one beyond this closes the oldest.
pub(super) const PENDING_MAX: usize = 256;
/// At most one warning about bad connections this often; the warning counts the others.
pub(super) const COMPLAIN_EVERY: Duration = Duration::from_secs(10);
/// A hello thread's stack: it reads 52 bytes.
pub(super) const HELLO_STACK: usize = 128 * 1024;

/// A connection back from saying hello.
#[derive(Debug)]
pub(super) struct Greeted {
    pub(super) id: u64,
    pub(super) from: SocketAddr,
    pub(super) stream: TcpStream,
    pub(super) nonce: [u8; 16],
    pub(super) hello: io::Result<Hello>,
}

/// Greet the connection `stream` from `from` and read its hello in a thread of its own, which
/// hands both back on `said` (within [`HELLO_WAIT`], or at once once its connection is shut
/// down). Returns `id` and a handle on the connection to shut it down with.
pub(super) fn greet(
    stream: TcpStream,
    from: SocketAddr,
    id: u64,
    said: std::sync::mpsc::Sender<Greeted>,
) -> io::Result<(u64, TcpStream)> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    let watch = stream.try_clone()?;
    std::thread::Builder::new()
        .name("collective-hello".into())
        .stack_size(HELLO_STACK)
        .spawn(move || {
            let mut stream = stream;
            let nonce: [u8; 16] = rand::random();
            let mut greeting = MAGIC.to_vec();
            greeting.extend_from_slice(&VERSION.to_le_bytes());
            greeting.extend_from_slice(&nonce);
            let never = AtomicBool::new(false);
            let hello = stream.write_all(&greeting).and_then(|()| {
                read_hello(&mut stream, &mut until(Instant::now() + HELLO_WAIT), &never)
            });
            // The service may be gone: nobody to tell.
            let _ = said.send(Greeted {
                id,
                from,
                stream,
                nonce,
                hello,
            });
        })?;
    Ok((id, watch))
}

/// The connections still saying hello, oldest first.
#[derive(Debug, Default)]
pub(super) struct Pending {
    pub(super) next: u64,
    pub(super) waiting: std::collections::VecDeque<(u64, SocketAddr, TcpStream)>,
    /// The cap per IP address (at least [`PENDING_PER_IP`]).
    pub(super) per_ip: usize,
}

impl Pending {
    /// For jobs of `workers` workers in all.
    pub(super) fn for_workers(workers: usize) -> Pending {
        Pending {
            per_ip: PENDING_PER_IP.max(2 * workers),
            ..Pending::default()
        }
    }

    pub(super) fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    pub(super) fn add(&mut self, id: u64, from: SocketAddr, watch: TcpStream) {
        self.waiting.push_back((id, from, watch));
    }

    /// Whether `id` was still waiting (it no longer is).
    pub(super) fn done(&mut self, id: u64) -> bool {
        match self.waiting.iter().position(|(i, ..)| *i == id) {
            Some(at) => {
                self.waiting.remove(at);
                true
            }
            None => false,
        }
    }

    /// Before a connection from `from`: close the oldest ones over the caps (per address and
    /// in all); how many.
    pub(super) fn make_room(&mut self, from: SocketAddr) -> u64 {
        let mut closed = 0;
        let same = |w: &(u64, SocketAddr, TcpStream)| w.1.ip() == from.ip();
        if self.waiting.iter().filter(|w| same(w)).count() >= self.per_ip {
            if let Some(at) = self.waiting.iter().position(same) {
                close(self.waiting.remove(at));
                closed += 1;
            }
        }
        while self.waiting.len() >= PENDING_MAX {
            close(self.waiting.pop_front());
            closed += 1;
        }
        closed
    }

    pub(super) fn close_all(&mut self) {
        for w in self.waiting.drain(..) {
            close(Some(w));
        }
    }
}

pub(super) fn close(waiting: Option<(u64, SocketAddr, TcpStream)>) {
    if let Some((_, _, stream)) = waiting {
        let _ = stream.shutdown(Shutdown::Both);
    }
}

/// What the service holds against connections that are not workers.
#[derive(Debug, Default)]
pub(super) struct Strangers {
    pub(super) bad: u64,
    pub(super) evicted: u64,
    pub(super) complaints: Complaints,
}

/// Warnings about bad connections, at most one per [`COMPLAIN_EVERY`]: anyone who can reach
/// the port could otherwise fill the log.
#[derive(Debug, Default)]
pub(super) struct Complaints {
    pub(super) last: Option<Instant>,
    /// Complaints since the last warning, not logged.
    pub(super) held: u64,
}

impl Complaints {
    /// Warn about `what` unless a warning went out less than [`COMPLAIN_EVERY`] ago; whether
    /// it did.
    pub(super) fn note(&mut self, what: std::fmt::Arguments<'_>) -> bool {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < COMPLAIN_EVERY)
        {
            self.held += 1;
            tracing::debug!("collective: {what}");
            return false;
        }
        match std::mem::take(&mut self.held) {
            0 => tracing::warn!("collective: {what}"),
            held => tracing::warn!(
                "collective: {what} ({held} more bad connections in the last {:.0?})",
                self.last.map_or(COMPLAIN_EVERY, |t| now.duration_since(t))
            ),
        }
        self.last = Some(now);
        true
    }

    /// Say how many were held back since the last warning, if any.
    pub(super) fn flush(&mut self) {
        match std::mem::take(&mut self.held) {
            0 => {}
            held => tracing::warn!("collective: {held} more bad connections"),
        }
    }
}
