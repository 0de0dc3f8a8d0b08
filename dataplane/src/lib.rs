//! The switchgnn dataplane: everything that moves a feature. This first part holds the wire
//! format ([`wire`]) and the fixed-point codec ([`fixed`]) that the switch model, the host
//! engine and the P4 program share.

pub mod fixed;
pub mod wire;
