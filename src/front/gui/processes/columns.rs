//! The table's columns: what each sorts by and whether it reads the recorded history.

use serde::{Deserialize, Serialize};

/// Columns the table sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortColumn {
    /// Process id.
    Pid,
    /// Process name.
    Name,
    /// Owner.
    User,
    /// GPU index.
    Gpu,
    /// GPU memory now.
    Memory,
    /// Change over the last minute.
    Delta,
    /// Time since start.
    Age,
    /// Host CPU, percent of a core.
    Cpu,
    /// Host resident memory.
    Rss,
    /// Leak flag (by rate), stale, exited.
    Status,
    /// Command line.
    Command,
    /// Container name (else short id), with the pod as `namespace/pod` in its tooltip.
    Container,
    /// The process's share of the GPU's SM time, where the driver gives it.
    GpuUtil,
}

impl SortColumn {
    /// Every column in table order, with its title.
    pub(crate) const ALL: [(SortColumn, &'static str); 13] = [
        (SortColumn::Pid, "PID"),
        (SortColumn::Name, "Name"),
        (SortColumn::User, "User"),
        (SortColumn::Gpu, "GPU"),
        (SortColumn::Memory, "GPU memory"),
        (SortColumn::GpuUtil, "GPU %"),
        (SortColumn::Delta, "Δ 1 min"),
        // The leak badge right after the memory figures, and before the container: seen
        // whole at 1280 × 800 without scrolling sideways.
        (SortColumn::Status, "Status"),
        (SortColumn::Container, "Container"),
        (SortColumn::Age, "Age"),
        (SortColumn::Cpu, "CPU"),
        (SortColumn::Rss, "RSS"),
        (SortColumn::Command, "Command line"),
    ];

    /// False for the columns a session log does not keep (GPU %, CPU, RSS: sampled live,
    /// never recorded).
    pub(crate) fn recorded(self) -> bool {
        !matches!(
            self,
            SortColumn::GpuUtil | SortColumn::Cpu | SortColumn::Rss
        )
    }

    /// What the column's figure is, for its title's tooltip (None where the title says it).
    pub(super) fn meaning(self) -> Option<&'static str> {
        Some(match self {
            SortColumn::Memory => "GPU memory the driver counts for this process on this GPU",
            SortColumn::GpuUtil => {
                "Share of time this process's kernels ran on the GPU, averaged over the last \
                 10 s (the driver's per-process figure, read every 10 s while the guard parks \
                 idle processes or an idle rule is on; — when not read)"
            }
            SortColumn::Delta => {
                "How much its GPU memory changed over the last minute (— until it has been \
                 seen for a minute)"
            }
            SortColumn::Age => "Time since the process started",
            SortColumn::Cpu => "Host CPU it used over the last sample, in % of one core",
            SortColumn::Rss => "Host memory it holds (resident set, as top shows it)",
            _ => return None,
        })
    }

    pub(super) fn numeric(self) -> bool {
        matches!(
            self,
            SortColumn::Memory
                | SortColumn::Delta
                | SortColumn::Age
                | SortColumn::Status
                | SortColumn::Cpu
                | SortColumn::Rss
                | SortColumn::GpuUtil
        )
    }
}
