/*!
vramwarden watches NVIDIA GPU memory: a background thread samples every GPU and every process
on it (through NVML, or through built-in simulated GPUs), keeps hours of compact history, finds
leaks, runs cleanup rules, records session logs, and serves it all to an egui window, to headless
commands, and to Prometheus and remote windows through an agent.

# How data flows

```text
source::GpuSource ──► tick_loop::run ──► engine::Engine::tick ──► shared::Shared (monitor::Monitor)
 NVML | sim | fault     one loop for:      enrich (/proc, containers,        │ a copy per change,
 | recorded (import)    live (sampler),    PyTorch), session log, leaks,    │ drawn with no lock
 | replay (a session)   --speed, import,   OOMs, rules → rules::action      ▼
                        replay             (read-only for a replay)    link::EngineLink::view
                                                  ▲                         │
                                    commands: engine::EngineCommand         ▼
                                    (settings, recording, Manual {key})   ui (window) · agent
                                                  └──── link::EngineLink::send ◄──┘   · cli
ui: file work (open, import, list, export, save settings) → jobs::JobBoard (its own threads)
```

The window never calls NVML, never signals a process and never touches a file: it draws a
copy of the engine's state ([`shared::Shared::view`], made once per change and cheap because
the history's sealed chunks are shared) without holding a lock, sends engine commands through
its link (a manual action names the process only: the engine, here or an agent's, builds the
target and checks identity, pid + start time, and policy right before acting), and asks its
[`jobs::JobBoard`] for file work, whose progress and results it reads every frame. A past
session is a source too ([`source::replay::ReplaySource`]): [`replay`] plays it through a
read-only engine, so what the window shows of it is built by the same code as what it shows
live, and nothing acts from it. No module depends on one that depends on it.

# Where to add things
- **A GPU source**: implement [`source::GpuSource`] (see [`source::sim`] for a pure one) and
  give it a [`source::SourceKind`] variant (and its line in `SourceKind::open`) and the flag
  that picks it (`front/cli/args.rs`); [`tick_loop::run`] drives it in every mode.
- **An action**: a variant of [`rules::Action`] (and its [`rules::model::ActionKind`]), its
  policy and transport in [`rules::action`] (identity is checked there for every kind).
- **A pane**: a module under `ui/` drawing from [`monitor::Monitor`] and returning what the user
  asked for; the app turns that into an [`engine::EngineCommand`] or a [`jobs::JobCommand`].
- **A front end**: draw [`link::EngineLink::view`] (a copy of the engine's state made once per
  change; see [`shared::Shared`]), send commands through the link (see [`agent`] for a headless
  one).
- **A command-line command**: its clap definition in [`cli::args`], its runner in [`cli`].
*/

#![warn(missing_docs)]

pub mod act;
pub mod detect;
pub mod engine;
pub mod front;
pub mod host;
pub mod link;
pub mod model;
pub mod session;
pub mod source;
