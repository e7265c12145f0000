//! Chat templates: the Jinja template in `tokenizer.chat_template`, rendered
//! with minijinja the way Hugging Face's `apply_chat_template` renders it.
//!
//! Environment, matching transformers' sandbox:
//!
//! * `trim_blocks` and `lstrip_blocks` on, trailing newline dropped;
//! * Python string/dict methods (`.strip()`, `.startswith()`, `.items()`,
//!   ...) through minijinja-contrib's pycompat;
//! * `raise_exception(msg)` fails the render with `msg`;
//! * `strftime_now(fmt)` formats the current UTC time;
//! * `tojson` writes JSON like Python's `json.dumps(ensure_ascii=False)`
//!   (`", "` and `": "` separators, optional `indent`);
//! * context: `messages`, `add_generation_prompt`, `bos_token`,
//!   `eos_token`, and `tools` (OpenAI function definitions, or none).
//!
//! Tool calling ([`ChatTemplate::render_with_tools`]): messages may carry
//! `tool_calls` (an assistant's calls, `function.arguments` given to the
//! template as a JSON object, the way Hugging Face templates read it) and
//! `tool_call_id` (a `tool` message's answer); a message without them has
//! no such key at all, since templates test `'tool_calls' in message`.
//! [`ChatTemplate::tool_syntax`] names the family of tool-call syntax the
//! template's text shows ([`ToolSyntax`]).
//!
//! A template is untrusted input (it comes with the model file): every
//! render runs on [`TEMPLATE_FUEL`] minijinja instructions and may write
//! at most [`TEMPLATE_MAX_OUTPUT`] bytes, and [`ChatTemplate::new`]
//! renders a small probe conversation, so a template that exceeds either
//! on it is refused at load instead of holding a caller later.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use fak_gguf::GgufFile;
use minijinja::value::{Kwargs, ValueKind};
use minijinja::{context, Environment, Error, ErrorKind, Value};
use serde::{Deserialize, Serialize};

use crate::error::TokenizerError;
use crate::limits::{TemplateLimit, TEMPLATE_FUEL, TEMPLATE_MAX_OUTPUT};

/// Name under which the template is registered.
const TEMPLATE_NAME: &str = "chat";

/// An output buffer that refuses to grow past [`TEMPLATE_MAX_OUTPUT`].
struct CappedOutput {
    buf: Vec<u8>,
    over: bool,
}

impl std::io::Write for CappedOutput {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(data.len()) > TEMPLATE_MAX_OUTPUT {
            self.over = true;
            return Err(std::io::Error::other("chat template output limit"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One conversation turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// The turn's text.
    pub content: String,
}

/// A call an assistant message made (OpenAI's shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// `call_...`.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

/// The function part of a [`ToolCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The function's name.
    pub name: String,
    /// The arguments as JSON (an object when they parse, else the text).
    pub arguments: serde_json::Value,
}

/// A conversation turn with the tool-calling fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolMessage {
    /// `system`, `user`, `assistant`, `tool`, ...
    pub role: String,
    /// The turn's text (empty for an assistant turn that only calls).
    pub content: String,
    /// The calls of an assistant turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The call a `tool` turn answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl From<&ChatMessage> for ToolMessage {
    fn from(m: &ChatMessage) -> ToolMessage {
        ToolMessage {
            role: m.role.clone(),
            content: m.content.clone(),
            ..ToolMessage::default()
        }
    }
}

/// The tool-call syntax a template's model was trained on, recognised
/// from the template's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolSyntax {
    /// Qwen2.5 / Hermes: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`,
    /// several calls one after another.
    Hermes,
    /// Llama 3.1-3.3 JSON: the whole reply is `{"name": ..., "parameters": {...}}`,
    /// one call per turn.
    Llama3Json,
}

impl ToolSyntax {
    /// The family a template's source shows, if any: Hermes when it
    /// writes `<tool_call>` blocks with `arguments` (and not Qwen3-Coder's
    /// `<function=...>` XML), Llama 3 JSON when it writes a
    /// `"parameters": ` object between Llama headers.
    pub fn detect(source: &str) -> Option<ToolSyntax> {
        if source.contains("<tool_call>")
            && source.contains("arguments")
            && !source.contains("<function=")
        {
            Some(ToolSyntax::Hermes)
        } else if source.contains("\"parameters\": ") && source.contains("<|start_header_id|>") {
            Some(ToolSyntax::Llama3Json)
        } else {
            None
        }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
    tools: Option<ToolSyntax>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// The file's `tokenizer.chat_template`, with its BOS/EOS texts;
    /// `None` if the file has no template.
    pub fn from_gguf(f: &GgufFile) -> Result<Option<ChatTemplate>, TokenizerError> {
        let Some(source) = f.get_str("tokenizer.chat_template")? else {
            return Ok(None);
        };
        let tokens = f.get_str_array("tokenizer.ggml.tokens")?.unwrap_or(&[]);
        let text_of = |key: &str| -> Result<&str, TokenizerError> {
            Ok(f.get_uint(key)?
                .and_then(|id| usize::try_from(id).ok())
                .and_then(|i| tokens.get(i))
                .map_or("", String::as_str))
        };
        let bos = text_of("tokenizer.ggml.bos_token_id")?;
        let eos = text_of("tokenizer.ggml.eos_token_id")?;
        ChatTemplate::new(source, bos, eos).map(Some)
    }

    /// Compiles `source`; `bos_token`/`eos_token` are what the template sees
    /// under those names. The template then renders a probe conversation
    /// (user, assistant, user, with the generation prompt).
    ///
    /// # Errors
    ///
    /// [`TokenizerError::TemplateSyntax`] if it does not parse;
    /// [`TokenizerError::TemplateLimit`] if the probe exceeds a limit. Other
    /// probe failures (a template may `raise_exception` on conversations
    /// it does not support) surface when such a conversation is rendered.
    pub fn new(
        source: &str,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<ChatTemplate, TokenizerError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(|e| TokenizerError::TemplateSyntax(describe(&e)))?;
        let t = ChatTemplate {
            env,
            bos: bos_token.to_string(),
            eos: eos_token.to_string(),
            tools: ToolSyntax::detect(source),
        };
        let probe =
            [("user", "Hello."), ("assistant", "Hi."), ("user", "Bye.")].map(|(role, content)| {
                ChatMessage {
                    role: role.into(),
                    content: content.into(),
                }
            });
        match t.render(&probe, true) {
            Err(e @ TokenizerError::TemplateLimit { .. }) => Err(e),
            _ => Ok(t),
        }
    }

    /// The tool-call syntax of the template's family, if it has one.
    pub fn tool_syntax(&self) -> Option<ToolSyntax> {
        self.tools
    }

    /// Renders the conversation; with `add_generation_prompt` the text ends
    /// with the opening of an assistant turn.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, TokenizerError> {
        let messages: Vec<ToolMessage> = messages.iter().map(ToolMessage::from).collect();
        self.render_with_tools(&messages, None, add_generation_prompt)
    }

    /// Renders a conversation with tool calls and tool answers; `tools`
    /// (OpenAI function definitions, `{"type": "function", "function":
    /// {...}}`) is the template's `tools` variable, none when `None`.
    pub fn render_with_tools(
        &self,
        messages: &[ToolMessage],
        tools: Option<&[serde_json::Value]>,
        add_generation_prompt: bool,
    ) -> Result<String, TokenizerError> {
        let tmpl = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| TokenizerError::TemplateRender(describe(&e)))?;
        let mut out = CappedOutput {
            buf: Vec::new(),
            over: false,
        };
        let ctx = context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos,
            eos_token => &self.eos,
            tools => tools.map_or(Value::from(()), Value::from_serialize),
        };
        match tmpl.render_captured_to(ctx, &mut out) {
            Ok(_) => String::from_utf8(out.buf)
                .map_err(|e| TokenizerError::TemplateRender(e.to_string())),
            Err(_) if out.over => Err(TokenizerError::TemplateLimit {
                limit: TemplateLimit::Output,
            }),
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(TokenizerError::TemplateLimit {
                limit: TemplateLimit::Fuel,
            }),
            Err(e) => Err(TokenizerError::TemplateRender(describe(&e))),
        }
    }
}

/// A minijinja error with its detail and location.
fn describe(e: &Error) -> String {
    let mut s = e.to_string();
    if let (Some(name), Some(line)) = (e.name(), e.line()) {
        let _ = write!(s, " (in {name} line {line})");
    }
    s
}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

fn strftime_now(fmt: String) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs, &fmt)
}

/// Formats `secs` since the Unix epoch (UTC) with the strftime directives
/// `%Y %y %m %d %e %H %M %S %j %b %B %a %A %p %I %%`; others stay literal.
pub(crate) fn format_utc(secs: u64, fmt: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let (year, month, day) = civil_from_days(days);
    let yday = days - days_from_civil(year, 1, 1) + 1;
    let month_name = MONTHS
        .get((month as usize).wrapping_sub(1))
        .copied()
        .unwrap_or("");
    let day_name = DAYS.get((days % 7) as usize).copied().unwrap_or("");
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };

    let mut out = String::with_capacity(fmt.len() + 16);
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let _ = match it.next() {
            Some('Y') => write!(out, "{year}"),
            Some('y') => write!(out, "{:02}", year % 100),
            Some('m') => write!(out, "{month:02}"),
            Some('d') => write!(out, "{day:02}"),
            Some('e') => write!(out, "{day:>2}"),
            Some('H') => write!(out, "{hour:02}"),
            Some('I') => write!(out, "{hour12:02}"),
            Some('M') => write!(out, "{minute:02}"),
            Some('S') => write!(out, "{second:02}"),
            Some('j') => write!(out, "{yday:03}"),
            Some('p') => write!(out, "{}", if hour < 12 { "AM" } else { "PM" }),
            Some('B') => write!(out, "{month_name}"),
            Some('b') => write!(out, "{}", month_name.get(..3).unwrap_or("")),
            Some('A') => write!(out, "{day_name}"),
            Some('a') => write!(out, "{}", day_name.get(..3).unwrap_or("")),
            Some('%') => write!(out, "%"),
            Some(other) => write!(out, "%{other}"),
            None => write!(out, "%"),
        };
    }
    out
}

/// Days since 1970-01-01 -> (year, month 1..=12, day 1..=31), proleptic
/// Gregorian, counting in 400-year eras of 146 097 days from 0000-03-01.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z / 146_097;
    let doe = z % 146_097; // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // 0..=365, from March 1
    let mp = (5 * doy + 2) / 153; // March = 0
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Inverse of [`civil_from_days`] (for years ≥ 1970).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y % 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).saturating_sub(719_468)
}

/// `value | tojson(indent=N)` like Python's `json.dumps(ensure_ascii=False)`.
fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    // Accepted for compatibility; output is never ASCII-escaped.
    let _: Option<Value> = kwargs.get("ensure_ascii")?;
    let _: Option<Value> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    let style = JsonStyle {
        indent,
        sort_keys: sort_keys.unwrap_or(false),
    };
    write_json(&value, style, 0, &mut out)?;
    Ok(Value::from_safe_string(out))
}

#[derive(Clone, Copy)]
struct JsonStyle {
    indent: Option<usize>,
    sort_keys: bool,
}

fn newline(style: JsonStyle, level: usize, out: &mut String) {
    if let Some(n) = style.indent {
        out.push('\n');
        out.push_str(&" ".repeat(n * level));
    }
}

fn write_json(v: &Value, style: JsonStyle, level: usize, out: &mut String) -> Result<(), Error> {
    let item_sep = if style.indent.is_some() { "," } else { ", " };
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(v, out),
        ValueKind::String | ValueKind::Bytes | ValueKind::Plain | ValueKind::Invalid => {
            write_str(&v.to_string(), out);
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(style, level + 1, out);
                write_json(item, style, level + 1, out)?;
            }
            newline(style, level, out);
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if style.sort_keys {
                keys.sort_by_key(|k| k.to_string());
            }
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(style, level + 1, out);
                write_str(&k.to_string(), out);
                out.push_str(": ");
                write_json(&v.get_item(k)?, style, level + 1, out)?;
            }
            newline(style, level, out);
            out.push('}');
        }
        _ => write_str(&v.to_string(), out),
    }
    Ok(())
}

fn write_number(v: &Value, out: &mut String) {
    if let Ok(i) = i64::try_from(v.clone()) {
        let _ = write!(out, "{i}");
    } else if let Ok(f) = f64::try_from(v.clone()) {
        if !f.is_finite() {
            out.push_str(if f.is_nan() {
                "NaN"
            } else if f > 0.0 {
                "Infinity"
            } else {
                "-Infinity"
            });
        } else if f.fract() == 0.0 && f.abs() < 1e16 {
            let _ = write!(out, "{f:.1}");
        } else {
            let _ = write!(out, "{f}");
        }
    } else {
        out.push_str(&v.to_string());
    }
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(pairs: &[(&str, &str)]) -> Vec<ChatMessage> {
        pairs
            .iter()
            .map(|(r, c)| ChatMessage {
                role: r.to_string(),
                content: c.to_string(),
            })
            .collect()
    }

    #[test]
    fn trims_blocks_and_uses_python_methods() {
        let src = "{% for m in messages %}\n  {% if m.role.startswith('u') %}[{{ m.content.strip() }}]{% endif %}\n{% endfor %}{{ eos_token }}\n";
        let t = ChatTemplate::new(src, "<s>", "</s>").expect("template compiles");
        let out = t.render(&msgs(&[("user", "  hi  "), ("assistant", "x")]), false);
        assert_eq!(out.ok().as_deref(), Some("[hi]</s>"));
    }

    #[test]
    fn loop_controls_work() {
        let src = "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m.role }}{% endfor %}";
        let t = ChatTemplate::new(src, "", "").expect("template compiles");
        let out = t.render(&msgs(&[("user", "a"), ("assistant", "b")]), false);
        assert_eq!(out.ok().as_deref(), Some("user"));
    }

    #[test]
    fn raise_exception_fails_the_render() {
        let t =
            ChatTemplate::new("{{ raise_exception('no system role') }}", "", "").expect("compiles");
        let err = t
            .render(&[], true)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("no system role"), "{err}");
    }

    #[test]
    fn syntax_errors_are_typed() {
        let err = ChatTemplate::new("{% for %}", "", "").err();
        assert!(matches!(err, Some(TokenizerError::TemplateSyntax(_))));
    }

    #[test]
    fn tojson_matches_python_json_dumps() {
        let t = ChatTemplate::new(
            "{{ {'a': [1, 2.5, 'é\"'], 'b': none, 'c': true} | tojson }}|{{ [1, {'k': 'v'}] | tojson(indent=2) }}",
            "",
            "",
        )
        .expect("compiles");
        let out = t.render(&[], false).ok();
        assert_eq!(
            out.as_deref(),
            Some("{\"a\": [1, 2.5, \"é\\\"\"], \"b\": null, \"c\": true}|[\n  1,\n  {\n    \"k\": \"v\"\n  }\n]")
        );
    }

    #[test]
    fn tools_and_calls_reach_the_template() {
        let src = "{% for t in tools %}[{{ t.function.name }}]{% endfor %}{% for m in messages %}{{ m.role }}:{% if 'tool_calls' in m %}{% for c in m.tool_calls %}{{ c.function.name }}{{ c.function.arguments | tojson }}{% endfor %}{% elif m.tool_call_id is defined %}<{{ m.tool_call_id }}>{{ m.content }}{% else %}{{ m.content }}{% endif %};{% endfor %}";
        let t = ChatTemplate::new(src, "", "").expect("compiles");
        let tools = [serde_json::json!({"type": "function", "function": {"name": "f"}})];
        let msgs = [
            ToolMessage {
                role: "user".into(),
                content: "hi".into(),
                ..ToolMessage::default()
            },
            ToolMessage {
                role: "assistant".into(),
                tool_calls: Some(vec![ToolCall {
                    id: "call_1".into(),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: "f".into(),
                        // Sorted keys: the order survives with or without
                        // serde_json's preserve_order.
                        arguments: serde_json::json!({"a": [true], "b": 1}),
                    },
                }]),
                ..ToolMessage::default()
            },
            ToolMessage {
                role: "tool".into(),
                content: "42".into(),
                tool_call_id: Some("call_1".into()),
                ..ToolMessage::default()
            },
        ];
        let out = t.render_with_tools(&msgs, Some(&tools), false).ok();
        assert_eq!(
            out.as_deref(),
            Some("[f]user:hi;assistant:f{\"a\": [true], \"b\": 1};tool:<call_1>42;")
        );
        // Without tools the variable is none, and plain messages have no
        // tool_calls key.
        let none = ChatTemplate::new(
            "{{ tools is none }}{{ 'tool_calls' in messages[0] }}",
            "",
            "",
        )
        .expect("compiles");
        assert_eq!(
            none.render(&msgs_of(), false).ok().as_deref(),
            Some("TrueFalse")
        );
    }

    fn msgs_of() -> Vec<ChatMessage> {
        msgs(&[("user", "a")])
    }

    #[test]
    fn tool_syntax_is_detected_from_the_source() {
        assert_eq!(
            ToolSyntax::detect(
                "{{- '<tool_call>\\n{\"name\": <function-name>, \"arguments\": ...' }}"
            ),
            Some(ToolSyntax::Hermes)
        );
        assert_eq!(
            ToolSyntax::detect("<|start_header_id|> {{- '\"parameters\": ' }}"),
            Some(ToolSyntax::Llama3Json)
        );
        assert_eq!(
            ToolSyntax::detect("<tool_call>\n<function=f> arguments"),
            None
        );
        assert_eq!(ToolSyntax::detect("{{ messages }}"), None);
    }

    #[test]
    fn utc_formatting() {
        // 2024-02-29 13:05:09 UTC, a Thursday.
        let secs = 1_709_211_909;
        assert_eq!(
            format_utc(secs, "%d %b %Y %H:%M:%S %A %j %%"),
            "29 Feb 2024 13:05:09 Thursday 060 %"
        );
        assert_eq!(format_utc(0, "%Y-%m-%d %a"), "1970-01-01 Thu");
    }
}
