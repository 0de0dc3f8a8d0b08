//! The control machines on simulated time, messages passed by hand.

use super::*;
use crate::switch::{Switch, SwitchConfig};

const MS: Nanos = 1_000_000;

fn timers() -> ControlTimers {
    ControlTimers {
        join: 1_000 * MS,
        peer: 100 * MS,
        retry: 10 * MS,
    }
}

fn hello(rank: u16) -> Hello {
    Hello {
        control_version: CONTROL_VERSION,
        wire_version: crate::wire::VERSION,
        job: 1,
        rank,
        world: 2,
        mode: "switchgnn".into(),
        plan_checksum: 42,
        proof: None,
    }
}

fn switch_control<A: Clone + Eq + std::hash::Hash + std::fmt::Display>(
    now: Nanos,
) -> SwitchControl<A> {
    SwitchControl::new(
        SwitchControlConfig {
            job: 1,
            world: 2,
            mode: "switchgnn".into(),
            plan_checksum: 42,
            timers: timers(),
            window: 64,
            allreduce_slots: 16,
            rack: None,
        },
        now,
    )
}

/// The start of a dataplane packet of type `kind`, as long as a header (the switch only reads
/// its type here).
fn packet(kind: u8) -> [u8; 32] {
    let mut p = [0u8; 32];
    p[..4].copy_from_slice(&[0x53, 0x47, 1, kind]);
    p
}

/// Deliver everything both sides queued, in both directions, at `now`.
fn exchange_messages(s: &mut SwitchControl<u16>, workers: &mut [WorkerControl], now: Nanos) {
    loop {
        let mut moved = false;
        for (port, w) in workers.iter_mut().enumerate() {
            while let Some(m) = w.poll_control() {
                s.handle_control(now, port as u16, m);
                moved = true;
            }
        }
        while let Some((port, m)) = s.poll_control() {
            workers[usize::from(port)].handle_control(now, m);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

#[test]
fn messages_round_trip_and_garbage_is_an_error() {
    let msgs = [
        Control::Hello(hello(1)),
        Control::Refuse {
            reason: "no".into(),
        },
        Control::Heartbeat,
        Control::Welcome {
            job: 1,
            rank: 2,
            window: 48,
            allreduce_slots: 32,
        },
        Control::Bye { rank: 1 },
        Control::ByeAck,
        Control::Unknown,
    ];
    for m in msgs {
        assert_eq!(Control::decode(&m.encode()).unwrap().unwrap(), m);
    }
    // A welcome without a window (an older switch) means no cap, and no all-reduce slots.
    assert_eq!(
        Control::decode(b"SGCT{\"type\":\"welcome\",\"job\":1,\"rank\":0}")
            .unwrap()
            .unwrap(),
        Control::Welcome {
            job: 1,
            rank: 0,
            window: 0,
            allreduce_slots: 0,
        }
    );
    assert!(Control::decode(&[0x53, 0x47, 1, 1]).is_none());
    assert!(Control::decode(b"SGCT{\"type\":").unwrap().is_err());
    assert!(Control::decode(b"SGCT{\"type\":\"launch\"}")
        .unwrap()
        .is_err());
}

#[test]
fn a_long_reason_is_cut_to_the_buffer() {
    let m = Control::Abort {
        reason: "é".repeat(2_000),
    };
    let mut buf = [0u8; crate::node::MAX_DATAGRAM_LEN];
    let len = m.encode_into(&mut buf);
    assert!(len <= buf.len());
    let Control::Abort { reason } = Control::decode(&buf[..len]).unwrap().unwrap() else {
        panic!("an abort");
    };
    assert!(reason.len() > 1_000 && reason.chars().all(|c| c == 'é'));
}

#[test]
fn workers_join_and_a_mismatch_is_refused_naming_the_workers_value() {
    let mut s = switch_control(0);
    let mut good = WorkerControl::new(hello(0), timers(), 0);
    let mut bad = WorkerControl::new(
        Hello {
            plan_checksum: 7,
            ..hello(1)
        },
        timers(),
        0,
    );
    exchange_messages(&mut s, std::slice::from_mut(&mut good), 0);
    assert!(good.is_joined());
    assert_eq!(good.window(), 64);
    s.handle_control(0, 1, bad.poll_control().unwrap());
    let (to, refusal) = s.poll_control().unwrap();
    assert_eq!(to, 1);
    bad.handle_control(0, refusal);
    let Some(WorkerFailure::Refused { reason }) = bad.failure() else {
        panic!("refused: {:?}", bad.state());
    };
    // The worker's own value, never the switch's: whoever learns it takes a free rank.
    assert!(reason.contains("0x0000000000000007"), "{reason}");
    assert!(reason.contains("plan checksum"), "{reason}");
    assert!(!reason.contains("2a") && !reason.contains("42"), "{reason}");
    assert_eq!(s.counters().refused, 1);
    assert_eq!(s.rank_of(&1), None);
}

#[test]
fn a_worker_retries_its_hello_and_gives_up_at_the_join_timeout() {
    let mut w = WorkerControl::new(hello(0), timers(), 0);
    let mut now = 0;
    let mut sent = 0;
    while w.failure().is_none() {
        while w.poll_control().is_some() {
            sent += 1;
        }
        now = w.poll_timeout().expect("a deadline while joining");
        w.handle_timeout(now);
    }
    assert_eq!(now, timers().join);
    assert_eq!(sent, 100, "one hello per retry interval");
    assert!(matches!(
        w.failure(),
        Some(WorkerFailure::NoSwitch { hellos: 100, .. })
    ));
}

#[test]
fn the_join_window_runs_from_the_first_workers_hello() {
    let sw = Switch::new(SwitchConfig::with_memory(1 << 16));
    let mut s: SwitchControl<u16> = switch_control(0);
    // Workers that take a minute to load their data: no deadline before anyone says hello.
    assert_eq!(s.poll_timeout(), None);
    let late = 60 * timers().join;
    s.handle_timeout(late, &sw);
    assert_eq!(s.failure(), None);
    let mut first = WorkerControl::new(hello(0), timers(), late);
    exchange_messages(&mut s, std::slice::from_mut(&mut first), late);
    assert!(first.is_joined());
    // From then on, the others have the join timeout to come.
    let due = s.poll_timeout().expect("the join deadline");
    assert!(due <= late + timers().join + 1, "{due}");
    s.handle_timeout(late + timers().join, &sw);
    assert_eq!(s.failure(), None);
    s.handle_timeout(late + timers().join + 1, &sw);
    let Some(
        failure @ SwitchFailure::JoinTimeout {
            missing, waited, ..
        },
    ) = s.failure()
    else {
        panic!("a join timeout: {:?}", s.failure());
    };
    assert_eq!((missing.as_slice(), *waited), (&[1][..], timers().join + 1));
    let text = failure.to_string();
    assert!(
        text.contains("workers [1] did not join within 1.0s of the first worker's hello"),
        "{text}"
    );
    assert!(text.contains("joined: 0 at 0"), "{text}");
}

/// Both workers join; worker 1 computes for `compute` (heartbeats only) while worker 0 keeps
/// the switch busy; `alive` says whether worker 1 sends its heartbeats at all.
fn run_compute(compute: Nanos, alive: bool) -> (SwitchControl<u16>, Vec<WorkerControl>, Nanos) {
    let sw = Switch::new(SwitchConfig::with_memory(1 << 16));
    let mut s = switch_control(0);
    let mut w = vec![
        WorkerControl::new(hello(0), timers(), 0),
        WorkerControl::new(hello(1), timers(), 0),
    ];
    exchange_messages(&mut s, &mut w, 0);
    assert!(w.iter().all(|w| w.is_joined()));
    let mut now = 0;
    while now < compute && s.failure().is_none() {
        let mut deadlines = vec![s.poll_timeout(), w[0].poll_timeout()];
        if alive {
            // A dead worker's timers never fire.
            deadlines.push(w[1].poll_timeout());
        }
        let next = deadlines.into_iter().flatten().min().expect("timers run");
        now = next;
        s.handle_timeout(now, &sw);
        for (i, wc) in w.iter_mut().enumerate() {
            if (alive || i == 0) && wc.poll_timeout().is_some_and(|t| t <= now) {
                wc.handle_timeout(now);
            }
        }
        if !alive {
            // A dead worker's messages never arrive.
            while w[1].poll_control().is_some() {}
        }
        exchange_messages(&mut s, &mut w, now);
    }
    (s, w, now)
}

#[test]
fn a_long_computation_is_not_a_dead_worker() {
    let (s, w, now) = run_compute(3 * timers().peer + 7 * MS, true);
    assert!(now > 3 * timers().peer);
    assert_eq!(s.failure(), None);
    assert!(w.iter().all(|w| w.is_joined()));
    assert!(w[1].heartbeats_sent() >= 12, "{}", w[1].heartbeats_sent());
}

#[test]
fn a_dead_worker_is_named_within_the_timeout_and_the_others_are_told() {
    let (s, w, now) = run_compute(10 * timers().peer, false);
    let Some(SwitchFailure::WorkerLost { rank, silent, .. }) = s.failure() else {
        panic!("worker lost: {:?}", s.failure());
    };
    assert_eq!(*rank, 1);
    // Heard last at the welcome (time 0); named at the first check past the timeout.
    assert!(*silent > timers().peer && now <= timers().peer + timers().quiet());
    let Some(WorkerFailure::Aborted { reason }) = w[0].failure() else {
        panic!("worker 0 told: {:?}", w[0].state());
    };
    assert!(reason.contains("worker 1"), "{reason}");
}

#[test]
fn a_silent_switch_is_noticed_only_while_listening() {
    let mut s = switch_control(0);
    let mut w = vec![WorkerControl::new(hello(0), timers(), 0)];
    exchange_messages(&mut s, &mut w, 0);
    let w = &mut w[0];
    // Computing: the switch's silence does not matter.
    for t in (1..=50).map(|i| i * 10 * MS) {
        w.handle_timeout(t);
        while w.poll_control().is_some() {}
    }
    assert!(w.is_joined());
    // Waiting on an exchange: silence counts from when the worker starts listening.
    w.listen(500 * MS, true);
    w.handle_timeout(590 * MS);
    assert!(w.is_joined());
    w.handle_timeout(601 * MS);
    assert!(matches!(
        w.failure(),
        Some(WorkerFailure::SwitchSilent { .. })
    ));
}

#[test]
fn a_restarted_switch_is_joined_again_and_a_goodbye_is_acknowledged() {
    let mut s = switch_control(0);
    let mut w = vec![WorkerControl::new(hello(0), timers(), 0)];
    exchange_messages(&mut s, &mut w, 0);
    // The switch restarts: it knows nobody, and answers data with `Unknown`.
    let mut s = switch_control(200 * MS);
    assert_eq!(s.on_data(200 * MS, &0, &packet(2)), Admission::Unknown);
    // Rate-limited: a second packet right after gets no second reply.
    assert_eq!(s.on_data(201 * MS, &0, &packet(2)), Admission::Unknown);
    let (to, m) = s.poll_control().unwrap();
    assert_eq!((to, &m), (0, &Control::Unknown));
    assert!(s.poll_control().is_none());
    w[0].handle_control(200 * MS, m);
    exchange_messages(&mut s, &mut w, 200 * MS);
    assert_eq!(w[0].rejoins(), 1);
    assert_eq!(s.rank_of(&0), Some(0));
    assert_eq!(s.on_data(210 * MS, &0, &packet(2)), Admission::Worker(0));
    w[0].leave(300 * MS);
    exchange_messages(&mut s, &mut w, 300 * MS);
    assert_eq!(w[0].state(), &WorkerState::Left);
}

#[test]
fn a_draining_switch_starts_no_new_exchange() {
    let mut s = switch_control(0);
    let mut w = vec![
        WorkerControl::new(hello(0), timers(), 0),
        WorkerControl::new(hello(1), timers(), 0),
    ];
    exchange_messages(&mut s, &mut w, 0);
    s.drain(10 * MS, 20 * MS);
    let join = [0x53, 0x47, 1, crate::wire::PacketType::Join as u8];
    assert_eq!(s.on_data(11 * MS, &1, &join), Admission::Drained);
    assert_eq!(s.counters().drained_joins, 1);
    let data = [0x53, 0x47, 1, crate::wire::PacketType::Data as u8];
    assert_eq!(s.on_data(11 * MS, &1, &data), Admission::Worker(1));
    assert!(!s.is_finished(29 * MS) && s.is_finished(30 * MS));
}

const SECRET: &[u8] = b"sixteen bytes at least, surely";

fn secret() -> Secret {
    Secret::new(SECRET).unwrap()
}

#[test]
fn a_flood_from_forged_addresses_gets_a_bounded_trickle_of_replies() {
    let mut s: SwitchControl<u32> = switch_control(0);
    let data = packet(2);
    // 100 000 datagrams in one second, each from another address.
    let flood = 100_000u64;
    for i in 0..flood {
        let now = i * 1_000_000_000 / flood;
        assert_eq!(s.on_data(now, &(i as u32), &data), Admission::Unknown);
    }
    let mut replies = 0u64;
    while s.poll_control().is_some() {
        replies += 1;
    }
    assert!(
        replies <= REPLY_BURST + REPLIES_PER_SECOND,
        "{replies} replies"
    );
    assert!(
        replies >= REPLIES_PER_SECOND / 2,
        "{replies} replies: the budget is not spent"
    );
    assert_eq!(s.counters().unknown_packets, flood);
    assert_eq!(s.counters().replies_suppressed, flood - replies);
    assert!(s.strangers_tracked() <= MAX_TRACKED);
    // One persistent stranger: one reply per REPLY_EVERY at most.
    let mut s: SwitchControl<u32> = switch_control(0);
    for ms in 0..1_000u64 {
        s.on_data(ms * MS, &7, &data);
    }
    let mut replies = 0;
    while s.poll_control().is_some() {
        replies += 1;
    }
    assert_eq!(replies, 1_000 * MS / REPLY_EVERY);
    // Hellos that are refused get the same budget.
    let mut s: SwitchControl<u32> = switch_control(0);
    for i in 0..10_000u32 {
        let wrong = Hello { job: 9, ..hello(0) };
        s.handle_control(u64::from(i) * 1_000, i, Control::Hello(wrong));
    }
    let mut refusals = 0;
    while s.poll_control().is_some() {
        refusals += 1;
    }
    assert_eq!(s.counters().refused, 10_000);
    assert!(
        refusals <= REPLY_BURST + REPLIES_PER_SECOND / 100 + 1,
        "{refusals}"
    );
}

#[test]
fn with_a_secret_only_workers_that_hold_it_join() {
    let mut s = switch_control(0).with_secret(secret(), 1);
    let mut w = vec![
        WorkerControl::new(hello(0), timers(), 0).with_secret(secret()),
        WorkerControl::new(hello(1), timers(), 0).with_secret(secret()),
    ];
    exchange_messages(&mut s, &mut w, 0);
    assert!(w.iter().all(|w| w.is_joined()));
    assert_eq!(s.counters().challenges, 2);
    assert_eq!(s.counters().admitted, 2);

    // Another secret: refused, saying so.
    let mut s = switch_control(0).with_secret(secret(), 2);
    let other = Secret::new(b"another secret of enough bytes".to_vec()).unwrap();
    let mut w = vec![WorkerControl::new(hello(0), timers(), 0).with_secret(other)];
    exchange_messages(&mut s, &mut w, 0);
    let Some(WorkerFailure::Refused { reason }) = w[0].failure() else {
        panic!("refused: {:?}", w[0].state());
    };
    assert!(
        reason.contains("admission proof does not verify"),
        "{reason}"
    );
    assert_eq!(s.counters().bad_proofs, 1);
    assert_eq!(s.joined(), 0);

    // No secret at all: the worker fails naming what it lacks.
    let mut s = switch_control(0).with_secret(secret(), 3);
    let mut w = vec![WorkerControl::new(hello(0), timers(), 0)];
    exchange_messages(&mut s, &mut w, 0);
    let Some(WorkerFailure::Refused { reason }) = w[0].failure() else {
        panic!("refused: {:?}", w[0].state());
    };
    assert!(reason.contains("secret_file"), "{reason}");
    assert_eq!(s.joined(), 0);

    // A switch without a secret takes a worker that has one.
    let mut s = switch_control(0);
    let mut w = vec![WorkerControl::new(hello(0), timers(), 0).with_secret(secret())];
    exchange_messages(&mut s, &mut w, 0);
    assert!(w[0].is_joined());
}

#[test]
fn a_proof_seen_on_the_wire_is_worthless_elsewhere_or_again() {
    let mut s = switch_control(0).with_secret(secret(), 4);
    // Worker 0 at address 0 is challenged and answers.
    s.handle_control(0, 0u16, Control::Hello(hello(0)));
    let Some((0, Control::Challenge { nonce })) = s.poll_control() else {
        panic!("a challenge");
    };
    let proven = Hello {
        proof: Some(secret().prove(&nonce, &hello(0))),
        ..hello(0)
    };
    // Someone who copied the proof sends it from address 1 first: challenged, not admitted.
    s.handle_control(MS, 1, Control::Hello(proven.clone()));
    assert!(matches!(
        s.poll_control(),
        Some((1, Control::Challenge { .. }))
    ));
    assert_eq!(s.rank_of(&1), None);
    // The real worker is admitted...
    s.handle_control(2 * MS, 0, Control::Hello(proven.clone()));
    assert!(matches!(
        s.poll_control(),
        Some((0, Control::Welcome { .. }))
    ));
    assert_eq!(s.rank_of(&0), Some(0));
    // ...and the same proof again (a replay) only gets a new challenge, counted apart from
    // a first hello (so was the copy sent from address 1).
    assert_eq!(s.counters().stale_proofs, 1);
    s.handle_control(100 * MS, 0, Control::Hello(proven.clone()));
    assert!(matches!(
        s.poll_control(),
        Some((0, Control::Challenge { .. }))
    ));
    assert_eq!(s.counters().stale_proofs, 2);
    // A proof for another hello (rank 1 claimed with rank 0's proof) does not verify.
    s.handle_control(200 * MS, 2, Control::Hello(hello(1)));
    let Some((2, Control::Challenge { nonce })) = s.poll_control() else {
        panic!("a challenge");
    };
    let forged = Hello {
        proof: Some(secret().prove(&nonce, &hello(0))),
        ..hello(1)
    };
    s.handle_control(201 * MS, 2, Control::Hello(forged));
    assert!(matches!(
        s.poll_control(),
        Some((2, Control::Refuse { .. }))
    ));
    assert_eq!(s.rank_of(&2), None);
    // Secrets are never printed.
    assert!(!format!("{:?}", secret()).contains("sixteen"));
    assert!(Secret::new(b"short".to_vec()).is_err());
}

/// A switch waiting for a worker that is still loading (rank 1 missing, rank 0 joined and
/// heard from) never offers a deadline in the past: after three peer timeouts its next
/// deadline is ahead of it, and it wakes about once per heartbeat interval until the join
/// deadline. Before, the stall deadline stayed two peer timeouts after the start, and a driver
/// sleeping until it did not sleep at all. A leaf (which judges no stall) likewise.
#[test]
fn a_switch_waiting_for_workers_offers_no_deadline_in_the_past() {
    let sw = Switch::new(SwitchConfig::with_memory(1 << 16));
    let leaf = |now| {
        let mut cfg = switch_control::<u16>(now).config().clone();
        cfg.rack = Some(vec![0]);
        SwitchControl::<u16>::new(cfg, now)
    };
    for (name, mut s, missing) in [
        ("a switch", switch_control::<u16>(0), true),
        ("a leaf", leaf(0), false),
    ] {
        let mut w = vec![WorkerControl::new(hello(0), timers(), 0)];
        exchange_messages(&mut s, &mut w, 0);
        assert_eq!(s.joined(), 1, "{name}");
        let mut now = 0;
        let mut wakes = 0u64;
        let until = 3 * timers().peer + timers().quiet();
        while now < until {
            let next = s.poll_timeout().expect("a deadline while waiting");
            assert!(
                next > now,
                "{name}: deadline {next} at {now} (wake {wakes})"
            );
            now = next;
            wakes += 1;
            // Worker 0 is alive: the switch hears it now and then.
            s.handle_control(now, 0, Control::Heartbeat);
            s.handle_timeout(now, &sw);
            while s.poll_control().is_some() {}
            assert!(wakes < 1_000, "{name}: {wakes} wakes by {now} ns");
        }
        let next = s.poll_timeout().expect("a deadline while waiting");
        assert!(next > now, "{name}: deadline {next} at {now}");
        assert_eq!(s.failure(), None, "{name}");
        // About one wake per heartbeat interval (a quarter of the peer timeout).
        assert!(
            wakes <= until / timers().quiet() + 2,
            "{name}: {wakes} wakes"
        );
        if missing {
            // Waiting on: the join deadline is still the one that ends the wait.
            assert!(next <= timers().join + 1);
        }
    }
}

/// Every message an address that has not joined can send gets a reply no larger than itself
/// (amplification ≤ 1), and no reply carries the switch's plan checksum, with or without a
/// secret. Before, a 1-byte datagram got a 22-byte `Unknown` and a hello with a wrong plan
/// checksum a longer refusal that named the switch's.
#[test]
fn strangers_get_no_reply_larger_than_what_they_sent_and_never_the_checksum() {
    const CHECKSUM: u64 = 0x5eed_c0de_1234_abcd;
    let fresh = |secret: bool| {
        let mut cfg = switch_control::<u32>(0).config().clone();
        cfg.plan_checksum = CHECKSUM;
        let s = SwitchControl::<u32>::new(cfg, 0);
        if secret {
            s.with_secret(super::Secret::new(SECRET).unwrap(), 9)
        } else {
            s
        }
    };
    let ours = Hello {
        plan_checksum: CHECKSUM,
        ..hello(0)
    };
    let hellos: Vec<(&str, Hello)> = vec![
        ("wrong checksum", hello(1)),
        (
            "wrong job",
            Hello {
                job: 9,
                ..ours.clone()
            },
        ),
        (
            "wrong world",
            Hello {
                world: 3,
                ..ours.clone()
            },
        ),
        (
            "rank out of range",
            Hello {
                rank: 7,
                ..ours.clone()
            },
        ),
        (
            "wrong mode",
            Hello {
                mode: "g3".into(),
                ..ours.clone()
            },
        ),
        (
            "empty mode",
            Hello {
                mode: String::new(),
                ..hello(1)
            },
        ),
        (
            "wrong control version",
            Hello {
                control_version: 99,
                ..ours.clone()
            },
        ),
        (
            "wrong wire version",
            Hello {
                wire_version: 9,
                ..ours.clone()
            },
        ),
        (
            "a taken rank",
            Hello {
                rank: 0,
                ..ours.clone()
            },
        ),
        (
            "a stale proof",
            Hello {
                proof: Some(secret().prove("not a nonce the switch sent", &hello(1))),
                ..hello(1)
            },
        ),
    ];
    let data: Vec<(&str, Vec<u8>)> = [0usize, 1, 4, 21, 22, 32]
        .iter()
        .map(|&n| ("data", packet(2)[..n].to_vec()))
        .collect();
    let controls = [
        ("heartbeat", Control::Heartbeat),
        ("bye", Control::Bye { rank: 0 }),
        ("byeack", Control::ByeAck),
        ("unknown", Control::Unknown),
    ];
    let checksum_texts = [
        format!("{CHECKSUM:x}"),
        format!("{CHECKSUM:X}"),
        CHECKSUM.to_string(),
        "c0de".to_string(),
    ];
    for secret_too in [false, true] {
        let mut s = fresh(secret_too);
        // Rank 0 is taken by a live worker at address 0.
        if secret_too {
            s.handle_control(0, 0, Control::Hello(ours.clone()));
            let Some((0, Control::Challenge { nonce })) = s.poll_control() else {
                panic!("a challenge");
            };
            let proven = Hello {
                proof: Some(secret().prove(&nonce, &ours)),
                ..ours.clone()
            };
            s.handle_control(0, 0, Control::Hello(proven));
        } else {
            s.handle_control(0, 0, Control::Hello(ours.clone()));
        }
        assert!(matches!(
            s.poll_control(),
            Some((0, Control::Welcome { .. }))
        ));
        let mut now = 0;
        let mut addr = 0u32;
        let mut answered = 0;
        let mut check = |s: &mut SwitchControl<u32>, what: &str, asked: usize, addr: u32| {
            let mut replied = 0;
            let mut nonce = None;
            while let Some((to, m)) = s.poll_control() {
                if let Control::Challenge { nonce: n } = &m {
                    nonce = Some(n.clone());
                }
                assert_eq!(to, addr, "{what}: a reply to someone else");
                let bytes = m.encode();
                let text = String::from_utf8_lossy(&bytes);
                for c in &checksum_texts {
                    assert!(!text.contains(c.as_str()), "{what}: {text}");
                }
                replied += bytes.len();
            }
            assert!(
                replied <= asked,
                "{what} (secret: {secret_too}): {replied} bytes for {asked}"
            );
            eprintln!("{what} (secret: {secret_too}): {replied} bytes for {asked}");
            answered += usize::from(replied > 0);
            nonce
        };
        for (what, h) in &hellos {
            (now, addr) = (now + REPLY_EVERY, addr + 1);
            let m = Control::Hello(h.clone());
            let asked = m.encode().len();
            s.handle_control(now, addr, m);
            let challenge = check(&mut s, what, asked, addr);
            if secret_too {
                // Answer the challenge with a proof under another secret: refused.
                if let Some(nonce) = challenge {
                    let other = Secret::new(b"another secret of enough bytes".to_vec()).unwrap();
                    let m = Control::Hello(Hello {
                        proof: Some(other.prove(&nonce, h)),
                        ..h.clone()
                    });
                    let asked = m.encode().len();
                    s.handle_control(now + 1, addr, m);
                    check(&mut s, "a wrong proof", asked, addr);
                }
            }
        }
        for (what, bytes) in &data {
            (now, addr) = (now + REPLY_EVERY, addr + 1);
            assert_eq!(s.on_data(now, &addr, bytes), Admission::Unknown);
            check(&mut s, what, bytes.len(), addr);
        }
        for (what, m) in &controls {
            (now, addr) = (now + REPLY_EVERY, addr + 1);
            let asked = m.encode().len();
            s.handle_control(now, addr, m.clone());
            check(&mut s, what, asked, addr);
        }
        // Most are answered (shortened): the test saw replies, not only silence.
        assert!(answered >= hellos.len(), "{answered} answered");
        assert!(s.counters().replies_too_large >= 4, "{:?}", s.counters());
        assert_eq!(s.joined(), 1);
    }
}

/// A worker stopped (SIGSTOP) while the switch aborted the job judges the switch silent when
/// it resumes, before it reads its socket; the abort waiting there, naming the cause, wins.
#[test]
fn an_abort_read_after_a_pause_replaces_the_switchs_silence() {
    let mut s = switch_control(0);
    let mut w = vec![WorkerControl::new(hello(0), timers(), 0)];
    exchange_messages(&mut s, &mut w, 0);
    let w = &mut w[0];
    w.listen(10 * MS, true);
    w.handle_timeout(10 * MS + 2 * timers().peer);
    assert!(matches!(
        w.failure(),
        Some(WorkerFailure::SwitchSilent { .. })
    ));
    w.handle_control(
        10 * MS + 2 * timers().peer,
        Control::Abort {
            reason: "worker 0 fell silent".into(),
        },
    );
    let Some(WorkerFailure::Aborted { reason }) = w.failure() else {
        panic!("aborted: {:?}", w.state());
    };
    assert!(reason.contains("worker 0"), "{reason}");
}
