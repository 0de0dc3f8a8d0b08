//! `switchgnn._native`: the Python module's compiled half. It drives the same Rust code as the
//! `switchgnn` command — plans, the software switch with its all-reduce service, and a worker's
//! exchanges through [`Participant`] — and links no libtorch, so a process that imported torch
//! loads no second copy. The Python half (`python/switchgnn/`) wraps these classes with array
//! conversions, context managers and the BNS-GCN-shaped `switchgnn.bns`.
//!
//! Every blocking call (connecting, an exchange, an all-reduce, waiting for the switch) runs
//! with the GIL released, so workers in threads of one process overlap.

mod plan;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use switchgnn_dataplane::control::Secret;
use switchgnn_dataplane::ExchangeKind;
use switchgnn_transport::client::WorkerWire;
use switchgnn_transport::collective::{ReduceOp, RunningService, ServiceConfig};
use switchgnn_transport::job::AllReduceVia;
use switchgnn_transport::server::{ServerConfig, ServerReport, SwitchServer};
use switchgnn_transport::ShimConfig;
use switchgnn_transport::{JobFile, Participant, ParticipantError, PlanDir, Timeouts};

use crate::plan::{Failure, PrepareArgs};

create_exception!(
    switchgnn,
    SwitchgnnError,
    PyRuntimeError,
    "A failure of the switch, a worker or the network (the message says which and why)."
);

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Usage(why) => PyValueError::new_err(why),
            Failure::Failed(why) => SwitchgnnError::new_err(why),
        }
    }
}

fn participant_error(e: ParticipantError) -> PyErr {
    match e {
        ParticipantError::Usage(why) => PyValueError::new_err(why),
        other => SwitchgnnError::new_err(other.to_string()),
    }
}

fn address(text: &str, what: &str) -> PyResult<SocketAddr> {
    text.parse().map_err(|_| {
        PyValueError::new_err(format!(
            "{what} `{text}` is not an address like 127.0.0.1:7000"
        ))
    })
}

fn kind(name: &str) -> PyResult<ExchangeKind> {
    Ok(plan::parse_kind(name)?)
}

/// The settings of one side of a job, from keyword arguments.
struct JobArgs<'a> {
    plan: &'a PlanDir,
    kind: ExchangeKind,
    switch: SocketAddr,
    job: u16,
    loss: f64,
    seed: u64,
    join_timeout: f64,
    peer_timeout: f64,
    secret: Option<Vec<u8>>,
}

impl JobArgs<'_> {
    fn secret(&self) -> PyResult<Option<Secret>> {
        self.secret
            .clone()
            .map(Secret::new)
            .transpose()
            .map_err(PyValueError::new_err)
    }

    fn job_file(&self) -> PyResult<JobFile> {
        if !(0.0..1.0).contains(&self.loss) {
            return Err(PyValueError::new_err(format!(
                "loss {} must lie in [0, 1)",
                self.loss
            )));
        }
        let millis = |s: f64, what: &str| {
            if s.is_finite() && s > 0.0 {
                Ok((s * 1e3).ceil() as u64)
            } else {
                Err(PyValueError::new_err(format!(
                    "{what} {s} must be a positive number of seconds"
                )))
            }
        };
        let mut job = JobFile::loopback(
            self.plan.dir().to_path_buf(),
            self.kind,
            self.switch,
            self.plan.workers(),
        );
        job.job = self.job;
        job.timeouts = Timeouts {
            join_ms: millis(self.join_timeout, "join_timeout")?,
            peer_ms: millis(self.peer_timeout, "peer_timeout")?,
            ..Timeouts::loopback()
        };
        job.faults = ShimConfig {
            loss: self.loss,
            seed: self.seed,
            ..ShimConfig::default()
        };
        Ok(job)
    }
}

/// A job file and the plan it names (written by `switchgnn.prepare`), its secret read.
fn job_and_plan(path: &std::path::Path) -> Result<(JobFile, PlanDir, Option<Secret>), PyErr> {
    let job = JobFile::read(path).map_err(|e| PyValueError::new_err(e.to_string()))?;
    if job.transport != switchgnn_transport::job::TransportKind::Udp {
        return Err(PyValueError::new_err(format!(
            "{}: the Python module runs over UDP; a DPDK job runs as `switchgnn switch` and \
             `switchgnn train --job`",
            path.display()
        )));
    }
    if job.fabric.is_some() {
        return Err(PyValueError::new_err(format!(
            "{}: a job on a two-level fabric ([fabric]) runs through `switchgnn switch --tier` \
             and `switchgnn worker`; the Python module serves a single switch",
            path.display()
        )));
    }
    let prepared = plan::open(&job.plan)?;
    if u32::from(job.world) != prepared.plan().manifest.spec.workers {
        return Err(PyValueError::new_err(format!(
            "{}: world = {}, but the plan in {} is for {} workers",
            path.display(),
            job.world,
            job.plan.display(),
            prepared.plan().manifest.spec.workers
        )));
    }
    let secret = job
        .secret()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok((job, prepared, secret))
}

/// Write a plan for a graph given as an edge list and an owner per vertex (see the Python
/// wrapper `switchgnn.prepare`); returns a JSON summary.
#[pyfunction]
#[pyo3(signature = (num_vertices, src, dst, owner, feature_dims, out_dir, *, workers=None,
                    switch_memory="100MB".to_string(), kinds, order="priority-bfs".to_string(),
                    order_seed=0, name="python".to_string(), symmetrize=false, chip=None,
                    loopback_ports="spare".to_string(), gbps=100.0, host_packet_ns=20.0))]
#[allow(clippy::too_many_arguments)]
fn prepare(
    py: Python<'_>,
    num_vertices: usize,
    src: PyReadonlyArray1<'_, i64>,
    dst: PyReadonlyArray1<'_, i64>,
    owner: PyReadonlyArray1<'_, i64>,
    feature_dims: Vec<usize>,
    out_dir: PathBuf,
    workers: Option<u32>,
    switch_memory: String,
    kinds: Vec<String>,
    order: String,
    order_seed: u64,
    name: String,
    symmetrize: bool,
    chip: Option<String>,
    loopback_ports: String,
    gbps: f64,
    host_packet_ns: f64,
) -> PyResult<String> {
    let args = PrepareArgs {
        num_vertices,
        src: src.as_array().to_vec(),
        dst: dst.as_array().to_vec(),
        owner: owner.as_array().to_vec(),
        workers,
        feature_dims,
        out_dir,
        switch_memory,
        kinds,
        order,
        order_seed,
        name,
        symmetrize,
        chip,
        loopback_ports,
        gbps,
        host_packet_ns,
    };
    Ok(py.detach(|| plan::prepare(&args))?)
}

/// What a plan directory holds, as JSON: workers, vertices, widths, kinds, the owner of every
/// vertex is read separately ([`owners`]).
#[pyfunction]
fn plan_info(py: Python<'_>, plan: PathBuf) -> PyResult<String> {
    let p = py.detach(|| plan::open(&plan))?;
    let m = &p.plan().manifest;
    let kinds: Vec<&str> = p.saved_kinds().iter().map(|k| k.name()).collect();
    // `None` for a folder without shards (`switchgnn prepare` alone): no worker can join it.
    let contributions = p.contributions().ok();
    Ok(serde_json::json!({
        "workers": m.spec.workers,
        "vertices": m.dataset.vertices,
        "edges": m.dataset.edges,
        "feature_dims": m.spec.feature_dims,
        "kinds": kinds,
        "contributions": contributions,
        "boundary_vertices": m.boundary.boundary_vertices,
    })
    .to_string())
}

/// The owner of every vertex of a plan.
#[pyfunction]
fn owners<'py>(py: Python<'py>, plan: PathBuf) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let p = py.detach(|| plan::open(&plan))?;
    Ok(PyArray1::from_slice(py, p.plan().assignment.parts()))
}

type Served = (Result<(), String>, ServerReport);

/// The software switch of one job, with its all-reduce service, running in a thread of this
/// process until every worker has said goodbye or it is stopped. Its methods take it shared,
/// so one Python thread may stop a switch another is waiting on.
#[pyclass(module = "switchgnn._native")]
struct Switch {
    address: SocketAddr,
    /// The plan folder it serves.
    plan: PathBuf,
    /// The exchange kind it serves, which every worker of the job must run.
    kind: ExchangeKind,
    stop: Arc<AtomicBool>,
    state: Mutex<Serving>,
}

/// The switch thread and the service until they are joined, then what they ended with.
struct Serving {
    running: Option<JoinHandle<Served>>,
    collective: Option<RunningService>,
    /// The report once the switch has ended, as JSON, and the failure it ended with.
    ended: Option<(String, Option<String>)>,
}

#[pymethods]
impl Switch {
    #[new]
    #[pyo3(signature = (plan, kind="switchgnn", *, address="127.0.0.1:0", job=1, loss=0.0,
                        seed=0, join_timeout=20.0, peer_timeout=10.0, switch_memory=None,
                        secret=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        plan: PathBuf,
        kind: &str,
        address: &str,
        job: u16,
        loss: f64,
        seed: u64,
        join_timeout: f64,
        peer_timeout: f64,
        switch_memory: Option<String>,
        secret: Option<Vec<u8>>,
    ) -> PyResult<Switch> {
        let listen = self::address(address, "address")?;
        let kind = self::kind(kind)?;
        let prepared = py.detach(|| plan::open(&plan))?;
        let args = JobArgs {
            plan: &prepared,
            kind,
            switch: listen,
            job,
            loss,
            seed,
            join_timeout,
            peer_timeout,
            secret,
        };
        let job = args.job_file()?;
        let secret = args.secret()?;
        Switch::serve(py, &prepared, &job, secret, switch_memory)
    }

    /// The switch of a job file (`switchgnn switch --job`'s): its plan, exchange kind,
    /// address, timeouts, link, faults and `secret_file`. UDP only.
    #[staticmethod]
    #[pyo3(signature = (path, *, switch_memory=None))]
    fn from_job(py: Python<'_>, path: PathBuf, switch_memory: Option<String>) -> PyResult<Switch> {
        let (job, prepared, secret) = py.detach(|| job_and_plan(&path))?;
        Switch::serve(py, &prepared, &job, secret, switch_memory)
    }

    /// The address workers connect to (`host:port`).
    #[getter]
    fn address(&self) -> String {
        self.address.to_string()
    }

    /// The plan folder it serves (the job file's, for a switch from a job file).
    #[getter]
    fn plan(&self) -> PathBuf {
        self.plan.clone()
    }

    /// The exchange kind it serves (what its workers must be given).
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.name()
    }

    /// Whether the switch still serves the job.
    #[getter]
    fn running(&self) -> bool {
        self.serving()
            .running
            .as_ref()
            .is_some_and(|h| !h.is_finished())
    }

    /// Wait until every worker has said goodbye (or `timeout` seconds pass: then `None`); the
    /// switch's report as JSON. Raises if the job failed (a worker lost, workers missing).
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<String>> {
        // A timeout too large to mean anything waits as long as the switch runs.
        let until = timeout
            .and_then(|t| Duration::try_from_secs_f64(t.max(0.0)).ok())
            .and_then(|t| Instant::now().checked_add(t));
        while self.running() {
            if until.is_some_and(|u| Instant::now() >= u) {
                return Ok(None);
            }
            py.detach(|| std::thread::sleep(Duration::from_millis(20)));
            py.check_signals()?;
        }
        self.end(py, false)
    }

    /// Stop serving now, whatever the workers are doing; the report as JSON. Raises if the job
    /// had already failed.
    fn stop(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.stop.store(true, Ordering::Relaxed);
        self.end(py, true)
    }
}

impl Switch {
    /// Start serving `job` on `prepared`.
    fn serve(
        py: Python<'_>,
        prepared: &PlanDir,
        job: &JobFile,
        secret: Option<Secret>,
        switch_memory: Option<String>,
    ) -> PyResult<Switch> {
        let (kind, listen) = (job.mode, job.switch);
        let memory = match &switch_memory {
            Some(text) => switchgnn_partition::size::parse_bytes(text)
                .map_err(|e| PyValueError::new_err(e.to_string()))?,
            None => prepared.plan().manifest.spec.switch_memory,
        };
        let session = py.detach(|| prepared.session(kind).map(Arc::new).map_err(Failure::from))?;
        let service =
            ServiceConfig::of(job.job, job.world, &job.timeouts).with_secret(secret.clone());
        let cfg = ServerConfig::of_job(job, listen, memory, secret);
        let (mut server, collective) = SwitchServer::bind_with_service(cfg, session, service)
            .map_err(|e| SwitchgnnError::new_err(format!("cannot serve on {listen}: {e}")))?;
        let address = server
            .local_addr()
            .map_err(|e| SwitchgnnError::new_err(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let running = std::thread::Builder::new()
            .name("switchgnn-switch".into())
            .spawn(move || {
                let outcome = server
                    .run(&flag, None)
                    .map(|_| ())
                    .map_err(|e| e.to_string());
                (outcome, server.report())
            })
            .map_err(|e| SwitchgnnError::new_err(e.to_string()))?;
        Ok(Switch {
            address,
            plan: prepared.dir().to_path_buf(),
            kind,
            stop,
            state: Mutex::new(Serving {
                running: Some(running),
                collective: Some(collective),
                ended: None,
            }),
        })
    }

    /// Join the switch thread and the service once; the report, or the failure. A service
    /// that is `stopping` is not waited for, nor blamed for the workers it still had.
    fn end(&self, py: Python<'_>, stopping: bool) -> PyResult<Option<String>> {
        // Joined without the GIL, under the lock: a second caller waits for the same outcome.
        let ended = py.detach(|| {
            let mut serving = self.serving();
            if let Some(handle) = serving.running.take() {
                let served = handle.join();
                let grace = if stopping {
                    Duration::ZERO
                } else {
                    Duration::from_secs(2)
                };
                let service = serving
                    .collective
                    .take()
                    .map(|c| c.finish(grace).map(|_| ()).map_err(|e| e.to_string()))
                    .filter(|_| !stopping);
                let (report, failure) = match served {
                    Ok((outcome, report)) => {
                        let json = serde_json::to_string(&report).expect("the report serialises");
                        (json, outcome.err())
                    }
                    Err(_) => ("{}".to_string(), Some("the switch thread panicked".into())),
                };
                let failure = failure.or_else(|| match service {
                    Some(Err(e)) => Some(format!("the all-reduce service: {e}")),
                    _ => None,
                });
                serving.ended = Some((report, failure));
            }
            serving.ended.clone()
        });
        match ended {
            Some((_, Some(failure))) => Err(SwitchgnnError::new_err(failure)),
            Some((report, None)) => Ok(Some(report)),
            None => Ok(None),
        }
    }

    fn serving(&self) -> std::sync::MutexGuard<'_, Serving> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A switch dropped while serving stops at once (its thread looks at the flag at least every
/// 20 ms); the joins run with the GIL held, since a destructor cannot give it up.
impl Drop for Switch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let serving = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = serving.running.take() {
            let _ = h.join();
        }
        if let Some(c) = serving.collective.take() {
            let _ = c.finish(Duration::ZERO);
        }
    }
}

/// One worker of a job: its connection to the switch and the all-reduce service.
#[pyclass(module = "switchgnn._native")]
struct Worker {
    /// Behind a lock only because Python objects must be shareable between threads; every
    /// method takes the worker mutably, so the lock is never contended.
    participant: Mutex<Option<Participant>>,
    rank: u16,
    world: u16,
    widths: Vec<usize>,
    boundary: Vec<u32>,
    vertices: Vec<u32>,
    /// The plan folder the worker joined with.
    plan: PathBuf,
    wire: Option<WorkerWire>,
}

#[pymethods]
impl Worker {
    #[new]
    #[pyo3(signature = (plan, rank, switch, kind="switchgnn", *, job=1,
                        bind="127.0.0.1:0", loss=0.0, seed=0, join_timeout=20.0,
                        peer_timeout=10.0, secret=None, allreduce="switch"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        plan: PathBuf,
        rank: i64,
        switch: &str,
        kind: &str,
        job: u16,
        bind: &str,
        loss: f64,
        seed: u64,
        join_timeout: f64,
        peer_timeout: f64,
        secret: Option<Vec<u8>>,
        allreduce: &str,
    ) -> PyResult<Worker> {
        let switch = address(switch, "switch")?;
        let via = AllReduceVia::parse(allreduce).ok_or_else(|| {
            PyValueError::new_err(format!(
                "allreduce={allreduce:?}: the all-reduce runs in the \"switch\" or over \"tcp\""
            ))
        })?;
        let bind = address(bind, "bind")?;
        let kind = self::kind(kind)?;
        let prepared = py.detach(|| plan::open(&plan))?;
        let args = JobArgs {
            plan: &prepared,
            kind,
            switch,
            job,
            loss,
            seed,
            join_timeout,
            peer_timeout,
            secret,
        };
        let mut job = args.job_file()?;
        let secret = args.secret()?;
        job.bind = Some(bind);
        job.allreduce.via = via;
        Worker::join(py, &prepared, &job, rank, secret)
    }

    /// Worker `rank` of a job file (`switchgnn train --job`'s): its plan, exchange kind,
    /// switch address (or `switch`), bind address, timeouts, link, faults and `secret_file`.
    /// UDP only.
    #[staticmethod]
    #[pyo3(signature = (path, rank, *, switch=None))]
    fn from_job(
        py: Python<'_>,
        path: PathBuf,
        rank: i64,
        switch: Option<&str>,
    ) -> PyResult<Worker> {
        let (mut job, prepared, secret) = py.detach(|| job_and_plan(&path))?;
        if let Some(text) = switch {
            job.switch = address(text, "switch")?;
        }
        Worker::join(py, &prepared, &job, rank, secret)
    }

    #[getter]
    fn rank(&self) -> u16 {
        self.rank
    }

    #[getter]
    fn world(&self) -> u16 {
        self.world
    }

    /// The plan folder this worker joined with.
    #[getter]
    fn plan(&self) -> PathBuf {
        self.plan.clone()
    }

    /// The width each layer exchanges.
    #[getter]
    fn widths(&self) -> Vec<usize> {
        self.widths.clone()
    }

    /// The vertices (global ids, ascending) whose rows every exchange sends and receives.
    #[getter]
    fn boundary<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, &self.boundary)
    }

    /// The vertices this worker owns (global ids, ascending).
    #[getter]
    fn vertices<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_slice(py, &self.vertices)
    }

    /// Exchange one layer: `rows` holds one float32 row per boundary vertex (C order); `out`
    /// (same shape, float32, C order) receives each boundary vertex's sum of its remote
    /// neighbours' rows.
    fn exchange_into(
        &mut self,
        py: Python<'_>,
        layer: usize,
        rows: PyReadonlyArray2<'_, f32>,
        out: &Bound<'_, PyArray2<f32>>,
        backward: bool,
    ) -> PyResult<()> {
        let participant = self.participant().as_mut().ok_or_else(closed)?;
        let width = participant.width(layer).map_err(participant_error)?;
        let want = [participant.boundary().len(), width];
        if rows.shape() != want || out.shape() != want {
            return Err(PyValueError::new_err(format!(
                "layer {layer} exchanges {} boundary rows of width {width}: rows has shape {:?} \
                 and out {:?}",
                want[0],
                rows.shape(),
                out.shape()
            )));
        }
        let rows = rows
            .as_slice()
            .map_err(|_| PyValueError::new_err("rows must be a C-contiguous float32 array"))?;
        let mut out = out
            .try_readwrite()
            .map_err(|_| PyValueError::new_err("out is not writable (or borrowed elsewhere)"))?;
        let out = out
            .as_slice_mut()
            .map_err(|_| PyValueError::new_err("out must be a C-contiguous float32 array"))?;
        py.detach(|| participant.exchange_into(layer, backward, rows, out))
            .map_err(participant_error)
    }

    /// Sum (`op="sum"`) or take the maximum (`"max"`) of a float32 vector across every
    /// worker, in place; every worker gets the same bits.
    #[pyo3(signature = (values, op="sum"))]
    fn all_reduce(
        &mut self,
        py: Python<'_>,
        values: &Bound<'_, PyArray1<f32>>,
        op: &str,
    ) -> PyResult<()> {
        let op = match op {
            "sum" => ReduceOp::Sum,
            "max" => ReduceOp::Max,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown reduction `{other}` (sum or max)"
                )))
            }
        };
        let participant = self.participant().as_mut().ok_or_else(closed)?;
        let mut values = values
            .try_readwrite()
            .map_err(|_| PyValueError::new_err("values is not writable (or borrowed elsewhere)"))?;
        let values = values
            .as_slice_mut()
            .map_err(|_| PyValueError::new_err("values must be a contiguous float32 array"))?;
        py.detach(|| participant.all_reduce(op, values))
            .map_err(participant_error)
    }

    /// Counters of this worker's exchanges and all-reduces (and, once closed, of its socket),
    /// as JSON.
    fn stats(&self) -> String {
        let guard = self.participant.lock().unwrap_or_else(|e| e.into_inner());
        let totals = match &*guard {
            Some(p) => serde_json::to_value(&p.totals),
            None => Ok(serde_json::Value::Null),
        }
        .expect("the totals serialise");
        serde_json::json!({
            "rank": self.rank,
            "totals": totals,
            "wire": self.wire,
        })
        .to_string()
    }

    /// Say goodbye to the switch and the all-reduce service. Further calls raise.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(participant) = self.participant().take() else {
            return Ok(());
        };
        let wire = py
            .detach(|| participant.finish())
            .map_err(participant_error)?;
        self.wire = Some(wire);
        Ok(())
    }

    /// Whether [`Worker::close`] was called.
    #[getter]
    fn closed(&mut self) -> bool {
        self.participant().is_none()
    }
}

impl Worker {
    /// Join `job` on `prepared` as worker `rank`.
    fn join(
        py: Python<'_>,
        prepared: &PlanDir,
        job: &JobFile,
        rank: i64,
        secret: Option<Secret>,
    ) -> PyResult<Worker> {
        let (kind, switch) = (job.mode, job.switch);
        let world = prepared.workers();
        let rank = u16::try_from(rank)
            .ok()
            .filter(|&r| r < world)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "rank {rank} is not a worker of the plan's {world} (0 to {})",
                    world - 1
                ))
            })?;
        let session = py.detach(|| {
            prepared
                .view(kind, rank)
                .map(Arc::new)
                .map_err(Failure::from)
        })?;
        let contributions = prepared.contributions().map_err(Failure::from)?;
        // Workers must agree on the plans and on the scale's term count.
        let agreement = session.checksum ^ contributions.rotate_left(17);
        let participant = py
            .detach(|| {
                Participant::connect(job, session, rank, switch, agreement, contributions, secret)
            })
            .map_err(participant_error)?;
        let vertices = prepared
            .plan()
            .assignment
            .parts()
            .iter()
            .enumerate()
            .filter(|&(_, &o)| o == u32::from(rank))
            .map(|(v, _)| v as u32)
            .collect();
        Ok(Worker {
            widths: prepared.plan().manifest.spec.feature_dims.clone(),
            boundary: participant.boundary().to_vec(),
            participant: Mutex::new(Some(participant)),
            rank,
            world,
            vertices,
            plan: prepared.dir().to_path_buf(),
            wire: None,
        })
    }

    fn participant(&mut self) -> &mut Option<Participant> {
        self.participant
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
    }
}

fn closed() -> PyErr {
    PyValueError::new_err("the worker is closed")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SwitchgnnError", m.py().get_type::<SwitchgnnError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(prepare, m)?)?;
    m.add_function(wrap_pyfunction!(plan_info, m)?)?;
    m.add_function(wrap_pyfunction!(owners, m)?)?;
    m.add_class::<Switch>()?;
    m.add_class::<Worker>()?;
    Ok(())
}
