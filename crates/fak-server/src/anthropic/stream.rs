//! A Messages API answer: one `message` object, or its server-sent events.
//!
//! ```text
//!   event: message_start        {message: {id, content: [], usage: {input_tokens, cache_read_input_tokens}}}
//!   event: ping
//!   event: content_block_start  {index: 0, content_block: {type: text, text: ""}}
//!   event: content_block_delta  {index: 0, delta: {type: text_delta, text}}        one per piece
//!   event: content_block_stop   {index: 0}
//!   event: content_block_start  {index: 1, content_block: {type: tool_use, id, name, input: {}}}
//!   event: content_block_delta  {index: 1, delta: {type: input_json_delta, partial_json}}
//!   event: content_block_stop   {index: 1}
//!   event: message_delta        {delta: {stop_reason, stop_sequence}, usage: {output_tokens, ...}}
//!   event: message_stop
//!   a failure after the start: event: error {type: error, error: {...}}
//! ```
//!
//! `usage.input_tokens` counts the prompt tokens computed; those found in
//! the prefix cache are `cache_read_input_tokens`, as Anthropic counts
//! cache reads apart.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::body::Bytes;
use axum::response::Response;
use fak_engine::{Event, FinishReason, Usage};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use super::AnthropicError;
use crate::error::ApiError;
use crate::outcome::{Part, Reader, Whole};
use crate::tools::ToolReply;

/// What an answer needs besides the events.
pub struct Answer {
    /// The model name the answer carries.
    pub model: String,
    /// Prompt tokens.
    pub n_prompt: usize,
    /// The request's stop strings, as the engine numbers them.
    pub stops: Vec<String>,
    /// How tool calls are read, when they can happen.
    pub tools: Option<ToolReply>,
}

fn message_id() -> String {
    format!("msg_{:024x}", rand::random::<u128>() >> 32)
}

fn tool_id(base: u128, index: usize) -> String {
    format!("toolu_{:024x}", (base >> 32).wrapping_add(index as u128))
}

/// `stop_reason` and `stop_sequence`.
fn stop(a: &Answer, reason: FinishReason, calls: usize) -> (&'static str, Value) {
    match reason {
        FinishReason::Length => ("max_tokens", Value::Null),
        FinishReason::StopString(k) => (
            "stop_sequence",
            a.stops.get(k).map_or(Value::Null, |s| json!(s)),
        ),
        _ if calls > 0 => ("tool_use", Value::Null),
        _ => ("end_turn", Value::Null),
    }
}

fn usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.prompt_tokens.saturating_sub(u.cached_tokens),
        "output_tokens": u.completion_tokens,
        "cache_read_input_tokens": u.cached_tokens,
        "cache_creation_input_tokens": 0,
    })
}

/// A call's arguments as the `input` object (`{}` if they do not parse:
/// only a call cut short can fail to, and those are dropped).
fn input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| json!({}))
}

/// Waits for the whole reply: the `message` object.
///
/// # Errors
///
/// The request's failure.
pub async fn whole(a: &Answer, rx: UnboundedReceiver<Event>) -> Result<Value, ApiError> {
    let w = Whole::from_parts(Reader::new(rx, a.tools.as_ref()).all().await)?;
    let base = a.tools.as_ref().map_or(0, |t| t.base);
    let mut content = Vec::new();
    if !w.text.trim().is_empty() {
        content.push(json!({"type": "text", "text": w.text}));
    }
    let mut n_calls = 0;
    for (i, (name, args, complete)) in w.calls.iter().enumerate() {
        if *complete {
            n_calls += 1;
            content.push(
                json!({"type": "tool_use", "id": tool_id(base, i), "name": name,
                                "input": input(args)}),
            );
        }
    }
    let (reason, seq) = stop(a, w.reason, n_calls);
    Ok(json!({
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": a.model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": seq,
        "usage": usage(&w.usage),
    }))
}

/// Which content block is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Text,
    Call,
}

struct Sse {
    answer: Answer,
    reader: Reader,
    id: String,
    out: VecDeque<Bytes>,
    started: bool,
    /// Index of the next content block.
    next: usize,
    open: Open,
    /// Whitespace held back until text that is not whitespace follows
    /// (so a call after a newline opens no empty text block).
    blank: String,
    done: bool,
}

fn event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

impl Sse {
    fn push(&mut self, name: &str, data: Value) {
        self.out.push_back(event(name, &data));
    }

    fn start(&mut self, cached: usize) {
        if self.started {
            return;
        }
        self.started = true;
        let m = json!({
            "id": self.id, "type": "message", "role": "assistant", "model": self.answer.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": self.answer.n_prompt.saturating_sub(cached), "output_tokens": 0,
                      "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0},
        });
        self.push(
            "message_start",
            json!({"type": "message_start", "message": m}),
        );
        self.push("ping", json!({"type": "ping"}));
    }

    fn close(&mut self) {
        if self.open != Open::None {
            let index = self.next - 1;
            self.push(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            );
            self.open = Open::None;
        }
    }

    fn text(&mut self, t: String) {
        if self.open != Open::Text {
            if t.trim().is_empty() {
                self.blank.push_str(&t);
                return;
            }
            self.close();
            let index = self.next;
            self.next += 1;
            self.open = Open::Text;
            self.push(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}}),
            );
        }
        let t = std::mem::take(&mut self.blank) + &t;
        let index = self.next - 1;
        self.push(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": "text_delta", "text": t}}),
        );
    }

    fn part(&mut self, p: Part) {
        let base = self.answer.tools.as_ref().map_or(0, |t| t.base);
        match p {
            Part::Admitted { cached } => self.start(cached),
            Part::Text(t) => {
                self.start(0);
                self.text(t);
            }
            Part::CallStart { index, name } => {
                self.start(0);
                self.close();
                self.blank.clear();
                let block = self.next;
                self.next += 1;
                self.open = Open::Call;
                self.push(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": block,
                           "content_block": {"type": "tool_use", "id": tool_id(base, index),
                                             "name": name, "input": {}}}),
                );
            }
            Part::CallArgs { text, .. } => {
                let block = self.next - 1;
                self.push(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": block,
                           "delta": {"type": "input_json_delta", "partial_json": text}}),
                );
            }
            Part::CallEnd { .. } => self.close(),
            Part::Done {
                reason,
                usage: u,
                calls,
            } => {
                self.start(u.cached_tokens);
                self.close();
                let (r, seq) = stop(&self.answer, reason, calls);
                self.push(
                    "message_delta",
                    json!({"type": "message_delta", "delta": {"stop_reason": r, "stop_sequence": seq},
                           "usage": usage(&u)}),
                );
                self.push("message_stop", json!({"type": "message_stop"}));
                self.done = true;
            }
            Part::Failed(e) => {
                let body = AnthropicError(e).body();
                self.push("error", body);
                self.done = true;
            }
        }
    }
}

/// The answer as server-sent events. Dropping the stream (the client went
/// away) drops the receiver, which cancels the request.
pub fn sse(answer: Answer, rx: UnboundedReceiver<Event>) -> Response {
    let reader = Reader::new(rx, answer.tools.as_ref());
    let s = Sse {
        answer,
        reader,
        id: message_id(),
        out: VecDeque::new(),
        started: false,
        next: 0,
        open: Open::None,
        blank: String::new(),
        done: false,
    };
    let stream = futures_util::stream::unfold(s, |mut s| async move {
        loop {
            if let Some(b) = s.out.pop_front() {
                return Some((Ok::<Bytes, Infallible>(b), s));
            }
            if s.done {
                return None;
            }
            let parts = s.reader.next().await;
            if parts.is_empty() {
                s.done = true;
            }
            for p in parts {
                s.part(p);
            }
        }
    });
    crate::chat::event_stream(stream)
}
