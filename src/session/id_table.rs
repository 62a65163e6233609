//! A table by process id, read once per process entry of every sample a session replays. The
//! ids a writer gives (0, 1, 2, … in the order processes appear) index a vector; an id far
//! above the others (a crafted file's) stays in a map, so no id read from a file sizes an
//! allocation: the vector is at most twice the entries plus [`DENSE_SLACK`] long. The table
//! is built once, from every entry, when the file has been read.

use crate::model::FastMap;

/// How far above twice the number of entries an id may lie and still be kept in the vector.
const DENSE_SLACK: usize = 1024;

/// See the module's documentation.
#[derive(Debug, Clone)]
pub(crate) struct IdTable<T> {
    dense: Vec<Option<T>>,
    sparse: FastMap<u32, T>,
}

impl<T> Default for IdTable<T> {
    fn default() -> Self {
        Self {
            dense: Vec::new(),
            sparse: FastMap::default(),
        }
    }
}

impl<T> IdTable<T> {
    /// Sets the entry of `id` (kept in the map until [`IdTable::pack`]).
    pub(crate) fn insert(&mut self, id: u32, value: T) {
        match self.dense.get_mut(id as usize) {
            Some(slot) => *slot = Some(value),
            None => {
                self.sparse.insert(id, value);
            }
        }
    }

    /// Lays the entries out for reading: every id below twice their number plus
    /// [`DENSE_SLACK`] in the vector (linear in the number of entries).
    pub(crate) fn pack(&mut self) {
        let mut all = std::mem::take(&mut self.sparse);
        let dense = std::mem::take(&mut self.dense);
        all.extend((0u32..).zip(dense).filter_map(|(id, v)| v.map(|v| (id, v))));
        *self = Self::from_map(all);
    }

    /// The table of every entry of `all` (linear in its size).
    fn from_map(all: FastMap<u32, T>) -> Self {
        let limit = 2 * all.len() + DENSE_SLACK;
        let len = all
            .keys()
            .map(|id| *id as usize)
            .filter(|i| *i < limit)
            .max()
            .map_or(0, |i| i + 1);
        let mut t = Self::default();
        t.dense.resize_with(len, || None);
        for (id, v) in all {
            t.insert(id, v);
        }
        t
    }

    /// The entry of `id`.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<&T> {
        match self.dense.get(id as usize) {
            Some(slot) => slot.as_ref(),
            None => self.sparse.get(&id),
        }
    }

    /// Every entry with its id (the vector's in id order, then the map's).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        (0u32..)
            .zip(&self.dense)
            .filter_map(|(id, v)| v.as_ref().map(|v| (id, v)))
            .chain(self.sparse.iter().map(|(id, v)| (*id, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(ids: impl Iterator<Item = u32>) -> IdTable<u32> {
        let mut t = IdTable::default();
        for id in ids {
            t.insert(id, id ^ 0x5555);
        }
        t.pack();
        t
    }

    #[test]
    fn a_writer_s_ids_live_in_the_vector_and_far_ones_in_the_map() {
        let t = table((0..100).chain([u32::MAX - 1, 5_000_000]));
        assert_eq!((t.dense.len(), t.sparse.len()), (100, 2));
        for id in (0..100).chain([u32::MAX - 1, 5_000_000]) {
            assert_eq!(t.get(id), Some(&(id ^ 0x5555)));
        }
        let mut all: Vec<(u32, u32)> = t.iter().map(|(id, v)| (id, *v)).collect();
        all.sort_unstable();
        let want: Vec<(u32, u32)> = (0..100)
            .chain([5_000_000, u32::MAX - 1])
            .map(|id| (id, id ^ 0x5555))
            .collect();
        assert_eq!(all, want);
        assert_eq!(
            (t.get(100), t.get(u32::MAX), t.get(4_999_999)),
            (None, None, None)
        );
        // Packed again after more entries (a later one replacing an earlier): the same reads.
        let mut t = t;
        t.insert(7, 1);
        t.insert(200, 2);
        t.pack();
        assert_eq!(
            (t.get(7), t.get(200), t.get(99)),
            (Some(&1), Some(&2), Some(&(99 ^ 0x5555)))
        );
    }

    #[test]
    fn gaps_below_the_limit_stay_in_the_vector() {
        // Ids of a log joined to others: sparse, but not far above the count.
        let t = table((0..50).map(|k| k * 20));
        assert_eq!((t.dense.len(), t.sparse.len()), (981, 0));
        assert_eq!(
            (t.get(980), t.get(981), t.get(979)),
            (Some(&(980 ^ 0x5555)), None, None)
        );
    }

    #[test]
    fn crafted_ids_cannot_size_the_vector() {
        let t = table((0..1000u32).map(|k| k.wrapping_mul(4_000_037)));
        assert!(t.dense.len() <= 2 * 1000 + DENSE_SLACK, "{}", t.dense.len());
        for k in 0..1000u32 {
            let id = k.wrapping_mul(4_000_037);
            assert_eq!(t.get(id), Some(&(id ^ 0x5555)));
        }
    }
}
