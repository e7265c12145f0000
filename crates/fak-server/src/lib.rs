//! `fak serve`: an OpenAI-compatible HTTP server over one fak engine.
//!
//! ```text
//!   client ──HTTP──► axum handler (tokio)                engine thread (one OS thread)
//!                    auth → tenant, parse JSON,           owns Model, KV, Engine
//!                    chat template, tokenize              │
//!                      │  Command::Submit{Request, tx} ──►│ add → RequestId (or a typed
//!                      │◄── oneshot: Ok(id) / EngineError │   error: 400 / 429 / 500)
//!                      │                                  │ loop: step() → events
//!                      │◄── Event::Token / Finished ──────┤ route to the request's channel
//!   SSE chunks / JSON ◄┘                                  │ closed channel → cancel (blocks
//!                                                         │   freed within one step)
//!   /metrics ◄── prometheus registry ◄── gauges, counters, histograms updated per step
//! ```
//!
//! JSON stays in this crate: the engine speaks token ids and typed events.

#![forbid(unsafe_code)]

mod anthropic;
mod api;
mod chat;
mod config;
mod engine_thread;
mod error;
mod handlers;
mod key;
mod kv_events;
mod metrics;
mod oai_responses;
mod outcome;
mod registry;
mod reply;
mod sessions;
mod state;
mod stored;
mod structured;
mod tools;

use std::net::SocketAddr;
use std::sync::Arc;

pub use config::{
    AnyModel, ServerConfig, StoredLimits, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_STORED, DEFAULT_STORED_TTL,
};
pub use error::ServerError;
pub use kv_events::{BindError as KvEventsBindError, KvEventsConfig};

/// Runs the server until SIGTERM or Ctrl-C: then it stops accepting
/// (503), finishes the requests in flight, and returns.
///
/// # Errors
///
/// [`ServerError`] when the address cannot be bound, the model does not
/// load, or the runtime fails.
pub fn run(cfg: ServerConfig) -> Result<(), ServerError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServerError::Io)?;
    rt.block_on(serve(cfg))
}

async fn serve(cfg: ServerConfig) -> Result<(), ServerError> {
    let addr: SocketAddr = format!("{}:{}", cfg.host, cfg.port).parse().or_else(|_| {
        std::net::ToSocketAddrs::to_socket_addrs(&(cfg.host.as_str(), cfg.port))
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| ServerError::BadAddress(format!("{}:{}", cfg.host, cfg.port)))
    })?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ServerError::Bind(addr.to_string(), e))?;
    let local = listener.local_addr().map_err(ServerError::Io)?;
    let store = match &cfg.state_dir {
        Some(dir) => Some(
            registry::persist::Store::open(dir, &cfg.model, &cfg.api_keys)
                .map_err(|e| ServerError::State(dir.clone(), e))?,
        ),
        None => None,
    };
    let metrics = Arc::new(metrics::Metrics::new());
    let sink = match &cfg.kv_events {
        Some(k) => Some(kv_events::start(k, metrics.clone()).map_err(ServerError::KvEvents)?),
        None => None,
    };
    let (engine, loaded) = engine_thread::spawn(cfg.clone(), metrics.clone(), sink);
    let state = state::AppState::new(cfg.clone(), engine.clone(), metrics, store);
    let app = handlers::router(state.clone());
    eprintln!(
        "fak serve: listening on http://{local} (loading {})",
        cfg.model.display()
    );
    // Watch the load in the background: /health says 503 until it is done.
    let st = state.clone();
    tokio::spawn(async move {
        match loaded.await {
            Ok(Ok(info)) => {
                eprintln!(
                    "fak serve: {} ready (n_ctx {}, {} KV blocks of {} tokens)",
                    st.name(),
                    info.n_ctx,
                    info.n_blocks,
                    info.block_size
                );
                // Sessions are back before the first request is served.
                sessions::restore(&st).await;
                st.stored().restore(st.engine(), st.store()).await;
                st.set_loaded(info);
                tokio::spawn(sweep_stored(st.clone()));
                if let Some(ttl) = st.session_ttl {
                    tokio::spawn(sessions::sweep(st.clone(), ttl));
                }
            }
            Ok(Err(e)) => {
                eprintln!("fak: error: {e}");
                st.set_failed(e.to_string());
            }
            Err(_) => st.set_failed("the engine thread stopped".into()),
        }
    });
    let shutdown_state = state.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::select! {
                _ = shutdown_signal() => {},
                _ = shutdown_state.stopped() => {},
            }
            eprintln!("fak serve: shutting down: finishing requests in flight");
            shutdown_state.set_draining();
        })
        .await
        .map_err(ServerError::Io)?;
    let failed = state.load_failure();
    if failed.is_none() {
        sessions::save_all(&state).await;
    }
    engine.shutdown();
    match failed {
        Some(e) => Err(ServerError::Load(e)),
        None => Ok(()),
    }
}

/// Drops expired stored responses once a minute.
async fn sweep_stored(st: state::AppState) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
    loop {
        tick.tick().await;
        st.stored().sweep(st.engine(), st.store()).await;
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
