//! Joining two histories of consecutive spans of one session, built at once on two threads
//! (see [`crate::engine::replay_halves`]): the later one's chunks are appended to the earlier
//! one's, so joining costs a pointer per chunk, not a push per value.

use std::sync::Arc;

use super::{History, Series, Times, CHUNK, NONE};

impl History {
    /// An empty history, as [`History::new`], whose first tick will be `tick`: the later half
    /// of a session whose earlier half holds ticks `0..tick` ([`History::join_later`]).
    pub(crate) fn starting_at(capacity: usize, tick: u64) -> Self {
        let mut h = Self::new(capacity);
        h.base_tick = tick;
        h
    }

    /// Appends `later`, a history made by [`History::starting_at`] this history's
    /// [`History::end_tick`] whose times all come after this one's, as if its samples had been
    /// pushed here. Both must hold every tick they were given (none evicted) and this one a
    /// whole number of chunks; otherwise nothing changes and `later` is handed back.
    ///
    /// # Errors
    /// `later`, when the two cannot be joined chunk by chunk.
    pub(crate) fn join_later(&mut self, later: History) -> Result<(), Box<History>> {
        let joinable = later.base_tick == self.end_tick()
            && self.end_tick() % CHUNK as u64 == 0
            && self.base_tick == 0
            && self.evictions == 0
            && later.evictions == 0
            && self.times.skip == 0
            && later.times.skip == 0
            && self.times.open.is_empty()
            && self.len() + later.len() <= self.capacity
            && match (self.times.back(), later.times.front()) {
                (Some(a), Some(b)) => a < b,
                _ => true,
            };
        if !joinable {
            return Err(Box::new(later));
        }
        self.times.append(later.times);
        let at = later.base_tick;
        join_vec(&mut self.devices, later.devices, at);
        join_vec(&mut self.ghosts, later.ghosts, at);
        if self.metrics.len() < later.metrics.len() {
            self.metrics
                .resize_with(later.metrics.len(), Default::default);
        }
        for (mine, theirs) in self.metrics.iter_mut().zip(later.metrics) {
            for (m, l) in mine.iter_mut().zip(theirs) {
                m.append(l, at);
            }
        }
        for (k, s) in later.processes.into_entries() {
            self.processes
                .get_or_insert_with(k, Series::default)
                .append(s, at);
        }
        for (k, [a, r]) in later.torch.into_entries() {
            let [ma, mr] = self.torch.get_or_insert_with(k, Default::default);
            ma.append(a, at);
            mr.append(r, at);
        }
        Ok(())
    }
}

/// Series of device `i` of `later` appended to series `i` of `mine`.
fn join_vec(mine: &mut Vec<Series>, later: Vec<Series>, at: u64) {
    if mine.len() < later.len() {
        mine.resize_with(later.len(), Series::default);
    }
    for (m, l) in mine.iter_mut().zip(later) {
        m.append(l, at);
    }
}

impl Series {
    /// Appends `later`, a series of the history that starts at tick `at` (a chunk boundary,
    /// at or after this series' end): ticks between are stored as [`NONE`].
    fn append(&mut self, later: Series, at: u64) {
        if later.is_empty() {
            return;
        }
        if self.is_empty() {
            *self = later;
            return;
        }
        debug_assert!(at % CHUNK as u64 == 0 && later.first_tick % CHUNK as u64 == 0);
        debug_assert!(self.first_tick % CHUNK as u64 == 0 && self.end_tick() <= at);
        while self.end_tick() < later.first_tick {
            self.push_raw(NONE);
        }
        let chunks = Arc::unwrap_or_clone(later.sealed);
        Arc::make_mut(&mut self.sealed).extend(chunks);
        self.sealed_count += later.sealed_count;
        self.open = later.open;
    }
}

impl Times {
    /// Appends `later`'s times (this one holds whole chunks only, none skipped).
    fn append(&mut self, later: Times) {
        let chunks = Arc::unwrap_or_clone(later.sealed);
        Arc::make_mut(&mut self.sealed).extend(chunks);
        self.open = later.open;
    }
}
