//! OpenAI response bodies, whole or as server-sent events, built from one
//! request's engine events.
//!
//! ```text
//!   stream (chat):  data: {delta: {role: "assistant", content: ""}}
//!                   data: {delta: {content: "Hel"}}   one per released piece
//!                   data: {delta: {}, finish_reason: "stop"}
//!                   data: {choices: [], usage: {...}}  with include_usage
//!                   data: [DONE]
//!   with tools:     data: {delta: {tool_calls: [{index, id, type, function: {name, arguments: ""}}]}}
//!                   data: {delta: {tool_calls: [{index, function: {arguments: "{\"ci"}}]}}  fragments
//!                   data: {delta: {}, finish_reason: "tool_calls"}
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use fak_engine::{Event, FinishReason, StepLogprobs, Usage};
use fak_tokenizer::Tokenizer;
use futures_util::Stream;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::error::ApiError;
use crate::tools::ToolReply;

/// Which endpoint's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `chat.completion`.
    Chat,
    /// `text_completion`.
    Completion,
}

/// How to answer.
#[derive(Debug, Clone)]
pub struct Shape {
    pub kind: Kind,
    pub stream: bool,
    pub include_usage: bool,
    pub model: String,
    /// A session turn's `"session": {"id", "tokens"}`, set before the
    /// request's last event is passed on; added to the final object (or
    /// the final chunk).
    pub session: Option<Arc<OnceLock<Value>>>,
    /// How tool calls are read out of the reply, when they can happen.
    pub tools: Option<ToolReply>,
}

/// `tool_calls` instead of `stop` when the reply ended after calls.
fn finish_with_calls(r: FinishReason, calls: bool) -> &'static str {
    match r {
        FinishReason::EndOfGeneration
        | FinishReason::StopToken(_)
        | FinishReason::StopString(_)
            if calls =>
        {
            "tool_calls"
        }
        r => finish_name(r),
    }
}

impl Shape {
    fn session_json(&self) -> Option<Value> {
        self.session.as_ref().and_then(|s| s.get().cloned())
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn new_id(kind: Kind) -> String {
    let r: u128 = rand::random();
    match kind {
        Kind::Chat => format!("chatcmpl-{:024x}", r >> 32),
        Kind::Completion => format!("cmpl-{:024x}", r >> 32),
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "accepted_prediction_tokens": u.accepted_prediction_tokens,
            "rejected_prediction_tokens": u.rejected_prediction_tokens,
        },
    })
}

fn finish_name(r: FinishReason) -> &'static str {
    match r {
        FinishReason::Cancelled => "abort",
        r => r.openai(),
    }
}

fn piece(tok: &Tokenizer, id: u32) -> (String, Vec<u8>) {
    let b = tok.token_bytes(id).to_vec();
    (String::from_utf8_lossy(&b).into_owned(), b)
}

/// One token's entry of chat `logprobs.content`.
fn chat_lp(tok: &Tokenizer, lp: &StepLogprobs) -> Value {
    let (t, b) = piece(tok, lp.chosen.token);
    let top: Vec<Value> = lp
        .top
        .iter()
        .map(|c| {
            let (t, b) = piece(tok, c.token);
            json!({"token": t, "logprob": c.logprob, "bytes": b})
        })
        .collect();
    json!({"token": t, "logprob": lp.chosen.logprob, "bytes": b, "top_logprobs": top})
}

/// Completions-style log-probabilities of several tokens.
fn completion_lp(tok: &Tokenizer, lps: &[StepLogprobs], offsets: &[usize]) -> Value {
    let tokens: Vec<String> = lps.iter().map(|l| piece(tok, l.chosen.token).0).collect();
    let token_lps: Vec<f32> = lps.iter().map(|l| l.chosen.logprob).collect();
    let tops: Vec<Value> = lps
        .iter()
        .map(|l| {
            let mut m = serde_json::Map::new();
            for c in &l.top {
                m.insert(piece(tok, c.token).0, json!(c.logprob));
            }
            Value::Object(m)
        })
        .collect();
    json!({"tokens": tokens, "token_logprobs": token_lps, "top_logprobs": tops, "text_offset": offsets})
}

/// Waits for the whole request and answers with one JSON object.
///
/// # Errors
///
/// The request's failure, mapped to its HTTP status.
pub async fn collect(
    tok: &Tokenizer,
    shape: &Shape,
    mut rx: UnboundedReceiver<Event>,
) -> Result<Value, ApiError> {
    let mut text = String::new();
    let mut lps: Vec<StepLogprobs> = Vec::new();
    let mut offsets = Vec::new();
    loop {
        let Some(ev) = rx.recv().await else {
            return Err(ApiError::unavailable("the engine stopped"));
        };
        match ev {
            Event::Token {
                text: t, logprobs, ..
            } => {
                if let Some(l) = logprobs {
                    offsets.push(text.len());
                    lps.push(l);
                }
                text.push_str(&t);
            }
            Event::Finished {
                reason,
                usage,
                text: t,
                ..
            } => {
                text.push_str(&t);
                let want_lp = !lps.is_empty();
                let choice = match (shape.kind, &shape.tools) {
                    (Kind::Chat, Some(tr)) => {
                        let (content, calls) = tr.read(&text);
                        let calls = crate::tools::calls_json(tr.base, &calls);
                        let mut message = json!({"role": "assistant", "content": content});
                        if !calls.is_empty() {
                            if content.trim().is_empty() {
                                message["content"] = Value::Null;
                            }
                            message["tool_calls"] = json!(calls);
                        }
                        json!({
                            "index": 0,
                            "message": message,
                            "logprobs": if want_lp {
                                json!({"content": lps.iter().map(|l| chat_lp(tok, l)).collect::<Vec<_>>()})
                            } else { Value::Null },
                            "finish_reason": finish_with_calls(reason, !calls.is_empty()),
                        })
                    }
                    (Kind::Chat, None) => json!({
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "logprobs": if want_lp {
                            json!({"content": lps.iter().map(|l| chat_lp(tok, l)).collect::<Vec<_>>()})
                        } else { Value::Null },
                        "finish_reason": finish_name(reason),
                    }),
                    (Kind::Completion, _) => json!({
                        "index": 0,
                        "text": text,
                        "logprobs": if want_lp { completion_lp(tok, &lps, &offsets) } else { Value::Null },
                        "finish_reason": finish_name(reason),
                    }),
                };
                let mut v = json!({
                    "id": new_id(shape.kind),
                    "object": match shape.kind { Kind::Chat => "chat.completion", Kind::Completion => "text_completion" },
                    "created": now(),
                    "model": shape.model,
                    "choices": [choice],
                    "usage": usage_json(&usage),
                });
                if let Some(s) = shape.session_json() {
                    v["session"] = s;
                }
                return Ok(v);
            }
            Event::Failed { error, .. } => return Err(error.into()),
            Event::Admitted { .. } => {}
        }
    }
}

struct Sse {
    tok: Arc<Tokenizer>,
    shape: Shape,
    rx: UnboundedReceiver<Event>,
    id: String,
    created: u64,
    out: VecDeque<Bytes>,
    done: bool,
    /// Bytes of text sent so far (completions' `text_offset`).
    sent: usize,
    /// The request finished: the chunks from here on are the last ones.
    finished: bool,
    /// Reads tool calls out of the text, with tools.
    calls: Option<(crate::tools::CallParser, ToolReply)>,
    /// Calls that ended.
    complete: usize,
}

impl Sse {
    fn chunk(&self, choice: Value, usage: Option<&Usage>) -> Bytes {
        let object = match self.shape.kind {
            Kind::Chat => "chat.completion.chunk",
            Kind::Completion => "text_completion",
        };
        let mut v = json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.shape.model,
            "choices": if choice.is_null() { json!([]) } else { json!([choice]) },
        });
        if let Some(u) = usage {
            v["usage"] = usage_json(u);
        } else if self.shape.include_usage {
            v["usage"] = Value::Null;
        }
        if self.finished {
            if let Some(s) = self.shape.session_json() {
                v["session"] = s;
            }
        }
        Bytes::from(format!("data: {v}\n\n"))
    }

    fn text_choice(
        &mut self,
        text: &str,
        lp: Option<&StepLogprobs>,
        finish: Option<FinishReason>,
    ) -> Value {
        let finish = finish.map(finish_name);
        let v = match self.shape.kind {
            Kind::Chat => {
                let delta = if text.is_empty() && finish.is_some() {
                    json!({})
                } else {
                    json!({"content": text})
                };
                json!({
                    "index": 0,
                    "delta": delta,
                    "logprobs": lp.map_or(Value::Null, |l| json!({"content": [chat_lp(&self.tok, l)]})),
                    "finish_reason": finish,
                })
            }
            Kind::Completion => json!({
                "index": 0,
                "text": text,
                "logprobs": lp.map_or(Value::Null, |l| completion_lp(&self.tok, std::slice::from_ref(l), &[self.sent])),
                "finish_reason": finish,
            }),
        };
        self.sent += text.len();
        v
    }

    /// Chunks for a piece of the reply, read for tool calls.
    fn tool_pieces(&mut self, pieces: Vec<crate::tools::Piece>) {
        use crate::tools::Piece;
        let base = self.calls.as_ref().map_or(0, |(_, t)| t.base);
        for p in pieces {
            let delta = match p {
                Piece::Text(t) => json!({"content": t}),
                Piece::Start { index, name } => json!({"tool_calls": [{
                    "index": index, "id": crate::tools::call_id(base, index), "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                Piece::Args { index, text } => {
                    json!({"tool_calls": [{"index": index, "function": {"arguments": text}}]})
                }
                Piece::End { .. } => {
                    self.complete += 1;
                    continue;
                }
            };
            let c = json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": null});
            let b = self.chunk(c, None);
            self.out.push_back(b);
        }
    }

    /// Turns the next event into chunks; false when the stream is over.
    async fn pull(&mut self) -> bool {
        let Some(ev) = self.rx.recv().await else {
            let e = ApiError::unavailable("the engine stopped");
            self.out
                .push_back(Bytes::from(format!("data: {}\n\n", e.body())));
            self.out.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
            self.done = true;
            return true;
        };
        match ev {
            Event::Token { text, logprobs, .. } if self.calls.is_some() => {
                let pieces = self.calls.as_mut().map(|(p, _)| p.push(&text));
                self.tool_pieces(pieces.unwrap_or_default());
                if let Some(l) = logprobs {
                    let c = json!({"index": 0, "delta": {},
                        "logprobs": {"content": [chat_lp(&self.tok, &l)]}, "finish_reason": null});
                    let b = self.chunk(c, None);
                    self.out.push_back(b);
                }
            }
            Event::Finished {
                reason,
                usage,
                text,
                ..
            } if self.calls.is_some() => {
                let mut pieces = Vec::new();
                if let Some((p, _)) = self.calls.as_mut() {
                    pieces = p.push(&text);
                    pieces.extend(p.finish());
                }
                self.tool_pieces(pieces);
                self.finished = true;
                let finish = finish_with_calls(reason, self.complete > 0);
                let c = json!({"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish});
                let b = self.chunk(c, None);
                self.out.push_back(b);
                if self.shape.include_usage {
                    let b = self.chunk(Value::Null, Some(&usage));
                    self.out.push_back(b);
                }
                self.out.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
                self.done = true;
            }
            Event::Token { text, logprobs, .. } => {
                if !text.is_empty() || logprobs.is_some() {
                    let c = self.text_choice(&text, logprobs.as_ref(), None);
                    let b = self.chunk(c, None);
                    self.out.push_back(b);
                }
            }
            Event::Finished {
                reason,
                usage,
                text,
                ..
            } => {
                if !text.is_empty() {
                    let c = self.text_choice(&text, None, None);
                    let b = self.chunk(c, None);
                    self.out.push_back(b);
                }
                self.finished = true;
                let c = self.text_choice("", None, Some(reason));
                let b = self.chunk(c, None);
                self.out.push_back(b);
                if self.shape.include_usage {
                    let b = self.chunk(Value::Null, Some(&usage));
                    self.out.push_back(b);
                }
                self.out.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
                self.done = true;
            }
            Event::Failed { error, .. } => {
                let e = ApiError::from(error);
                self.out
                    .push_back(Bytes::from(format!("data: {}\n\n", e.body())));
                self.out.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
                self.done = true;
            }
            Event::Admitted { .. } => {}
        }
        true
    }
}

/// The request's events as server-sent events. Dropping the stream (the
/// client went away) drops `rx`, which cancels the request.
pub fn sse(
    tok: Arc<Tokenizer>,
    shape: Shape,
    rx: UnboundedReceiver<Event>,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    let shape_tools = shape.tools.clone().filter(|_| shape.kind == Kind::Chat);
    let mut s = Sse {
        id: new_id(shape.kind),
        created: now(),
        tok,
        shape,
        rx,
        out: VecDeque::new(),
        done: false,
        sent: 0,
        finished: false,
        calls: shape_tools.map(|t| (t.parser(), t)),
        complete: 0,
    };
    if s.shape.kind == Kind::Chat {
        let c = json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null});
        let b = s.chunk(c, None);
        s.out.push_back(b);
    }
    futures_util::stream::unfold(s, |mut s| async move {
        loop {
            if let Some(b) = s.out.pop_front() {
                return Some((Ok(b), s));
            }
            if s.done || !s.pull().await {
                return None;
            }
        }
    })
}
