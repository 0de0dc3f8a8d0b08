//! The host exchange over TCP: the kernel's own transport, as gloo's all-to-all runs it, for a
//! baseline beside the exchanges through the switch.
//!
//! Each worker sends every one of its boundary rows once to every remote worker that needs it
//! — the copies the host exchange's engine sends
//! ([`HostExchange::pairs`](switchgnn_dataplane::engine::HostExchange::pairs)), in its order —
//! and sums what arrives into the same fixed-point output
//! ([`ExchangeOutput`](switchgnn_dataplane::engine::ExchangeOutput)): for each of its vertices
//! with remote neighbours, the integer sum of their encoded rows, as the plan's tables list
//! them. Integer sums do not depend on the order, so the output is bit-identical to the host
//! engine's.
//!
//! **One connection per unordered pair of workers**, the lower rank connecting to the higher,
//! both directions on it: TCP is full duplex, gloo's pairs hold one socket per peer, and a
//! second connection per pair would only double the handshakes and the kernel's state. The
//! connections are made once per job and carry every exchange after.
//!
//! **Meeting.** Each worker listens on a free port of the address it reaches the collective
//! service from (the service beside the switch), and the workers learn each other's addresses
//! in one sum all-reduce of that service; a job of threads can hand the addresses out itself
//! ([`Listening::connect`]). Connecting, the lower rank proves it belongs to the job (job,
//! rank, world, the plans' checksum, and an HMAC of the accepting side's nonce under the job's
//! secret if it has one), as the collective's hello does.
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

mod meeting;
mod mesh;
mod receive;
mod routes;

use std::io;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use switchgnn_dataplane::control::Secret;
use thiserror::Error;

use crate::collective::CollectiveError;

pub use meeting::Listening;
pub use mesh::TcpMesh;
pub use routes::TcpRoutes;

const ROWS: u8 = 1;
const END: u8 = 2;
const ROWS_HEADER: usize = 13;
const END_LEN: usize = 9;
/// Rows go in frames of about this many bytes (one row at least).
const FRAME_TARGET: usize = 64 * 1024;
/// The largest frame a reader takes (a guard against a corrupt length).
const MAX_FRAME: usize = 16 << 20;
/// Each connection's write buffer: several frames go out in one write.
const BUFFER: usize = 256 * 1024;

/// Why the host exchange over TCP failed.
#[derive(Debug, Error)]
pub enum TcpExchangeError {
    /// A local socket operation failed.
    #[error("tcp exchange: {what}: {source}")]
    Io {
        /// What the worker was doing.
        what: String,
        /// What the system said.
        source: io::Error,
    },
    /// A peer's connection failed.
    #[error("tcp exchange: worker {peer}: {source}")]
    Peer {
        /// The peer's rank.
        peer: u16,
        /// What the system said.
        source: io::Error,
    },
    /// A peer sent something else than the plan says it sends.
    #[error("tcp exchange: worker {peer} sent {what}")]
    Protocol {
        /// The peer's rank.
        peer: u16,
        /// What it sent.
        what: String,
    },
    /// A peer refused this worker's hello, or the workers could not all meet.
    #[error("tcp exchange: {0}")]
    Rendezvous(String),
    /// The all-reduce that hands out the addresses failed.
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
    /// Stream bytes written (frames, not TCP/IP headers), handshakes included.
    pub bytes_sent: u64,
    /// Stream bytes read, counted alike.
    pub bytes_received: u64,
    /// Segments the kernel sent and received on them, pure acknowledgements included
    /// (`TCP_INFO`; 0 where the kernel does not say).
    pub segments_sent: u64,
    /// Segments received, counted alike.
    pub segments_received: u64,
}

/// Who a worker is to its peers, and how it drives its connections.
#[derive(Debug, Clone)]
pub struct MeshConfig {
    /// The job's id.
    pub job: u16,
    /// This worker's rank.
    pub rank: u16,
    /// The job's workers.
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

#[cfg(test)]
mod tests {
    use super::receive::{receive, Incoming, Received};
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
