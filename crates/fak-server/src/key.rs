//! [`KeyTenant`], the tenant of a request's API key, and its narrowing by
//! `user` and `cache_salt` into the engine's [`Tenant`]. It sits in a leaf
//! module, below the shared state (`state.rs`, whose extractor reads it from
//! the request's headers and re-exports it) and the stored responses
//! (`stored.rs`, whose entries are per key).

use fak_kv::Tenant;
use sha2::{Digest, Sha256};

/// The tenant of the request's API key (0 without keys), before any
/// narrowing by `user` or `cache_salt` ([`KeyTenant::narrowed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyTenant(pub u64);

impl KeyTenant {
    /// The tenant of a request: its key's, narrowed by `user` and
    /// `cache_salt` when given, so prefix-cache entries never cross
    /// between them.
    pub fn narrowed(self, user: Option<&str>, salt: Option<&str>) -> Tenant {
        if user.is_none() && salt.is_none() {
            return Tenant(self.0);
        }
        let mut h = Sha256::new();
        h.update(self.0.to_le_bytes());
        for part in [user, salt] {
            match part {
                Some(s) => {
                    h.update([1]);
                    h.update((s.len() as u64).to_le_bytes());
                    h.update(s.as_bytes());
                }
                None => h.update([0]),
            }
        }
        let d = h.finalize();
        let mut b = [0u8; 8];
        b.copy_from_slice(&d[..8]);
        Tenant(u64::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowing_separates_users_and_salts() {
        let k = KeyTenant(3);
        assert_eq!(k.narrowed(None, None), Tenant(3));
        let a = k.narrowed(Some("u"), None);
        assert_ne!(a, k.narrowed(None, Some("u")));
        assert_ne!(a, KeyTenant(4).narrowed(Some("u"), None));
        assert_eq!(a, k.narrowed(Some("u"), None));
    }
}
