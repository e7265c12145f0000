//! A Responses API answer: one `response` object, or its server-sent
//! events; and, with `store`, the answer kept (stored.rs) before the last
//! event, so a `previous_response_id` sent right after it finds it.
//!
//! ```text
//!   response.created / response.in_progress            {response: status in_progress, output: []}
//!   response.output_item.added                         {output_index, item: message, in_progress}
//!   response.content_part.added                        {item_id, output_index, content_index: 0, part: output_text ""}
//!   response.output_text.delta                         {item_id, output_index, content_index, delta}   per piece
//!   response.output_text.done / content_part.done / output_item.done
//!   response.output_item.added                         {item: function_call, call_id, name, arguments: ""}
//!   response.function_call_arguments.delta             {item_id, output_index, delta}
//!   response.function_call_arguments.done / output_item.done
//!   response.completed | response.incomplete           {response: the whole object}
//!   a failure: response.failed {response: status failed, error}
//!   every event: {"type", "sequence_number" (0, 1, ...), ...}
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::response::Response;
use fak_engine::{Event, FinishReason, Usage};
use fak_kv::Tenant;
use fak_tokenizer::{Tokenizer, ToolMessage};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::engine_thread::Loaded;
use crate::error::ApiError;
use crate::outcome::{Part, Reader, Whole};
use crate::state::{AppState, KeyTenant};
use crate::stored::StoredId;
use crate::tools::call_id;
use crate::tools::ToolReply;

/// The request's fields a response object repeats.
pub struct Echo {
    pub model: String,
    pub instructions: Option<String>,
    pub tools: Vec<Value>,
    pub tool_choice: Value,
    pub parallel_tool_calls: bool,
    pub temperature: f64,
    pub top_p: f64,
    pub max_output_tokens: Option<i64>,
    pub text: Value,
    pub metadata: Value,
    pub previous_response_id: Option<String>,
    pub store: bool,
    pub user: Option<String>,
}

/// What keeping the response takes.
pub struct Keep {
    pub st: AppState,
    pub loaded: Loaded,
    pub key: KeyTenant,
    /// The engine tenant of the request (its snapshot shares its blocks).
    pub tenant: Tenant,
    /// The conversation before the reply, without the instructions.
    pub conversation: Vec<ToolMessage>,
    pub instructions: Option<String>,
    /// The tool definitions the template saw.
    pub tools: Option<Value>,
}

/// One response being answered.
pub struct Turn {
    pub id: StoredId,
    pub echo: Echo,
    pub keep: Keep,
    /// The engine session the response runs in, if any.
    pub scratch: super::snapshot::Scratch,
    /// How tool calls are read, when they can happen.
    pub tools: Option<ToolReply>,
    /// The names of the request's custom tools (their calls are
    /// `custom_tool_call` items, their input the `input` argument).
    pub custom: Vec<String>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    })
}

/// Status and `incomplete_details` of a finished reply.
fn status(reason: FinishReason) -> (&'static str, Value) {
    match reason {
        FinishReason::Length => ("incomplete", json!({"reason": "max_output_tokens"})),
        _ => ("completed", Value::Null),
    }
}

impl Turn {
    fn base(&self) -> u128 {
        self.tools.as_ref().map_or(0, |t| t.base)
    }

    fn item_id(&self, prefix: &str, index: usize) -> String {
        format!(
            "{prefix}_{:024x}",
            (self.id.0 >> 32).wrapping_add(index as u128)
        )
    }

    /// The response object.
    fn object(
        &self,
        created: u64,
        status: &str,
        output: Vec<Value>,
        usage: Option<&Usage>,
    ) -> Value {
        let e = &self.echo;
        json!({
            "id": self.id.to_string(),
            "object": "response",
            "created_at": created,
            "status": status,
            "background": false,
            "error": null,
            "incomplete_details": null,
            "instructions": e.instructions,
            "max_output_tokens": e.max_output_tokens,
            "model": e.model,
            "output": output,
            "parallel_tool_calls": e.parallel_tool_calls,
            "previous_response_id": e.previous_response_id,
            "reasoning": {"effort": null, "summary": null},
            "service_tier": "default",
            "store": e.store,
            "temperature": e.temperature,
            "text": e.text,
            "tool_choice": e.tool_choice,
            "tools": e.tools,
            "top_p": e.top_p,
            "truncation": "disabled",
            "usage": usage.map(usage_json),
            "user": e.user,
            "metadata": e.metadata,
        })
    }

    fn message_item(&self, text: &str, status: &str) -> Value {
        json!({
            "type": "message", "id": self.item_id("msg", 0), "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        })
    }

    fn is_custom(&self, name: &str) -> bool {
        self.custom.iter().any(|c| c == name)
    }

    /// Call `index`'s item id.
    fn call_item_id(&self, index: usize, name: &str) -> String {
        let prefix = if self.is_custom(name) { "ctc" } else { "fc" };
        self.item_id(prefix, index + 1)
    }

    fn call_item(&self, index: usize, name: &str, args: &str, status: &str) -> Value {
        let id = self.call_item_id(index, name);
        let call = call_id(self.base(), index);
        if self.is_custom(name) {
            json!({"type": "custom_tool_call", "id": id, "call_id": call, "name": name,
                   "input": custom_input(args), "status": status})
        } else {
            json!({"type": "function_call", "id": id, "call_id": call, "name": name,
                   "arguments": args, "status": status})
        }
    }

    /// The output items and the reply as a chat message.
    fn output(&self, w: &Whole) -> (Vec<Value>, ToolMessage) {
        let (st, _) = status(w.reason);
        let mut items = Vec::new();
        if !w.text.trim().is_empty() {
            items.push(self.message_item(&w.text, st));
        }
        let mut calls = Vec::new();
        for (i, (name, args, complete)) in w.calls.iter().enumerate() {
            if *complete {
                items.push(self.call_item(i, name, args, "completed"));
                calls.push(fak_tokenizer::ToolCall {
                    id: call_id(self.base(), i),
                    kind: "function".into(),
                    function: fak_tokenizer::FunctionCall {
                        name: name.clone(),
                        arguments: serde_json::from_str(args)
                            .unwrap_or_else(|_| Value::String(args.clone())),
                    },
                });
            }
        }
        let reply = ToolMessage {
            role: "assistant".into(),
            content: if calls.is_empty() {
                w.text.clone()
            } else {
                w.text.trim().to_string()
            },
            tool_calls: (!calls.is_empty()).then_some(calls),
            tool_call_id: None,
        };
        (items, reply)
    }

    /// The finished response object, kept first when `store` is set.
    async fn finish(&mut self, created: u64, w: &Whole) -> Value {
        let (items, reply) = self.output(w);
        let (st, incomplete) = status(w.reason);
        let mut v = self.object(created, st, items, Some(&w.usage));
        v["incomplete_details"] = incomplete;
        if self.echo.store {
            self.keep(reply, v.clone()).await;
        } else if let Some(s) = self.scratch.take() {
            crate::stored::free(self.keep.st.engine(), Some(s)).await;
        }
        v
    }

    /// Stores the response with its conversation and KV snapshot.
    async fn keep(&mut self, reply: ToolMessage, response: Value) {
        let k = &self.keep;
        let mut conversation = k.conversation.clone();
        conversation.push(reply);
        let tokens = snapshot_tokens(
            &k.loaded,
            k.instructions.as_deref(),
            &conversation,
            k.tools.as_ref(),
        );
        let (session, tokens) = match tokens {
            Some(t) => (
                super::snapshot::settle(&k.st, k.tenant, &mut self.scratch, t.clone()).await,
                t,
            ),
            None => (None, Vec::new()),
        };
        let l = &k.loaded;
        let max_total = l.n_blocks.saturating_mul(l.block_size) / 2;
        let entry = crate::stored::NewEntry {
            owner: k.key,
            tenant: k.tenant,
            conversation,
            response,
            session,
            tokens,
        };
        k.st.stored()
            .insert(k.st.engine(), k.st.store(), self.id, entry, max_total)
            .await;
    }
}

/// A custom tool call's input: the `input` string of its arguments.
fn custom_input(args: &str) -> String {
    serde_json::from_str::<Value>(args)
        .ok()
        .and_then(|v| v.get("input").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default()
}

/// The tokens of a conversation rendered without a generation prompt,
/// as the next turn's prompt starts.
fn snapshot_tokens(
    l: &Loaded,
    instructions: Option<&str>,
    conversation: &[ToolMessage],
    tools: Option<&Value>,
) -> Option<Vec<u32>> {
    let t = l.template.as_ref()?;
    let mut msgs = Vec::with_capacity(conversation.len() + 1);
    if let Some(i) = instructions {
        msgs.push(ToolMessage {
            role: "system".into(),
            content: i.to_string(),
            ..ToolMessage::default()
        });
    }
    msgs.extend(conversation.iter().cloned());
    let defs = tools.and_then(Value::as_array).map(Vec::as_slice);
    let text = t.render_with_tools(&msgs, defs, false).ok()?;
    Some(encode(&l.tok, &text))
}

fn encode(tok: &Tokenizer, text: &str) -> Vec<u32> {
    tok.encode(text, fak_tokenizer::EncodeOptions::default())
}

/// Waits for the whole reply: the response object.
///
/// # Errors
///
/// The request's failure.
pub async fn whole(mut turn: Turn, rx: UnboundedReceiver<Event>) -> Result<Value, ApiError> {
    let created = now();
    let w = Whole::from_parts(Reader::new(rx, turn.tools.as_ref()).all().await)?;
    Ok(turn.finish(created, &w).await)
}

/// The item being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Message,
    Call(usize),
}

struct Sse {
    turn: Turn,
    reader: Reader,
    created: u64,
    seq: u64,
    out: VecDeque<Bytes>,
    /// Output items so far (finished ones), for the indexes.
    items: usize,
    open: Open,
    /// The reply so far, folded as the parts arrive.
    text: String,
    calls: Vec<(String, String, bool)>,
    /// Whitespace held back until text that is not whitespace follows.
    blank: String,
    done: bool,
}

impl Sse {
    fn push(&mut self, mut data: Value) {
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        let name = data["type"].as_str().unwrap_or("error").to_string();
        self.out
            .push_back(Bytes::from(format!("event: {name}\ndata: {data}\n\n")));
    }

    fn close(&mut self) {
        let index = self.items;
        match self.open {
            Open::None => return,
            Open::Message => {
                let id = self.turn.item_id("msg", 0);
                let text = self.text.clone();
                self.push(json!({"type": "response.output_text.done", "item_id": id, "output_index": index,
                                 "content_index": 0, "text": text, "logprobs": []}));
                self.push(json!({"type": "response.content_part.done", "item_id": id, "output_index": index,
                                 "content_index": 0,
                                 "part": {"type": "output_text", "text": text, "annotations": [], "logprobs": []}}));
                let item = self.turn.message_item(&text, "completed");
                self.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
            }
            Open::Call(k) => {
                let (name, args, _) = self.calls[k].clone();
                let id = self.turn.call_item_id(k, &name);
                if self.turn.is_custom(&name) {
                    // The input is known once the call's JSON is whole.
                    let input = custom_input(&args);
                    self.push(
                        json!({"type": "response.custom_tool_call_input.delta", "item_id": id,
                                     "output_index": index, "delta": input}),
                    );
                    self.push(
                        json!({"type": "response.custom_tool_call_input.done", "item_id": id,
                                     "output_index": index, "input": input}),
                    );
                } else {
                    self.push(
                        json!({"type": "response.function_call_arguments.done", "item_id": id,
                                     "output_index": index, "name": name, "arguments": args}),
                    );
                }
                let item = self.turn.call_item(k, &name, &args, "completed");
                self.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
            }
        }
        self.items += 1;
        self.open = Open::None;
    }

    fn text(&mut self, t: String) {
        if self.open != Open::Message {
            if t.trim().is_empty() {
                self.blank.push_str(&t);
                return;
            }
            self.close();
            self.open = Open::Message;
            let id = self.turn.item_id("msg", 0);
            let index = self.items;
            let item = json!({"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []});
            self.push(
                json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            );
            self.push(json!({"type": "response.content_part.added", "item_id": id, "output_index": index,
                             "content_index": 0,
                             "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}));
        }
        let delta = std::mem::take(&mut self.blank) + &t;
        self.text.push_str(&delta);
        let id = self.turn.item_id("msg", 0);
        let index = self.items;
        self.push(
            json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                         "content_index": 0, "delta": delta, "logprobs": []}),
        );
    }

    async fn part(&mut self, p: Part) {
        match p {
            Part::Admitted { .. } => {}
            Part::Text(t) => self.text(t),
            Part::CallStart { index, name } => {
                self.close();
                self.blank.clear();
                while self.calls.len() <= index {
                    self.calls.push((String::new(), String::new(), false));
                }
                self.calls[index].0 = name.clone();
                self.open = Open::Call(index);
                let item = self.turn.call_item(index, &name, "", "in_progress");
                let out = self.items;
                self.push(json!({"type": "response.output_item.added", "output_index": out, "item": item}));
            }
            Part::CallArgs { index, text } => {
                let Some(c) = self.calls.get_mut(index) else {
                    return;
                };
                c.1.push_str(&text);
                let name = c.0.clone();
                if self.turn.is_custom(&name) {
                    return;
                }
                let id = self.turn.call_item_id(index, &name);
                let out = self.items;
                self.push(
                    json!({"type": "response.function_call_arguments.delta", "item_id": id,
                                 "output_index": out, "delta": text}),
                );
            }
            Part::CallEnd { index } => {
                if let Some(c) = self.calls.get_mut(index) {
                    c.2 = true;
                }
                self.close();
            }
            Part::Done { reason, usage, .. } => {
                // A call cut short is no item: its added event stands alone.
                if let Open::Call(k) = self.open {
                    if !self.calls[k].2 {
                        self.open = Open::None;
                    }
                }
                self.close();
                let w = Whole {
                    text: std::mem::take(&mut self.text),
                    calls: std::mem::take(&mut self.calls),
                    reason,
                    usage,
                };
                let v = self.turn.finish(self.created, &w).await;
                let kind = match v["status"].as_str() {
                    Some("incomplete") => "response.incomplete",
                    _ => "response.completed",
                };
                self.push(json!({"type": kind, "response": v}));
                self.done = true;
            }
            Part::Failed(e) => {
                let mut v = self.turn.object(self.created, "failed", Vec::new(), None);
                v["error"] =
                    json!({"code": e.code.unwrap_or("server_error"), "message": e.message});
                self.push(json!({"type": "response.failed", "response": v}));
                self.done = true;
            }
        }
    }
}

/// The answer as server-sent events. Dropping the stream (the client went
/// away) drops the receiver, which cancels the request.
pub fn sse(turn: Turn, rx: UnboundedReceiver<Event>) -> Response {
    let reader = Reader::new(rx, turn.tools.as_ref());
    let created = now();
    let mut s = Sse {
        turn,
        reader,
        created,
        seq: 0,
        out: VecDeque::new(),
        items: 0,
        open: Open::None,
        text: String::new(),
        calls: Vec::new(),
        blank: String::new(),
        done: false,
    };
    let v = s.turn.object(created, "in_progress", Vec::new(), None);
    s.push(json!({"type": "response.created", "response": v.clone()}));
    s.push(json!({"type": "response.in_progress", "response": v}));
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
                s.part(p).await;
            }
        }
    });
    crate::chat::event_stream(stream)
}
