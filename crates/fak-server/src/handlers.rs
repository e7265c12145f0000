//! Every route, and the endpoints of the OpenAI chat completions and
//! completions APIs (plus their vLLM `/render` twins, `/v1/models`,
//! `/tokenize`, `/detokenize`, `/health` and `/metrics`). The other APIs'
//! routes (`oai_responses/`, `anthropic/`, `sessions/`) are mounted here;
//! the request path they share with these endpoints is in `chat.rs`.
//!
//! ```text
//!   POST /v1/chat/completions ─► auth (key → tenant) ─► parse + check ─►
//!     render the chat template ─► tokenize ─► engine.submit ─►
//!       stream: SSE chunks as events arrive      non-stream: one JSON at the end
//!   dropping the response (client gone) drops the event receiver; the
//!   engine thread sees the closed channel and cancels the request
//! ```

use axum::extract::{DefaultBodyLimit, Request as HttpRequest, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use fak_engine::Request;
use serde_json::{json, Value};

use crate::api::{self, ChatRequest, CompletionRequest, Prompt};
use crate::chat::{chat_request, prepare, respond, submit, ChatInput, OutputLimit};
use crate::error::ApiError;
use crate::reply::{Kind, Shape};
use crate::state::{AppState, Body, Call, Caller};
use crate::tools::{self, Tools};

/// Every route.
pub fn router(state: AppState) -> Router {
    let limit = state.max_body_bytes;
    let api = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/chat/completions/render", post(render_chat))
        .route("/v1/completions", post(completions))
        .route("/v1/completions/render", post(render_completion))
        .route("/v1/models", get(models))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/v1/responses", post(crate::oai_responses::create))
        .route("/v1/responses/render", post(crate::oai_responses::render))
        .merge(crate::oai_responses::routes())
        .merge(crate::anthropic::routes())
        .merge(crate::sessions::routes());
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .merge(api)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

async fn not_found(req: HttpRequest) -> ApiError {
    ApiError::not_found(format!(
        "no route for {} {}",
        req.method(),
        req.uri().path()
    ))
}

async fn health(State(st): State<AppState>) -> Response {
    match st.ready() {
        Ok(_) => Json(json!({"status": "ok"})).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn metrics(State(st): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        st.metrics().encode(),
    )
        .into_response()
}

async fn models(c: Caller) -> Json<Value> {
    let names = c.st.names();
    let data: Vec<Value> = std::iter::once(&names.primary)
        .chain(&names.aliases)
        .map(|name| {
            json!({
                "id": name,
                "object": "model",
                "created": c.st.created(),
                "owned_by": "fak",
                "max_model_len": c.loaded.n_ctx,
            })
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}

async fn tokenize(c: Caller, Body(r): Body<api::TokenizeRequest>) -> Result<Json<Value>, ApiError> {
    let l = &c.loaded;
    let Some(text) = r.content.or(r.prompt) else {
        return Err(ApiError::bad_param("content", "give the text as content"));
    };
    let opts = fak_tokenizer::EncodeOptions {
        add: if r.add_special.unwrap_or(true) {
            fak_tokenizer::AddSpecial::FromMetadata
        } else {
            fak_tokenizer::AddSpecial::Never
        },
        ..Default::default()
    };
    let tokens = l.tok.encode(&text, opts);
    Ok(Json(
        json!({"tokens": tokens, "count": tokens.len(), "max_model_len": l.n_ctx}),
    ))
}

async fn detokenize(
    c: Caller,
    Body(r): Body<api::DetokenizeRequest>,
) -> Result<Json<Value>, ApiError> {
    let l = &c.loaded;
    if let Some(&bad) = r.tokens.iter().find(|&&t| t as usize >= l.tok.n_vocab()) {
        return Err(ApiError::bad_param(
            "tokens",
            format!("token {bad} is not below n_vocab {}", l.tok.n_vocab()),
        ));
    }
    Ok(Json(json!({"content": l.tok.decode(&r.tokens)})))
}

/// The engine request of a chat completion, and its tools.
fn chat_engine_request(c: &Caller, r: &ChatRequest) -> Result<(Request, Option<Tools>), ApiError> {
    if r.messages.is_empty() {
        return Err(ApiError::bad_param(
            "messages",
            "messages must not be empty",
        ));
    }
    let messages = r
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| m.checked(i))
        .collect::<Result<Vec<_>, _>>()?;
    let input = ChatInput {
        common: &r.common,
        messages,
        tools: r.tools.as_ref(),
        tool_choice: r.tool_choice.as_ref(),
        parallel_tool_calls: r.parallel_tool_calls,
        logprobs: api::chat_logprobs(r.logprobs, r.top_logprobs)?,
        limit: OutputLimit::Strict,
    };
    let (mut req, tools) = chat_request(&c.loaded, c.key, input)?;
    if let Some(p) = &r.prediction {
        let text = p.text()?;
        let plain = fak_tokenizer::EncodeOptions {
            special: fak_tokenizer::SpecialTokens::Plain,
            add: fak_tokenizer::AddSpecial::Never,
        };
        req.speculation.prediction = c.loaded.tok.encode(&text, plain);
    }
    Ok((req, tools))
}

async fn chat(call: Call<ChatRequest>) -> Result<Response, ApiError> {
    let Call {
        caller: c,
        body: r,
        model,
    } = call;
    let (req, tools) = chat_engine_request(&c, &r)?;
    let shape = Shape {
        kind: Kind::Chat,
        stream: r.common.stream,
        include_usage: r.common.include_usage(),
        model,
        session: None,
        tools: tools::reply(tools.as_ref()),
    };
    let rx = submit(&c.st, req, c.arrived, tools.as_ref()).await?;
    respond(&c.loaded, shape, rx).await
}

/// The engine request of a completion.
fn completion_engine_request(c: &Caller, r: CompletionRequest) -> Result<Request, ApiError> {
    let l = &c.loaded;
    if r.best_of.is_some_and(|b| b != 1) {
        return Err(ApiError::bad_param("best_of", "best_of must be 1"));
    }
    if r.echo {
        return Err(ApiError::bad_param("echo", "echo is not supported"));
    }
    if r.suffix.is_some() {
        return Err(ApiError::bad_param("suffix", "suffix is not supported"));
    }
    let ids = match r.prompt {
        Prompt::Text(t) => l.tok.encode(&t, fak_tokenizer::EncodeOptions::default()),
        Prompt::Ids(ids) => ids,
        Prompt::Texts(mut v) if v.len() == 1 => l
            .tok
            .encode(&v.remove(0), fak_tokenizer::EncodeOptions::default()),
        Prompt::IdLists(mut v) if v.len() == 1 => v.remove(0),
        _ => {
            return Err(ApiError::bad_param(
                "prompt",
                "give one prompt (a string or a list of token ids); batches are not supported",
            ))
        }
    };
    let logprobs = api::completion_logprobs(r.logprobs)?;
    prepare(c.key, &r.common, ids, logprobs, OutputLimit::Strict)
}

async fn completions(call: Call<CompletionRequest>) -> Result<Response, ApiError> {
    let Call {
        caller: c,
        body: r,
        model,
    } = call;
    let shape = Shape {
        kind: Kind::Completion,
        stream: r.common.stream,
        include_usage: r.common.include_usage(),
        model,
        session: None,
        tools: None,
    };
    let req = completion_engine_request(&c, r)?;
    let rx = submit(&c.st, req, c.arrived, None).await?;
    respond(&c.loaded, shape, rx).await
}

/// `POST /v1/chat/completions/render` (vLLM's): the token ids the engine
/// would run for this chat completion, rendered and checked exactly as
/// `/v1/chat/completions` does, without running it. A KV-aware router
/// (vllm-router's `kv_aware`) matches them against the blocks a replica
/// reports holding.
async fn render_chat(call: Call<ChatRequest>) -> Result<Json<Value>, ApiError> {
    let (req, _) = chat_engine_request(&call.caller, &call.body)?;
    Ok(Json(json!({"token_ids": req.prompt, "features": null})))
}

/// `POST /v1/completions/render` (vLLM's): a list with one item per
/// prompt, as [`render_chat`].
async fn render_completion(call: Call<CompletionRequest>) -> Result<Json<Value>, ApiError> {
    let req = completion_engine_request(&call.caller, call.body)?;
    Ok(Json(json!([{"token_ids": req.prompt, "features": null}])))
}
