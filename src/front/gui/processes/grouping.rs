//! Grouping the rows (by GPU, user, container...) under header rows.

use serde::{Deserialize, Serialize};

use super::sorting::container_cell;
use crate::engine::view::ProcessRow;

/// How the table groups its rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupBy {
    /// One flat list.
    #[default]
    None,
    /// A group per user.
    User,
    /// A group per container (or pod); processes outside any in one group.
    Container,
}

impl GroupBy {
    /// Every choice with its label.
    pub(crate) const ALL: [(GroupBy, &'static str); 3] = [
        (GroupBy::None, "No grouping"),
        (GroupBy::User, "By user"),
        (GroupBy::Container, "By container"),
    ];

    /// The group a row belongs to.
    pub(crate) fn key(self, r: &ProcessRow) -> String {
        match self {
            GroupBy::None => String::new(),
            GroupBy::User if r.info.user.is_empty() => "(unknown user)".into(),
            GroupBy::User => r.info.user.clone(),
            GroupBy::Container => {
                let c = container_cell(r);
                if c.is_empty() {
                    "(no container)".into()
                } else {
                    c
                }
            }
        }
    }
}

/// A line of the table: a group's header or a process.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Item<'a> {
    /// A group: its key, how many processes and how much GPU memory they hold.
    Group(&'a str, usize, u64),
    /// A process.
    Row(&'a ProcessRow),
}

/// The groups of `rows` (already sorted): each group's key, its rows in their order and the
/// GPU memory they hold now; the largest group first.
pub(crate) fn group_rows<'a>(
    rows: &[&'a ProcessRow],
    by: GroupBy,
) -> Vec<(String, Vec<&'a ProcessRow>, u64)> {
    let mut groups: Vec<(String, Vec<&'a ProcessRow>, u64)> = Vec::new();
    for r in rows {
        let k = by.key(r);
        let used = r
            .used_bytes
            .filter(|_| r.exited_at_ms.is_none())
            .unwrap_or(0);
        match groups.iter_mut().find(|g| g.0 == k) {
            Some(g) => {
                g.1.push(r);
                g.2 += used;
            }
            None => groups.push((k, vec![r], used)),
        }
    }
    groups.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    groups
}
