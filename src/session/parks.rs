//! The parks a session log holds, per process and in time: what a replay shows as parked at
//! each moment. Read from the `park_state` events (format 3); a log from before them gives
//! what its `park` events say (the parks and resumes vramwarden made, each at its end).

use super::Event;
use crate::model::{FastMap, ParkInfo, ParkState, UnixMs};

/// Each process's park changes, by the reader's process id, in time order.
#[derive(Debug, Clone, Default)]
pub(crate) struct ParkTimeline {
    changes: FastMap<u32, Vec<(UnixMs, Option<ParkInfo>)>>,
}

impl ParkTimeline {
    /// True when the log holds no park.
    pub(crate) fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Process `id`'s park is `park` from `unix_ms` on.
    pub(crate) fn note(&mut self, id: u32, unix_ms: UnixMs, park: Option<ParkInfo>) {
        self.changes.entry(id).or_default().push((unix_ms, park));
    }

    /// Puts each process's changes in time order (a damaged stretch or joined logs may
    /// have shuffled them; the sort is stable).
    pub(crate) fn finish(&mut self) {
        for v in self.changes.values_mut() {
            v.sort_by_key(|(t, _)| *t);
        }
    }

    /// Process `id`'s park at `t`: the last change at or before it.
    pub(crate) fn at(&self, id: u32, t: UnixMs) -> Option<ParkInfo> {
        let v = self.changes.get(&id)?;
        let i = v.partition_point(|(at, _)| *at <= t);
        v.get(i.checked_sub(1)?).and_then(|(_, p)| *p)
    }

    /// The parks of a log without `park_state` events, from its `park` events: a park that
    /// went through holds its bytes from its end on (parked since its start), a resume that
    /// went through ends it. Each is matched to the definition of its pid on its GPU (with
    /// its start time where the event has one) that was seen last before it.
    /// `defs` are the definitions as (reader's id, pid, GPU, start time).
    pub(crate) fn from_actions(
        events: &[Event],
        defs: impl Iterator<Item = (u32, u32, u32, UnixMs)>,
    ) -> Self {
        let mut t = Self::default();
        let defs: Vec<(u32, u32, u32, UnixMs)> = defs.collect();
        for e in events {
            let Event::Park {
                unix_ms,
                pid,
                start_time_ms,
                device_index,
                action,
                bytes,
                seconds,
                ok: true,
                ..
            } = e
            else {
                continue;
            };
            let Some(id) = defs
                .iter()
                .filter(|(_, p, gpu, _)| p == pid && gpu == device_index)
                .filter(|(_, _, _, start)| *start_time_ms == 0 || start == start_time_ms)
                .map(|(id, ..)| *id)
                .max()
            else {
                continue;
            };
            let park = (action == "park").then(|| ParkInfo {
                state: ParkState::Parked,
                bytes: *bytes,
                since_ms: unix_ms.saturating_sub((seconds.max(0.0) * 1000.0) as i64),
            });
            t.note(id, *unix_ms, park);
        }
        t.finish();
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked(bytes: u64, since_ms: UnixMs) -> ParkInfo {
        ParkInfo {
            state: ParkState::Parked,
            bytes: Some(bytes),
            since_ms,
        }
    }

    #[test]
    fn a_park_holds_from_its_change_until_the_next() {
        let mut t = ParkTimeline::default();
        t.note(4, 2_000, None);
        t.note(4, 1_000, Some(parked(7, 900)));
        t.finish();
        assert_eq!(t.at(4, 999), None);
        assert_eq!(t.at(4, 1_000), Some(parked(7, 900)));
        assert_eq!(t.at(4, 1_999), Some(parked(7, 900)));
        assert_eq!(t.at(4, 2_000), None);
        assert_eq!(t.at(5, 1_500), None);
    }

    #[test]
    fn an_older_log_s_park_events_give_its_parks() {
        let defs = [(1, 77, 0, 100), (2, 77, 0, 200)];
        let park = |unix_ms, action: &str, ok| Event::Park {
            unix_ms,
            pid: 77,
            start_time_ms: 200,
            device_index: 0,
            name: "python3".into(),
            action: action.into(),
            bytes: Some(3 << 30),
            seconds: 4.0,
            ok,
            detail: String::new(),
        };
        let events = vec![
            park(10_000, "park", true),
            park(20_000, "resume", false),
            park(30_000, "resume", true),
        ];
        let t = ParkTimeline::from_actions(&events, defs.into_iter());
        // The process with that start time (id 2), parked since the park began.
        assert_eq!(t.at(2, 25_000), Some(parked(3 << 30, 6_000)));
        assert_eq!(t.at(1, 25_000), None);
        assert_eq!(t.at(2, 9_999), None);
        // The failed resume changed nothing; the one that went through ended it.
        assert_eq!(t.at(2, 30_000), None);
    }
}
