//! A map of the engine's per-process tables (history series, table rows) that is read in the
//! order of the samples: entries live in one vector (insertion order), and the map remembers
//! which entry each position of the last sample found. A source lists its processes in the
//! same order from one sample to the next, so a tick walks the entries in order, comparing
//! keys, and hashes only a process that moved, came or left. Keys are still hashed with
//! foldhash seeded at random per map, so keys read from a crafted session file cannot be aimed
//! at it.

use std::hash::Hash;

/// The per-process map; see the module's documentation.
#[derive(Debug, Clone)]
pub(crate) struct SampleMap<K, V> {
    entries: indexmap::IndexMap<K, V, foldhash::fast::RandomState>,
    /// Per position in the last sample: the entry found there.
    at: Vec<usize>,
}

impl<K, V> Default for SampleMap<K, V> {
    fn default() -> Self {
        Self {
            entries: indexmap::IndexMap::default(),
            at: Vec::new(),
        }
    }
}

impl<K: Hash + Eq + Copy, V> SampleMap<K, V> {
    /// The entry of `key`, listed at position `pos` of the sample being taken in; `make` builds
    /// it when there is none.
    pub(crate) fn at_mut(&mut self, pos: usize, key: K, make: impl FnOnce(&Self) -> V) -> &mut V {
        let i = self.index_at(pos, key, make);
        &mut self.entries[i]
    }

    /// [`SampleMap::at_mut`], with the entry's place in insertion order (what
    /// [`SampleMap::place_mut`] of a map kept in the same order takes).
    pub(crate) fn at_mut_placed(
        &mut self,
        pos: usize,
        key: K,
        make: impl FnOnce(&Self) -> V,
    ) -> (usize, &mut V) {
        let i = self.index_at(pos, key, make);
        (i, &mut self.entries[i])
    }

    /// The entry of `key` when it is the one at `place` in insertion order (a map kept in
    /// the same order as another: see [`SampleMap::at_mut_placed`]), else as
    /// [`SampleMap::at_mut`] finds it.
    pub(crate) fn place_mut(
        &mut self,
        place: usize,
        pos: usize,
        key: K,
        make: impl FnOnce(&Self) -> V,
    ) -> &mut V {
        let i = match self.entries.get_index(place) {
            Some((k, _)) if *k == key => place,
            _ => self.index_at(pos, key, make),
        };
        &mut self.entries[i]
    }

    /// The place of `key`'s entry (made by `make` when there is none), listed at `pos`.
    fn index_at(&mut self, pos: usize, key: K, make: impl FnOnce(&Self) -> V) -> usize {
        let hinted = self
            .at
            .get(pos)
            .copied()
            .filter(|i| self.entries.get_index(*i).is_some_and(|(k, _)| *k == key));
        let i = match hinted.or_else(|| self.entries.get_index_of(&key)) {
            Some(i) => i,
            None => {
                let v = make(self);
                self.entries.insert_full(key, v).0
            }
        };
        if self.at.len() <= pos {
            self.at.resize(pos + 1, usize::MAX);
        }
        self.at[pos] = i;
        i
    }

    /// The entry of `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key)
    }

    /// The entry of `key`, or a new one from `make`.
    pub(crate) fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        self.entries.entry(key).or_insert_with(make)
    }

    /// Sets the entry of `key` to `value` (a new one goes last).
    pub(crate) fn insert(&mut self, key: K, value: V) {
        self.entries.insert(key, value);
    }

    /// Keeps the entries `keep` accepts (in their order).
    pub(crate) fn retain(&mut self, keep: impl FnMut(&K, &mut V) -> bool) {
        self.entries.retain(keep);
    }

    /// How many entries there are.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every key, in insertion order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.keys()
    }

    /// Every entry, in insertion order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> + Clone {
        self.entries.values()
    }

    /// Every entry, to change.
    #[cfg(test)]
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.values_mut()
    }

    /// Every key with its entry.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter()
    }

    /// Every key with its entry, taken out, in insertion order.
    pub(crate) fn into_entries(self) -> impl Iterator<Item = (K, V)> {
        self.entries.into_iter()
    }

    /// The entry of `key`, to change.
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.entries.get_mut(key)
    }
}

impl<'a, K, V> IntoIterator for &'a SampleMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = indexmap::map::Iter<'a, K, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_find_their_entries_when_the_order_changes_and_entries_go() {
        let mut m: SampleMap<u32, u32> = SampleMap::default();
        for (pos, k) in [10, 20, 30].into_iter().enumerate() {
            *m.at_mut(pos, k, |_| 0) += k;
        }
        // Another order, one key new, one gone: every key still gets its own entry.
        for (pos, k) in [30, 40, 10].into_iter().enumerate() {
            *m.at_mut(pos, k, |m| m.len() as u32 * 1000) += k;
        }
        m.retain(|k, _| *k != 20);
        for (pos, k) in [40, 30].into_iter().enumerate() {
            *m.at_mut(pos, k, |_| 7) += 1;
        }
        let mut all: Vec<(u32, u32)> = m.iter().map(|(k, v)| (*k, *v)).collect();
        all.sort_unstable();
        assert_eq!(all, vec![(10, 20), (30, 61), (40, 3041)]);
        assert_eq!(m.get(&20), None);
    }

    #[test]
    fn a_map_kept_in_another_maps_order_finds_its_entry_at_that_place() {
        let (mut rows, mut beside): (SampleMap<u32, u32>, SampleMap<u32, u32>) =
            (SampleMap::default(), SampleMap::default());
        for (pos, k) in [10, 20, 30].into_iter().enumerate() {
            let (place, _) = rows.at_mut_placed(pos, k, |_| 0);
            *beside.place_mut(place, pos, k, |_| 0) += k;
        }
        // Out of step (a key this map lacks, a place that holds another key): found by key.
        beside.retain(|k, _| *k != 10);
        for (pos, k) in [30, 10, 20].into_iter().enumerate() {
            let (place, _) = rows.at_mut_placed(pos, k, |_| 0);
            assert_eq!(rows.keys().nth(place), Some(&k));
            *beside.place_mut(place, pos, k, |_| 100) += 1;
        }
        let mut all: Vec<(u32, u32)> = beside.iter().map(|(k, v)| (*k, *v)).collect();
        all.sort_unstable();
        assert_eq!(all, vec![(10, 101), (20, 21), (30, 31)]);
    }
}
