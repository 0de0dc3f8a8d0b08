//! A packet arriving at the engine, by type: the switch's gos, sums and raw copies, its
//! acknowledgements, other workers' fetches and their packed host copies.

use super::receive::Raw;
use super::recovery::Ask;
use super::rows::AckNow;
use super::{send, Engine, EngineDrop, SendStrategy};
use crate::node::Address;
use crate::plan::Mode;
use crate::wire::{AckRanges, Packet, PacketType, Records, Repr, HEADER_LEN};

/// The lanes of `packet` copied into `lanes` (an aggregator's worth on the stack).
pub(super) fn copy_lanes<'a>(
    packet: &Packet<&[u8]>,
    lanes: &'a mut [i32; crate::wire::MAX_LANES],
) -> &'a [i32] {
    let mut n = 0;
    for (slot, v) in lanes.iter_mut().zip(packet.payload()) {
        *slot = v;
        n += 1;
    }
    &lanes[..n]
}

impl<S: SendStrategy> Engine<S> {
    /// Check a packet against the exchange and its plan, then hand it to its type's handler.
    pub(super) fn on_packet(&mut self, bytes: &[u8]) -> Result<(), EngineDrop> {
        use EngineDrop::*;
        let packet = Packet::new_checked(bytes).map_err(|_| Malformed)?;
        let repr = Repr::parse(&packet).map_err(|_| Malformed)?;
        // Numbered by the switch as it left, whichever exchange it belongs to.
        if repr.packet_type.is_stamped() {
            self.holes.saw(repr.sequence);
        }
        if !self.cfg.exchange.matches(&repr) {
            return Err(OtherExchange);
        }
        let limits = crate::wire::PlanLimits {
            vertices: self.plan.owner.len() as u32,
            blocks: self.plan.blocks.len() as u32 + 1,
            workers: u32::from(self.plan.workers),
            layers: u32::from(repr.layer) + 1,
            chunks: self.plan.chunks() as u32,
        };
        repr.check_plan(&limits).map_err(|_| OutOfPlan)?;
        let c = usize::from(repr.chunk);
        let lanes_ok = usize::from(repr.lanes) == self.plan.chunk_lanes(c);
        match repr.packet_type {
            PacketType::BlockGo => {
                if repr.sequence != self.cfg.seq {
                    return Err(OtherExchange);
                }
                self.observe_block(repr.block);
            }
            PacketType::Data if repr.flags.ack => self.on_data_ack(&repr)?,
            PacketType::Stamps if repr.flags.ack => self.holes.reported(repr.sequence),
            PacketType::Fetch => {
                if self.recovery.len() >= self.reply_queue_limit() {
                    // Behind on replies already: the requester asks again later (waiting
                    // longer once it has asked twice), and no flood of requests grows this
                    // queue.
                    self.stats.fetches_shed += 1;
                    return Ok(());
                }
                self.answer_fetch(&repr)?;
            }
            PacketType::Result if lanes_ok || repr.flags.fetch => self.on_result(&repr, &packet)?,
            PacketType::Rows if repr.flags.ack => self.on_rows_ack(&repr, bytes)?,
            PacketType::Rows if !self.plan.mode.switch_aggregates() && repr.lanes == 0 => {
                self.on_rows(&repr, &bytes[HEADER_LEN..])?;
            }
            PacketType::Raw if lanes_ok => self.on_raw(&repr, &packet)?,
            _ => return Err(Unsupported),
        }
        self.check_block_done();
        Ok(())
    }

    /// The switch acknowledged one of our feature chunks (or partial sums).
    fn on_data_ack(&mut self, repr: &Repr) -> Result<(), EngineDrop> {
        use EngineDrop::*;
        let c = usize::from(repr.chunk);
        if self.current_block() != Some(repr.block) {
            return Err(Stale);
        }
        let bytes = 4 * self.plan.chunk_lanes(c);
        if repr.flags.ecn {
            self.stats.ecn_echoes += 1;
        }
        if self.sender.on_ack(self.now, repr.sequence, repr.src) {
            self.cc.on_ack(self.now, bytes, repr.flags.ecn);
            self.sync_window();
            self.stats.srtt_ns = self.sender.srtt().unwrap_or(0);
        }
        Ok(())
    }

    /// Another worker asks for one of our contributions: queue it as a raw copy.
    fn answer_fetch(&mut self, repr: &Repr) -> Result<(), EngineDrop> {
        use EngineDrop::*;
        let c = usize::from(repr.chunk);
        tracing::trace!(
            rank = self.cfg.rank,
            now = self.now,
            from = repr.worker,
            u = repr.src,
            v = repr.dst,
            c,
            "fetch answered"
        );
        // A receiver missed this contribution. Not a congestion signal for this
        // sender: what was lost is as likely the switch's sum on the receiver's link as
        // this worker's packet, and this worker's own losses show in its own acks (a
        // cut per fetch shrank every owner's window to one packet at 5% loss).
        // Features do not depend on the block: answer whatever the phase.
        let mut h = self.header(PacketType::Raw);
        h.flags.resend = true;
        h.block = repr.block;
        let (plan, rows) = (&self.plan, &self.rows);
        self.recovery
            .try_push_with(Address::Switch, |buf| {
                let (len, _) = send::feature_packet(
                    &h,
                    PacketType::Raw,
                    plan,
                    rows,
                    None,
                    repr.src,
                    repr.dst,
                    c,
                    repr.sequence,
                    buf,
                )?;
                Some(len)
            })
            .ok_or(NotOwned)?;
        self.stats.fetch_replies += 1;
        Ok(())
    }

    /// A sum from the switch, or its notice that a destination overflowed (then fetch).
    fn on_result(&mut self, repr: &Repr, packet: &Packet<&[u8]>) -> Result<(), EngineDrop> {
        use EngineDrop::*;
        let c = usize::from(repr.chunk);
        self.observe_block(repr.block);
        if self.current_block() != Some(repr.block) {
            return Err(Stale);
        }
        self.stats.results += 1;
        self.stats.payload_received += 4 * u64::from(repr.lanes);
        let receiver = self.receiver.as_mut().ok_or(Stale)?;
        if repr.flags.fetch {
            self.stats.overflow_notices += 1;
            let wants = receiver.overflowed(repr.dst, c).ok_or(Unexpected)?;
            self.fetch(wants, usize::MAX, Ask::Any);
        } else {
            let mut lanes = [0i32; crate::wire::MAX_LANES];
            let values = copy_lanes(packet, &mut lanes);
            receiver
                .on_result(
                    repr.dst,
                    c,
                    repr.count,
                    values,
                    &mut self.output,
                    &mut self.stats,
                )
                .ok_or(Unexpected)?;
            self.last_progress = self.now;
        }
        Ok(())
    }

    /// A receiver's acknowledgement of our packed copies, in ranges.
    fn on_rows_ack(&mut self, repr: &Repr, bytes: &[u8]) -> Result<(), EngineDrop> {
        use EngineDrop::*;
        if self.current_block() != Some(repr.block) {
            return Err(Stale);
        }
        let ranges =
            AckRanges::new_checked(&bytes[HEADER_LEN..], repr.count).map_err(|_| Malformed)?;
        if repr.flags.ecn {
            self.stats.ecn_echoes += 1;
        }
        let (acked, lost) = self.sender.on_ack_ranges(self.now, repr.worker, ranges);
        if acked > 0 {
            self.cc.on_ack(self.now, acked as usize, repr.flags.ecn);
            self.stats.srtt_ns = self.sender.srtt().unwrap_or(0);
        }
        if lost {
            self.stats.ack_losses += 1;
            self.cc.on_timeout(self.now);
        }
        self.sync_window();
        Ok(())
    }

    /// A contribution forwarded raw (unaggregated), for this block and the cache.
    fn on_raw(&mut self, repr: &Repr, packet: &Packet<&[u8]>) -> Result<(), EngineDrop> {
        use EngineDrop::*;
        let c = usize::from(repr.chunk);
        self.stats.raws += 1;
        self.stats.payload_received += 4 * u64::from(repr.lanes);
        let mut lanes = [0i32; crate::wire::MAX_LANES];
        let values = copy_lanes(packet, &mut lanes);
        self.observe_block(repr.block);
        let for_block = self.current_block() == Some(repr.block);
        if for_block && repr.flags.resend {
            self.sample_fetch(repr.src, repr.dst, repr.chunk);
        }
        if for_block {
            let receiver = self.receiver.as_mut().ok_or(Stale)?;
            let raw = Raw {
                u: repr.src,
                v: repr.dst,
                c,
                values,
                overflow: !repr.flags.resend,
            };
            let progressed = receiver.on_raw(raw, &mut self.output, &mut self.stats);
            tracing::trace!(
                rank = self.cfg.rank,
                now = self.now,
                u = repr.src,
                v = repr.dst,
                c,
                resend = repr.flags.resend,
                progressed,
                "raw copy"
            );
            if progressed {
                self.last_progress = self.now;
            }
        }
        // A partial sum forwarded by the switch serves one destination only: only
        // plain features are kept.
        if !self.plan.mode.pre_aggregated() || repr.flags.resend {
            self.cache.insert((repr.src, repr.chunk), values);
        }
        Ok(())
    }

    /// A packet of packed host copies from worker `repr.worker`, its records in `payload`:
    /// checked whole, acknowledged (now or soon), then each record taken as a raw copy.
    pub(super) fn on_rows(&mut self, repr: &Repr, payload: &[u8]) -> Result<(), EngineDrop> {
        use EngineDrop::*;
        let records = Records::new_checked(payload, repr.count).map_err(|_| Malformed)?;
        let (plan, sender, me) = (&self.plan, repr.worker, self.cfg.rank);
        // A copy names a vertex of its sender; a partial sum names a destination of ours, and
        // comes without lanes when it did not fit them. In the host hybrid a packet may carry
        // either: which one, the record's vertex says.
        let partial = |r: &crate::wire::Record| send::is_partial(plan, sender, r.src);
        // In the host two-level exchange a partial naming another worker's destination is a
        // share for this worker to add up as its rack's proxy.
        let queue = self.sender.queue();
        let share = |r: &crate::wire::Record| {
            plan.mode == Mode::HostTwoLevel && plan.owner.get(r.src as usize) != Some(&me)
        };
        let fits = |r: &crate::wire::Record| {
            let c = usize::from(r.chunk);
            if share(r) {
                let lanes = r.lane_count() == plan.chunk_lanes(c) || r.lane_count() == 0;
                return c < plan.chunks() && lanes && queue.expects_share(r.src, sender);
            }
            let (lanes, named_by) = if partial(r) {
                (
                    r.lane_count() == plan.chunk_lanes(c) || r.lane_count() == 0,
                    me,
                )
            } else {
                (r.lane_count() == plan.chunk_lanes(c), sender)
            };
            c < plan.chunks() && lanes && plan.owner.get(r.src as usize) == Some(&named_by)
        };
        if repr.count == 0 || !records.clone().all(|r| fits(&r)) {
            return Err(Unexpected);
        }
        self.observe_block(repr.block);
        if self.current_block() != Some(repr.block) {
            return Err(Stale);
        }
        let ack = self.acks.on_packet(
            self.now,
            sender,
            repr.block,
            repr.sequence,
            (repr.src, repr.dst),
            (repr.flags.ecn, repr.flags.resend),
            self.cfg.framing.ack_every,
            self.ack_delay(),
        );
        if ack == AckNow::Yes {
            self.send_ack(sender);
        }
        let hybrid = self.plan.mode == Mode::HostHybrid;
        let receiver = self.receiver.as_mut().ok_or(Stale)?;
        let mut lanes = [0i32; crate::wire::MAX_LANES];
        let mut overflowed = Vec::new();
        for r in records {
            self.stats.raws += 1;
            self.stats.payload_received += r.carried_bytes() as u64;
            let values = r.lanes_into(&mut lanes);
            let c = usize::from(r.chunk);
            if self.plan.mode == Mode::HostTwoLevel && self.plan.owner[r.src as usize] != me {
                let new = self.sender.queue_mut().on_share(r.src, sender, c, values);
                if new.ok_or(Unexpected)? {
                    self.last_progress = self.now;
                }
                continue;
            }
            if send::is_partial(&self.plan, sender, r.src) {
                if values.is_empty() {
                    // Its sender's partial overflowed: the destination's plain features.
                    self.stats.overflow_notices += 1;
                    overflowed.extend(receiver.overflowed(r.src, c).ok_or(Unexpected)?);
                } else if receiver.on_partial(
                    r.src,
                    sender,
                    c,
                    values,
                    &mut self.output,
                    &mut self.stats,
                ) {
                    self.last_progress = self.now;
                }
                continue;
            }
            let progressed = if hybrid {
                receiver.on_copy(r.src, c, values, &mut self.output, &mut self.stats)
            } else {
                let raw = Raw {
                    u: r.src,
                    v: repr.dst,
                    c,
                    values,
                    overflow: false,
                };
                receiver.on_raw(raw, &mut self.output, &mut self.stats)
            };
            if progressed {
                self.last_progress = self.now;
            }
            self.cache.insert((r.src, r.chunk), values);
        }
        if !overflowed.is_empty() {
            self.fetch(overflowed, usize::MAX, Ask::Any);
        }
        Ok(())
    }
}
