//! Ethernet / IP / UDP frames around switchgnn datagrams: the frames the P4 program parses,
//! a kernel-bypass datapath sends and receives, and packet captures record.
//!
//! Writing is done here (in place, into a buffer the caller owns: an mbuf's data room);
//! reading goes through `etherparse`, which checks every length and refuses what does not add
//! up, so a malformed frame is an error to count, never a panic.

use std::net::{IpAddr, SocketAddr, SocketAddrV4};

use thiserror::Error;

use crate::datapath::EcnCodepoint;

/// An Ethernet address.
pub type Mac = [u8; 6];
/// The all-ones address: every station on the segment takes it.
pub const BROADCAST: Mac = [0xff; 6];
/// Ethernet, IPv4 and UDP headers together.
pub const HEADERS_V4: usize = ETHERNET + IPV4 + UDP;
const ETHERNET: usize = 14;
const IPV4: usize = 20;
const UDP: usize = 8;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;

/// The two ECN bits of the IP header for a codepoint (RFC 3168).
pub fn ecn_bits(ecn: Option<EcnCodepoint>) -> u8 {
    match ecn {
        None => 0,
        Some(EcnCodepoint::Ect1) => 1,
        Some(EcnCodepoint::Ect0) => 2,
        Some(EcnCodepoint::Ce) => 3,
    }
}

/// The codepoint of an IP header's two ECN bits.
pub fn ecn_of_bits(bits: u8) -> Option<EcnCodepoint> {
    match bits & 3 {
        1 => Some(EcnCodepoint::Ect1),
        2 => Some(EcnCodepoint::Ect0),
        3 => Some(EcnCodepoint::Ce),
        _ => None,
    }
}

/// RFC 1071 checksum of `bytes`.
pub fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The IPv4 header of a UDP datagram of `udp_len` bytes (checksum filled in).
fn ipv4_header(src: [u8; 4], dst: [u8; 4], ecn: u8, udp_len: u16) -> [u8; IPV4] {
    let mut ip = [0u8; IPV4];
    ip[0] = 0x45;
    ip[1] = ecn;
    ip[2..4].copy_from_slice(&(IPV4 as u16 + udp_len).to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64; // TTL
    ip[9] = 17; // UDP
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let sum = checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip
}

fn udp_header(from: u16, to: u16, udp_len: u16) -> [u8; UDP] {
    let mut udp = [0u8; UDP];
    udp[0..2].copy_from_slice(&from.to_be_bytes());
    udp[2..4].copy_from_slice(&to.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    // Checksum 0: none, which IPv4 allows; the switchgnn header has no checksum of its own
    // either, as the Ethernet FCS already covers the frame.
    udp
}

/// Write the Ethernet / IPv4 / UDP headers of a datagram of `payload_len` bytes into the first
/// [`HEADERS_V4`] bytes of `buf` (the payload goes right after them).
pub fn write_ipv4_headers(
    buf: &mut [u8],
    macs: (Mac, Mac),
    from: SocketAddrV4,
    to: SocketAddrV4,
    ecn: Option<EcnCodepoint>,
    payload_len: usize,
) {
    let (src_mac, dst_mac) = macs;
    let udp_len = (UDP + payload_len) as u16;
    buf[0..6].copy_from_slice(&dst_mac);
    buf[6..12].copy_from_slice(&src_mac);
    buf[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let ip = ipv4_header(from.ip().octets(), to.ip().octets(), ecn_bits(ecn), udp_len);
    buf[ETHERNET..ETHERNET + IPV4].copy_from_slice(&ip);
    buf[ETHERNET + IPV4..HEADERS_V4].copy_from_slice(&udp_header(from.port(), to.port(), udp_len));
}

/// A made-up MAC address for an IP address: Wireshark shows frames, and hosts on a capture
/// are easier to tell apart by their addresses.
pub fn made_up_mac(ip: IpAddr) -> Mac {
    let o = match ip {
        IpAddr::V4(v4) => v4.octets(),
        IpAddr::V6(v6) => {
            let b = v6.octets();
            [b[12], b[13], b[14], b[15]]
        }
    };
    // Locally administered, unicast.
    [0x02, 0x53, o[0], o[1], o[2], o[3]]
}

/// The Ethernet frame (without FCS) carrying `payload` from `from` to `to` over UDP, with
/// made-up MAC addresses: what a capture records.
pub fn frame(
    from: SocketAddr,
    to: SocketAddr,
    ecn: Option<EcnCodepoint>,
    payload: &[u8],
) -> Vec<u8> {
    let macs = (made_up_mac(from.ip()), made_up_mac(to.ip()));
    if let (SocketAddr::V4(from), SocketAddr::V4(to)) = (from, to) {
        let mut out = vec![0u8; HEADERS_V4 + payload.len()];
        write_ipv4_headers(&mut out, macs, from, to, ecn, payload.len());
        out[HEADERS_V4..].copy_from_slice(payload);
        return out;
    }
    let v6 = |a: IpAddr| match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    let bits = ecn_bits(ecn);
    let udp_len = (UDP + payload.len()) as u16;
    let mut out = Vec::with_capacity(ETHERNET + 40 + UDP + payload.len());
    out.extend_from_slice(&macs.1);
    out.extend_from_slice(&macs.0);
    out.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
    let mut ip = [0u8; 40];
    ip[0] = 0x60 | (bits >> 4);
    ip[1] = bits << 4;
    ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
    ip[6] = 17;
    ip[7] = 64;
    ip[8..24].copy_from_slice(&v6(from.ip()).octets());
    ip[24..40].copy_from_slice(&v6(to.ip()).octets());
    out.extend_from_slice(&ip);
    out.extend_from_slice(&udp_header(from.port(), to.port(), udp_len));
    out.extend_from_slice(payload);
    out
}

/// Why a received frame was not taken.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// A length or header that does not add up (etherparse's words for it).
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// Well formed, but not IPv4 / UDP (ARP, IPv6, LLDP...): not for us.
    #[error("not an IPv4 UDP frame")]
    NotUdp,
    /// An IPv4 fragment: switchgnn datagrams are never fragmented.
    #[error("IPv4 fragment")]
    Fragment,
}

/// A received IPv4 / UDP frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received<'a> {
    /// The sender's Ethernet address: where replies to `from` go.
    pub src_mac: Mac,
    /// The sender's IPv4 address and port.
    pub from: SocketAddrV4,
    /// The receiver's IPv4 address and port.
    pub to: SocketAddrV4,
    /// The IPv4 header's codepoint.
    pub ecn: Option<EcnCodepoint>,
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// Read an Ethernet frame: its IPv4 / UDP datagram, or why not.
pub fn parse(frame: &[u8]) -> Result<Received<'_>, FrameError> {
    use etherparse::{LinkSlice, NetSlice, SlicedPacket, TransportSlice};
    let packet =
        SlicedPacket::from_ethernet(frame).map_err(|e| FrameError::Malformed(e.to_string()))?;
    let Some(LinkSlice::Ethernet2(eth)) = &packet.link else {
        return Err(FrameError::NotUdp);
    };
    let Some(NetSlice::Ipv4(ip)) = &packet.net else {
        return Err(FrameError::NotUdp);
    };
    if ip.payload().fragmented {
        return Err(FrameError::Fragment);
    }
    let Some(TransportSlice::Udp(udp)) = &packet.transport else {
        return Err(FrameError::NotUdp);
    };
    let header = ip.header();
    Ok(Received {
        src_mac: eth.source(),
        from: SocketAddrV4::new(header.source_addr(), udp.source_port()),
        to: SocketAddrV4::new(header.destination_addr(), udp.destination_port()),
        ecn: ecn_of_bits(header.ecn().value()),
        payload: udp.payload(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn a_written_frame_parses_back_with_every_field() {
        let payload = [7u8, 1, 2, 3, 4, 5];
        for ecn in [
            None,
            Some(EcnCodepoint::Ect0),
            Some(EcnCodepoint::Ect1),
            Some(EcnCodepoint::Ce),
        ] {
            let mut buf = vec![0u8; HEADERS_V4 + payload.len()];
            let macs = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
            let (from, to) = (v4("10.0.0.2:47001"), v4("10.0.0.1:47000"));
            write_ipv4_headers(&mut buf, macs, from, to, ecn, payload.len());
            buf[HEADERS_V4..].copy_from_slice(&payload);
            let got = parse(&buf).unwrap();
            assert_eq!(got.src_mac, macs.0);
            assert_eq!((got.from, got.to), (from, to));
            assert_eq!(got.ecn, ecn);
            assert_eq!(got.payload, payload);
            // The IPv4 header checksums to zero, as a receiver's check computes it.
            assert_eq!(checksum(&buf[ETHERNET..ETHERNET + IPV4]), 0);
        }
    }

    #[test]
    fn malformed_and_foreign_frames_are_refused_not_taken() {
        let mut buf = vec![0u8; HEADERS_V4 + 4];
        let macs = ([2; 6], BROADCAST);
        write_ipv4_headers(&mut buf, macs, v4("10.0.0.2:1"), v4("10.0.0.1:2"), None, 4);
        // Cut short: the IP header's length says more than there is.
        assert!(matches!(
            parse(&buf[..HEADERS_V4]),
            Err(FrameError::Malformed(_))
        ));
        assert!(matches!(parse(&buf[..10]), Err(FrameError::Malformed(_))));
        // ARP.
        let mut arp = buf.clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert!(parse(&arp).is_err());
        // TCP instead of UDP.
        let mut tcp = buf.clone();
        tcp[ETHERNET + 9] = 6;
        assert!(parse(&tcp).is_err());
        // A fragment (more-fragments bit).
        let mut frag = buf.clone();
        frag[ETHERNET + 6] = 0x20;
        let sum = {
            frag[ETHERNET + 10..ETHERNET + 12].copy_from_slice(&[0, 0]);
            checksum(&frag[ETHERNET..ETHERNET + IPV4])
        };
        frag[ETHERNET + 10..ETHERNET + 12].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(parse(&frag), Err(FrameError::Fragment));
    }

    #[test]
    fn capture_frames_of_both_families_parse_or_say_why() {
        let from: SocketAddr = "10.1.2.3:9".parse().unwrap();
        let to: SocketAddr = "10.1.2.4:10".parse().unwrap();
        let f = frame(from, to, Some(EcnCodepoint::Ce), b"abc");
        let got = parse(&f).unwrap();
        assert_eq!(got.payload, b"abc");
        assert_eq!(got.src_mac, made_up_mac(from.ip()));
        let from6: SocketAddr = "[::1]:9".parse().unwrap();
        let f6 = frame(from6, to, None, b"abc");
        assert_eq!(f6.len(), ETHERNET + 40 + UDP + 3);
        assert_eq!(parse(&f6), Err(FrameError::NotUdp));
    }
}
