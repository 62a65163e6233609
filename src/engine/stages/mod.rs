//! The stages of a tick, in the order [`crate::engine::Engine::tick`] runs them:
//! [`enrich`] → [`record`] → [`watches`] → [`rules`] (with the OOM [`guard`]) → [`publish`]. Each owns its own state;
//! what a stage has to say besides its data (its typed events) goes into the tick's
//! [`outbox::Outbox`], published with the tick and handed to the front end's subscriber.

pub(crate) mod enrich;
pub mod guard;
pub mod outbox;
pub mod publish;
pub mod record;
pub mod rules;
pub mod watches;
