//! The measured per-phase time breakdown of a run, as reports carry it.
//!
//! Built from the forward-pass clocks of [`fak_model::ForwardTimes`]:
//!
//! ```text
//!   wall ─┬─ ingest passes ─┬─ matmul      (some sequence had several tokens)
//!         │                 ├─ attention
//!         │                 └─ other
//!         ├─ decode passes ─┬─ matmul      (every sequence had one token)
//!         │                 ├─ attention
//!         │                 └─ other
//!         └─ outside_forward               (scheduling, sampling, bookkeeping)
//! ```

use fak_model::{ForwardTimes, PhaseTimes};
use serde::Serialize;

/// One pass kind's totals, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PassPhases {
    pub passes: u64,
    pub tokens: u64,
    pub matmul_s: f64,
    pub attention_s: f64,
    pub other_s: f64,
    pub total_s: f64,
}

impl From<&PhaseTimes> for PassPhases {
    fn from(t: &PhaseTimes) -> PassPhases {
        PassPhases {
            passes: t.passes,
            tokens: t.tokens,
            matmul_s: t.matmul.as_secs_f64(),
            attention_s: t.attention.as_secs_f64(),
            other_s: t.other.as_secs_f64(),
            total_s: t.total().as_secs_f64(),
        }
    }
}

/// Where a run's wall time went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Phases {
    pub ingest: PassPhases,
    pub decode: PassPhases,
    /// Wall time outside every forward pass.
    pub outside_forward_s: f64,
}

impl Phases {
    /// The breakdown of a run of `wall_s` seconds whose passes took `t`.
    pub fn new(t: &ForwardTimes, wall_s: f64) -> Phases {
        Phases {
            ingest: (&t.ingest).into(),
            decode: (&t.decode).into(),
            outside_forward_s: (wall_s - t.all().total().as_secs_f64()).max(0.0),
        }
    }

    /// One line: seconds per phase and kind.
    pub fn line(&self) -> String {
        let f = |p: &PassPhases| {
            format!(
                "{:.2} s ({} passes: matmul {:.2}, attention {:.2}, other {:.2})",
                p.total_s, p.passes, p.matmul_s, p.attention_s, p.other_s
            )
        };
        format!(
            "ingest {}; decode {}; outside forward {:.2} s",
            f(&self.ingest),
            f(&self.decode),
            self.outside_forward_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn phases_split_the_wall_time() {
        let t = ForwardTimes {
            ingest: PhaseTimes {
                passes: 2,
                tokens: 100,
                matmul: Duration::from_millis(300),
                attention: Duration::from_millis(200),
                other: Duration::from_millis(50),
            },
            decode: PhaseTimes {
                passes: 5,
                tokens: 40,
                matmul: Duration::from_millis(100),
                attention: Duration::from_millis(40),
                other: Duration::from_millis(10),
            },
        };
        let p = Phases::new(&t, 1.0);
        assert!((p.ingest.total_s - 0.55).abs() < 1e-9);
        assert!((p.decode.total_s - 0.15).abs() < 1e-9);
        assert!((p.outside_forward_s - 0.3).abs() < 1e-9);
        assert_eq!(p.decode.passes, 5);
        assert!(p.line().contains("attention 0.20"));
    }
}
