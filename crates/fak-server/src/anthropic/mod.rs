//! The Anthropic Messages API: `POST /v1/messages` and
//! `POST /v1/messages/count_tokens`, translated into the same engine
//! request as chat completions (`chat::chat_request`).
//!
//! ```text
//!   system (string | text blocks) ─► a system message; blocks that start
//!       with "x-anthropic-billing-header" are left out (see BILLING)
//!   messages[i] user:      tool_result blocks ─► tool messages (in order)
//!                          text blocks        ─► one user message
//!               assistant: text + tool_use    ─► one assistant message with tool_calls
//!   tools {name, input_schema} ─► chat tools; tool_choice auto|any|tool|none
//!   max_tokens (required), stop_sequences, temperature, top_p, top_k ─► Common
//!   the reply ─► outcome::Part ─► a message, or its SSE events (stream.rs)
//! ```
//!
//! Errors take Anthropic's shape: `{"type": "error", "error": {"type",
//! "message"}}` ([`AnthropicError`]).

mod stream;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use fak_tokenizer::{FunctionCall, ToolCall, ToolMessage};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::Named;
use crate::api::{Common, Stop};
use crate::chat::{chat_request, submit, ChatInput, OutputLimit};
use crate::error::ApiError;
use crate::state::{AppState, Call, Dialect};

/// Claude Code's first system block: a billing line that changes with
/// every request. Rendered, it would make every prompt differ from its
/// first tokens on and defeat the prefix cache, so blocks that start
/// with it are left out of the prompt.
pub const BILLING: &str = "x-anthropic-billing-header";

/// The Messages API routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/messages", post(create))
        .route("/v1/messages/count_tokens", post(count_tokens))
}

/// Anthropic's error shape.
#[derive(Debug)]
pub struct Anthropic;

impl Dialect for Anthropic {
    type Error = AnthropicError;
}

/// An [`ApiError`] written as Anthropic writes errors.
#[derive(Debug)]
pub struct AnthropicError(pub ApiError);

impl From<ApiError> for AnthropicError {
    fn from(e: ApiError) -> AnthropicError {
        AnthropicError(e)
    }
}

impl AnthropicError {
    /// Anthropic's error `type` for an HTTP status.
    pub fn kind(status: StatusCode) -> &'static str {
        match status.as_u16() {
            400 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            503 | 529 => "overloaded_error",
            _ => "api_error",
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({
            "type": "error",
            "error": {"type": Self::kind(self.0.status), "message": self.0.message},
        })
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        let mut r = (self.0.status, Json(self.body())).into_response();
        if let Some(s) = self.0.retry_after {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

/// `system`: a string or text blocks.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum System {
    Text(String),
    Blocks(Vec<Block>),
}

/// A content block (the fields of every type fak reads).
#[derive(Debug, Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    /// `tool_use`.
    id: Option<String>,
    name: Option<String>,
    input: Option<Value>,
    /// `tool_result`.
    tool_use_id: Option<String>,
    content: Option<Content>,
    #[serde(default)]
    is_error: bool,
}

/// A message's (or a tool result's) `content`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    content: Content,
}

#[derive(Debug, Deserialize)]
struct ToolDef {
    /// Absent or `custom` for a client tool; server tools are skipped.
    #[serde(rename = "type")]
    kind: Option<String>,
    name: String,
    description: Option<String>,
    input_schema: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ToolChoice {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
    #[serde(default)]
    disable_parallel_tool_use: bool,
}

/// `POST /v1/messages` (and, without `max_tokens`, `count_tokens`).
#[derive(Debug, Deserialize)]
pub struct MessagesRequest {
    model: Option<String>,
    messages: Vec<Message>,
    system: Option<System>,
    max_tokens: Option<i64>,
    stop_sequences: Option<Vec<String>>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<i64>,
    #[serde(default)]
    stream: bool,
    tools: Option<Vec<ToolDef>>,
    tool_choice: Option<ToolChoice>,
    /// Accepted; fak keeps no per-user state from it.
    #[allow(dead_code)]
    metadata: Option<Value>,
    /// Accepted and ignored: fak's models answer without a thinking phase.
    #[allow(dead_code)]
    thinking: Option<Value>,
}

impl Named for MessagesRequest {
    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(m)
}

/// The text of blocks that must all be text.
fn text_of(blocks: &[Block], at: &str) -> Result<String, ApiError> {
    let mut s = String::new();
    for (j, b) in blocks.iter().enumerate() {
        match (b.kind.as_str(), &b.text) {
            ("text", Some(t)) => s.push_str(t),
            ("image" | "document", _) => {
                return Err(bad(format!(
                    "{at}[{j}]: {} blocks are not supported: this model reads text only",
                    b.kind
                )))
            }
            (k, _) => return Err(bad(format!("{at}[{j}]: expected a text block, got '{k}'"))),
        }
    }
    Ok(s)
}

/// The system prompt, without billing-header blocks.
fn system_text(s: Option<&System>) -> Result<Option<String>, ApiError> {
    let text = match s {
        None => return Ok(None),
        Some(System::Text(t)) => t.clone(),
        Some(System::Blocks(blocks)) => {
            let kept: Vec<&Block> = blocks
                .iter()
                .filter(|b| !b.text.as_deref().is_some_and(|t| t.starts_with(BILLING)))
                .collect();
            let mut parts = Vec::new();
            for (j, b) in kept.iter().enumerate() {
                match (b.kind.as_str(), &b.text) {
                    ("text", Some(t)) => parts.push(t.as_str()),
                    (k, _) => {
                        return Err(bad(format!(
                            "system[{j}]: expected a text block, got '{k}'"
                        )))
                    }
                }
            }
            parts.join("\n\n")
        }
    };
    Ok((!text.is_empty()).then_some(text))
}

/// The conversation as chat messages.
fn messages(r: &MessagesRequest) -> Result<Vec<ToolMessage>, ApiError> {
    let mut out = Vec::new();
    if let Some(s) = system_text(r.system.as_ref())? {
        out.push(msg("system", s));
    }
    if r.messages.is_empty() {
        return Err(bad("messages: at least one message is required"));
    }
    for (i, m) in r.messages.iter().enumerate() {
        let at = format!("messages[{i}].content");
        match (m.role.as_str(), &m.content) {
            ("user" | "assistant" | "system", Content::Text(t)) => {
                out.push(msg(&m.role, t.clone()))
            }
            // Claude Code sends its environment as a system message
            // among the others.
            ("system", Content::Blocks(blocks)) => out.push(msg("system", text_of(blocks, &at)?)),
            ("user", Content::Blocks(blocks)) => {
                let mut text = String::new();
                for (j, b) in blocks.iter().enumerate() {
                    match b.kind.as_str() {
                        "tool_result" => {
                            let Some(id) = &b.tool_use_id else {
                                return Err(bad(format!(
                                    "{at}[{j}]: tool_result needs tool_use_id"
                                )));
                            };
                            let mut content = match &b.content {
                                None => String::new(),
                                Some(Content::Text(t)) => t.clone(),
                                Some(Content::Blocks(c)) => {
                                    text_of(c, &format!("{at}[{j}].content"))?
                                }
                            };
                            if b.is_error {
                                content = format!("Error: {content}");
                            }
                            out.push(ToolMessage {
                                tool_call_id: Some(id.clone()),
                                ..msg("tool", content)
                            });
                        }
                        _ => text.push_str(&text_of(std::slice::from_ref(b), &at)?),
                    }
                }
                if !text.is_empty() {
                    out.push(msg("user", text));
                }
            }
            ("assistant", Content::Blocks(blocks)) => {
                let mut text = String::new();
                let mut calls = Vec::new();
                for (j, b) in blocks.iter().enumerate() {
                    match b.kind.as_str() {
                        "tool_use" => {
                            let (Some(id), Some(name)) = (&b.id, &b.name) else {
                                return Err(bad(format!("{at}[{j}]: tool_use needs id and name")));
                            };
                            calls.push(ToolCall {
                                id: id.clone(),
                                kind: "function".into(),
                                function: FunctionCall {
                                    name: name.clone(),
                                    arguments: b.input.clone().unwrap_or_else(|| json!({})),
                                },
                            });
                        }
                        // Earlier turns' thinking is not part of the prompt.
                        "thinking" | "redacted_thinking" => {}
                        _ => text.push_str(&text_of(std::slice::from_ref(b), &at)?),
                    }
                }
                out.push(ToolMessage {
                    tool_calls: (!calls.is_empty()).then_some(calls),
                    ..msg("assistant", text)
                });
            }
            (role, _) => {
                return Err(bad(format!(
                    "messages[{i}].role '{role}' must be user, assistant or system"
                )))
            }
        }
    }
    Ok(out)
}

fn msg(role: &str, content: String) -> ToolMessage {
    ToolMessage {
        role: role.into(),
        content,
        tool_calls: None,
        tool_call_id: None,
    }
}

/// `tools`, `tool_choice` and `parallel_tool_calls` in chat completions'
/// shape.
struct ChatTools {
    tools: Option<Value>,
    choice: Option<Value>,
    parallel: Option<bool>,
}

/// Tools and tool choice in chat completions' shape.
fn chat_tools(r: &MessagesRequest) -> Result<ChatTools, ApiError> {
    let tools = r.tools.as_ref().map(|v| {
        Value::Array(
            v.iter()
                .filter(|t| t.kind.as_deref().is_none_or(|k| k == "custom"))
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema.clone().unwrap_or_else(|| json!({"type": "object"})),
                    }})
                })
                .collect(),
        )
    });
    let (choice, parallel) = match &r.tool_choice {
        None => (None, None),
        Some(c) => {
            let choice = match (c.kind.as_str(), &c.name) {
                ("auto", _) => json!("auto"),
                ("any", _) => json!("required"),
                ("none", _) => json!("none"),
                ("tool", Some(n)) => json!({"type": "function", "function": {"name": n}}),
                ("tool", None) => return Err(bad("tool_choice: type tool needs a name")),
                (k, _) => {
                    return Err(bad(format!(
                        "tool_choice.type '{k}' is not one of auto, any, tool, none"
                    )))
                }
            };
            (Some(choice), Some(!c.disable_parallel_tool_use))
        }
    };
    Ok(ChatTools {
        tools,
        choice,
        parallel,
    })
}

/// The request's sampling and limits as chat completions' fields.
fn common(r: &MessagesRequest, max_tokens: i64) -> Common {
    Common {
        stream: r.stream,
        max_tokens: Some(max_tokens),
        temperature: r.temperature,
        top_p: r.top_p,
        top_k: r.top_k,
        stop: r.stop_sequences.clone().map(Stop::Many),
        ..Common::default()
    }
}

/// The stop strings as the engine numbers them (empty ones dropped).
fn stop_strings(r: &MessagesRequest) -> Vec<String> {
    r.stop_sequences
        .iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .cloned()
        .collect()
}

/// The request translated: chat messages and tools, through the same
/// path as chat completions (`count_tokens` counts its prompt).
fn engine_request(
    l: &crate::engine_thread::Loaded,
    key: crate::state::KeyTenant,
    r: &MessagesRequest,
    max_tokens: i64,
) -> Result<(fak_engine::Request, Option<crate::tools::Tools>), ApiError> {
    let msgs = messages(r)?;
    let ChatTools {
        tools,
        choice,
        parallel,
    } = chat_tools(r)?;
    let common = common(r, max_tokens);
    let input = ChatInput {
        common: &common,
        messages: msgs,
        tools: tools.as_ref(),
        tool_choice: choice.as_ref(),
        parallel_tool_calls: parallel,
        logprobs: fak_engine::Logprobs::Off,
        limit: OutputLimit::Ceiling,
    };
    chat_request(l, key, input)
}

async fn create(call: Call<MessagesRequest, Anthropic>) -> Result<Response, AnthropicError> {
    let Call {
        caller: c,
        body: r,
        model,
    } = call;
    let Some(max_tokens) = r.max_tokens else {
        return Err(bad("max_tokens: field required").into());
    };
    let (req, tools) = engine_request(&c.loaded, c.key, &r, max_tokens)?;
    let n_prompt = req.prompt.len();
    let reply = crate::tools::reply(tools.as_ref());
    let rx = submit(&c.st, req, c.arrived, tools.as_ref()).await?;
    let answer = stream::Answer {
        model,
        n_prompt,
        stops: stop_strings(&r),
        tools: reply,
    };
    if r.stream {
        Ok(stream::sse(answer, rx))
    } else {
        Ok(Json(stream::whole(&answer, rx).await?).into_response())
    }
}

async fn count_tokens(call: Call<MessagesRequest, Anthropic>) -> Result<Response, AnthropicError> {
    let Call {
        caller: c, body: r, ..
    } = call;
    let (req, _) = engine_request(&c.loaded, c.key, &r, 1)?;
    Ok(Json(json!({"input_tokens": req.prompt.len()})).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: Value) -> MessagesRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn billing_blocks_are_left_out_of_the_system_prompt() {
        let r = req(
            json!({"messages": [{"role": "user", "content": "hi"}], "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=1; cch=abc"},
            {"type": "text", "text": "You are Claude Code."}]}),
        );
        let m = messages(&r).unwrap();
        assert_eq!(m[0].role, "system");
        assert_eq!(m[0].content, "You are Claude Code.");
    }

    #[test]
    fn tool_round_trips_become_chat_messages() {
        let r = req(json!({"messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": true},
                {"type": "text", "text": "thanks"}]}]}));
        let m = messages(&r).unwrap();
        let roles: Vec<&str> = m.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
        let calls = m[1].tool_calls.as_ref().unwrap();
        assert_eq!(calls[0].function.arguments, json!({"city": "Paris"}));
        assert_eq!(m[2].tool_call_id.as_deref(), Some("toolu_1"));
        assert_eq!(m[2].content, "sunny");
        assert_eq!(m[3].content, "Error: boom");
    }

    #[test]
    fn images_and_unknown_roles_are_400s() {
        let image = req(json!({"messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]}));
        assert_eq!(messages(&image).unwrap_err().status, 400);
        let role = req(json!({"messages": [{"role": "tool", "content": "x"}]}));
        assert_eq!(messages(&role).unwrap_err().status, 400);
        let e = AnthropicError(ApiError::not_found("x"));
        assert_eq!(e.body()["error"]["type"], "not_found_error");
        assert_eq!(e.body()["type"], "error");
    }

    #[test]
    fn tool_choice_maps_to_chat_choices() {
        let r = req(
            json!({"messages": [], "tools": [{"name": "f", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search"}],
            "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": true}}),
        );
        let ChatTools {
            tools,
            choice,
            parallel,
        } = chat_tools(&r).unwrap();
        assert_eq!(tools.unwrap().as_array().unwrap().len(), 1);
        assert_eq!(choice.unwrap()["function"]["name"], "f");
        assert_eq!(parallel, Some(false));
    }
}
