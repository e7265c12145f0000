//! placeholder, replaced by the crate's owner
