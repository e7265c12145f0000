//! The chat-request layer every generating API shares: the one place an
//! API's parameters become an engine [`Request`] ([`engine_request`];
//! [`prepare`] for a fresh context), a
//! conversation in any API's terms ([`ChatInput`]) rendered, tokenized and
//! held to its tools' grammar ([`chat_request`]), the hand-off to the
//! engine thread ([`submit`]), and the answer as one JSON object or as
//! server-sent events ([`respond`], [`event_stream`]).
//!
//! ```text
//!   handlers.rs (chat, completions) ─┐
//!   oai_responses/, anthropic/ ──────┴─► chat_request ─► prepare ─┐
//!   sessions/ (a session's context) ─────────────────────────────┴─► engine_request ─► Request
//!                                   submit ─► EngineHandle ─► events
//!                                   respond / event_stream ─► JSON or SSE
//! ```
//!
//! These lived in `handlers.rs`; they sit here, below the API modules and
//! above the state and the engine handle, so the API modules import them
//! and `handlers.rs` only mounts the routes and keeps its own endpoints.

use std::time::Instant;

use axum::body::Body as HttpBody;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fak_engine::{Context, Event, MaxTokens, Request, SpecMode, Speculation};
use fak_kv::Tenant;
use fak_tokenizer::ToolMessage;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::api::{self, Common};
use crate::engine_thread::Loaded;
use crate::error::ApiError;
use crate::reply::{self, Shape};
use crate::state::{AppState, KeyTenant};
use crate::tools::{self, Tools};

/// Where an engine request runs and how long it may answer: what the
/// endpoints sharing [`engine_request`] fill in differently.
pub(crate) struct Placement {
    /// The KV namespace (a key's tenant, narrowed by `user`; a session's
    /// owner).
    pub tenant: Tenant,
    /// A fresh context, or a session's.
    pub context: Context,
    pub max_tokens: MaxTokens,
}

/// The engine request for `prompt` under `c`'s settings, placed by `at`:
/// the one place an API's parameters become a [`Request`]. Every
/// generating endpoint comes through here, sessions included, so sampling,
/// stop strings, structured output and the speculation opt-out read the
/// same on all of them.
///
/// # Errors
///
/// 400 naming the parameter at fault.
pub(crate) fn engine_request(
    c: &Common,
    prompt: Vec<u32>,
    logprobs: fak_engine::Logprobs,
    at: Placement,
) -> Result<Request, ApiError> {
    c.check_n()?;
    Ok(Request {
        prompt,
        sampling: c.sampling()?,
        max_tokens: at.max_tokens,
        stop: c.stop_rules()?,
        logprobs,
        tenant: at.tenant,
        context: at.context,
        constraint: c.constraint()?,
        speculation: Speculation {
            mode: match c.speculative {
                Some(false) => SpecMode::Off,
                Some(true) | None => SpecMode::Engine,
            },
            prediction: Vec::new(),
        },
    })
}

/// The engine request for `prompt` under `c`'s settings, in a fresh
/// context ([`engine_request`]).
///
/// # Errors
///
/// 400 naming the parameter at fault.
pub(crate) fn prepare(
    key: KeyTenant,
    c: &Common,
    prompt: Vec<u32>,
    logprobs: fak_engine::Logprobs,
    limit: OutputLimit,
) -> Result<Request, ApiError> {
    if prompt.is_empty() {
        return Err(ApiError::bad_param("prompt", "the prompt is empty"));
    }
    let max_tokens = limit.max_tokens(c.max_tokens()?);
    let at = Placement {
        tenant: key.narrowed(c.user.as_deref(), c.cache_salt.as_deref()),
        context: Context::Fresh,
        max_tokens,
    };
    engine_request(c, prompt, logprobs, at)
}

/// What an API's output limit means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputLimit {
    /// The limit must fit the context: above it the request is a 400
    /// (chat completions, as OpenAI and vLLM answer).
    Strict,
    /// A ceiling: the reply stops at the context's room if that comes
    /// first (the Messages and Responses APIs; Claude Code asks for
    /// 128000 tokens whatever the model's context).
    Ceiling,
}

impl OutputLimit {
    /// The engine's limit for a request that gave `given` (`None`: as
    /// many tokens as there is room for). The engine resolves it against
    /// the context and the KV pool ([`MaxTokens`]).
    pub(crate) fn max_tokens(self, given: Option<usize>) -> MaxTokens {
        match (given, self) {
            (Some(n), OutputLimit::Strict) => MaxTokens::Strict(n),
            (Some(n), OutputLimit::Ceiling) => MaxTokens::Ceiling(n),
            (None, _) => MaxTokens::Room,
        }
    }
}

/// A conversation in any API's terms, translated into chat messages and
/// chat-completions-shaped tools: what every chat-like endpoint (chat
/// completions, the Responses API, the Messages API) hands to
/// [`chat_request`].
pub(crate) struct ChatInput<'a> {
    /// Sampling, limits, stop strings, structured output, tenant narrowing.
    pub common: &'a Common,
    /// The conversation, checked.
    pub messages: Vec<ToolMessage>,
    /// `tools` as chat completions writes them.
    pub tools: Option<&'a Value>,
    /// `tool_choice` as chat completions writes it.
    pub tool_choice: Option<&'a Value>,
    pub parallel_tool_calls: Option<bool>,
    pub logprobs: fak_engine::Logprobs,
    pub limit: OutputLimit,
}

/// Renders `input` through the model's chat template (with its tools),
/// tokenizes it and makes the engine request, held to the tools' grammar
/// when calls can happen.
///
/// # Errors
///
/// 400 when the model has no template, the tools or parameters are wrong,
/// or the messages do not render.
pub(crate) fn chat_request(
    l: &Loaded,
    key: KeyTenant,
    input: ChatInput<'_>,
) -> Result<(Request, Option<Tools>), ApiError> {
    api::check_tool_answers(&[], &input.messages)?;
    let Some(template) = &l.template else {
        return Err(ApiError::bad_request(
            "this model has no chat template; use /v1/completions",
        ));
    };
    let tools = tools::parse(
        input.tools,
        input.tool_choice,
        input.parallel_tool_calls,
        Some(template),
    )?;
    let text = template
        .render_with_tools(
            &input.messages,
            tools.as_ref().and_then(Tools::rendered),
            true,
        )
        .map_err(|e| ApiError::bad_request(format!("chat template: {e}")))?;
    let ids = l.tok.encode(&text, fak_tokenizer::EncodeOptions::default());
    let mut req = prepare(key, input.common, ids, input.logprobs, input.limit)?;
    tools::constrain(&mut req, tools.as_ref())?;
    Ok((req, tools))
}

/// Hands `req` to the engine; its events.
///
/// # Errors
///
/// The engine's refusal (429 when the queue is full, 400 for a request it
/// cannot take); a grammar error of a tools request names the tool.
pub(crate) async fn submit(
    st: &AppState,
    req: Request,
    arrived: Instant,
    tools: Option<&Tools>,
) -> Result<UnboundedReceiver<Event>, ApiError> {
    match st.engine().submit(req, arrived).await {
        Ok((_, rx)) => Ok(rx),
        Err(e) => Err(tools::submit_error(e, tools)),
    }
}

/// Answers from a request's events in `shape`, as a stream or as one JSON
/// object.
pub(crate) async fn respond(
    l: &Loaded,
    shape: Shape,
    rx: tokio::sync::mpsc::UnboundedReceiver<fak_engine::Event>,
) -> Result<Response, ApiError> {
    if shape.stream {
        Ok(event_stream(reply::sse(l.tok.clone(), shape, rx)))
    } else {
        let v = reply::collect(&l.tok, &shape, rx).await?;
        Ok(Json(v).into_response())
    }
}

/// A server-sent-event response over `stream` (every API's streaming
/// answer). Dropping it (the client went away) drops the stream and, with
/// it, the request's event receiver, which cancels the request.
pub(crate) fn event_stream<S>(stream: S) -> Response
where
    S: futures_util::Stream<Item = Result<axum::body::Bytes, std::convert::Infallible>>
        + Send
        + 'static,
{
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        HttpBody::from_stream(stream),
    )
        .into_response()
}
