//! OpenAI request bodies and their checks: JSON in, an engine
//! [`Request`](fak_engine::Request) out, or a 400 naming the field.
//!
//! Unknown fields are ignored (clients send many); fields fak cannot honour
//! (`n` other than 1, `best_of`, `echo`, `suffix`) are refused, never
//! silently dropped.

use serde::Deserialize;

use fak_engine::{Logprobs, SamplingParams, StopRules, MAX_TOP_LOGPROBS};

use crate::error::ApiError;

/// `stop`: one string or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// A content part of a message (`{"type": "text", "text": ...}`).
#[derive(Debug, Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

/// A message's `content`: text, or a list of parts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

/// The function of a call in an assistant message.
#[derive(Debug, Deserialize)]
pub struct CallFunction {
    pub name: String,
    /// JSON text (OpenAI's shape); an object is taken as well.
    pub arguments: serde_json::Value,
}

/// A call in an assistant message.
#[derive(Debug, Deserialize)]
pub struct MessageCall {
    pub id: String,
    pub function: CallFunction,
}

/// One chat message.
#[derive(Debug, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: Option<Content>,
    /// An assistant's calls.
    pub tool_calls: Option<Vec<MessageCall>>,
    /// The call a `tool` message answers.
    pub tool_call_id: Option<String>,
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// Fields shared by chat and completions requests.
#[derive(Debug, Default, Deserialize)]
pub struct Common {
    pub model: Option<String>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub max_tokens: Option<i64>,
    pub max_completion_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub stop: Option<Stop>,
    pub n: Option<i64>,
    pub user: Option<String>,
    pub cache_salt: Option<String>,
    /// llama-server's extension: generate `max_tokens` whatever comes.
    #[serde(default)]
    pub ignore_eos: bool,
    /// fak's extension: `false` opts this request out of speculative
    /// decoding (its output is the same either way).
    pub speculative: Option<bool>,
    /// Structured output (`structured::response_format`).
    pub response_format: Option<serde_json::Value>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    #[serde(default)]
    pub logprobs: bool,
    pub top_logprobs: Option<i64>,
    /// Function definitions (`tools::parse`).
    pub tools: Option<serde_json::Value>,
    pub tool_choice: Option<serde_json::Value>,
    pub parallel_tool_calls: Option<bool>,
    /// OpenAI's Predicted Outputs (`{"type": "content", "content": …}`).
    pub prediction: Option<Prediction>,
    #[serde(flatten)]
    pub common: Common,
}

/// `prediction`: text the answer is expected to repeat (a file being
/// edited); drafts for speculative decoding, never a change to the output.
#[derive(Debug, Deserialize)]
pub struct Prediction {
    /// Must be `content`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A string or text parts.
    pub content: Content,
}

impl Prediction {
    /// The predicted text.
    ///
    /// # Errors
    ///
    /// 400 naming `prediction.type` for another type, and for parts that
    /// are not text.
    pub fn text(&self) -> Result<String, ApiError> {
        if self.kind != "content" {
            return Err(ApiError::bad_param(
                "prediction.type",
                format!(
                    "prediction type '{}' is not supported (only 'content')",
                    self.kind
                ),
            ));
        }
        match &self.content {
            Content::Text(t) => Ok(t.clone()),
            Content::Parts(parts) => {
                let mut s = String::new();
                for (j, p) in parts.iter().enumerate() {
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(t)) => s.push_str(t),
                        _ => {
                            let why = format!("only text parts are supported, got '{}'", p.kind);
                            return Err(ApiError::bad_param(
                                "prediction.content",
                                format!("prediction.content[{j}]: {why}"),
                            ));
                        }
                    }
                }
                Ok(s)
            }
        }
    }
}

/// A request body that may name a model.
pub trait Named {
    /// The body's `model`, if it has one.
    fn model(&self) -> Option<&str> {
        None
    }
}

impl Named for ChatRequest {
    fn model(&self) -> Option<&str> {
        self.common.model.as_deref()
    }
}

/// A completions prompt: text or token ids, alone or in a list of one.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    Text(String),
    Ids(Vec<u32>),
    Texts(Vec<String>),
    IdLists(Vec<Vec<u32>>),
}

/// `POST /v1/completions`.
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    pub prompt: Prompt,
    pub logprobs: Option<i64>,
    pub best_of: Option<i64>,
    #[serde(default)]
    pub echo: bool,
    pub suffix: Option<String>,
    #[serde(flatten)]
    pub common: Common,
}

impl Named for CompletionRequest {
    fn model(&self) -> Option<&str> {
        self.common.model.as_deref()
    }
}

/// `POST /tokenize`.
#[derive(Debug, Deserialize)]
pub struct TokenizeRequest {
    /// Text (llama-server's name).
    pub content: Option<String>,
    /// Text (vLLM's name).
    pub prompt: Option<String>,
    /// Add BOS/EOS as the vocabulary says (default true).
    pub add_special: Option<bool>,
}

/// `POST /detokenize`.
#[derive(Debug, Deserialize)]
pub struct DetokenizeRequest {
    pub tokens: Vec<u32>,
}

/// Parses a JSON body into `T`, or a 400 saying where it is wrong.
pub fn parse<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "the request body is empty; send JSON",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let v = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." || inner.is_syntax() || inner.is_eof() {
            ApiError::bad_request(format!("invalid JSON body: {inner}"))
        } else {
            ApiError::bad_request(format!("invalid JSON body: {path}: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    Ok(v)
}

/// Roles the chat template is given.
const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

impl Message {
    /// The message, checked: known role, text parts only, calls only on
    /// assistant messages, a `tool_call_id` on each tool message (whether
    /// it answers an earlier call is [`check_tool_answers`]'s business).
    pub fn checked(&self, i: usize) -> Result<fak_tokenizer::ToolMessage, ApiError> {
        if !ROLES.contains(&self.role.as_str()) {
            return Err(ApiError::bad_param(
                "messages",
                format!(
                    "messages[{i}].role '{}' is not one of {}",
                    self.role,
                    ROLES.join(", ")
                ),
            ));
        }
        let content = match &self.content {
            None => String::new(),
            Some(Content::Text(t)) => t.clone(),
            Some(Content::Parts(parts)) => {
                let mut s = String::new();
                for (j, p) in parts.iter().enumerate() {
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(t)) => s.push_str(t),
                        _ => {
                            return Err(ApiError::bad_param(
                                "messages",
                                format!(
                                    "messages[{i}].content[{j}]: only text parts are supported, got '{}'",
                                    p.kind
                                ),
                            ))
                        }
                    }
                }
                s
            }
        };
        // The template sees developer messages as system ones.
        let role = if self.role == "developer" {
            "system".to_string()
        } else {
            self.role.clone()
        };
        let tool_calls = match &self.tool_calls {
            None => None,
            Some(_) if role != "assistant" => {
                return Err(ApiError::bad_param(
                    "messages",
                    format!("messages[{i}]: only assistant messages carry tool_calls"),
                ))
            }
            Some(calls) => Some(
                calls
                    .iter()
                    .map(|c| fak_tokenizer::ToolCall {
                        id: c.id.clone(),
                        kind: "function".into(),
                        function: fak_tokenizer::FunctionCall {
                            name: c.function.name.clone(),
                            // Templates read the arguments as a mapping.
                            arguments: match &c.function.arguments {
                                serde_json::Value::String(t) => serde_json::from_str(t)
                                    .unwrap_or_else(|_| serde_json::Value::String(t.clone())),
                                v => v.clone(),
                            },
                        },
                    })
                    .collect(),
            ),
        };
        let tool_call_id = match (&self.tool_call_id, role.as_str()) {
            (Some(id), "tool") => Some(id.clone()),
            (None, "tool") => {
                return Err(ApiError::bad_param(
                    "messages",
                    format!("messages[{i}]: a tool message needs the tool_call_id it answers"),
                ))
            }
            _ => None,
        };
        Ok(fak_tokenizer::ToolMessage {
            role,
            content,
            tool_calls,
            tool_call_id,
        })
    }
}

/// Every `tool` message of `new` answers a call made before it, in
/// `earlier` or in `new`.
///
/// # Errors
///
/// 400 naming the message whose `tool_call_id` matches no earlier call.
pub fn check_tool_answers(
    earlier: &[fak_tokenizer::ToolMessage],
    new: &[fak_tokenizer::ToolMessage],
) -> Result<(), ApiError> {
    let mut ids: Vec<&str> = earlier
        .iter()
        .flat_map(|m| m.tool_calls.iter().flatten())
        .map(|c| c.id.as_str())
        .collect();
    for (i, m) in new.iter().enumerate() {
        if let Some(id) = &m.tool_call_id {
            if !ids.contains(&id.as_str()) {
                return Err(ApiError::bad_param(
                    "messages",
                    format!(
                        "messages[{i}]: tool_call_id {id:?} matches no tool call of an earlier assistant message"
                    ),
                ));
            }
        }
        ids.extend(m.tool_calls.iter().flatten().map(|c| c.id.as_str()));
    }
    Ok(())
}

fn finite(name: &'static str, v: Option<f64>, default: f64) -> Result<f32, ApiError> {
    let v = v.unwrap_or(default);
    if !v.is_finite() {
        return Err(ApiError::bad_param(
            name,
            format!("{name} must be a finite number"),
        ));
    }
    Ok(v as f32)
}

impl Common {
    /// Checks `n`; the engine checks the sampling ranges.
    pub fn check_n(&self) -> Result<(), ApiError> {
        match self.n {
            None | Some(1) => Ok(()),
            Some(n) => Err(ApiError::bad_param(
                "n",
                format!("n must be 1 (fak returns one choice per request), got {n}"),
            )),
        }
    }

    /// `max_tokens` (or `max_completion_tokens`): `None` when absent.
    pub fn max_tokens(&self) -> Result<Option<usize>, ApiError> {
        let (name, v) = match (self.max_completion_tokens, self.max_tokens) {
            (Some(v), _) => ("max_completion_tokens", v),
            (None, Some(v)) => ("max_tokens", v),
            (None, None) => return Ok(None),
        };
        if v < 1 {
            return Err(ApiError::bad_param(
                if name == "max_tokens" {
                    "max_tokens"
                } else {
                    "max_completion_tokens"
                },
                format!("{name} must be at least 1, got {v}"),
            ));
        }
        Ok(Some(usize::try_from(v).unwrap_or(usize::MAX)))
    }

    /// Sampling settings (OpenAI's defaults: temperature 1, top-p 1; a
    /// random seed unless one is given).
    pub fn sampling(&self) -> Result<SamplingParams, ApiError> {
        let top_k = match self.top_k {
            None => 0,
            Some(k) if k <= 0 => 0,
            Some(k) => usize::try_from(k).unwrap_or(usize::MAX),
        };
        let seed = match self.seed {
            Some(s) => s as u64,
            None => rand::random::<u64>(),
        };
        let s = SamplingParams {
            temperature: finite("temperature", self.temperature, 1.0)?,
            top_k,
            top_p: finite("top_p", self.top_p, 1.0)?,
            min_p: finite("min_p", self.min_p, 0.0)?,
            presence_penalty: finite("presence_penalty", self.presence_penalty, 0.0)?,
            frequency_penalty: finite("frequency_penalty", self.frequency_penalty, 0.0)?,
            seed,
        };
        s.validate()
            .map_err(|e| ApiError::bad_param(e.name, e.to_string()))?;
        Ok(s)
    }

    /// Stop rules: stop strings, end-of-generation unless `ignore_eos`.
    pub fn stop_rules(&self) -> Result<StopRules, ApiError> {
        let strings = match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        };
        if strings.len() > 16 {
            return Err(ApiError::bad_param("stop", "at most 16 stop strings"));
        }
        Ok(StopRules {
            eog: if self.ignore_eos {
                fak_engine::StopAt::Never
            } else {
                fak_engine::StopAt::EndOfGeneration
            },
            token_ids: Vec::new(),
            strings: strings.into_iter().filter(|s| !s.is_empty()).collect(),
        })
    }

    /// The constraint `response_format` asks for.
    pub fn constraint(&self) -> Result<Option<fak_engine::Constraint>, ApiError> {
        crate::structured::response_format(self.response_format.as_ref())
    }

    /// Whether the stream ends with a usage chunk.
    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage)
    }
}

/// Log-probability settings of a chat request.
pub fn chat_logprobs(logprobs: bool, top: Option<i64>) -> Result<Logprobs, ApiError> {
    match (logprobs, top) {
        (false, None) => Ok(Logprobs::Off),
        (false, Some(_)) => Err(ApiError::bad_param(
            "top_logprobs",
            "top_logprobs needs logprobs: true",
        )),
        (true, t) => top_n("top_logprobs", t.unwrap_or(0)),
    }
}

/// Log-probability settings of a completions request (`logprobs: N`).
pub fn completion_logprobs(n: Option<i64>) -> Result<Logprobs, ApiError> {
    match n {
        None => Ok(Logprobs::Off),
        Some(n) => top_n("logprobs", n),
    }
}

fn top_n(name: &'static str, n: i64) -> Result<Logprobs, ApiError> {
    if !(0..=MAX_TOP_LOGPROBS as i64).contains(&n) {
        return Err(ApiError::bad_param(
            name,
            format!("{name} must be within 0..={MAX_TOP_LOGPROBS}, got {n}"),
        ));
    }
    Ok(Logprobs::Top(n as usize))
}
