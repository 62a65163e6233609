/*!
vramwarden watches NVIDIA GPU memory: a background thread samples every GPU and every process
on it (through NVML, or through built-in simulated GPUs), keeps hours of compact history, finds
leaks, runs cleanup rules, records session logs, and serves it all to an egui window, to headless
commands, and to Prometheus and remote windows through an agent.

# How data flows

```text
source (NVML | sim | fault | import) ──► sampler thread ──► engine::Engine::tick
      enrich from /proc, containers, PyTorch companions ─┘        │
      session log ◄── leak_watch, oom_watch, rules ◄──────────────┤
                                                                   ▼
              shared::Shared: monitor::Monitor (history, process rows, leaks, activity)
                                                                   │ read by (the window: a copy
                                                                   │ per change, no lock held)
                    ┌──────────────────────────┬───────────────────┴─────────────┐
                 ui (window)          agent (/metrics, /api/v1)        cli (snapshot, record…)
                    │ commands (engine::EngineCommand) through link::EngineLink
                    └──► local: sampler::SamplerHandle   remote: link::remote::RemoteLink ──► agent
```

The window never calls NVML, never signals a process and never touches a session file being
written: it draws a copy of the monitor ([`shared::Shared::view`], made once per change and
cheap because the history's sealed chunks are shared) without holding a lock, and sends
commands; the engine (here, or an agent's) checks
identity (pid + start time) and policy right before acting.

# Where to add things
- **A GPU source**: implement [`source::GpuSource`] (see [`source::sim`] for a pure one) and
  offer it in [`sampler::source_factory`].
- **An action**: a variant of [`rules::Action`], its policy and transport in
  [`rules::action`] (identity is checked there for every kind).
- **A pane**: a module under `ui/` drawing from [`monitor::Monitor`] and returning what the user
  asked for; the app turns that into an [`engine::EngineCommand`].
- **A front end**: draw [`link::EngineLink::view`] (a copy of the engine's state made once per
  change; see [`shared::Shared`]), send
  commands through the link (see [`agent`] for a headless one).
- **A command-line command**: its clap definition in [`cli::args`], its runner in [`cli`].
*/

#![warn(missing_docs)]

pub mod agent;
pub mod cli;
pub mod cli_docs;
pub mod container;
pub mod engine;
pub mod format;
pub mod history;
pub mod import;
pub mod jobs;
pub mod leak;
pub mod leak_watch;
pub mod link;
pub mod logging;
pub mod model;
pub mod monitor;
pub mod notify;
pub mod oom_watch;
pub mod proc_usage;
pub mod procinfo;
pub mod replay;
pub mod rules;
pub mod sampler;
pub mod session;
pub mod settings;
pub mod shared;
pub mod snapshot_out;
pub mod source;
pub mod tick_loop;
pub mod torch;
#[cfg(feature = "gui")]
pub mod ui;
