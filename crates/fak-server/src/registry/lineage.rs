//! Lineage: where each token span of a session came from, and the spans
//! evicted from it.
//!
//! ```text
//!   [0,40) message 0 │ [40,52) message 1 │ [52,60) message 2 │ [60,75) generated
//!   fork at 75 ─► the child's spans say "forked from sess_… at 75" and keep
//!                 the parent's origin (so `{"message": k}` still finds them)
//!   evict [40,52) ─► later spans move down by 12; {start 40, length 12,
//!                    sha256 of the ids, time} joins `evicted`
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::PublicId;

/// Where a span of tokens came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// The prompt a session was created with.
    Prefix,
    /// Chat message `k` of the session (template text around it included).
    Message { k: usize },
    /// Raw append `k` (`/completions`).
    Appended { k: usize },
    /// Generated; the reply to become message `k` (chat), if any.
    Generated { message: Option<usize> },
    /// Inherited from the parent at a fork.
    Forked {
        from: PublicId,
        at: usize,
        of: Box<Origin>,
    },
}

impl Origin {
    /// The origin with fork wrappers taken off.
    pub fn base(&self) -> &Origin {
        match self {
            Origin::Forked { of, .. } => of.base(),
            o => o,
        }
    }

    /// The API's string.
    pub fn label(&self) -> String {
        match self {
            Origin::Prefix => "prefix".into(),
            Origin::Message { k } => format!("message {k}"),
            Origin::Appended { k } => format!("appended {k}"),
            Origin::Generated { .. } => "generated".into(),
            Origin::Forked { from, at, .. } => format!("forked from {from} at {at}"),
        }
    }

    /// Whether it belongs to chat message `k` (its text or its reply).
    pub fn is_message(&self, k: usize) -> bool {
        match self.base() {
            Origin::Message { k: m } => *m == k,
            Origin::Generated { message: Some(m) } => *m == k,
            _ => false,
        }
    }
}

/// One span of a session's tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub start: usize,
    pub end: usize,
    pub origin: Origin,
}

impl Segment {
    /// The API's JSON.
    pub fn json(&self) -> Value {
        let mut v = json!({"start": self.start, "end": self.end, "origin": self.origin.label()});
        if let Origin::Forked { of, .. } = &self.origin {
            v["parent_origin"] = json!(of.base().label());
        }
        if let Origin::Generated { message: Some(k) } = self.origin.base() {
            v["message"] = json!(k);
        }
        v
    }
}

/// A span evicted from a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evicted {
    pub start: usize,
    pub length: usize,
    /// SHA-256 of the span's token ids, each as 4 little-endian bytes.
    pub sha256: String,
    /// Unix seconds.
    pub time: u64,
    /// `exact` or `shift`.
    pub mode: String,
}

impl Evicted {
    /// The record of evicting `ids` at `start`.
    pub fn new(start: usize, ids: &[u32], time: u64, mode: &str) -> Evicted {
        let mut h = Sha256::new();
        for id in ids {
            h.update(id.to_le_bytes());
        }
        let sha256 = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Evicted {
            start,
            length: ids.len(),
            sha256,
            time,
            mode: mode.into(),
        }
    }
}

/// Adds `n` tokens of `origin` at the end (merging with an equal last
/// span).
pub fn push(lineage: &mut Vec<Segment>, n: usize, origin: Origin) {
    if n == 0 {
        return;
    }
    let start = lineage.last().map_or(0, |s| s.end);
    match lineage.last_mut() {
        Some(last) if last.origin == origin => last.end += n,
        _ => lineage.push(Segment {
            start,
            end: start + n,
            origin,
        }),
    }
}

/// The lineage of a fork of a session of `n` tokens.
pub fn forked(lineage: &[Segment], from: PublicId, n: usize) -> Vec<Segment> {
    lineage
        .iter()
        .map(|s| Segment {
            start: s.start,
            end: s.end,
            origin: Origin::Forked {
                from,
                at: n,
                of: Box::new(s.origin.clone()),
            },
        })
        .collect()
}

/// Removes tokens `a..b`: spans inside go, spans across are cut, later
/// spans move down.
pub fn remove(lineage: &mut Vec<Segment>, a: usize, b: usize) {
    let n = b - a;
    let mut out: Vec<Segment> = Vec::with_capacity(lineage.len());
    for s in lineage.drain(..) {
        let keep_before = s.start.min(a)..s.end.min(a);
        let keep_after = s.start.max(b)..s.end.max(b);
        let len = keep_before.len() + keep_after.len();
        if len == 0 {
            continue;
        }
        let start = if s.start < a {
            s.start
        } else {
            s.start.max(b) - n
        };
        out.push(Segment {
            start,
            end: start + len,
            origin: s.origin,
        });
    }
    *lineage = out;
}

/// The span of chat message `k`: `None` if it has no tokens, `Err` if its
/// spans are not contiguous.
pub fn message_span(lineage: &[Segment], k: usize) -> Result<Option<(usize, usize)>, ()> {
    let spans: Vec<&Segment> = lineage.iter().filter(|s| s.origin.is_message(k)).collect();
    let (Some(first), Some(last)) = (spans.first(), spans.last()) else {
        return Ok(None);
    };
    let total: usize = spans.iter().map(|s| s.end.saturating_sub(s.start)).sum();
    if total != last.end.saturating_sub(first.start) {
        return Err(());
    }
    Ok(Some((first.start, last.end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(start: usize, end: usize, k: usize) -> Segment {
        Segment {
            start,
            end,
            origin: Origin::Message { k },
        }
    }

    #[test]
    fn remove_cuts_and_shifts() {
        let mut l = vec![seg(0, 10, 0), seg(10, 20, 1), seg(20, 30, 2)];
        remove(&mut l, 5, 15);
        assert_eq!(l, vec![seg(0, 5, 0), seg(5, 10, 1), seg(10, 20, 2)]);
        remove(&mut l, 5, 10);
        assert_eq!(l, vec![seg(0, 5, 0), seg(5, 15, 2)]);
    }

    #[test]
    fn message_spans_and_push() {
        let mut l = Vec::new();
        push(&mut l, 4, Origin::Message { k: 0 });
        push(&mut l, 3, Origin::Message { k: 1 });
        push(&mut l, 2, Origin::Generated { message: Some(1) });
        push(&mut l, 1, Origin::Message { k: 1 });
        push(&mut l, 0, Origin::Prefix);
        assert_eq!(l.len(), 4);
        assert_eq!(message_span(&l, 1), Ok(Some((4, 10))));
        assert_eq!(message_span(&l, 5), Ok(None));
        push(&mut l, 2, Origin::Message { k: 2 });
        push(&mut l, 1, Origin::Message { k: 0 });
        assert_eq!(message_span(&l, 0), Err(()));
        let f = forked(&l, PublicId(7), 13);
        assert_eq!(message_span(&f, 1), Ok(Some((4, 10))));
        assert!(f[0].json()["origin"]
            .as_str()
            .is_some_and(|o| o.starts_with("forked from sess_")));
    }

    #[test]
    fn evicted_hash_is_of_the_ids() {
        let e = Evicted::new(3, &[1, 2], 0, "exact");
        assert_eq!(e.length, 2);
        assert_eq!(e.sha256.len(), 64);
        assert_ne!(e.sha256, Evicted::new(3, &[2, 1], 0, "exact").sha256);
    }
}
