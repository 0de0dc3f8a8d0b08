//! Raw features received in this exchange, kept to answer fetches locally.

use std::collections::HashMap;

/// Raw features received from other workers in this exchange, by (source, chunk): a fetch is
/// answered from here before it goes to the network. One growing arena rather than a buffer
/// per packet.
#[derive(Debug, Default)]
pub(super) struct RawCache {
    at: HashMap<(u32, u8), (usize, usize)>,
    lanes: Vec<i32>,
}

impl RawCache {
    pub(super) fn insert(&mut self, key: (u32, u8), values: &[i32]) {
        match self.at.get(&key) {
            Some(&(start, len)) if len == values.len() => {
                self.lanes[start..start + len].copy_from_slice(values)
            }
            _ => {
                self.at.insert(key, (self.lanes.len(), values.len()));
                self.lanes.extend_from_slice(values);
            }
        }
    }

    pub(super) fn get(&self, key: &(u32, u8)) -> Option<&[i32]> {
        let &(start, len) = self.at.get(key)?;
        Some(&self.lanes[start..start + len])
    }
}
