//! OpenAI tool calling: `tools`, `tool_choice` and `parallel_tool_calls`
//! checked, turned into a Lark grammar for the engine's constraint, and
//! the model's output turned back into `tool_calls`.
//!
//! ```text
//!   tools ─► checked (names, schemas) ─► rendered through the template's `tools`
//!   tool_choice ─► grammar in the template family's syntax (ToolSyntax):
//!     Hermes (Qwen2.5)   <tool_call>\n{"name": N, "arguments": A}\n</tool_call>  (\n<tool_call>…)*
//!     Llama 3 JSON       {"name": N, "parameters": A}                            (one call)
//!     required / named   a call from the first token
//!     auto               free text, or text then a call: once the opener is
//!                        written (Hermes) or the reply opens with `{` (both:
//!                        Qwen2.5 0.5B often drops the tags), the name and
//!                        arguments are constrained
//!     none               no tools rendered, no grammar, no parsing
//!   output ─► CallParser (incremental, the same for streamed and whole answers)
//!     ─► content text + calls (name, arguments as the exact JSON text generated)
//!     auto also: a reply that is, trimmed, exactly one {"name", "arguments"}
//!     object, bare or in one ```json fence, naming a declared tool with
//!     arguments valid under its schema, is that call (whole.rs); the reply
//!     is held back only while it may still be one
//! ```
//!
//! A template whose family is unknown (SmolLM2's has no tools) renders
//! `tools` if it reads them, and `auto` then answers in plain text;
//! `required` or a named function is a 400, since no call syntax can be
//! constrained.
//!
//! How a reply's calls are read ([`ToolReply`]: the syntax, the base of
//! the call ids, the whole-call reader) is defined here too, so the
//! writers of replies (`reply.rs`, `outcome.rs`, the APIs' streams) import
//! it from this module and nothing here imports them.

use std::sync::Arc;

use serde_json::{json, Value};

use fak_engine::Constraint;
use fak_tokenizer::{ChatTemplate, ToolSyntax};

use crate::error::ApiError;

mod reader;
mod whole;

pub use reader::{
    call_id, calls_json, new_base, read_with, template_calls, Call, CallParser, Piece,
};
pub use whole::WholeCall;

/// `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// No calls: tools are not rendered.
    None,
    /// Text or calls, as the model decides.
    Auto,
    /// At least one call, of any tool.
    Required,
    /// A call of this tool (index into the tools).
    Named(usize),
}

/// Whether several calls may follow one another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallel {
    /// One call at most.
    One,
    /// Any number (Hermes only; Llama 3 templates take one per turn).
    Many,
}

/// One checked function definition.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    /// Its parameters' JSON schema.
    pub parameters: Value,
}

/// A request's tools, checked.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The definitions as sent, for the template's `tools`.
    pub defs: Vec<Value>,
    pub tools: Vec<Tool>,
    pub choice: Choice,
    pub parallel: Parallel,
    /// The template's call syntax (`None`: calls are not recognised).
    pub syntax: Option<ToolSyntax>,
}

fn bad(param: &'static str, m: impl Into<String>) -> ApiError {
    ApiError::bad_param(param, m)
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks `tools`, `tool_choice` and `parallel_tool_calls` against the
/// model's template; `None` when the request has no tools.
///
/// # Errors
///
/// 400 naming the field: a malformed definition or schema, a duplicate
/// name, `tool_choice` naming no given function, `required` or a named
/// function without tools or on a template without a known call syntax.
pub fn parse(
    tools: Option<&Value>,
    choice: Option<&Value>,
    parallel: Option<bool>,
    template: Option<&ChatTemplate>,
) -> Result<Option<Tools>, ApiError> {
    let defs: Vec<Value> = match tools {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err(bad("tools", "tools must be a list of function definitions")),
    };
    let mut checked = Vec::with_capacity(defs.len());
    for (i, d) in defs.iter().enumerate() {
        if d.get("type").and_then(Value::as_str) != Some("function") {
            return Err(bad(
                "tools",
                format!("tools[{i}].type must be \"function\""),
            ));
        }
        let Some(f) = d.get("function").and_then(Value::as_object) else {
            return Err(bad(
                "tools",
                format!("tools[{i}].function must be an object"),
            ));
        };
        let name = f.get("name").and_then(Value::as_str).unwrap_or("");
        if !valid_name(name) {
            return Err(bad(
                "tools",
                format!(
                    "tools[{i}].function.name {name:?} must be 1 to 64 letters, digits, '_' or '-'"
                ),
            ));
        }
        if checked.iter().any(|t: &Tool| t.name == name) {
            return Err(bad(
                "tools",
                format!("tools[{i}]: the function name {name:?} is given twice"),
            ));
        }
        let parameters = match f.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => {
                return Err(bad(
                    "tools",
                    format!("tools[{i}].function.parameters must be a JSON schema (an object)"),
                ))
            }
        };
        checked.push(Tool {
            name: name.to_string(),
            parameters,
        });
    }
    let choice = match choice {
        None | Some(Value::Null) => {
            if checked.is_empty() {
                Choice::None
            } else {
                Choice::Auto
            }
        }
        Some(Value::String(s)) => match s.as_str() {
            "none" => Choice::None,
            "auto" => Choice::Auto,
            "required" => Choice::Required,
            other => {
                return Err(bad(
                    "tool_choice",
                    format!("tool_choice {other:?} is not one of none, auto, required or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"),
                ))
            }
        },
        Some(v) => {
            let name = v
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str);
            match (v.get("type").and_then(Value::as_str), name) {
                (Some("function"), Some(n)) => match checked.iter().position(|t| t.name == n) {
                    Some(k) => Choice::Named(k),
                    None => {
                        return Err(bad(
                            "tool_choice",
                            format!("tool_choice names the function {n:?}, which is not in tools"),
                        ))
                    }
                },
                _ => {
                    return Err(bad(
                        "tool_choice",
                        "tool_choice must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                    ))
                }
            }
        }
    };
    if checked.is_empty() {
        return match choice {
            Choice::None | Choice::Auto => Ok(None),
            _ => Err(bad(
                "tool_choice",
                "tool_choice required or a named function needs tools",
            )),
        };
    }
    let syntax = template.and_then(ChatTemplate::tool_syntax);
    if syntax.is_none() && matches!(choice, Choice::Required | Choice::Named(_)) {
        return Err(bad(
            "tool_choice",
            "this model's chat template has no tool-call syntax fak recognises (Hermes/Qwen2.5 \
             <tool_call> or Llama 3 JSON), so a call cannot be required; use tool_choice auto \
             (tools are rendered, the reply is text) or none",
        ));
    }
    let parallel = match (parallel.unwrap_or(true), syntax) {
        (true, Some(ToolSyntax::Hermes)) => Parallel::Many,
        _ => Parallel::One,
    };
    Ok(Some(Tools {
        defs,
        tools: checked,
        choice,
        parallel,
        syntax,
    }))
}

impl Tools {
    /// The definitions the template sees (none for `tool_choice: none`).
    pub fn rendered(&self) -> Option<&[Value]> {
        (self.choice != Choice::None).then_some(self.defs.as_slice())
    }

    /// How the output is read: the call syntax when calls can happen.
    pub fn reading(&self) -> Option<ToolSyntax> {
        match self.choice {
            Choice::None => None,
            _ => self.syntax,
        }
    }

    /// The grammar the reply is held to (`None`: free text).
    pub fn constraint(&self) -> Option<Constraint> {
        let syntax = self.reading()?;
        let key = match syntax {
            ToolSyntax::Hermes => "arguments",
            ToolSyntax::Llama3Json => "parameters",
        };
        let allowed: Vec<usize> = match self.choice {
            Choice::Named(k) => vec![k],
            _ => (0..self.tools.len()).collect(),
        };
        // One rule per tool, one line each, so a schema error's line
        // names the tool (see `schema_error`).
        let mut g = String::from("%llguidance {}\n");
        let fns: Vec<String> = allowed.iter().map(|k| format!("fn_{k}")).collect();
        let body = fns.join(" | ");
        match (syntax, &self.choice) {
            (ToolSyntax::Hermes, Choice::Auto) => {
                // Text that does not open with `{`, a call after any such
                // text (the opener ends a lazy lexeme), or a bare call.
                g.push_str("start: TEXT | head \"\\n\" call_body more | fn\n");
                g.push_str("head[lazy]: HEAD_TEXT \"<tool_call>\"\n");
                g.push_str("HEAD_TEXT: /([^{](.|\\n)*)?/\n");
            }
            (ToolSyntax::Hermes, _) => {
                g.push_str("start: \"<tool_call>\\n\" call_body more\n");
            }
            (ToolSyntax::Llama3Json, Choice::Auto) => {
                g.push_str("start: TEXT | fn\n");
            }
            (ToolSyntax::Llama3Json, _) => g.push_str("start: fn\n"),
        }
        if syntax == ToolSyntax::Hermes {
            g.push_str("call_body: fn \"\\n</tool_call>\"\n");
            match self.parallel {
                Parallel::Many => g.push_str("more: (\"\\n<tool_call>\\n\" call_body)*\n"),
                Parallel::One => g.push_str("more: \"\"\n"),
            }
        }
        g.push_str("TEXT: /[^{](.|\\n)*/\n");
        g.push_str(&format!("fn: {body}\n"));
        // The name and the separators are literals; each tool's
        // parameters are their own `%json`, on their own line, so a
        // schema error is that schema's (and its line names the tool).
        for &k in &allowed {
            let t = &self.tools[k];
            g.push_str(&format!(
                "fn_{k}: \"{{\\\"name\\\": \\\"{}\\\", \\\"{key}\\\": \" args_{k} \"}}\"\n",
                t.name
            ));
        }
        for &k in &allowed {
            let mut schema = self.tools[k].parameters.clone();
            if let Some(o) = schema.as_object_mut() {
                o.entry("x-guidance").or_insert_with(|| {
                    json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "})
                });
            }
            g.push_str(&format!("args_{k}: %json {schema}\n"));
        }
        Some(Constraint::Lark(g))
    }

    /// A grammar that does not compile, as a 400 naming the tool whose
    /// schema failed when the error's line shows it.
    pub fn schema_error(&self, message: &str) -> ApiError {
        // llguidance names the grammar line first: "at LINE(COLUMN): ...".
        let line: Option<usize> = message
            .strip_prefix("at ")
            .and_then(|m| m.split('(').next())
            .and_then(|n| n.trim().parse().ok());
        let grammar = match self.constraint() {
            Some(Constraint::Lark(g)) => g,
            _ => String::new(),
        };
        let tool = line
            .and_then(|n| grammar.lines().nth(n.saturating_sub(1)))
            .and_then(|l| l.strip_prefix("args_"))
            .and_then(|l| l.split(':').next())
            .and_then(|k| k.parse::<usize>().ok())
            .filter(|&k| k < self.tools.len());
        // The reason, without llguidance's listing of the grammar.
        let reason = message.lines().next().unwrap_or(message);
        let reason = reason
            .split_once("): ")
            .map_or(reason, |(_, r)| r)
            .trim_start_matches("failed to compile JSON schema: ");
        let which = match tool {
            Some(k) => format!(
                "tools[{k}] ({}): its parameters schema does not compile",
                self.tools[k].name
            ),
            None => "a tool's parameters schema does not compile".to_string(),
        };
        bad("tools", format!("{which}: {reason}"))
    }
}

/// Holds `req` to the tools' grammar, when calls can happen.
///
/// # Errors
///
/// 400 when the request also asks for a `response_format`: one reply
/// follows one grammar.
pub fn constrain(req: &mut fak_engine::Request, tools: Option<&Tools>) -> Result<(), ApiError> {
    let Some(c) = tools.and_then(Tools::constraint) else {
        return Ok(());
    };
    if req.constraint.is_some() {
        return Err(bad(
            "response_format",
            "response_format cannot be combined with tools unless tool_choice is none",
        ));
    }
    req.constraint = Some(c);
    Ok(())
}

/// Tool calls in a chat reply: their syntax and the base of their ids.
#[derive(Debug, Clone)]
pub struct ToolReply {
    pub syntax: fak_tokenizer::ToolSyntax,
    /// `tools::call_id(base, i)` is call `i`'s id.
    pub base: u128,
    /// `tool_choice: "auto"`: a reply that is one call written as a JSON
    /// object (bare or fenced) is read as that call.
    pub whole: Option<Arc<WholeCall>>,
}

impl ToolReply {
    /// A reader of this reply's calls (streamed or whole: the same).
    pub fn parser(&self) -> CallParser {
        CallParser::new(self.syntax).with_whole(self.whole.clone())
    }

    /// The whole reply's content and calls.
    pub fn read(&self, text: &str) -> (String, Vec<Call>) {
        read_with(self.parser(), text)
    }
}

/// How the reply's calls are read (none when they cannot happen).
pub fn reply(tools: Option<&Tools>) -> Option<ToolReply> {
    tools.and_then(Tools::reading).map(|syntax| ToolReply {
        syntax,
        base: new_base(),
        whole: tools
            .filter(|t| t.choice == Choice::Auto)
            .map(|t| Arc::new(WholeCall::new(syntax, &t.tools))),
    })
}

/// A refused submission; a grammar error of a tools request names the tool.
pub fn submit_error(e: crate::engine_thread::SubmitError, tools: Option<&Tools>) -> ApiError {
    match (e, tools) {
        (
            crate::engine_thread::SubmitError::Engine(fak_engine::EngineError::BadConstraint(m)),
            Some(t),
        ) if t.constraint().is_some() => t.schema_error(&m),
        (e, _) => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(v: Value, choice: Value) -> Result<Option<Tools>, ApiError> {
        let t = ChatTemplate::new("{{ '<tool_call>' }} arguments {{ tools }}", "", "").unwrap();
        parse(Some(&v), Some(&choice), None, Some(&t))
    }

    #[test]
    fn bad_tools_are_400s_naming_the_field() {
        let ok = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
        for (v, choice, param) in [
            (json!({"a": 1}), json!("auto"), "tools"),
            (json!([{"type": "x"}]), json!("auto"), "tools"),
            (
                json!([{"type": "function", "function": {"name": "a b"}}]),
                json!("auto"),
                "tools",
            ),
            (
                json!([{"type": "function", "function": {"name": "f", "parameters": 3}}]),
                json!("auto"),
                "tools",
            ),
            (
                json!([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]),
                json!("auto"),
                "tools",
            ),
            (ok.clone(), json!("sometimes"), "tool_choice"),
            (
                ok.clone(),
                json!({"type": "function", "function": {"name": "g"}}),
                "tool_choice",
            ),
            (json!([]), json!("required"), "tool_choice"),
        ] {
            let e = tools(v.clone(), choice.clone()).unwrap_err();
            assert_eq!(e.body()["error"]["param"], param, "{v} {choice}");
        }
        let t = tools(
            ok.clone(),
            json!({"type": "function", "function": {"name": "f"}}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(t.choice, Choice::Named(0));
        assert_eq!(t.parallel, Parallel::Many);
        let Some(Constraint::Lark(g)) = t.constraint() else {
            panic!("a grammar")
        };
        assert!(
            g.contains("start: \"<tool_call>\\n\" call_body more"),
            "{g}"
        );
        let none = tools(ok.clone(), json!("none")).unwrap().unwrap();
        assert!(none.constraint().is_none() && none.rendered().is_none());
        // No known syntax: auto renders, required is refused.
        let plain = ChatTemplate::new("{{ messages }}", "", "").unwrap();
        let auto = parse(Some(&ok), None, None, Some(&plain)).unwrap().unwrap();
        assert!(auto.constraint().is_none() && auto.rendered().is_some());
        let e = parse(Some(&ok), Some(&json!("required")), None, Some(&plain)).unwrap_err();
        assert_eq!(e.body()["error"]["param"], "tool_choice");
    }
}
