//! The service's frames on the wire, as both ends read and write them: the greeting and the
//! hello with its proof, rounds of `f32` values, and the reads that wait with a deadline.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::CollectiveError;

pub(super) const MAGIC: [u8; 4] = *b"SGAR";
/// Status byte: still waiting for other workers.
pub(super) const KEEPALIVE: u8 = 2;
pub(super) const VERSION: u16 = 2;
/// What a hello's proof signs, before the nonce and the hello's fields.
pub(super) const PROOF_CONTEXT: &[u8] = b"switchgnn collective proof v1\0";
pub(super) const GREETING_LEN: usize = 22;
pub(super) const HELLO_LEN: usize = 52;
/// Largest vector one round may carry (256 Mi values, 1 GiB).
pub(super) const MAX_COUNT: u32 = 1 << 28;
/// How often blocked reads look at the stop flag.
pub(super) const POLL: Duration = Duration::from_millis(100);

/// The fields a hello's proof covers.
pub(super) fn proof_parts(
    nonce: &[u8],
    job: u16,
    rank: u16,
    world: u16,
    agreement: u64,
) -> Vec<u8> {
    let mut parts = nonce.to_vec();
    for w in [job, rank, world] {
        parts.extend_from_slice(&w.to_le_bytes());
    }
    parts.extend_from_slice(&agreement.to_le_bytes());
    parts
}

/// Whether a read error at the start of a round is a worker that closed its connection: the
/// end of the stream, or a reset, which is what a keepalive written after the worker closed
/// (racing its goodbye) turns the close into.
pub(super) fn leaving(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
    )
}

/// Patience that ends at `deadline`.
pub(super) fn until(deadline: Instant) -> impl FnMut() -> io::Result<()> {
    move || {
        if Instant::now() >= deadline {
            Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"))
        } else {
            Ok(())
        }
    }
}

#[derive(Debug)]
pub(super) struct Hello {
    pub(super) job: u16,
    pub(super) rank: u16,
    pub(super) world: u16,
    pub(super) agreement: u64,
    pub(super) proof: [u8; 32],
}

pub(super) fn read_hello(
    stream: &mut TcpStream,
    patience: &mut dyn FnMut() -> io::Result<()>,
    stop: &AtomicBool,
) -> io::Result<Hello> {
    let mut b = [0u8; HELLO_LEN];
    read_full(stream, &mut b, patience, stop)?;
    if b[..4] != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a collective hello",
        ));
    }
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    if u16_at(4) != VERSION {
        let _ = send_error(
            stream,
            &format!(
                "collective version {} (this service speaks {VERSION})",
                u16_at(4)
            ),
        );
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "version mismatch",
        ));
    }
    Ok(Hello {
        job: u16_at(6),
        rank: u16_at(8),
        world: u16_at(10),
        agreement: u64::from_le_bytes(b[12..20].try_into().expect("8 bytes")),
        proof: b[20..HELLO_LEN].try_into().expect("32 bytes"),
    })
}

pub(crate) fn send_error(stream: &mut TcpStream, reason: &str) -> io::Result<()> {
    let mut m = vec![1u8];
    m.extend_from_slice(&(reason.len() as u32).to_le_bytes());
    m.extend_from_slice(reason.as_bytes());
    stream.write_all(&m)
}

/// Fill `buf`, asking `patience` every poll interval whether to go on waiting (its error ends
/// the read) and giving up early on `stop`. Unlike `read_exact` under a read timeout, no byte
/// is lost to a timeout.
pub(super) fn read_full(
    stream: &mut TcpStream,
    buf: &mut [u8],
    patience: &mut dyn FnMut() -> io::Result<()>,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        patience()?;
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "stopped"));
        }
        stream.set_read_timeout(Some(POLL))?;
        match stream.read(&mut buf[at..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(super) fn read_f32s(
    stream: &mut TcpStream,
    out: &mut [f32],
    patience: &mut dyn FnMut() -> io::Result<()>,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut bytes = vec![0u8; 4 * out.len()];
    read_full(stream, &mut bytes, patience, stop)?;
    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *o = f32::from_le_bytes(b.try_into().expect("4 bytes"));
    }
    Ok(())
}

pub(super) fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => "the connection closed".into(),
        io::ErrorKind::TimedOut if e.get_ref().is_none_or(|i| i.to_string() == "timed out") => {
            "sent nothing in time".into()
        }
        _ => e.to_string(),
    }
}

pub(super) fn io_err(addr: SocketAddr, source: io::Error) -> CollectiveError {
    CollectiveError::Io { addr, source }
}

pub(super) fn addr0() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}
