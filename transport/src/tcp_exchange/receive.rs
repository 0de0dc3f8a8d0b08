//! The reading side of an exchange: one peer's frames, checked and summed into the output
//! rows, and the kernel's segment counters of a connection.

use std::io::{self, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::{TcpExchangeError, END, END_LEN, MAX_FRAME, ROWS, ROWS_HEADER};

/// What one peer must send in one exchange.
#[derive(Debug)]
pub(super) struct Incoming<'a> {
    pub(super) peer: u16,
    pub(super) seq: u32,
    pub(super) width: usize,
    /// Its vertices that this worker expects, ascending.
    pub(super) from: &'a [u32],
    pub(super) idle: Duration,
}

/// One peer's rows, in the order of [`Incoming::from`], and the bytes read.
#[derive(Debug)]
pub(super) struct Received {
    pub(super) lanes: Vec<i32>,
    pub(super) bytes: u64,
    /// When its first bytes arrived.
    pub(super) first: Option<Instant>,
}

/// Read one peer's frames of exchange `want.seq` up to its end, checking each against the
/// plan.
pub(super) fn receive(
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

pub(super) fn read_failed(peer: u16, e: io::Error, idle: Duration) -> TcpExchangeError {
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
pub(super) fn segments(stream: &TcpStream) -> (u64, u64) {
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
pub(super) fn segments(_stream: &TcpStream) -> (u64, u64) {
    (0, 0)
}
