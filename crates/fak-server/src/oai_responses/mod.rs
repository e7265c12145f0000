//! The OpenAI Responses API: `POST /v1/responses`, and the stored
//! responses' `GET` / `DELETE /v1/responses/{id}`, translated into the
//! same engine request as chat completions (`chat::chat_request`).
//!
//! ```text
//!   instructions            ─► a system message (not carried to later turns)
//!   previous_response_id    ─► that stored response's conversation (stored.rs)
//!   input: string | items   ─► message (system, developer, user, assistant; text parts)
//!                              function_call        ─► the assistant's tool_calls
//!                              function_call_output ─► a tool message
//!                              reasoning            ─► skipped (fak's models do not reason apart)
//!   tools {type: function, name, parameters}, tool_choice, parallel_tool_calls ─► chat tools
//!   max_output_tokens, temperature, top_p, text.format ─► Common
//!   the reply ─► outcome::Part ─► a response object, or its events (stream.rs)
//!   store (default true) ─► the conversation and its KV kept under resp_<id>
//! ```
//!
//! Fields fak cannot honour are accepted and ignored: `reasoning`,
//! `include`, `prompt_cache_key`, `text.verbosity`, `truncation`,
//! `service_tier`, `safety_identifier`, `metadata` (echoed),
//! `stream_options`. `background: true` is refused.

mod snapshot;
mod stream;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use fak_tokenizer::{FunctionCall, ToolCall, ToolMessage};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::Common;
use crate::api::Named;
use crate::chat::{chat_request, submit, ChatInput, OutputLimit};
use crate::error::ApiError;
use crate::state::{AppState, Call, Caller};
use crate::stored::StoredId;

pub use stream::Echo;

/// The stored responses' routes (`POST /v1/responses` is routed beside
/// the other generation endpoints).
pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/responses/{id}", get(retrieve).delete(delete))
}

/// `input`: text, or a list of items.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Input {
    Text(String),
    Items(Vec<Value>),
}

/// `text`: the output format (`verbosity` is accepted and ignored).
#[derive(Debug, Default, Deserialize)]
struct TextOptions {
    format: Option<Value>,
}

/// `POST /v1/responses`.
#[derive(Debug, Deserialize)]
pub struct ResponsesRequest {
    model: Option<String>,
    input: Option<Input>,
    instructions: Option<String>,
    tools: Option<Vec<Value>>,
    tool_choice: Option<Value>,
    parallel_tool_calls: Option<bool>,
    max_output_tokens: Option<i64>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    text: Option<TextOptions>,
    #[serde(default)]
    stream: bool,
    store: Option<bool>,
    previous_response_id: Option<String>,
    #[serde(default)]
    background: bool,
    user: Option<String>,
    metadata: Option<Value>,
}

impl Named for ResponsesRequest {
    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
}

fn bad(param: &'static str, m: impl Into<String>) -> ApiError {
    ApiError::bad_param(param, m)
}

fn msg(role: &str, content: String) -> ToolMessage {
    ToolMessage {
        role: role.into(),
        content,
        ..ToolMessage::default()
    }
}

/// The text of a message's `content` (a string or text parts).
fn content_text(v: Option<&Value>, at: &str) -> Result<String, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut s = String::new();
            for (j, p) in parts.iter().enumerate() {
                let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
                match (kind, p.get("text").and_then(Value::as_str)) {
                    ("input_text" | "output_text" | "text", Some(t)) => s.push_str(t),
                    ("refusal", _) => {
                        s.push_str(p.get("refusal").and_then(Value::as_str).unwrap_or(""))
                    }
                    ("input_image" | "input_file" | "input_audio", _) => {
                        return Err(bad(
                            "input",
                            format!(
                                "{at}[{j}]: {kind} is not supported: this model reads text only"
                            ),
                        ))
                    }
                    _ => {
                        return Err(bad(
                            "input",
                            format!(
                            "{at}[{j}]: expected an input_text or output_text part, got {kind:?}"
                        ),
                        ))
                    }
                }
            }
            Ok(s)
        }
        Some(_) => Err(bad(
            "input",
            format!("{at} must be a string or a list of content parts"),
        )),
    }
}

fn str_field<'a>(item: &'a Value, name: &str, at: &str) -> Result<&'a str, ApiError> {
    item.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| bad("input", format!("{at}.{name} must be a string")))
}

/// Appends input `items` to `out` as chat messages.
fn items(list: &[Value], out: &mut Vec<ToolMessage>) -> Result<(), ApiError> {
    for (i, item) in list.iter().enumerate() {
        let at = format!("input[{i}]");
        if !item.is_object() {
            return Err(bad("input", format!("{at} must be an object")));
        }
        let kind = match item.get("type") {
            None if item.get("role").is_some() => "message",
            Some(Value::String(k)) => k.as_str(),
            _ => return Err(bad("input", format!("{at}.type must be a string"))),
        };
        match kind {
            "message" => {
                let role = str_field(item, "role", &at)?;
                let role = match role {
                    "user" | "assistant" | "system" => role,
                    // The template sees developer messages as system ones.
                    "developer" => "system",
                    r => {
                        return Err(bad(
                            "input",
                            format!(
                                "{at}.role {r:?} is not one of user, assistant, system, developer"
                            ),
                        ))
                    }
                };
                let text = content_text(item.get("content"), &format!("{at}.content"))?;
                out.push(msg(role, text));
            }
            "function_call" | "custom_tool_call" => {
                let call_id = str_field(item, "call_id", &at)?;
                let name = str_field(item, "name", &at)?;
                let arguments = if kind == "function_call" {
                    let args = str_field(item, "arguments", &at)?;
                    // Templates read the arguments as a mapping.
                    serde_json::from_str(args).unwrap_or_else(|_| Value::String(args.to_string()))
                } else {
                    // A custom tool's input is the `input` argument.
                    json!({ "input": str_field(item, "input", &at)? })
                };
                let call = ToolCall {
                    id: call_id.to_string(),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: name.to_string(),
                        arguments,
                    },
                };
                // Calls that follow an assistant message (or each other)
                // are that message's calls.
                match out.last_mut() {
                    Some(m) if m.role == "assistant" => {
                        m.tool_calls.get_or_insert_with(Vec::new).push(call)
                    }
                    _ => out.push(ToolMessage {
                        tool_calls: Some(vec![call]),
                        ..msg("assistant", String::new())
                    }),
                }
            }
            "function_call_output" | "custom_tool_call_output" => {
                let call_id = str_field(item, "call_id", &at)?;
                let output = content_text(item.get("output"), &format!("{at}.output"))?;
                out.push(ToolMessage {
                    tool_call_id: Some(call_id.to_string()),
                    ..msg("tool", output)
                });
            }
            "reasoning" => {}
            k => {
                return Err(bad(
                    "input",
                    format!(
                        "{at}.type {k:?} is not supported (message, function_call, \
                         function_call_output, custom_tool_call, custom_tool_call_output, \
                         reasoning)"
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// Tools OpenAI runs on its side, and tool groups: accepted and left out
/// of the prompt (the model cannot call them here). Codex CLI sends
/// `web_search` and a `namespace` of sub-agent tools with every request.
const HOSTED: [&str; 9] = [
    "web_search",
    "web_search_preview",
    "file_search",
    "code_interpreter",
    "image_generation",
    "computer_use_preview",
    "mcp",
    "local_shell",
    "namespace",
];

/// Function and custom tools in chat completions' shape, and the names of
/// the custom ones.
///
/// A custom tool takes free text: here it is a function of one string
/// argument, `input`, written as JSON like every other call. Its format
/// holds that string: a `regex` grammar is the string's `pattern` (so the
/// input matches it exactly); a `lark` grammar cannot be nested inside a
/// JSON string, so its input is any string; `text` (or none) is any string.
fn chat_tools(tools: &[Value]) -> Result<(Value, Vec<String>), ApiError> {
    let mut out = Vec::with_capacity(tools.len());
    let mut custom = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        match t.get("type").and_then(Value::as_str) {
            Some("function") => out.push(json!({"type": "function", "function": {
                "name": t.get("name").cloned().unwrap_or(Value::Null),
                "description": t.get("description").cloned().unwrap_or(Value::Null),
                "parameters": t.get("parameters").cloned().unwrap_or(Value::Null),
            }})),
            Some("custom") => {
                let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
                let mut input = json!({"type": "string"});
                let format = t.get("format");
                match format.and_then(|f| f.get("type")).and_then(Value::as_str) {
                    None | Some("text") => {}
                    Some("grammar") => {
                        let f = format.unwrap_or(&Value::Null);
                        let def = f.get("definition").and_then(Value::as_str);
                        match (f.get("syntax").and_then(Value::as_str), def) {
                            (Some("regex"), Some(d)) => input["pattern"] = json!(d),
                            (Some("lark"), Some(_)) => {}
                            _ => {
                                return Err(bad(
                                    "tools",
                                    format!(
                                        "tools[{i}].format: a grammar needs syntax \"lark\" or \
                                         \"regex\" and a definition"
                                    ),
                                ))
                            }
                        }
                    }
                    Some(k) => {
                        return Err(bad(
                            "tools",
                            format!("tools[{i}].format.type {k:?} is not text or grammar"),
                        ))
                    }
                }
                custom.push(name.to_string());
                out.push(json!({"type": "function", "function": {
                    "name": name,
                    "description": t.get("description").cloned().unwrap_or(Value::Null),
                    "parameters": {"type": "object", "properties": {"input": input},
                                   "required": ["input"], "additionalProperties": false},
                }}));
            }
            Some(k) if HOSTED.iter().any(|h| k.starts_with(h)) => {}
            k => {
                return Err(bad(
                    "tools",
                    format!("tools[{i}].type {k:?} is not supported: fak runs function tools"),
                ))
            }
        }
    }
    Ok((Value::Array(out), custom))
}

/// `tool_choice` in chat completions' shape.
fn chat_choice(v: Option<&Value>) -> Result<Option<Value>, ApiError> {
    Ok(match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(json!(s)),
        Some(o) => match (
            o.get("type").and_then(Value::as_str),
            o.get("name").and_then(Value::as_str),
        ) {
            (Some("function" | "custom"), Some(n)) => {
                Some(json!({"type": "function", "function": {"name": n}}))
            }
            _ => {
                return Err(bad(
                    "tool_choice",
                    "tool_choice must be none, auto, required or {\"type\": \"function\", \"name\": ...}",
                ))
            }
        },
    })
}

/// `text.format` as chat completions' `response_format`.
fn response_format(text: Option<&TextOptions>) -> Option<Value> {
    let f = text?.format.as_ref()?;
    match f.get("type").and_then(Value::as_str) {
        Some("json_schema") => Some(json!({"type": "json_schema", "json_schema": {
            "name": f.get("name").cloned().unwrap_or(json!("response")),
            "schema": f.get("schema").cloned().unwrap_or(Value::Null),
            "strict": f.get("strict").cloned().unwrap_or(Value::Null),
        }})),
        _ => Some(f.clone()),
    }
}

/// A request translated for the engine, with what its answer needs.
struct Prepared {
    req: fak_engine::Request,
    parsed_tools: Option<crate::tools::Tools>,
    custom: Vec<String>,
    conversation: Vec<ToolMessage>,
    snapshot: Option<(fak_engine::SessionId, Vec<u32>)>,
    previous: Option<String>,
    store: bool,
}

/// Translates a Responses request into one engine request (the stored
/// conversation it continues, then the new input).
fn prepare(c: &Caller, r: &ResponsesRequest) -> Result<Prepared, ApiError> {
    if r.background {
        return Err(bad(
            "background",
            "background responses are not supported: send the request without background",
        ));
    }
    // The conversation before this turn (a stored response's), then the
    // new input.
    let (earlier, snapshot, previous) = match &r.previous_response_id {
        Some(id) => {
            let p = c.st.stored().previous(c.key, id)?;
            (p.conversation, p.snapshot, Some(id.clone()))
        }
        None => (Vec::new(), None, None),
    };
    let store = r.store.unwrap_or(true);
    let mut conversation = earlier;
    match &r.input {
        None if previous.is_none() => return Err(bad("input", "input is required")),
        None => {}
        Some(Input::Text(t)) => conversation.push(msg("user", t.clone())),
        Some(Input::Items(list)) => items(list, &mut conversation)?,
    }
    if conversation.is_empty() {
        return Err(bad("input", "input must not be empty"));
    }
    let mut messages = Vec::with_capacity(conversation.len() + 1);
    if let Some(i) = r.instructions.as_ref().filter(|i| !i.is_empty()) {
        messages.push(msg("system", i.clone()));
    }
    messages.extend(conversation.iter().cloned());
    let (tools, custom) = match r.tools.as_deref().map(chat_tools).transpose()? {
        Some((t, c)) => (Some(t), c),
        None => (None, Vec::new()),
    };
    let choice = chat_choice(r.tool_choice.as_ref())?;
    let common = Common {
        stream: r.stream,
        max_tokens: r.max_output_tokens,
        temperature: r.temperature,
        top_p: r.top_p,
        user: r.user.clone(),
        response_format: response_format(r.text.as_ref()),
        ..Common::default()
    };
    if let Some(n) = r.max_output_tokens.filter(|&n| n < 1) {
        return Err(bad(
            "max_output_tokens",
            format!("max_output_tokens must be at least 1, got {n}"),
        ));
    }
    let input = ChatInput {
        common: &common,
        messages,
        tools: tools.as_ref(),
        tool_choice: choice.as_ref(),
        parallel_tool_calls: r.parallel_tool_calls,
        logprobs: fak_engine::Logprobs::Off,
        limit: OutputLimit::Ceiling,
    };
    let (req, parsed_tools) =
        chat_request(&c.loaded, c.key, input).map_err(|e| rename_param(e, "messages", "input"))?;
    Ok(Prepared {
        req,
        parsed_tools,
        custom,
        conversation,
        snapshot,
        previous,
        store,
    })
}

/// `POST /v1/responses/render` (vLLM's): the prompt's token ids, as the
/// engine would see them, for a router that matches them against the
/// replicas' cached prefixes.
pub async fn render(call: Call<ResponsesRequest>) -> Result<Json<Value>, ApiError> {
    let p = prepare(&call.caller, &call.body)?;
    Ok(Json(json!({"token_ids": p.req.prompt, "features": null})))
}

/// `POST /v1/responses`.
pub async fn create(call: Call<ResponsesRequest>) -> Result<Response, ApiError> {
    let Call {
        caller: c,
        body: r,
        model,
    } = call;
    let Prepared {
        mut req,
        parsed_tools,
        custom,
        conversation,
        snapshot,
        previous,
        store,
    } = prepare(&c, &r)?;
    let scratch = snapshot::place(&c.st, &mut req, snapshot.as_ref(), store).await;
    let tenant = req.tenant;
    let rendered = parsed_tools
        .as_ref()
        .and_then(crate::tools::Tools::rendered)
        .map(|d| Value::Array(d.to_vec()));
    let reply = crate::tools::reply(parsed_tools.as_ref());
    let rx = submit(&c.st, req, c.arrived, parsed_tools.as_ref()).await?;
    let echo = Echo {
        model,
        instructions: r.instructions.clone(),
        tools: r.tools.clone().unwrap_or_default(),
        tool_choice: r.tool_choice.clone().unwrap_or(json!("auto")),
        parallel_tool_calls: r.parallel_tool_calls.unwrap_or(true),
        temperature: r.temperature.unwrap_or(1.0),
        top_p: r.top_p.unwrap_or(1.0),
        max_output_tokens: r.max_output_tokens,
        text: json!({"format": r.text.as_ref().and_then(|t| t.format.clone()).unwrap_or(json!({"type": "text"}))}),
        metadata: r.metadata.clone().unwrap_or(json!({})),
        previous_response_id: previous,
        store,
        user: r.user.clone(),
    };
    let keep = stream::Keep {
        st: c.st.clone(),
        loaded: c.loaded.clone(),
        key: c.key,
        tenant,
        conversation,
        instructions: r.instructions.clone().filter(|i| !i.is_empty()),
        tools: rendered,
    };
    let turn = stream::Turn {
        id: StoredId::random(),
        echo,
        keep,
        scratch,
        tools: reply,
        custom,
    };
    if r.stream {
        Ok(stream::sse(turn, rx))
    } else {
        Ok(Json(stream::whole(turn, rx).await?).into_response())
    }
}

/// A template or tool-answer error about `messages` names `input` here.
fn rename_param(mut e: ApiError, from: &str, to: &'static str) -> ApiError {
    if e.param == Some(from) {
        e.param = Some(to);
        e.message = e.message.replace("messages[", "input[");
    }
    e
}

async fn retrieve(c: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let v = c.st.stored().response(c.key, &id)?;
    Ok(Json(v).into_response())
}

async fn delete(c: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    c.st.stored()
        .remove(c.st.engine(), c.st.store(), c.key, &id)
        .await?;
    Ok((
        StatusCode::OK,
        Json(json!({"id": id, "object": "response.deleted", "deleted": true})),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_become_chat_messages() {
        let list = vec![
            json!({"role": "developer", "content": "Be brief."}),
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]}),
            json!({"type": "reasoning", "summary": []}),
            json!({"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{\"city\":\"Paris\"}"}),
            json!({"type": "function_call", "call_id": "c2", "name": "w", "arguments": "{\"city\":\"Rome\"}"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "sunny"}),
        ];
        let mut out = Vec::new();
        items(&list, &mut out).unwrap();
        let roles: Vec<&str> = out.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert_eq!(out[2].tool_calls.as_ref().unwrap().len(), 2);
        assert_eq!(
            out[2].tool_calls.as_ref().unwrap()[0].function.arguments,
            json!({"city": "Paris"})
        );
        assert_eq!(out[3].tool_call_id.as_deref(), Some("c1"));
    }

    #[test]
    fn unknown_items_and_images_are_400s_naming_input() {
        for bad_item in [
            json!({"type": "bogus"}),
            json!(3),
            json!({"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "x"}]}),
            json!({"type": "message", "role": "robot", "content": "x"}),
            json!({"type": "function_call", "name": "f"}),
        ] {
            let e = items(std::slice::from_ref(&bad_item), &mut Vec::new()).unwrap_err();
            assert_eq!(e.status, 400, "{bad_item}");
            assert_eq!(e.param, Some("input"), "{bad_item}");
        }
    }

    #[test]
    fn tools_and_formats_take_chat_shapes() {
        let (t, custom) = chat_tools(&[
            json!({"type": "function", "name": "f", "parameters": {"type": "object"}}),
        ])
        .unwrap();
        assert_eq!(t[0]["function"]["name"], "f");
        assert!(custom.is_empty());
        let (t, custom) = chat_tools(&[json!({"type": "custom", "name": "patch",
            "format": {"type": "grammar", "syntax": "regex", "definition": "[a-z]+"}})])
        .unwrap();
        assert_eq!(custom, ["patch"]);
        assert_eq!(
            t[0]["function"]["parameters"]["properties"]["input"]["pattern"],
            "[a-z]+"
        );
        let no_def = json!({"type": "custom", "name": "p", "format": {"type": "grammar"}});
        assert!(chat_tools(&[no_def]).is_err());
        assert!(chat_tools(&[json!({"type": "bogus"})]).is_err());
        let hosted = chat_tools(&[
            json!({"type": "web_search", "external_web_access": false}),
            json!({"type": "namespace", "name": "n", "tools": []}),
        ])
        .unwrap();
        assert_eq!(hosted.0, json!([]));
        let c = chat_choice(Some(&json!({"type": "function", "name": "f"}))).unwrap();
        assert_eq!(c.unwrap()["function"]["name"], "f");
        let f = response_format(Some(&TextOptions {
            format: Some(json!({"type": "json_schema", "name": "x", "schema": {"type": "object"}})),
        }))
        .unwrap();
        assert_eq!(f["json_schema"]["schema"]["type"], "object");
    }
}
