//! Agent sessions over HTTP: the `/v1/sessions` endpoints, each a claim on
//! a session of the registry ([`crate::registry`]), engine work, and the
//! record brought up to date.
//!
//! ```text
//!   handlers.rs  create, fork, get, list, delete, messages
//!   generate.rs  a turn: chat or raw completions appended, a reply
//!   evict.rs     a span removed exactly
//!   lifecycle.rs restore at start, save at exit, the idle sweep
//!   ops.rs, turn.rs  the steps those share
//! ```

mod evict;
mod generate;
mod handlers;
mod lifecycle;
mod ops;
mod turn;

pub use handlers::routes;
pub use lifecycle::{restore, save_all, sweep};
pub use ops::{append_to, create_holding, state_of};
