//! The engine's generational handles, [`RequestId`] and [`SessionId`]: a
//! slot of the engine's table plus that slot's generation, so a stale id
//! never names a later request or session. They sit below both the
//! requests (`request.rs`, which re-exports them) and the error type
//! (`error.rs`, whose variants name them).

/// A request's handle: a slot of the engine's table plus that slot's
/// generation, so a stale id never names a later request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId {
    /// Index in the engine's request table.
    pub slot: u32,
    /// How many requests used this slot before this one.
    pub generation: u32,
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.slot, self.generation)
    }
}

/// A persistent sequence of the engine (a shared prefix, an agent's
/// context): requests can append to it, and it outlives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId {
    /// Index in the engine's session table.
    pub slot: u32,
    /// How many sessions used this slot before this one.
    pub generation: u32,
}
