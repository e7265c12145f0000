//! A reply's engine events read into API-neutral parts: text, tool calls
//! (start, argument fragments, end) and the finish. The Responses API and
//! the Messages API write their own events and bodies from these, so the
//! reading of tool calls out of the text happens in one place for both.
//!
//! ```text
//!   Event::Admitted{cached}  ─► Part::Admitted{cached}
//!   Event::Token{text}       ─► CallParser (with tools) ─► Text | CallStart | CallArgs | CallEnd
//!   Event::Finished{..}      ─► the parser's tail, then Part::Done{reason, usage, calls}
//!   Event::Failed{error}     ─► Part::Failed(ApiError)
//!   channel closed           ─► Part::Failed(503: the engine stopped)
//! ```

use fak_engine::{Event, FinishReason, Usage};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::error::ApiError;
use crate::tools::ToolReply;
use crate::tools::{CallParser, Piece};

/// One part of a reply.
#[derive(Debug)]
pub enum Part {
    /// The request got its KV blocks; `cached` prompt tokens were reused.
    Admitted { cached: usize },
    /// Text outside tool calls.
    Text(String),
    /// Tool call `index` begins.
    CallStart { index: usize, name: String },
    /// More of call `index`'s arguments (JSON text).
    CallArgs { index: usize, text: String },
    /// Call `index` is complete.
    CallEnd { index: usize },
    /// The reply ended; `calls` tool calls were complete.
    Done {
        reason: FinishReason,
        usage: Usage,
        calls: usize,
    },
    /// The request failed.
    Failed(ApiError),
}

/// Reads one request's events into [`Part`]s.
pub struct Reader {
    rx: UnboundedReceiver<Event>,
    calls: Option<CallParser>,
    complete: usize,
    over: bool,
}

impl Reader {
    /// A reader of `rx`; tool calls are read out with `tools`' syntax.
    pub fn new(rx: UnboundedReceiver<Event>, tools: Option<&ToolReply>) -> Reader {
        Reader {
            rx,
            calls: tools.map(ToolReply::parser),
            complete: 0,
            over: false,
        }
    }

    fn pieces(&mut self, text: String, out: &mut Vec<Part>) {
        let pieces = match &mut self.calls {
            Some(p) => p.push(&text),
            None if text.is_empty() => Vec::new(),
            None => vec![Piece::Text(text)],
        };
        self.convert(pieces, out);
    }

    fn convert(&mut self, pieces: Vec<Piece>, out: &mut Vec<Part>) {
        for p in pieces {
            out.push(match p {
                Piece::Text(t) => Part::Text(t),
                Piece::Start { index, name } => Part::CallStart { index, name },
                Piece::Args { index, text } => Part::CallArgs { index, text },
                Piece::End { index } => {
                    self.complete += 1;
                    Part::CallEnd { index }
                }
            });
        }
    }

    /// The parts of the next event; empty once the reply is over.
    pub async fn next(&mut self) -> Vec<Part> {
        let mut out = Vec::new();
        while out.is_empty() && !self.over {
            let Some(ev) = self.rx.recv().await else {
                self.over = true;
                out.push(Part::Failed(ApiError::unavailable("the engine stopped")));
                break;
            };
            match ev {
                Event::Admitted { cached_tokens, .. } => out.push(Part::Admitted {
                    cached: cached_tokens,
                }),
                Event::Token { text, .. } => self.pieces(text, &mut out),
                Event::Finished {
                    reason,
                    usage,
                    text,
                    ..
                } => {
                    self.pieces(text, &mut out);
                    if let Some(p) = self.calls.as_mut() {
                        let tail = p.finish();
                        self.convert(tail, &mut out);
                    }
                    self.over = true;
                    out.push(Part::Done {
                        reason,
                        usage,
                        calls: self.complete,
                    });
                }
                Event::Failed { error, .. } => {
                    self.over = true;
                    out.push(Part::Failed(error.into()));
                }
            }
        }
        out
    }

    /// Every part until the end.
    pub async fn all(mut self) -> Vec<Part> {
        let mut v = Vec::new();
        loop {
            let p = self.next().await;
            if p.is_empty() {
                return v;
            }
            v.extend(p);
        }
    }
}

/// A whole reply: its text, its calls (name, arguments, complete) and how
/// it ended.
pub struct Whole {
    pub text: String,
    /// `(name, arguments)` of each call, in order, with whether it ended.
    pub calls: Vec<(String, String, bool)>,
    pub reason: FinishReason,
    pub usage: Usage,
}

impl Whole {
    /// Folds a reply's parts.
    ///
    /// # Errors
    ///
    /// The request's failure.
    pub fn from_parts(parts: Vec<Part>) -> Result<Whole, ApiError> {
        let mut text = String::new();
        let mut calls: Vec<(String, String, bool)> = Vec::new();
        for p in parts {
            match p {
                Part::Admitted { .. } => {}
                Part::Text(t) => text.push_str(&t),
                Part::CallStart { name, .. } => calls.push((name, String::new(), false)),
                Part::CallArgs { index, text } => {
                    if let Some(c) = calls.get_mut(index) {
                        c.1.push_str(&text);
                    }
                }
                Part::CallEnd { index } => {
                    if let Some(c) = calls.get_mut(index) {
                        c.2 = true;
                    }
                }
                Part::Done { reason, usage, .. } => {
                    return Ok(Whole {
                        text,
                        calls,
                        reason,
                        usage,
                    })
                }
                Part::Failed(e) => return Err(e),
            }
        }
        Err(ApiError::unavailable("the engine stopped"))
    }
}
