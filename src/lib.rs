/*!
vramwarden watches NVIDIA GPU memory: a background thread samples every GPU and every process
on it (through NVML, or through built-in simulated GPUs), keeps hours of compact history, finds
leaks, runs cleanup rules, records session logs, and serves it all to an egui window, to headless
commands, and to Prometheus and remote windows through an agent.

# The house, lowest floor first
A folder uses only the folders above it in this list. `tests/architecture.rs` checks it, that no
folder has a circle inside (a folder's `mod.rs` is one of its entries), and that the entries of
`act/` and `engine/` keep floors of their own (its `ACT_FLOORS` and `ENGINE_FLOORS`):

| folder | what it holds |
|---|---|
| [`model`] | the data: process facts, samples, the compact history, action outcomes, formatting |
| [`host`] | this computer apart from the GPU: `/proc`, containers, CPU use, folders, the log, trusted files |
| [`session`] | session logs: format, writer, reader, catalog, CSV export |
| [`source`] | where samples come from: NVML, simulated GPUs, nvidia-smi's CSV logs, a replayed session |
| [`detect`] | the detectors: leaks (and their driver over every series), OOMs, the forecast alert, memory held by PIDs not running here, and the records they leave |
| [`act`] | what is done to processes: rules and their executor, the PyTorch companion, park/resume |
| [`engine`] | the tick loop, its stages, the View ([`engine::view::Monitor`]), settings, the import and replay runs |
| [`link`] | a front end's connection to an engine, here or an agent's (the wire type) |
| [`front`] | the front ends: [`front::cli`], [`front::agent`], [`front::gui`]; none uses another (the headless two share [`front::headless`]: errors, exit codes) |

# How data flows

```text
source::GpuSource ─► engine::tick_loop ─► Engine::tick: enrich → watches → rules → record → publish
 NVML | sim | import   one loop for live,     (/proc,      (leaks,   (act::   (session  (the View,
 | replay (a session)  --speed, import,       PyTorch)      OOMs)     rules)   log)      alerts)
                       replay                                                        │
        commands with ids (engine::EngineCommand) ◄─ link::EngineLink ─► a copy of the View
        and their replies                            (here, or an agent's over HTTP)  │
                                                                                      ▼
                                                        front::gui · front::agent · front::cli
```

The window never calls NVML, never signals a process and never touches a file: it draws a
copy of the engine's state (made once per change and cheap because the history's sealed chunks
are shared) without holding a lock, sends commands through its link (a manual action names
the process only: the engine, here or an agent's, builds the target and checks identity, pid +
start time, and policy right before acting), and asks its job board for file work. A past
session is a source too ([`source::replay::ReplaySource`]), played through a read-only engine,
so what the window shows of it is built by the same code as what it shows live, and nothing
acts from it. What the engine derives from samples (the process rows, their peaks and
one-minute change) is kept in its own state ([`engine::state::EngineState`]), owned by its
thread; the View is only what it publishes. What happened in a tick leaves the engine as
numbered, typed events ([`engine::events::EngineEvent`]): the session log, the View, the wire
and the agent's counters take them as they are, and the window writes the words of its desktop
notifications itself. An agent serves its View as one versioned type
([`link::wire::WireView`]) and takes commands as one ([`link::wire::WireCommand`]); a window
attached to it checks every field of exactly that type on arrival and draws it as it draws its
own engine's View.

# Where to add things
- **A GPU source**: implement [`source::GpuSource`] (see [`source::sim`] for a pure one) and
  give it a [`source::SourceKind`] variant (and its line in `SourceKind::open`) and the flag
  that picks it (`front/cli/args.rs`); [`engine::tick_loop::run`] drives it in every mode.
- **An action**: a variant of [`act::rules::Action`] (and its
  [`act::rules::model::ActionKind`]), its policy and transport in [`act::rules::action`]
  (identity is checked there for every kind).
- **A detector**: a module in [`detect`] reading the history, run by the engine's watches stage
  (`engine/stages/watches.rs`), its findings published into the View.
- **A pane**: a module under `front/gui/` drawing from [`engine::view::Monitor`] and returning
  what the user asked for; the app turns that into an engine command or a job.
- **A front end**: draw [`link::EngineLink::view`] and send commands through the link (see
  [`front::agent`] for a headless one).
- **A command-line command**: its clap definition in `front/cli/args.rs`, its runner in
  [`front::cli`].

# What is public
The types a program that embeds the engine needs are re-exported at the crate's root (the
section below): the engine and its builder, the View it publishes, the commands it takes, the
agent's wire View and commands, the settings, and the GPU source trait with the simulated
source. The folders stay public for the binary (`main.rs`) and the tests, but inside them an
item is `pub(crate)` (or private) unless something outside the library names it;
`tests/architecture.rs` keeps the number of bare `pub` items from growing.
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

// The public API: what a program that embeds the engine uses, by short paths.
/// The settings (the config file's contents).
pub use engine::settings::Settings;
/// The engine ([`Engine`]), set up by [`EngineBuilder`] with its [`EngineOptions`], taking
/// [`EngineCommand`]s and publishing a [`Monitor`] (the View) after every tick.
pub use engine::{view::Monitor, Engine, EngineBuilder, EngineCommand, EngineOptions};
/// A front end's connection to an engine, and the View and commands an agent serves over HTTP.
pub use link::{
    wire::{WireCommand, WireView},
    EngineLink,
};
/// Where samples come from: the trait a source implements, the choice of one, and the
/// simulated GPUs (no driver needed).
pub use source::{sim::SimSource, GpuSource, SourceKind};
