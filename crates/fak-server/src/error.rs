//! Errors: the server's own ([`ServerError`]) and the OpenAI-shaped HTTP
//! errors handlers return ([`ApiError`]).
//!
//! Every HTTP error body is `{"error": {"message", "type", "code"}}`;
//! 400 for a bad request (a context overflow names `n_prompt_tokens` and
//! `n_ctx`), 401 for a missing or wrong key, 404 for an unknown model or
//! path, 413 for a body over the cap, 429 with `Retry-After` when the
//! queue is full, 503 while loading or draining, 500 for engine failures.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use fak_engine::EngineError;
use serde_json::json;

/// What stops the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listen address does not parse or resolve.
    #[error("bad listen address {0}")]
    BadAddress(String),
    /// The address cannot be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(String, #[source] std::io::Error),
    /// The model did not load.
    #[error("{0}")]
    Load(String),
    /// The state directory cannot be used.
    #[error("--state-dir {}: {}", .0.display(), .1)]
    State(std::path::PathBuf, #[source] std::io::Error),
    /// The KV-cache event sockets cannot be bound.
    #[error(transparent)]
    KvEvents(#[from] crate::kv_events::BindError),
    /// I/O of the runtime.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// An HTTP error in OpenAI's shape.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Human-readable message.
    pub message: String,
    /// OpenAI `type` (`invalid_request_error`, ...).
    pub kind: &'static str,
    /// OpenAI `code`, when there is one.
    pub code: Option<&'static str>,
    /// Offending parameter, when known.
    pub param: Option<&'static str>,
    /// Extra fields of the error object (`n_prompt_tokens`, `n_ctx`).
    pub extra: Vec<(&'static str, serde_json::Value)>,
    /// Seconds for `Retry-After` (429, 503).
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            code: None,
            param: None,
            extra: Vec::new(),
            retry_after: None,
        }
    }

    /// 400: the request is malformed or out of range.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 naming the parameter at fault.
    pub fn bad_param(param: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            param: Some(param),
            ..ApiError::bad_request(message)
        }
    }

    /// 401: missing or wrong API key.
    pub fn unauthorized() -> ApiError {
        ApiError {
            code: Some("invalid_api_key"),
            ..ApiError::new(
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                "missing or invalid API key: send Authorization: Bearer KEY or X-Api-Key: KEY",
            )
        }
    }

    /// 404: no such path.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            code: Some("not_found"),
            ..ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", message)
        }
    }

    /// 404: the request names another model.
    pub fn unknown_model(asked: &str, served: &str) -> ApiError {
        ApiError {
            code: Some("model_not_found"),
            param: Some("model"),
            ..ApiError::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                format!("the model '{asked}' does not exist; this server serves '{served}'"),
            )
        }
    }

    /// 409: the resource is in use.
    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError {
            code: Some("conflict"),
            ..ApiError::new(StatusCode::CONFLICT, "invalid_request_error", message)
        }
    }

    /// 429: a limit other than the queue.
    pub fn limited(message: impl Into<String>) -> ApiError {
        ApiError {
            code: Some("rate_limit_exceeded"),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", message)
        }
    }

    /// 413: body over the cap.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the request body is larger than {limit} bytes"),
        )
    }

    /// 503: loading or draining.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable_error",
                message,
            )
        }
    }

    /// 500: the engine failed.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        let mut err = json!({
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        });
        for (k, v) in &self.extra {
            err[*k] = v.clone();
        }
        json!({ "error": err })
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        match &e {
            EngineError::ContextOverflow {
                n_prompt_tokens,
                n_ctx,
                ..
            } => ApiError {
                code: Some("context_length_exceeded"),
                param: Some("messages"),
                extra: vec![
                    ("n_prompt_tokens", json!(n_prompt_tokens)),
                    ("n_ctx", json!(n_ctx)),
                ],
                ..ApiError::bad_request(e.to_string())
            },
            EngineError::QueueFull { .. } => ApiError {
                retry_after: Some(1),
                code: Some("rate_limit_exceeded"),
                ..ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    format!("{e}: retry later"),
                )
            },
            EngineError::BadSampling(b) => ApiError::bad_param(b.name, e.to_string()),
            EngineError::SessionBusy(_) => ApiError::conflict(
                "the session is in use by another request; retry when it is done",
            ),
            EngineError::UnknownSession(_) => ApiError::not_found("no such session"),
            EngineError::BadConstraint(_) => ApiError::bad_param("response_format", e.to_string()),
            _ if e.is_client_error() => ApiError::bad_request(e.to_string()),
            _ => ApiError::internal(e.to_string()),
        }
    }
}

impl From<crate::engine_thread::SubmitError> for ApiError {
    fn from(e: crate::engine_thread::SubmitError) -> ApiError {
        match e {
            crate::engine_thread::SubmitError::Engine(e) => e.into(),
            crate::engine_thread::SubmitError::Stopped => {
                ApiError::unavailable("the engine has stopped")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}
