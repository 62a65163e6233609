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
        join_vec(&mut self.devices, later.devices);
        join_vec(&mut self.ghosts, later.ghosts);
        if self.metrics.len() < later.metrics.len() {
            self.metrics
                .resize_with(later.metrics.len(), Default::default);
        }
        for (mine, theirs) in self.metrics.iter_mut().zip(later.metrics) {
            for (m, l) in mine.iter_mut().zip(theirs) {
                m.append(l);
            }
        }
        for (k, s) in later.processes.into_entries() {
            self.processes
                .get_or_insert_with(k, Series::default)
                .append(s);
        }
        for (k, [a, r]) in later.torch.into_entries() {
            let [ma, mr] = self.torch.get_or_insert_with(k, Default::default);
            ma.append(a);
            mr.append(r);
        }
        Ok(())
    }
}

/// Series of device `i` of `later` appended to series `i` of `mine`.
fn join_vec(mine: &mut Vec<Series>, later: Vec<Series>) {
    if mine.len() < later.len() {
        mine.resize_with(later.len(), Series::default);
    }
    for (m, l) in mine.iter_mut().zip(later) {
        m.append(l);
    }
}

impl Series {
    /// Appends `later`, a series that starts on a chunk boundary at or after this series' end
    /// (of a history made by [`History::starting_at`] there): ticks between are stored as
    /// [`NONE`].
    fn append(&mut self, later: Series) {
        if later.is_empty() {
            return;
        }
        if self.is_empty() {
            *self = later;
            return;
        }
        debug_assert!(later.first_tick % CHUNK as u64 == 0 && self.first_tick % CHUNK as u64 == 0);
        debug_assert!(self.end_tick() <= later.first_tick);
        while self.end_tick() < later.first_tick {
            self.push_raw(NONE);
        }
        let chunks = Arc::unwrap_or_clone(later.sealed);
        Arc::make_mut(&mut self.sealed).extend(chunks);
        self.sealed_count += later.sealed_count;
        self.lead = later.lead;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ProcInfo, ProcessSample, Snapshot, MIB};

    /// Sample `i`: one GPU, process 7 from tick 300 on (its memory rising), process 8 until
    /// tick 200.
    fn sample(i: u64) -> Snapshot {
        let process = |pid: u32, mib: u64| ProcessSample {
            pid,
            used_bytes: Some(mib * MIB),
            info: Some(Arc::new(ProcInfo {
                start_time_ms: 1,
                ..ProcInfo::default()
            })),
            ..ProcessSample::default()
        };
        let mut processes = Vec::new();
        if i >= 300 {
            processes.push(process(7, 100 + i));
        }
        if i < 200 {
            processes.push(process(8, 50));
        }
        super::super::tests::one_gpu_sample(i, processes)
    }

    #[test]
    fn two_halves_joined_hold_what_one_history_holds_and_series_begin_at_their_first_reading() {
        let n = 700;
        let mut whole = History::new(n);
        let (mut earlier, mut later) = (History::new(n), History::starting_at(n, 512));
        for i in 0..n as u64 {
            whole.push(&sample(i));
            match i {
                0..512 => earlier.push(&sample(i)),
                _ => later.push(&sample(i)),
            }
        }
        earlier.join_later(later).expect("joined");
        assert_eq!(earlier.span(), whole.span());
        assert_eq!(earlier.len(), n);
        for (k, s) in whole.processes.iter() {
            let joined = earlier.process(k).expect("series");
            assert_eq!(joined.values(0, 700), s.values(0, 700), "{k:?}");
            assert_eq!(joined.first_tick(), s.first_tick());
        }
        let seven = whole.processes.iter().find(|(k, _)| k.0.pid == 7);
        // Stored from tick 256 (a chunk boundary), read as beginning at its first reading.
        assert_eq!(seven.map(|(_, s)| s.first_tick()), Some(300));
        let dev = |h: &History| h.device(0).map(|s| s.values(0, 700));
        assert_eq!(dev(&earlier), dev(&whole));
        // Not joinable: a later history that does not start where this one ends.
        let mut a = History::new(n);
        for i in 0..256 {
            a.push(&sample(i));
        }
        assert!(a.join_later(History::starting_at(n, 300)).is_err());
        assert_eq!(a.len(), 256);
    }
}
