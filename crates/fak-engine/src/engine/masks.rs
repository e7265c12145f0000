//! Where a constrained request's token mask is computed: after the
//! forward pass on the engine thread, only when the sampled token fails
//! the grammar check ([`MaskMode::CheckFirst`]), or on a worker thread
//! while the forward pass runs ([`MaskMode::Overlap`]).
//!
//! ```text
//!   CheckFirst  engine  │ plan │ forward (pool) ........ │ sample, check; miss: mask, resample │
//!   Overlap     engine  │ plan │ lend │ forward (pool) .. │ wait │ sample (bit test / masked) │
//!               worker         │ mask r0 │ mask r1 │ ... ─┘ (matchers go back)
//! ```
//!
//! The mask for step n's token depends only on the grammar state after
//! the token sampled at step n − 1, which is known before step n's
//! forward pass starts. Each constrained item of a pass lends its
//! [`Matcher`] to the worker, which computes that request's [`Ready`]
//! verdict (accepting? which tokens?) and returns the matcher with it;
//! the engine thread waits for the batch only when it samples. The
//! sampler then draws exactly as in `CheckFirst`: where the request's
//! settings allow a check first, it draws from the raw logits and tests
//! the token's bit, drawing again from the masked logits only on a miss;
//! otherwise it draws from the masked logits. The verdict is the set the
//! check and the mask would have found, so both modes give the same
//! tokens for the same seeds (tests/masks.rs).
//!
//! A verdict depends only on the request's own matcher, so batch
//! invariance holds. Every lent matcher comes back within the same step
//! (the worker catches a panic per matcher and returns it with an error),
//! so nothing is in flight when [`Engine::cancel`](super::Engine::cancel)
//! or the next step runs. A matcher that errs fails its own request only;
//! a worker that died is replaced at the next pass, and the matchers it
//! held fail their requests with a typed error (never unconstrained).
//! A matcher in llguidance's error state reads as stopped there; its
//! verdict is that error, not "the grammar is complete".
//!
//! The tests reach these paths through the `fault-injection` feature
//! (enabled only by the crate's dev-dependency on itself, so no release
//! build carries it): [`Engine::inject_mask_fault`](super::Engine) marks a
//! request, and the worker makes its matcher err, panics while computing
//! its verdict, or dies holding the pass's matchers ([`MaskFault`]).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use llguidance::Matcher;

#[cfg(feature = "fault-injection")]
use crate::constraint::MaskFault;
use crate::constraint::Ready;
use crate::error::EngineError;

/// Where constrained requests' token masks are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaskMode {
    /// After the forward pass, on the engine thread: sample from the raw
    /// logits, check the token against the grammar, and compute the mask
    /// only on a miss (or when top-k/top-p/min-p or log-probabilities
    /// need the masked logits). The default: on a 2-core machine the
    /// forward pass keeps both cores busy, so a worker only moves the
    /// mask's cost (see docs/SERVING-BENCH.md, "Structured outputs").
    #[default]
    CheckFirst,
    /// During the forward pass, on a worker thread: every constrained
    /// item's mask is ready when its logits are.
    Overlap,
}

/// One matcher lent to the worker: the item of the pass it belongs to.
pub(super) struct Job {
    pub item: usize,
    pub matcher: Matcher,
    /// What to break while computing this job's verdict.
    #[cfg(feature = "fault-injection")]
    pub fault: Option<MaskFault>,
}

/// A lent matcher back, with its verdict.
pub(super) struct Done {
    pub item: usize,
    pub matcher: Matcher,
    pub ready: Result<Ready, EngineError>,
    /// Time the worker spent on it.
    pub took: Duration,
}

/// A worker thread computing verdicts, one batch of jobs per pass.
pub(super) struct MaskWorker {
    jobs: Option<Sender<Vec<Job>>>,
    done: Receiver<Vec<Done>>,
    thread: Option<JoinHandle<()>>,
    /// Set when the worker dropped its end of the channels (it died):
    /// its thread may still be unwinding, and a batch sent to it now
    /// would be lost too.
    dead: Cell<bool>,
}

/// A batch submitted to the worker, or kept when it could not take it.
pub(super) enum Pending {
    /// Nothing to compute.
    None,
    /// On the worker: the items it holds matchers of.
    Sent(Vec<usize>),
    /// The worker could not take them: computed on the engine thread at
    /// [`MaskWorker::wait`].
    Here(Vec<Job>),
}

/// Computes one job's verdict; a panic inside llguidance becomes the
/// request's error, and the matcher comes back either way.
fn compute(job: Job) -> Done {
    #[cfg(feature = "fault-injection")]
    let fault = job.fault;
    let Job {
        item, mut matcher, ..
    } = job;
    let t0 = Instant::now();
    let ready = catch_unwind(AssertUnwindSafe(|| {
        #[cfg(feature = "fault-injection")]
        inject(fault, &mut matcher);
        Ready::compute(&mut matcher)
    }))
    .unwrap_or_else(|_| {
        Err(EngineError::ConstraintFailed(
            "the grammar panicked while computing a mask".into(),
        ))
    });
    Done {
        item,
        matcher,
        ready,
        took: t0.elapsed(),
    }
}

/// Breaks a job's matcher or verdict as `fault` says (inside the per-job
/// catch).
#[cfg(feature = "fault-injection")]
fn inject(fault: Option<MaskFault>, matcher: &mut Matcher) {
    match fault {
        Some(MaskFault::MatcherError) => {
            // The matcher is now in its error state; the call's own result
            // is that error, which the verdict must find on its own.
            let _ = matcher.test_trigger_lexer_error();
        }
        Some(MaskFault::Panic) => panic!("injected fault: a panic computing a mask"),
        Some(MaskFault::WorkerDies) | None => {}
    }
}

impl MaskWorker {
    /// Starts the worker thread; `None` when the OS refuses a thread.
    pub(super) fn start() -> Option<MaskWorker> {
        let (jobs_tx, jobs_rx) = channel::<Vec<Job>>();
        let (done_tx, done_rx) = channel::<Vec<Done>>();
        let thread = std::thread::Builder::new()
            .name("fak-masks".into())
            .spawn(move || {
                while let Ok(batch) = jobs_rx.recv() {
                    #[cfg(feature = "fault-injection")]
                    if batch.iter().any(|j| j.fault == Some(MaskFault::WorkerDies)) {
                        // Outside the per-job catch: the thread ends, and
                        // the batch's matchers with it.
                        panic!("injected fault: the mask worker dies");
                    }
                    let out: Vec<Done> = batch.into_iter().map(compute).collect();
                    if done_tx.send(out).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(MaskWorker {
            jobs: Some(jobs_tx),
            done: done_rx,
            thread: Some(thread),
            dead: Cell::new(false),
        })
    }

    /// Hands `jobs` to the worker (or keeps them when it is gone).
    pub(super) fn submit(worker: Option<&MaskWorker>, jobs: Vec<Job>) -> Pending {
        if jobs.is_empty() {
            return Pending::None;
        }
        let items: Vec<usize> = jobs.iter().map(|j| j.item).collect();
        match worker.and_then(|w| w.jobs.as_ref()) {
            Some(tx) => match tx.send(jobs) {
                Ok(()) => Pending::Sent(items),
                Err(back) => Pending::Here(back.0),
            },
            None => Pending::Here(jobs),
        }
    }

    /// The verdicts of `pending`, in submission order. Items whose
    /// matcher the worker did not return (it died) are listed in the
    /// second vector.
    pub(super) fn wait(worker: Option<&MaskWorker>, pending: Pending) -> (Vec<Done>, Vec<usize>) {
        match pending {
            Pending::None => (Vec::new(), Vec::new()),
            Pending::Here(jobs) => (jobs.into_iter().map(compute).collect(), Vec::new()),
            Pending::Sent(items) => match worker.map(|w| w.done.recv()) {
                Some(Ok(done)) => {
                    let lost = items
                        .into_iter()
                        .filter(|i| !done.iter().any(|d| d.item == *i))
                        .collect();
                    (done, lost)
                }
                _ => {
                    if let Some(w) = worker {
                        w.dead.set(true);
                    }
                    (Vec::new(), items)
                }
            },
        }
    }

    /// Whether the worker is gone: it dropped its channels, or its thread
    /// ended (either only after a panic outside a job, which the per-job
    /// catch leaves no room for).
    pub(super) fn is_dead(&self) -> bool {
        self.dead.get() || self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl Drop for MaskWorker {
    fn drop(&mut self) {
        // Closing the channel ends the worker's loop.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            // A worker that panicked has nothing left to clean up.
            let _ = t.join();
        }
    }
}

#[cfg(feature = "fault-injection")]
impl super::Engine<'_> {
    /// Makes the mask worker fail on `id`'s matcher the next time it is
    /// lent ([`MaskMode::Overlap`] only): the test seam of the worker's
    /// error paths (feature `fault-injection`).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownRequest`] when `id` is not live;
    /// [`EngineError::BadConstraint`] when it has no constraint.
    pub fn inject_mask_fault(
        &mut self,
        id: crate::request::RequestId,
        fault: MaskFault,
    ) -> Result<(), EngineError> {
        self.live(id)?;
        self.slots[id.slot as usize]
            .live
            .as_mut()
            .and_then(|l| l.constraint.as_mut())
            .ok_or_else(|| EngineError::BadConstraint("the request is not constrained".into()))?
            .set_fault(fault);
        Ok(())
    }
}
