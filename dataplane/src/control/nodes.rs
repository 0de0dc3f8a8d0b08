//! The control plane wrapped around the dataplane's nodes, for drivers that move every byte
//! themselves (the in-memory network, the simulator): a switch whose ports are the workers'
//! addresses and that admits them before its switch model sees their packets, and a worker
//! that joins, keeps its heartbeats going while it computes, and runs one exchange engine at a
//! time. The UDP processes drive the same two machines around their sockets.

use super::{
    Admission, Control, ControlTimers, Hello, SwitchControl, SwitchControlConfig, WorkerControl,
    CONTROL_VERSION,
};
use crate::engine::Exchange;
use crate::node::{Address, HostNode, Nanos, Node, SwitchNode, Transmit};
use crate::switch::Switch;

/// A star of one exchange behind the control plane, all starting at time 0: `switch` (with its
/// job `job` installed) behind its control machine, and worker `i` running `engines[i]` once it
/// has joined with a hello for `mode` (plan checksum 0: both sides build the same plan here).
/// What the in-memory network and the simulator run when they run the control plane too.
pub fn controlled_star(
    switch: Switch,
    engines: Vec<Box<dyn Exchange>>,
    job: u16,
    mode: &str,
    timers: ControlTimers,
) -> (ControlledSwitch, Vec<ControlledWorker>) {
    let world = engines.len() as u16;
    let control = SwitchControlConfig {
        job,
        world,
        mode: mode.to_string(),
        plan_checksum: 0,
        timers,
        window: 0,
        allreduce_slots: 0,
        rack: None,
    };
    let workers = engines
        .into_iter()
        .enumerate()
        .map(|(rank, engine)| {
            let hello = Hello {
                control_version: CONTROL_VERSION,
                wire_version: crate::wire::VERSION,
                job,
                rank: rank as u16,
                world,
                mode: mode.to_string(),
                plan_checksum: 0,
                proof: None,
            };
            let mut w = ControlledWorker::new(WorkerControl::new(hello, timers, 0));
            w.start_one(0, engine);
            w
        })
        .collect();
    (ControlledSwitch::new(switch, control, 0), workers)
}

/// The switch model behind its control plane. Ports are addresses: a control message goes to
/// the control plane, a data packet from an admitted worker to the switch model (as its rank),
/// anything else is dropped and answered `Unknown`.
#[derive(Debug)]
pub struct ControlledSwitch {
    /// The switch model.
    pub switch: Switch,
    /// Its control plane; peers are ports.
    pub control: SwitchControl<u16>,
    /// Control messages that did not parse.
    pub malformed_control: u64,
}

impl ControlledSwitch {
    /// `switch` (with its job installed) behind a control plane of `cfg` that starts at `now`.
    pub fn new(switch: Switch, cfg: SwitchControlConfig, now: Nanos) -> ControlledSwitch {
        ControlledSwitch {
            switch,
            control: SwitchControl::new(cfg, now),
            malformed_control: 0,
        }
    }
}

impl Node for ControlledSwitch {
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]) {
        let Address::Worker(port) = from else {
            return;
        };
        if let Some(message) = Control::decode(bytes) {
            match message {
                Ok(m) => self.control.handle_control(now, port, m),
                Err(_) => self.malformed_control += 1,
            }
            return;
        }
        if let Admission::Worker(rank) = self.control.on_data(now, &port, bytes) {
            self.switch.handle_packet(now, Address::Worker(rank), bytes);
        }
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.control.handle_timeout(now, &self.switch);
    }

    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        if let Some((port, message)) = self.control.poll_control() {
            let len = message.encode_into(buf);
            return Some(Transmit {
                to: Address::Worker(port),
                len,
            });
        }
        loop {
            let t = self.switch.poll_transmit(now, buf)?;
            let Address::Worker(rank) = t.to else {
                continue;
            };
            // A rank without an address (it has not joined) cannot be reached.
            let Some(&port) = self.control.addr_of(rank) else {
                continue;
            };
            self.control.note_sent(now, rank);
            return Some(Transmit {
                to: Address::Worker(port),
                len: t.len,
            });
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.control.poll_timeout()
    }
}

impl SwitchNode for ControlledSwitch {
    fn set_egress_queue(&mut self, port: u16, bytes: u64) {
        if let Some(rank) = self.control.rank_of(&port) {
            self.switch.set_egress_queue(rank, bytes);
        }
    }

    fn passes(&self) -> u64 {
        self.switch.passes()
    }

    fn passes_reading_pairs(&self) -> u64 {
        self.switch.passes_reading_pairs()
    }

    fn aggregators_in_use(&self) -> usize {
        self.switch.aggregators_in_use()
    }
}

/// A worker: its control plane and, while an exchange runs, that exchange's engine. Between
/// exchanges it computes: it reads nothing but keeps sending heartbeats.
pub struct ControlledWorker {
    /// Its control plane.
    pub control: WorkerControl,
    engine: Option<Box<dyn Exchange>>,
    /// Dataplane packets that arrived while no exchange ran (dropped).
    pub idle_packets: u64,
    /// Control messages that did not parse.
    pub malformed_control: u64,
    /// Stop after the engine finishes (a host of one simulated exchange) rather than wait
    /// for the next one.
    done_with_engine: bool,
}

impl std::fmt::Debug for ControlledWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlledWorker")
            .field("control", &self.control)
            .field(
                "running_block",
                &self.engine.as_ref().map(|e| e.running_block()),
            )
            .field("idle_packets", &self.idle_packets)
            .finish_non_exhaustive()
    }
}

impl ControlledWorker {
    /// A worker whose control plane is `control`, computing (no exchange yet).
    pub fn new(control: WorkerControl) -> ControlledWorker {
        ControlledWorker {
            control,
            engine: None,
            idle_packets: 0,
            malformed_control: 0,
            done_with_engine: false,
        }
    }

    /// Start running `engine` at `now`; the worker listens to the switch until it finishes.
    pub fn start(&mut self, now: Nanos, engine: Box<dyn Exchange>) {
        self.control.listen(now, true);
        self.engine = Some(engine);
    }

    /// [`ControlledWorker::start`], and count the worker done once the engine is (for a
    /// driver that runs one exchange).
    pub fn start_one(&mut self, now: Nanos, engine: Box<dyn Exchange>) {
        self.start(now, engine);
        self.done_with_engine = true;
    }

    /// The engine, once its exchange is over (or to abandon it); the worker goes back to
    /// computing.
    pub fn take_engine(&mut self, now: Nanos) -> Option<Box<dyn Exchange>> {
        self.control.listen(now, false);
        self.done_with_engine = false;
        self.engine.take()
    }

    /// The running engine.
    pub fn engine(&self) -> Option<&dyn Exchange> {
        self.engine.as_deref()
    }

    /// Whether the running exchange is over (false when none runs).
    pub fn exchange_finished(&self) -> bool {
        self.engine.as_ref().is_some_and(|e| e.is_finished())
    }
}

impl Node for ControlledWorker {
    fn handle_packet(&mut self, now: Nanos, from: Address, bytes: &[u8]) {
        self.control.heard(now);
        if let Some(message) = Control::decode(bytes) {
            match message {
                Ok(m) => self.control.handle_control(now, m),
                Err(_) => self.malformed_control += 1,
            }
            return;
        }
        match self.engine.as_mut() {
            Some(e) => e.handle_packet(now, from, bytes),
            None => self.idle_packets += 1,
        }
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.control.handle_timeout(now);
        if let Some(e) = self.engine.as_mut() {
            if e.poll_timeout().is_some_and(|t| t <= now) {
                e.handle_timeout(now);
            }
        }
    }

    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<Transmit> {
        if let Some(message) = self.control.poll_control() {
            let len = message.encode_into(buf);
            return Some(Transmit {
                to: Address::Switch,
                len,
            });
        }
        // Data only once welcomed: the switch drops what comes from an address it does not
        // know.
        if !self.control.is_joined() {
            return None;
        }
        let t = self.engine.as_mut()?.poll_transmit(now, buf)?;
        self.control.note_sent(now);
        Some(t)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let engine = self
            .engine
            .as_ref()
            .filter(|_| self.control.is_joined())
            .and_then(|e| e.poll_timeout());
        [self.control.poll_timeout(), engine]
            .into_iter()
            .flatten()
            .min()
    }
}

impl HostNode for ControlledWorker {
    fn is_done(&self) -> bool {
        self.done_with_engine && self.exchange_finished()
    }
}
