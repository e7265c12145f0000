//! Routes, authentication, and the request path of the two generation
//! endpoints.
//!
//! ```text
//!   POST /v1/chat/completions ─► auth (key → tenant) ─► parse + check ─►
//!     render the chat template ─► tokenize ─► engine.submit ─►
//!       stream: SSE chunks as events arrive      non-stream: one JSON at the end
//!   dropping the response (client gone) drops the event receiver; the
//!   engine thread sees the closed channel and cancels the request
//! ```

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request as HttpRequest, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use fak_engine::{Context, Request};
use fak_kv::Tenant;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::api::{self, ChatRequest, Common, CompletionRequest, Prompt};
use crate::engine_thread::{EngineHandle, Loaded};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::responses::{self, Kind, Shape};
use crate::sessions::persist::Store;
use crate::sessions::{Limits, Registry};
use crate::tools::{self, Tools};
use crate::ServerConfig;

const LOADING: u8 = 0;
const READY: u8 = 1;
const DRAINING: u8 = 2;
const FAILED: u8 = 3;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: ServerConfig,
    name: String,
    engine: EngineHandle,
    metrics: Arc<Metrics>,
    loaded: OnceLock<Loaded>,
    phase: AtomicU8,
    failure: Mutex<Option<String>>,
    /// Wakes the shutdown future (a failed load ends the server).
    pub stop: tokio::sync::Notify,
    created: u64,
    sessions: Arc<Registry>,
    store: Option<Store>,
}

impl std::ops::Deref for AppState {
    type Target = ServerConfig;
    fn deref(&self) -> &ServerConfig {
        &self.inner.cfg
    }
}

impl AppState {
    /// State for a server that is loading its model.
    pub fn new(
        cfg: ServerConfig,
        engine: EngineHandle,
        metrics: Arc<Metrics>,
        store: Option<Store>,
    ) -> AppState {
        AppState {
            inner: Arc::new(Inner {
                name: cfg.model_name(),
                cfg,
                engine,
                metrics,
                loaded: OnceLock::new(),
                phase: AtomicU8::new(LOADING),
                failure: Mutex::new(None),
                stop: tokio::sync::Notify::new(),
                created: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                sessions: Arc::new(Registry::default()),
                store,
            }),
        }
    }

    /// The engine thread.
    pub(crate) fn engine(&self) -> &EngineHandle {
        &self.inner.engine
    }

    /// The sessions.
    pub(crate) fn sessions(&self) -> &Arc<Registry> {
        &self.inner.sessions
    }

    /// The state directory, with `--state-dir`.
    pub(crate) fn store(&self) -> Option<&Store> {
        self.inner.store.as_ref()
    }

    /// Session limits.
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_per_tenant: self.inner.cfg.max_sessions_per_tenant,
        }
    }

    /// The served model name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The model finished loading.
    pub fn set_loaded(&self, l: Loaded) {
        let _ = self.inner.loaded.set(l);
        let _ =
            self.inner
                .phase
                .compare_exchange(LOADING, READY, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The model failed to load: the server stops.
    pub fn set_failed(&self, e: String) {
        if let Ok(mut f) = self.inner.failure.lock() {
            *f = Some(e);
        }
        self.inner.phase.store(FAILED, Ordering::SeqCst);
        self.inner.stop.notify_one();
    }

    /// Why loading failed, if it did.
    pub fn load_failure(&self) -> Option<String> {
        self.inner.failure.lock().ok().and_then(|f| f.clone())
    }

    /// Stop accepting requests (503) while those in flight finish.
    pub fn set_draining(&self) {
        self.inner.phase.store(DRAINING, Ordering::SeqCst);
    }

    /// Resolves when the server must stop on its own.
    pub async fn stopped(&self) {
        self.inner.stop.notified().await;
    }

    pub(crate) fn ready(&self) -> Result<&Loaded, ApiError> {
        match self.inner.phase.load(Ordering::SeqCst) {
            READY => self
                .inner
                .loaded
                .get()
                .ok_or_else(|| ApiError::unavailable("the model is loading")),
            DRAINING => Err(ApiError::unavailable("the server is shutting down")),
            FAILED => Err(ApiError::unavailable("the model failed to load")),
            _ => Err(ApiError::unavailable("the model is loading")),
        }
    }
}

/// The tenant a request runs in: its API key, narrowed by `user` and
/// `cache_salt`, so prefix-cache entries never cross between them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyTenant(pub(crate) u64);

/// Every route.
pub fn router(state: AppState) -> Router {
    let limit = state.max_body_bytes;
    let api = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .merge(crate::sessions::routes())
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
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

/// Checks the API key (when keys are configured) and records the tenant.
async fn auth(State(st): State<AppState>, mut req: HttpRequest, next: Next) -> Response {
    let keys = &st.api_keys;
    let tenant = if keys.is_empty() {
        0
    } else {
        let h = req.headers();
        let given = h
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .or_else(|| h.get("x-api-key").and_then(|v| v.to_str().ok()))
            .map(str::trim);
        match given.and_then(|g| keys.iter().position(|k| k == g)) {
            Some(i) => i as u64 + 1,
            None => return ApiError::unauthorized().into_response(),
        }
    };
    req.extensions_mut().insert(KeyTenant(tenant));
    next.run(req).await
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
        st.inner.metrics.encode(),
    )
        .into_response()
}

async fn models(State(st): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let l = st.ready()?;
    Ok(Json(json!({
        "object": "list",
        "data": [{
            "id": st.name(),
            "object": "model",
            "created": st.inner.created,
            "owned_by": "fak",
            "max_model_len": l.n_ctx,
        }],
    })))
}

pub(crate) fn body_bytes(
    st: &AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(st.max_body_bytes)
        } else {
            ApiError::bad_request(format!("cannot read the request body: {e}"))
        }
    })
}

async fn tokenize(
    State(st): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let l = st.ready()?;
    let body = body_bytes(&st, body)?;
    let r: api::TokenizeRequest = api::parse(&body)?;
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
    State(st): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let l = st.ready()?;
    let body = body_bytes(&st, body)?;
    let r: api::DetokenizeRequest = api::parse(&body)?;
    if let Some(&bad) = r.tokens.iter().find(|&&t| t as usize >= l.tok.n_vocab()) {
        return Err(ApiError::bad_param(
            "tokens",
            format!("token {bad} is not below n_vocab {}", l.tok.n_vocab()),
        ));
    }
    Ok(Json(json!({"content": l.tok.decode(&r.tokens)})))
}

fn tenant_of(key: KeyTenant, c: &Common) -> Tenant {
    if c.user.is_none() && c.cache_salt.is_none() {
        return Tenant(key.0);
    }
    let mut h = Sha256::new();
    h.update(key.0.to_le_bytes());
    for part in [&c.user, &c.cache_salt] {
        match part {
            Some(s) => {
                h.update([1]);
                h.update((s.len() as u64).to_le_bytes());
                h.update(s.as_bytes());
            }
            None => h.update([0]),
        }
    }
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    Tenant(u64::from_le_bytes(b))
}

pub(crate) fn check_model(st: &AppState, c: &Common) -> Result<(), ApiError> {
    match &c.model {
        Some(m) if !m.is_empty() && m != st.name() => Err(ApiError::unknown_model(m, st.name())),
        _ => Ok(()),
    }
}

fn prepare(
    l: &Loaded,
    key: KeyTenant,
    c: &Common,
    prompt: Vec<u32>,
    logprobs: fak_engine::Logprobs,
) -> Result<Request, ApiError> {
    c.check_n()?;
    if prompt.is_empty() {
        return Err(ApiError::bad_param("prompt", "the prompt is empty"));
    }
    let max_tokens = match c.max_tokens()? {
        Some(n) => n,
        // OpenAI's default: as much as the context has room for, and no
        // more than the KV pool could ever hold for this request alone
        // (one block spare for a copy-on-write), so the default never
        // turns a request the pool can serve into a 400.
        None => {
            let pool = l.n_blocks.saturating_sub(1) * l.block_size;
            l.n_ctx.min(pool).saturating_sub(prompt.len()).max(1)
        }
    };
    Ok(Request {
        prompt,
        sampling: c.sampling()?,
        max_tokens,
        stop: c.stop_rules()?,
        logprobs,
        tenant: tenant_of(key, c),
        context: Context::Fresh,
        constraint: c.constraint()?,
    })
}

async fn chat(
    State(st): State<AppState>,
    axum::Extension(key): axum::Extension<KeyTenant>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let l = st.ready()?.clone();
    let body = body_bytes(&st, body)?;
    let r: ChatRequest = api::parse(&body)?;
    check_model(&st, &r.common)?;
    if r.messages.is_empty() {
        return Err(ApiError::bad_param(
            "messages",
            "messages must not be empty",
        ));
    }
    let msgs = r
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| m.checked(i))
        .collect::<Result<Vec<_>, _>>()?;
    api::check_tool_answers(&[], &msgs)?;
    let Some(template) = &l.template else {
        return Err(ApiError::bad_request(
            "this model has no chat template; use /v1/completions",
        ));
    };
    let tools = tools::parse(
        r.tools.as_ref(),
        r.tool_choice.as_ref(),
        r.parallel_tool_calls,
        Some(template),
    )?;
    let text = template
        .render_with_tools(&msgs, tools.as_ref().and_then(Tools::rendered), true)
        .map_err(|e| ApiError::bad_request(format!("chat template: {e}")))?;
    let ids = l.tok.encode(&text, fak_tokenizer::EncodeOptions::default());
    let logprobs = api::chat_logprobs(r.logprobs, r.top_logprobs)?;
    let mut req = prepare(&l, key, &r.common, ids, logprobs)?;
    tools::constrain(&mut req, tools.as_ref())?;
    run(&st, l, Kind::Chat, &r.common, req, arrived, tools.as_ref()).await
}

async fn completions(
    State(st): State<AppState>,
    axum::Extension(key): axum::Extension<KeyTenant>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let arrived = Instant::now();
    let l = st.ready()?.clone();
    let body = body_bytes(&st, body)?;
    let r: CompletionRequest = api::parse(&body)?;
    check_model(&st, &r.common)?;
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
    let req = prepare(&l, key, &r.common, ids, logprobs)?;
    run(&st, l, Kind::Completion, &r.common, req, arrived, None).await
}

/// Hands the request to the engine and answers in `kind`'s shape, as a
/// stream or as one JSON object.
async fn run(
    st: &AppState,
    l: Loaded,
    kind: Kind,
    c: &Common,
    req: Request,
    arrived: Instant,
    tools: Option<&Tools>,
) -> Result<Response, ApiError> {
    let shape = Shape {
        kind,
        stream: c.stream,
        include_usage: c.include_usage(),
        model: st.name().to_string(),
        session: None,
        tools: tools::reply(tools),
    };
    let (_, rx) = match st.inner.engine.submit(req, arrived).await {
        Ok(x) => x,
        Err(e) => return Err(tools::submit_error(e, tools)),
    };
    respond(&l, shape, rx).await
}

/// Answers from a request's events in `shape`, as a stream or as one JSON
/// object.
pub(crate) async fn respond(
    l: &Loaded,
    shape: Shape,
    rx: tokio::sync::mpsc::UnboundedReceiver<fak_engine::Event>,
) -> Result<Response, ApiError> {
    if shape.stream {
        let stream = responses::sse(l.tok.clone(), shape, rx);
        Ok((
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            Body::from_stream(stream),
        )
            .into_response())
    } else {
        let v = responses::collect(&l.tok, &shape, rx).await?;
        Ok(Json(v).into_response())
    }
}
