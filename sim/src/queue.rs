//! The event queue: a binary heap of small entries ordered by (time, insertion number), so
//! that events at the same nanosecond run in the order they were scheduled and a run is
//! deterministic. Payloads live beside the heap, in the [`Slab`], so the heap moves 32-byte
//! entries only.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use switchgnn_dataplane::Nanos;

#[derive(Debug)]
struct Entry<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    // Reversed: the heap pops the earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Time-ordered events, first in first out among equal times.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedule `event` at `at` (after every event already at `at`).
    pub fn push(&mut self, at: Nanos, event: E) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
    }

    /// The earliest event, ties in the order they were pushed.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }
}

/// Values addressed by a `u32` key, with freed keys reused.
#[derive(Debug)]
pub struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    /// Store `value`; its key.
    pub fn insert(&mut self, value: T) -> u32 {
        match self.free.pop() {
            Some(k) => {
                self.items[k as usize] = Some(value);
                k
            }
            None => {
                self.items.push(Some(value));
                (self.items.len() - 1) as u32
            }
        }
    }

    /// Take the value out; `None` for a key that holds nothing.
    pub fn remove(&mut self, key: u32) -> Option<T> {
        let v = self.items.get_mut(key as usize)?.take();
        if v.is_some() {
            self.free.push(key);
        }
        v
    }

    /// Values held now.
    pub fn len(&self) -> usize {
        self.items.len() - self.free.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn events_come_out_by_time_then_by_insertion(times in proptest::collection::vec(0u64..50, 0..200)) {
            let mut q = EventQueue::default();
            for (i, &t) in times.iter().enumerate() {
                q.push(t, i);
            }
            let mut out = Vec::new();
            while let Some((t, i)) = q.pop() {
                out.push((t, i));
            }
            let mut want: Vec<(u64, usize)> = times.iter().copied().zip(0..).collect();
            want.sort();
            prop_assert_eq!(out, want);
        }
    }

    #[test]
    fn slab_reuses_freed_keys() {
        let mut s = Slab::default();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.remove(a), None);
        assert_eq!(s.insert("c"), a);
        assert_eq!(s.len(), 2);
        assert_eq!(s.remove(b), Some("b"));
    }
}
