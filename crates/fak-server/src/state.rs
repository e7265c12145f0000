//! What every handler shares ([`AppState`]) and the one request preamble
//! every API runs before its own work: the typed extractors [`KeyTenant`],
//! [`Caller`] and [`Call`].
//!
//! ```text
//!   HTTP request ─► KeyTenant   API key (Bearer or x-api-key) → tenant, or 401
//!                ─► Caller      + the server is ready (503 while loading or
//!                               draining), the arrival time
//!                ─► Call<T>     + the body: under --max-body-bytes (413),
//!                               JSON of type T (400 naming the field), its
//!                               `model` one of the served names (404)
//!   each rejection is written in the API's own error shape: the extractors
//!   take a Dialect (OpenAI's {"error": {...}}, Anthropic's {"type": "error", ...})
//! ```
//!
//! Chat completions, completions, the Responses API, the Messages API and
//! the session endpoints all start from these, so authentication, limits,
//! the model check and readiness are written once.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request as HttpRequest};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use serde::de::DeserializeOwned;

use crate::api::Named;
use crate::config::{AnyModel, ModelNames, ServerConfig};
use crate::engine_thread::{EngineHandle, Loaded};
use crate::error::ApiError;
pub use crate::key::KeyTenant;
use crate::metrics::Metrics;
use crate::registry::persist::Store;
use crate::registry::{Limits, Registry};
use crate::stored::Stored;

/// Where the server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// The model is loading: requests get 503.
    Loading = 0,
    /// Serving.
    Ready = 1,
    /// Shutting down: requests in flight finish, new ones get 503.
    Draining = 2,
    /// The model failed to load: the server stops.
    Failed = 3,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            1 => Phase::Ready,
            2 => Phase::Draining,
            3 => Phase::Failed,
            _ => Phase::Loading,
        }
    }
}

/// How a request's `model` resolves: here, beside the preamble whose
/// 404 it is, while the names themselves are settings (`config.rs`).
impl ModelNames {
    /// The name an answer carries for a request that asked for `asked`.
    ///
    /// # Errors
    ///
    /// 404 when `asked` is none of the served names.
    pub fn resolve(&self, asked: Option<&str>) -> Result<String, ApiError> {
        match asked {
            None | Some("") => Ok(self.primary.clone()),
            Some(m) if m == self.primary || self.aliases.iter().any(|a| a == m) => {
                Ok(m.to_string())
            }
            Some(m) if self.any == AnyModel::Accept => Ok(m.to_string()),
            Some(m) => Err(ApiError::unknown_model(m, &self.primary)),
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: ServerConfig,
    names: ModelNames,
    engine: EngineHandle,
    metrics: Arc<Metrics>,
    loaded: OnceLock<Loaded>,
    phase: AtomicU8,
    failure: Mutex<Option<String>>,
    /// Wakes the shutdown future (a failed load ends the server).
    stop: tokio::sync::Notify,
    created: u64,
    sessions: Arc<Registry>,
    stored: Stored,
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
        let names = cfg.model_names();
        let stored = Stored::new(cfg.stored);
        AppState {
            inner: Arc::new(Inner {
                names,
                cfg,
                engine,
                metrics,
                loaded: OnceLock::new(),
                phase: AtomicU8::new(Phase::Loading as u8),
                failure: Mutex::new(None),
                stop: tokio::sync::Notify::new(),
                created: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                sessions: Arc::new(Registry::default()),
                stored,
                store,
            }),
        }
    }

    /// The engine thread.
    pub(crate) fn engine(&self) -> &EngineHandle {
        &self.inner.engine
    }

    /// The Prometheus metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The sessions.
    pub(crate) fn sessions(&self) -> &Arc<Registry> {
        &self.inner.sessions
    }

    /// The stored responses of the Responses API.
    pub(crate) fn stored(&self) -> &Stored {
        &self.inner.stored
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

    /// Unix seconds when the server started (`/v1/models`' `created`).
    pub(crate) fn created(&self) -> u64 {
        self.inner.created
    }

    /// The served model name.
    pub fn name(&self) -> &str {
        &self.inner.names.primary
    }

    /// Every name a request may use.
    pub fn names(&self) -> &ModelNames {
        &self.inner.names
    }

    /// Where the server is.
    pub fn phase(&self) -> Phase {
        Phase::from_u8(self.inner.phase.load(Ordering::SeqCst))
    }

    /// The model finished loading.
    pub fn set_loaded(&self, l: Loaded) {
        let _ = self.inner.loaded.set(l);
        let _ = self.inner.phase.compare_exchange(
            Phase::Loading as u8,
            Phase::Ready as u8,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }

    /// The model failed to load: the server stops.
    pub fn set_failed(&self, e: String) {
        if let Ok(mut f) = self.inner.failure.lock() {
            *f = Some(e);
        }
        self.inner
            .phase
            .store(Phase::Failed as u8, Ordering::SeqCst);
        self.inner.stop.notify_one();
    }

    /// Why loading failed, if it did.
    pub fn load_failure(&self) -> Option<String> {
        self.inner.failure.lock().ok().and_then(|f| f.clone())
    }

    /// Stop accepting requests (503) while those in flight finish.
    pub fn set_draining(&self) {
        self.inner
            .phase
            .store(Phase::Draining as u8, Ordering::SeqCst);
    }

    /// Resolves when the server must stop on its own.
    pub async fn stopped(&self) {
        self.inner.stop.notified().await;
    }

    /// The loaded model, or 503 while loading, draining or failed.
    pub(crate) fn ready(&self) -> Result<&Loaded, ApiError> {
        match self.phase() {
            Phase::Ready => self
                .inner
                .loaded
                .get()
                .ok_or_else(|| ApiError::unavailable("the model is loading")),
            Phase::Draining => Err(ApiError::unavailable("the server is shutting down")),
            Phase::Failed => Err(ApiError::unavailable("the model failed to load")),
            Phase::Loading => Err(ApiError::unavailable("the model is loading")),
        }
    }
}

/// How an API writes its errors: the preamble's rejections take this
/// shape.
pub trait Dialect: Send + Sync + 'static {
    /// The API's error response.
    type Error: From<ApiError> + IntoResponse + Send;
}

/// OpenAI's error shape (`{"error": {"message", "type", "param", "code"}}`).
#[derive(Debug)]
pub struct OpenAi;

impl Dialect for OpenAi {
    type Error = ApiError;
}

impl KeyTenant {
    /// The key given as `Authorization: Bearer KEY` or `X-Api-Key: KEY`,
    /// checked against the configured keys.
    fn from_parts(parts: &Parts, st: &AppState) -> Result<KeyTenant, ApiError> {
        let keys = &st.api_keys;
        if keys.is_empty() {
            return Ok(KeyTenant(0));
        }
        let h = &parts.headers;
        let given = h
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .or_else(|| h.get("x-api-key").and_then(|v| v.to_str().ok()))
            .map(str::trim);
        match given.and_then(|g| keys.iter().position(|k| k == g)) {
            Some(i) => Ok(KeyTenant(i as u64 + 1)),
            None => Err(ApiError::unauthorized()),
        }
    }
}

impl FromRequestParts<AppState> for KeyTenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, ApiError> {
        KeyTenant::from_parts(parts, st)
    }
}

/// An authenticated request to a ready server: the preamble of every
/// endpoint that needs the model, before its body.
pub struct Caller<D: Dialect = OpenAi> {
    pub st: AppState,
    /// The loaded model (tokenizer, template, sizes).
    pub loaded: Loaded,
    pub key: KeyTenant,
    /// When the request arrived (queue-time metrics).
    pub arrived: Instant,
    dialect: PhantomData<D>,
}

impl<D: Dialect> FromRequestParts<AppState> for Caller<D> {
    type Rejection = D::Error;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, D::Error> {
        let arrived = Instant::now();
        let key = KeyTenant::from_parts(parts, st)?;
        let loaded = st.ready()?.clone();
        Ok(Caller {
            st: st.clone(),
            loaded,
            key,
            arrived,
            dialect: PhantomData,
        })
    }
}

/// [`Caller`] plus its JSON body `T`, parsed and with its model checked:
/// the whole preamble of a generation endpoint.
pub struct Call<T, D: Dialect = OpenAi> {
    pub caller: Caller<D>,
    pub body: T,
    /// The model name the answer carries (the one asked for, when it is
    /// one of the served names).
    pub model: String,
}

impl<T, D> FromRequest<AppState> for Call<T, D>
where
    T: DeserializeOwned + Named + Send,
    D: Dialect,
{
    type Rejection = D::Error;

    async fn from_request(req: HttpRequest, st: &AppState) -> Result<Self, D::Error> {
        let (mut parts, body) = req.into_parts();
        let caller = Caller::<D>::from_request_parts(&mut parts, st).await?;
        let req = HttpRequest::from_parts(parts, body);
        let bytes = read_body(st, req).await?;
        let body: T = crate::api::parse(&bytes)?;
        let model = st.names().resolve(body.model())?;
        Ok(Call {
            caller,
            body,
            model,
        })
    }
}

/// The body, under the size cap (413 above it).
async fn read_body(st: &AppState, req: HttpRequest) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, st).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(st.max_body_bytes)
        } else {
            ApiError::bad_request(format!("cannot read the request body: {e}"))
        }
    })
}

/// The raw body, under the same size cap (a body that may be empty).
pub struct RawBody(pub Bytes);

impl FromRequest<AppState> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: HttpRequest, st: &AppState) -> Result<Self, ApiError> {
        Ok(RawBody(read_body(st, req).await?))
    }
}

/// A JSON body of type `T` with no model to check (tokenize, session
/// edits), after the same size cap.
pub struct Body<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequest<AppState> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: HttpRequest, st: &AppState) -> Result<Self, ApiError> {
        let bytes = read_body(st, req).await?;
        Ok(Body(crate::api::parse(&bytes)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_to_the_one_asked_for() {
        let n = ModelNames {
            primary: "m".into(),
            aliases: vec!["a".into()],
            any: AnyModel::Refuse,
        };
        assert_eq!(n.resolve(None).unwrap(), "m");
        assert_eq!(n.resolve(Some("a")).unwrap(), "a");
        assert_eq!(n.resolve(Some("b")).unwrap_err().status, 404);
        let any = ModelNames {
            any: AnyModel::Accept,
            ..n
        };
        assert_eq!(any.resolve(Some("claude-x")).unwrap(), "claude-x");
    }
}
