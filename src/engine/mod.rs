//! The engine: one per run, for every front end and every speed. Each sample goes through a
//! short pipeline of stages ([`stages`], run by [`Engine::tick`] in [`pipeline`]): enrich →
//! watches → rules → record → publish. It is set up by the one [`EngineBuilder`], driven by the
//! one loop ([`tick_loop`]) from a source chosen once ([`crate::source::SourceKind`]), and takes
//! a front end's requests between ticks ([`EngineCommand`]). Each tick's events are numbered
//! ([`EngineEvent`]); those that are alerts go to the front end's subscriber
//! ([`EngineOptions`]), which writes its own words: the engine shows no desktop notification.
//!
//! This file only names the parts and hands the common names on; inside `engine/` each part
//! uses the others by their own paths (`tests/architecture.rs` keeps the parts on floors).

pub mod builder;
pub mod command;
pub mod events;
pub mod guard_replay;
pub mod import;
pub mod past_cache;
pub mod pipeline;
pub mod replay;
mod replay_halves;
pub mod sampler;
pub mod settings;
pub mod shared;
mod sightings;
pub mod stages;
pub mod state;
pub mod tick_loop;
pub mod view;

pub use builder::EngineBuilder;
pub use command::{test_rule, CommandFrom, EngineCommand};
pub use events::{AlertFilter, AlertKind, EngineEvent, EngineEventKind};
pub use pipeline::{Engine, EngineOptions};
pub use stages::outbox::AlertSink;
pub use stages::record::RecordTo;
