//! A worker's connection to the collective service: connect and say hello, then one blocking
//! call per round.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::frames::{
    describe, io_err, proof_parts, read_f32s, read_full, until, GREETING_LEN, HELLO_LEN, KEEPALIVE,
    MAGIC, PROOF_CONTEXT, VERSION,
};
use super::{CollectiveError, Member, ReduceOp};

/// A worker's connection to the service.
#[derive(Debug)]
pub struct CollectiveClient {
    addr: SocketAddr,
    stream: TcpStream,
    rank: u16,
    round: u32,
    idle: Duration,
    /// Whether the service accepted the hello (an error before that is a refusal).
    joined: bool,
    /// Never set: the client's reads have no stop flag of their own.
    never: AtomicBool,
    /// Bytes written, for the traffic figures.
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
}

impl CollectiveClient {
    /// Connect (retrying until `join` has passed: the service may still be starting) and
    /// introduce this worker, `who`.
    pub fn connect(
        addr: SocketAddr,
        who: &Member,
        join: Duration,
        idle: Duration,
    ) -> Result<CollectiveClient, CollectiveError> {
        let Member {
            job,
            rank,
            world,
            agreement,
            ..
        } = *who;
        let started = Instant::now();
        let mut stream = loop {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(s) => break s,
                Err(last) if started.elapsed() >= join => {
                    return Err(CollectiveError::NoService {
                        addr,
                        waited: started.elapsed(),
                        last,
                    })
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        stream.set_nodelay(true).map_err(|e| io_err(addr, e))?;
        let never = AtomicBool::new(false);
        let mut greeting = [0u8; GREETING_LEN];
        read_full(
            &mut stream,
            &mut greeting,
            &mut until(started + join),
            &never,
        )
        .map_err(|e| io_err(addr, e))?;
        let version = u16::from_le_bytes([greeting[4], greeting[5]]);
        if greeting[..4] != MAGIC || version != VERSION {
            return Err(CollectiveError::Protocol(format!(
                "{addr} greets with another protocol (version {version}, this worker speaks \
                 {VERSION})"
            )));
        }
        let mut hello = Vec::with_capacity(HELLO_LEN);
        hello.extend_from_slice(&MAGIC);
        for w in [VERSION, job, rank, world] {
            hello.extend_from_slice(&w.to_le_bytes());
        }
        hello.extend_from_slice(&agreement.to_le_bytes());
        let proof = who.secret.as_ref().map_or([0; 32], |s| {
            let parts = proof_parts(&greeting[6..], job, rank, world, agreement);
            s.sign(PROOF_CONTEXT, &[&parts])
        });
        hello.extend_from_slice(&proof);
        stream.write_all(&hello).map_err(|e| io_err(addr, e))?;
        let mut client = CollectiveClient {
            addr,
            stream,
            rank,
            round: 0,
            idle,
            joined: false,
            never,
            bytes_sent: HELLO_LEN as u64,
            bytes_received: GREETING_LEN as u64,
        };
        // The hello is answered once every worker has connected; that may take a while.
        client.read_status(Some(started + join.max(idle)))?;
        client.joined = true;
        Ok(client)
    }

    /// Replace `values` by their element-wise reduction over every worker.
    pub fn all_reduce(&mut self, op: ReduceOp, values: &mut [f32]) -> Result<(), CollectiveError> {
        let mut m = Vec::with_capacity(9 + 4 * values.len());
        m.push(op.code());
        m.extend_from_slice(&self.round.to_le_bytes());
        m.extend_from_slice(&(values.len() as u32).to_le_bytes());
        for v in values.iter() {
            m.extend_from_slice(&v.to_le_bytes());
        }
        self.stream
            .write_all(&m)
            .map_err(|e| self.failed("sending", &e))?;
        self.bytes_sent += m.len() as u64;
        self.read_status(None)?;
        let mut patience = until(Instant::now() + self.idle);
        let mut count = [0u8; 4];
        read_full(&mut self.stream, &mut count, &mut patience, &self.never)
            .map_err(|e| self.failed("receiving", &e))?;
        let count = u32::from_le_bytes(count) as usize;
        if count != values.len() {
            return Err(CollectiveError::Protocol(format!(
                "round {} came back with {count} values, {} sent",
                self.round,
                values.len()
            )));
        }
        read_f32s(&mut self.stream, values, &mut patience, &self.never)
            .map_err(|e| self.failed("receiving", &e))?;
        self.bytes_received += 5 + 4 * count as u64;
        self.round += 1;
        Ok(())
    }

    /// This end of the connection: the address this host reaches the service from.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// The maximum of `x` over every worker.
    pub fn max(&mut self, x: f32) -> Result<f32, CollectiveError> {
        let mut v = [x];
        self.all_reduce(ReduceOp::Max, &mut v)?;
        Ok(v[0])
    }

    /// Read the status of a reply, skipping keepalives. `deadline`: a fixed one; `None`: wait
    /// as long as the service says it is alive (at most `idle` of silence).
    fn read_status(&mut self, deadline: Option<Instant>) -> Result<(), CollectiveError> {
        let mut status = [0u8; 1];
        loop {
            let mut patience = until(deadline.unwrap_or_else(|| Instant::now() + self.idle));
            read_full(&mut self.stream, &mut status, &mut patience, &self.never)
                .map_err(|e| self.failed("waiting for the service", &e))?;
            self.bytes_received += 1;
            if status[0] != KEEPALIVE {
                break;
            }
        }
        let mut patience = until(Instant::now() + self.idle);
        match status[0] {
            0 => Ok(()),
            1 => {
                let mut len = [0u8; 4];
                read_full(&mut self.stream, &mut len, &mut patience, &self.never)
                    .map_err(|e| self.failed("reading an error", &e))?;
                let len = (u32::from_le_bytes(len) as usize).min(1 << 16);
                let mut text = vec![0u8; len];
                read_full(&mut self.stream, &mut text, &mut patience, &self.never)
                    .map_err(|e| self.failed("reading an error", &e))?;
                let reason = String::from_utf8_lossy(&text).into_owned();
                Err(if !self.joined {
                    CollectiveError::Refused {
                        rank: self.rank,
                        reason,
                    }
                } else {
                    CollectiveError::Failed(reason)
                })
            }
            other => Err(CollectiveError::Protocol(format!("unknown status {other}"))),
        }
    }

    fn failed(&self, during: &str, e: &io::Error) -> CollectiveError {
        CollectiveError::Failed(format!(
            "worker {} {during} in round {} at {}: {}",
            self.rank,
            self.round,
            self.addr,
            describe(e)
        ))
    }
}
