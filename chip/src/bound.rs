//! A lower bound on an exchange's time on a chip, and the verdict a user acts on.
//!
//! `T ≥ max(lane updates / (pipes · stateful ALUs · lanes per ALU · f), passes / (pipes · f),
//! recirculated bytes / loopback bandwidth, each host link's bytes / link rate, each host's
//! packets × its per-packet cost)`: every resource the exchange needs, used at its full rate
//! with nothing waiting for anything else. Where the load was counted per pipe and path
//! ([`crate::Spread`]), the busiest pipe's passes and additions and the busiest path's bytes,
//! each at that one server's rate, bound it too. Where the hosts' delays are given
//! ([`crate::Delays`]), the exchange's chain of messages (join, go, and per block rows, done,
//! go) adds its latency: a block's rows cannot leave before its go nor its done before they
//! arrive, so each block takes at least its messages' delays plus its resources' time, and the
//! sum over blocks is at least the whole load's. No schedule does better; the simulator's
//! times are checked against it.

use serde::Serialize;

use crate::load::{HostCost, Load};
use crate::preset::Chip;

/// The resource a bound's time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Term {
    /// The stateful ALUs' additions.
    LaneUpdates,
    /// The pipes' packet rate.
    Passes,
    /// The recirculation paths' bandwidth.
    Recirculation,
    /// The busiest host link.
    HostLink,
    /// The busiest host's per-packet processing.
    HostPackets,
}

impl Term {
    /// The term in words.
    pub fn name(self) -> &'static str {
        match self {
            Term::LaneUpdates => "lane updates",
            Term::Passes => "pipeline passes",
            Term::Recirculation => "recirculation",
            Term::HostLink => "host link",
            Term::HostPackets => "host packet processing",
        }
    }

    /// What the term's figure rests on: a limit of the chip or link itself, or a model of
    /// something the chip's limits do not fix.
    pub fn basis(self) -> &'static str {
        match self {
            Term::LaneUpdates | Term::Passes => "a chip limit",
            Term::Recirculation => "the recirculation ports this program uses",
            Term::HostLink => "the link rate",
            Term::HostPackets => "an assumed per-packet host cost",
        }
    }
}

/// Each resource's time for one exchange, and the largest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bound {
    /// Seconds the stateful ALUs need.
    pub lane_updates_s: f64,
    /// Seconds the pipes' packet rate needs.
    pub passes_s: f64,
    /// Seconds the recirculation paths need.
    pub recirculation_s: f64,
    /// Seconds the busiest host link needs.
    pub host_link_s: f64,
    /// Seconds the busiest host's packet processing needs.
    pub host_packets_s: f64,
    /// Seconds the exchange's messages spend on their way, one after another (0 where the
    /// delays are not given): [`crate::Delays::seconds`].
    pub latency_s: f64,
    /// The bound: the largest of the above resource terms, or the latency plus the largest
    /// term of the work that must fall between the messages, whichever is longer.
    pub seconds: f64,
    /// The largest resource term plus the whole latency: what the planner ranks kinds by
    /// (an estimate, not a bound). It equals `seconds` without latency; with it, it charges
    /// every kind the same messages' latency per block on top of its whole work, where the
    /// bound may leave out work that could overlap them (the in-network acks a receive core
    /// works through, which would otherwise rank a kind with an ack per packet ahead by
    /// what it may, not what it does, hide).
    pub estimate_seconds: f64,
    /// Which resource term it is.
    pub dominant: Term,
    /// The hosts' largest term plus the switch's, plus the messages' latency: the time if
    /// neither the switch's work and the hosts' nor either of them and the messages overlapped
    /// at all. The exchange runs between `seconds` and this when both sides are busy (they
    /// overlap only in part: a destination's sum leaves only after its last pass); the
    /// hybrid's search minimises it.
    pub serial_seconds: f64,
}

/// `x / rate`, 0 when the rate is infinite (the ideal chip).
fn time(x: f64, rate: f64) -> f64 {
    if rate.is_infinite() {
        0.0
    } else {
        x / rate
    }
}

impl Bound {
    /// The switch's part of the bound of `load` on `chip`, seconds: the largest of its lane
    /// updates', passes' and recirculation's times.
    pub fn switch_seconds(chip: &Chip, load: &Load) -> f64 {
        let [lanes, passes, recirculation] = Bound::switch_terms(chip, load, 0);
        lanes.max(passes).max(recirculation)
    }

    /// Seconds of the stateful ALUs, the pipes' packet rate and the recirculation paths:
    /// pooled over the chip, or where the load was counted per pipe and path for this chip
    /// ([`Load::spread_on`]) its busiest pipe and path when they need longer. `passes_off`
    /// passes are left out (those that may overlap the chain of messages,
    /// [`Load::unchained`]): off the pooled passes, and off the busiest pipe's as if they all
    /// ran there.
    fn switch_terms(chip: &Chip, load: &Load, passes_off: u64) -> [f64; 3] {
        let switch = load.switch_work_on(chip);
        let mut terms = [
            time(switch.lane_updates as f64, chip.lane_rate()),
            time(
                switch.passes.saturating_sub(passes_off) as f64,
                chip.pass_rate(),
            ),
            time(
                switch.recirculated_bytes as f64,
                chip.loopback_bytes_per_s(),
            ),
        ];
        if let Some(spread) = load.spread.as_ref().filter(|s| s.fits(chip)) {
            let pipe = spread.busiest_pipe_passes_seconds(chip)
                - time(passes_off as f64, chip.pass_rate_per_pipe);
            terms[0] = terms[0].max(spread.busiest_pipe_lanes_seconds(chip));
            terms[1] = terms[1].max(pipe);
            terms[2] = terms[2].max(spread.busiest_path_seconds(chip));
        }
        terms
    }

    /// The bound of `load` on `chip` with hosts costing `host`: the largest resource term,
    /// or, where the hosts' delays are given, the chain of messages' latency plus the largest
    /// term of the work that must fall between its messages, if that is longer.
    pub fn of(chip: &Chip, load: &Load, host: &HostCost) -> Bound {
        let terms = Bound::terms(chip, load, host, false);
        let latency = host.delays.seconds(load.blocks);
        let mut bound = Bound {
            lane_updates_s: terms[0].1,
            passes_s: terms[1].1,
            recirculation_s: terms[2].1,
            host_link_s: terms[3].1,
            host_packets_s: terms[4].1,
            latency_s: latency,
            seconds: 0.0,
            estimate_seconds: largest(&terms).1 + latency,
            dominant: Term::HostLink,
            serial_seconds: serial(&terms) + latency,
        };
        (bound.dominant, bound.seconds) = largest(&terms);
        if latency > 0.0 {
            let chained = Bound::terms(chip, load, host, true);
            let (term, seconds) = largest(&chained);
            if seconds + latency > bound.seconds {
                (bound.dominant, bound.seconds) = (term, seconds + latency);
            }
        }
        bound
    }

    /// Each resource's time, for all of `load` or (`chained`) without what may overlap the
    /// chain of messages ([`Load::unchained`]).
    fn terms(chip: &Chip, load: &Load, host: &HostCost, chained: bool) -> [(Term, f64); 5] {
        let link = host.link_gbps * 1e9 / 8.0;
        // What may overlap the chain, left out when `chained` (nothing where none was counted).
        let u = &load.unchained;
        fn off(chained: bool, v: &[u64]) -> &[u64] {
            if chained {
                v
            } else {
                &[]
            }
        }
        // The busiest host's larger direction, less what is `off` of each.
        let busiest = |(sent, sent_off): (&[u64], &[u64]),
                       (received, received_off): (&[u64], &[u64])| {
            let less = |x: &[u64], off: &[u64], i: usize| {
                x[i].saturating_sub(off.get(i).copied().unwrap_or(0))
            };
            (0..sent.len())
                .map(|i| less(sent, sent_off, i).max(less(received, received_off, i)))
                .max()
                .unwrap_or(0) as f64
        };
        let passes_off = if chained { u.passes } else { 0 };
        let [lanes, passes, recirculation] = Bound::switch_terms(chip, load, passes_off);
        let bytes = busiest(
            (&load.sent_bytes, off(chained, &u.sent_bytes)),
            (&load.received_bytes, off(chained, &u.received_bytes)),
        );
        let packets = busiest(
            (&load.sent_packets, off(chained, &u.sent_packets)),
            (&load.received_packets, off(chained, &u.received_packets)),
        );
        [
            (Term::LaneUpdates, lanes),
            (Term::Passes, passes),
            (Term::Recirculation, recirculation),
            (Term::HostLink, bytes / link),
            (Term::HostPackets, packets * host.per_packet_ns * 1e-9),
        ]
    }

    /// What the bound comes from, in words: the dominant term's name, with `+ latency` where
    /// the messages' latency was added to it.
    pub fn by(&self) -> String {
        let largest = [
            self.lane_updates_s,
            self.passes_s,
            self.recirculation_s,
            self.host_link_s,
            self.host_packets_s,
        ]
        .into_iter()
        .fold(0.0, f64::max);
        if self.latency_s > 0.0 && self.seconds > largest {
            format!("{} + latency", self.dominant.name())
        } else {
            self.dominant.name().to_string()
        }
    }
}

/// The largest term and its time.
fn largest(terms: &[(Term, f64); 5]) -> (Term, f64) {
    terms.iter().copied().fold(
        (Term::HostLink, 0.0),
        |best, t| if t.1 > best.1 { t } else { best },
    )
}

/// The hosts' largest term plus the switch's ([`Bound::serial_seconds`]).
fn serial(terms: &[(Term, f64); 5]) -> f64 {
    terms[3].1.max(terms[4].1) + terms[0].1.max(terms[1].1).max(terms[2].1)
}

/// Whether in-network aggregation can beat a host-only baseline (the best kind without it) on
/// a chip, and by how much at best: the in-network bound against the baseline's own bound (its
/// line-rate time on the same hosts, through the same chip as a plain switch).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The chip, in words.
    pub chip: String,
    /// The in-network exchange's bound.
    pub in_network: Bound,
    /// The host-only kind it is judged against (`host`, `host-reduce`, `host-hybrid`).
    pub baseline: String,
    /// That kind's bound.
    pub host_exchange: Bound,
    /// Baseline bound over in-network bound: the most in-network aggregation can gain (below
    /// 1: it cannot win on this chip).
    pub speedup_at_best: f64,
    /// Whether it can win at all.
    pub can_win: bool,
}

impl Verdict {
    /// The verdict for `in_network` against the host-only kind `baseline` (name, load) on
    /// `chip`.
    pub fn of(
        chip: &Chip,
        in_network: &Load,
        (baseline, host): (&str, &Load),
        cost: &HostCost,
    ) -> Verdict {
        let a = Bound::of(chip, in_network, cost);
        let b = Bound::of(chip, host, cost);
        let speedup = if a.seconds > 0.0 {
            b.seconds / a.seconds
        } else {
            f64::INFINITY
        };
        Verdict {
            chip: chip.describe(),
            in_network: a,
            baseline: baseline.to_string(),
            host_exchange: b,
            speedup_at_best: speedup,
            can_win: speedup > 1.0,
        }
    }

    /// `at best 3.1x faster than host (bound: host link)` or `cannot beat host-reduce: at
    /// best 0.05x (bound: recirculation)`.
    pub fn sentence(&self) -> String {
        let (b, term) = (&self.in_network, self.in_network.dominant);
        let mut by = format!("{}, {}", term.name(), term.basis());
        if b.by().ends_with("latency") {
            by += &format!(", plus {:.1} µs of messages' latency", b.latency_s * 1e6);
        }
        let base = &self.baseline;
        if self.can_win {
            format!(
                "at best {:.2}x faster than {base} (bound by {by})",
                self.speedup_at_best
            )
        } else {
            format!(
                "cannot beat {base}: at best {:.3}x its speed (bound by {by})",
                self.speedup_at_best
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost() -> HostCost {
        HostCost {
            link_gbps: 100.0,
            per_packet_ns: 0.0,
            frame_overhead: 66,
            framing: Default::default(),
            delays: crate::Delays::NONE,
        }
    }

    /// One host sending `bytes` in one packet whose `passes` aggregator passes recirculate.
    fn load(bytes: u64, passes: u64) -> Load {
        Load {
            sent_bytes: vec![bytes],
            received_bytes: vec![0],
            sent_packets: vec![1],
            received_packets: vec![0],
            passes,
            recirculations: passes - 1,
            recirculated_bytes: (passes - 1) * bytes,
            lane_updates: passes * 32,
            ..Load::default()
        }
    }

    #[test]
    fn each_resource_can_be_the_bound() {
        let t1 = Chip::preset("tofino1-32").unwrap();
        // 1000 passes of a 250-byte packet: 249,750 bytes around 200 Gb/s of recirculation.
        let b = Bound::of(&t1, &load(250, 1000), &cost());
        assert_eq!(b.dominant, Term::Recirculation);
        assert!((b.seconds - 999.0 * 250.0 / 25e9).abs() < 1e-12);
        // On the ideal chip only the host link is left.
        let ideal = Chip::preset("ideal").unwrap();
        let b = Bound::of(&ideal, &load(250, 1000), &cost());
        assert_eq!(b.dominant, Term::HostLink);
        assert_eq!(b.seconds, 250.0 / 12.5e9);
        // A slow host: its packet processing.
        let slow = HostCost {
            per_packet_ns: 1e6,
            ..cost()
        };
        assert_eq!(
            Bound::of(&t1, &load(250, 1), &slow).dominant,
            Term::HostPackets
        );
    }

    #[test]
    fn the_latency_of_each_block_adds_to_the_resources() {
        let t1 = Chip::preset("tofino1-32").unwrap();
        let without = Bound::of(&t1, &load(250, 1000), &cost());
        let star = HostCost {
            delays: crate::Delays::star(2_000.0),
            ..cost()
        };
        // One block: join and go, then rows up and down, done and the final go.
        let one = Load {
            blocks: 1,
            ..load(250, 1000)
        };
        let b = Bound::of(&t1, &one, &star);
        assert!((b.latency_s - 6.0 * 2e-6).abs() < 1e-15, "{b:?}");
        assert!((b.seconds - (without.seconds + b.latency_s)).abs() < 1e-15);
        assert!((b.serial_seconds - (without.serial_seconds + b.latency_s)).abs() < 1e-15);
        assert_eq!(
            b.dominant, without.dominant,
            "the resource term stays the dominant one"
        );
        // Each further block four more delays; a switch's work alone (no blocks) none.
        let three = Load {
            blocks: 3,
            ..one.clone()
        };
        let b3 = Bound::of(&t1, &three, &star);
        assert!((b3.latency_s - 14.0 * 2e-6).abs() < 1e-15, "{b3:?}");
        assert_eq!(Bound::of(&t1, &load(250, 1000), &star).latency_s, 0.0);
        // What may overlap the chain (the barrier's messages, acks) adds no latency: a host
        // whose every byte is such traffic is bound by its link or the latency, not their sum.
        let ideal = Chip::preset("ideal").unwrap();
        let mut acks = Load {
            blocks: 1,
            ..load(250_000, 1)
        };
        acks.unchained.sent_bytes = vec![250_000];
        let a = Bound::of(&ideal, &acks, &star);
        assert_eq!(a.seconds, a.host_link_s.max(a.latency_s), "{a:?}");
        acks.unchained.sent_bytes = vec![50_000];
        let a = Bound::of(&ideal, &acks, &star);
        assert!(
            (a.seconds - (200_000.0 / 12.5e9 + a.latency_s)).abs() < 1e-15,
            "{a:?}"
        );
        // On a fabric the barrier's messages go the longer way, a host's rows the shorter.
        let fabric = HostCost {
            delays: crate::Delays {
                to_switch_ns: 3_000.0,
                host_to_host_ns: 4_000.0,
            },
            ..cost()
        };
        let f = Bound::of(&t1, &one, &fabric);
        assert!((f.latency_s - (4.0 * 3e-6 + 4e-6)).abs() < 1e-15, "{f:?}");
    }

    #[test]
    fn the_verdict_compares_the_two_bounds() {
        let t1 = Chip::preset("tofino1-32").unwrap();
        let host = load(10_000, 1);
        let v = Verdict::of(&t1, &load(250, 1000), ("host", &host), &cost());
        assert!(!v.can_win && v.speedup_at_best < 1.0, "{v:?}");
        assert!(v.sentence().contains("cannot beat"), "{}", v.sentence());
        let v = Verdict::of(&t1, &load(250, 2), ("host", &host), &cost());
        assert!(v.can_win && v.speedup_at_best > 1.0, "{v:?}");
        assert!(v.sentence().contains("faster"), "{}", v.sentence());
    }
}
