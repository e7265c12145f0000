//! One turn on a session: the tokens new chat messages add (rendered
//! incrementally through the chat template), and the bookkeeping when the
//! engine's request ends.
//!
//! ```text
//!   stored messages m0..mk  +  new messages n0..nj
//!   text(m0..mk)  ⊑  text(m0..mk, n0)  ⊑  ...  ⊑  text(all) + generation prompt
//!   └ already in the session ┘└ "message k+1" ┘      └ "message k+j+2" (the reply's) ┘
//!   the reply is generated; the template's end of that turn (after the
//!   end-of-generation token, e.g. "\n") is owed and added at the next turn
//! ```
//!
//! The session's tokens are what it was fed and what it generated, never a
//! re-tokenization of the conversation, so a turn costs only its new
//! tokens.

use fak_tokenizer::{AddSpecial, EncodeOptions, ToolMessage};
use serde_json::Value;

use crate::engine_thread::Loaded;
use crate::error::ApiError;
use crate::registry::lineage::Origin;
use crate::registry::Record;

/// Tokens a turn appends before generating, span by span.
pub struct Delta {
    pub pieces: Vec<(Vec<u32>, Origin)>,
    /// The conversation as the template saw it (live stored + new).
    pub conversation: Vec<ToolMessage>,
}

impl Delta {
    /// Every token, in order.
    pub fn tokens(&self) -> Vec<u32> {
        self.pieces
            .iter()
            .flat_map(|(t, _)| t.iter().copied())
            .collect()
    }
}

/// The session's messages that are still in its tokens.
pub fn live_messages(rec: &Record) -> Vec<ToolMessage> {
    rec.messages
        .iter()
        .filter(|m| !m.evicted)
        .map(|m| m.message())
        .collect()
}

fn render(
    l: &Loaded,
    msgs: &[ToolMessage],
    tools: Option<&[Value]>,
    gen: bool,
) -> Result<String, ApiError> {
    let Some(t) = &l.template else {
        return Err(ApiError::bad_request(
            "this model has no chat template; use the session's /completions",
        ));
    };
    if msgs.is_empty() && !gen {
        return Ok(String::new());
    }
    t.render_with_tools(msgs, tools, gen)
        .map_err(|e| ApiError::bad_request(format!("chat template: {e}")))
}

/// The tokens `new` messages add to the session `rec` (and, with `gen`,
/// the template's generation prompt, counted as the reply's message);
/// every render sees the session's `tools`.
///
/// # Errors
///
/// 400 when the model has no template or the template is not incremental
/// (a longer conversation does not extend the shorter one's text).
pub fn chat_delta(
    l: &Loaded,
    rec: &Record,
    new: &[ToolMessage],
    tools: Option<&[Value]>,
    gen: bool,
) -> Result<Delta, ApiError> {
    let mut conversation = live_messages(rec);
    let mut text = render(l, &conversation, tools, false)?;
    let mut texts: Vec<(String, Origin)> = Vec::new();
    if let Some((close, k)) = &rec.close {
        texts.push((close.clone(), Origin::Message { k: *k }));
    }
    let base = rec.messages.len();
    for (i, m) in new.iter().enumerate() {
        conversation.push(m.clone());
        let next = render(l, &conversation, tools, false)?;
        texts.push((extend(&text, &next)?, Origin::Message { k: base + i }));
        text = next;
    }
    if gen {
        let next = render(l, &conversation, tools, true)?;
        texts.push((
            extend(&text, &next)?,
            Origin::Message {
                k: base + new.len(),
            },
        ));
    }
    let mut empty = rec.tokens == 0;
    let mut pieces = Vec::new();
    for (t, origin) in texts {
        if t.is_empty() {
            continue;
        }
        let add = if empty {
            AddSpecial::FromMetadata
        } else {
            AddSpecial::Never
        };
        let ids = l.tok.encode(
            &t,
            EncodeOptions {
                add,
                ..Default::default()
            },
        );
        empty &= ids.is_empty();
        pieces.push((ids, origin));
    }
    Ok(Delta {
        pieces,
        conversation,
    })
}

fn extend(before: &str, after: &str) -> Result<String, ApiError> {
    after
        .strip_prefix(before)
        .map(str::to_string)
        .ok_or_else(|| {
            ApiError::bad_request(
                "the chat template does not render this conversation incrementally \
                 (the longer conversation does not start with the shorter one's text)",
            )
        })
}

/// What the template puts after the reply's text (the end of its turn),
/// less the end-of-generation token already in the session; `message` is
/// the reply as stored (its content and calls), `reply` the text generated.
pub fn close_after(
    l: &Loaded,
    conversation: &[ToolMessage],
    tools: Option<&[Value]>,
    message: ToolMessage,
    reply: &str,
    eog: Option<u32>,
) -> Option<String> {
    let gen = render(l, conversation, tools, true).ok()?;
    let mut all = conversation.to_vec();
    all.push(message);
    let full = render(l, &all, tools, false).ok()?;
    let mut close = full.strip_prefix(&gen)?.strip_prefix(reply)?;
    if let Some(t) = eog {
        let eog_text = l.tok.decode(&[t]);
        if !eog_text.is_empty() {
            close = close.strip_prefix(eog_text.as_str()).unwrap_or(close);
        }
    }
    (!close.is_empty()).then(|| close.to_string())
}

/// The tools a turn renders: the session's, or the turn's when the
/// session has none yet and no messages (templates put tools at the start
/// of the conversation, so they cannot change later).
///
/// # Errors
///
/// 400 (`tools`) when the turn's tools differ from the session's, or the
/// session already has messages rendered without tools.
pub fn session_tools(given: Option<&Value>, rec: &Record) -> Result<Option<Value>, ApiError> {
    let given = match given {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) if a.is_empty() => None,
        Some(v) => Some(v),
    };
    match (given, &rec.tools) {
        (Some(Value::Array(g)), Some(t)) if g != t => Err(ApiError::bad_param(
            "tools",
            "a session's tools are fixed when its first messages are rendered; \
             this turn's tools differ from the session's",
        )),
        (Some(_), None) if !rec.messages.is_empty() || rec.tokens > 0 => Err(ApiError::bad_param(
            "tools",
            "this session was started without tools; give tools when creating it",
        )),
        (Some(g), _) => Ok(Some(g.clone())),
        (None, t) => Ok(t.clone().map(Value::Array)),
    }
}
