//! `tool_choice: "auto"`: a reply that is, as a whole, one call written
//! as a JSON object instead of the template's call syntax. Small models
//! (Qwen2.5-Coder 0.5B) often answer a tool task with a Markdown JSON
//! block rather than `<tool_call>` tags; such a reply is read as that
//! call when nothing else is in it.
//!
//! ```text
//!   reply, trimmed ::= OBJECT
//!                    | "```" INFO "\n" OBJECT "```"       INFO: "" or "json" (any case)
//!   OBJECT         ::= {"name": N, KEY: A}                 exactly these two keys, any spacing
//!     KEY  "arguments" (Hermes) or "parameters" (Llama 3), the family's own
//!     N    a declared tool's name
//!     A    a JSON object, or a JSON string holding one, valid under N's
//!          `parameters` schema (the `jsonschema` crate)
//!   anything else (prose around it, two objects, an unknown name, arguments
//!   the schema refuses, a cut object) stays content, unchanged
//! ```
//!
//! The call's arguments are the object's text as generated (or the
//! string's contents). A reply that opens with `{` at its first byte never
//! gets here: the auto grammar holds it to a call in the template's own
//! shape ([`super::Tools::constraint`]), which the reader takes as a bare
//! call.
//!
//! Streaming: the reader ([`super::CallParser`]) holds the reply back
//! while [`could_be`] says it may still be such an object (only whitespace
//! so far, or it opens with a fence or `{` and nothing has ruled it out);
//! once it cannot, what was held goes out as content and the rest streams
//! as before. At the end a held reply is one call, or one piece of
//! content: streamed and whole answers agree.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use fak_tokenizer::ToolSyntax;

use super::Tool;

/// The tools a whole-reply call may name, and the family's arguments key.
#[derive(Debug, Clone)]
pub struct WholeCall {
    syntax: ToolSyntax,
    tools: Vec<Tool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HermesObject<'a> {
    name: String,
    #[serde(borrow)]
    arguments: &'a RawValue,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LlamaObject<'a> {
    name: String,
    #[serde(borrow)]
    parameters: &'a RawValue,
}

impl WholeCall {
    /// Calls of `tools` in `syntax`'s family.
    pub fn new(syntax: ToolSyntax, tools: &[Tool]) -> WholeCall {
        WholeCall {
            syntax,
            tools: tools.to_vec(),
        }
    }

    /// The call `text` is, as `(name, arguments JSON text)`, when the
    /// whole of it is one (the grammar in the module docs).
    pub fn read(&self, text: &str) -> Option<(String, String)> {
        let t = text.trim();
        let body = match t.strip_prefix(FENCE) {
            Some(r) => {
                let (info, rest) = r.split_once('\n')?;
                if !json_info(info) {
                    return None;
                }
                rest.strip_suffix(FENCE)?.trim()
            }
            None => t,
        };
        if !body.starts_with('{') {
            return None;
        }
        let (name, raw) = match self.syntax {
            ToolSyntax::Hermes => {
                let o: HermesObject<'_> = serde_json::from_str(body).ok()?;
                (o.name, o.arguments.get())
            }
            ToolSyntax::Llama3Json => {
                let o: LlamaObject<'_> = serde_json::from_str(body).ok()?;
                (o.name, o.parameters.get())
            }
        };
        let arguments = if raw.starts_with('"') {
            serde_json::from_str::<String>(raw).ok()?
        } else {
            raw.to_string()
        };
        let args: Value = serde_json::from_str(&arguments).ok()?;
        if !args.is_object() {
            return None;
        }
        let tool = self.tools.iter().find(|t| t.name == name)?;
        let valid = jsonschema::validator_for(&tool.parameters)
            .ok()?
            .is_valid(&args);
        valid.then_some((name, arguments))
    }
}

const FENCE: &str = "```";

/// A fence's info string that opens a JSON block: empty or `json`.
fn json_info(info: &str) -> bool {
    let i = info.trim_matches([' ', '\t', '\r']);
    i.is_empty() || i.eq_ignore_ascii_case("json")
}

/// Whether `partial` (an info string without its newline yet) can still
/// become one that [`json_info`] accepts.
fn json_info_prefix(partial: &str) -> bool {
    let p = partial.trim_start_matches([' ', '\t']);
    let word = p.trim_end_matches([' ', '\t', '\r']);
    if word.len() < p.len() {
        // Spacing after the word: the word is complete.
        return json_info(word);
    }
    word.len() <= 4 && "json".starts_with(word.to_ascii_lowercase().as_str())
}

/// Whether `text`, the reply so far, may still grow into a reply that
/// [`WholeCall::read`] could take (only its shape: the name and the
/// arguments are checked at the end).
pub fn could_be(text: &str) -> bool {
    let t = text.trim_start();
    if let Some(r) = t.strip_prefix(FENCE) {
        return match r.split_once('\n') {
            None => json_info_prefix(r),
            Some((info, body)) => json_info(info) && body_could_be(body, true),
        };
    }
    if FENCE.starts_with(t) {
        return true;
    }
    body_could_be(t, false)
}

/// [`could_be`] for what follows the fence's first line (or the whole
/// reply, unfenced).
fn body_could_be(body: &str, fenced: bool) -> bool {
    let b = body.trim_start();
    if b.is_empty() {
        return true;
    }
    if !b.starts_with('{') {
        return false;
    }
    let Some(end) = object_end(b) else {
        return true;
    };
    let tail = b[end..].trim_start();
    if !fenced {
        return tail.is_empty();
    }
    match tail.strip_prefix(FENCE) {
        Some(after) => after.trim().is_empty(),
        None => FENCE.starts_with(tail),
    }
}

/// The byte after the bracket that closes the one `s` opens with, or
/// `None` while it is open (strings and their escapes skipped).
fn object_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn weather() -> WholeCall {
        let tools = vec![
            Tool {
                name: "get_weather".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "location": {"type": "string"},
                        "unit": {"enum": ["celsius", "fahrenheit"]}
                    },
                    "required": ["location"],
                    "additionalProperties": false
                }),
            },
            Tool {
                name: "get_time".into(),
                parameters: json!({"type": "object", "properties": {}}),
            },
        ];
        WholeCall::new(ToolSyntax::Hermes, &tools)
    }

    const PRETTY: &str = "{\n  \"name\": \"get_weather\",\n  \"arguments\": {\n    \"location\": \"Lima\",\n    \"unit\": \"fahrenheit\"\n  }\n}";

    #[test]
    fn fenced_and_bare_objects_are_calls() {
        let w = weather();
        let args = "{\n    \"location\": \"Lima\",\n    \"unit\": \"fahrenheit\"\n  }";
        for text in [
            format!("```json\n{PRETTY}\n```"),
            format!("\n\n```JSON \n{PRETTY}\n```\n"),
            format!("```\n{PRETTY}```"),
            format!("  {PRETTY}  \n"),
            PRETTY.to_string(),
        ] {
            assert_eq!(
                w.read(&text),
                Some(("get_weather".into(), args.into())),
                "{text:?}"
            );
        }
    }

    #[test]
    fn arguments_may_be_a_string_holding_an_object() {
        let w = weather();
        let text = r#"```json
{"name": "get_weather", "arguments": "{\"location\": \"Oslo\"}"}
```"#;
        assert_eq!(
            w.read(text),
            Some(("get_weather".into(), "{\"location\": \"Oslo\"}".into()))
        );
        // A string that holds no object, or not JSON, is no call.
        for bad in [r#""[1]""#, r#""Oslo""#, r#""{""#, "[]", "3"] {
            let t = format!("{{\"name\": \"get_time\", \"arguments\": {bad}}}");
            assert_eq!(w.read(&t), None, "{t}");
        }
    }

    #[test]
    fn anything_else_is_content() {
        let w = weather();
        let two = format!("{PRETTY}\n{PRETTY}");
        let fenced_two = format!("```json\n{PRETTY}\n```\n```json\n{PRETTY}\n```");
        for text in [
            // An undeclared name.
            r#"{"name": "get_news", "arguments": {}}"#.to_string(),
            // Arguments the schema refuses: a missing required field, an
            // unknown one, a value outside the enum.
            r#"{"name": "get_weather", "arguments": {}}"#.to_string(),
            r#"{"name": "get_weather", "arguments": {"location": "Lima", "x": 1}}"#.to_string(),
            r#"{"name": "get_weather", "arguments": {"location": "Lima", "unit": "kelvin"}}"#
                .to_string(),
            // Prose around the fence, before or after.
            format!("Here is the call:\n```json\n{PRETTY}\n```"),
            format!("```json\n{PRETTY}\n```\nI called it."),
            // Two objects, bare or fenced.
            two,
            fenced_two,
            // Another key, the other family's key, a missing key.
            r#"{"name": "get_time", "arguments": {}, "id": 1}"#.to_string(),
            r#"{"name": "get_time", "parameters": {}}"#.to_string(),
            r#"{"name": "get_time"}"#.to_string(),
            // Another language's fence, a fence left open, a cut object.
            format!("```python\n{PRETTY}\n```"),
            format!("```json\n{PRETTY}\n"),
            PRETTY[..PRETTY.len() - 1].to_string(),
            String::new(),
        ] {
            assert_eq!(w.read(&text), None, "{text:?}");
        }
        let llama = WholeCall::new(ToolSyntax::Llama3Json, &w.tools);
        assert_eq!(
            llama.read(r#"{"name": "get_time", "parameters": {}}"#),
            Some(("get_time".into(), "{}".into()))
        );
        assert_eq!(llama.read(r#"{"name": "get_time", "arguments": {}}"#), None);
    }

    #[test]
    fn could_be_holds_only_what_may_still_be_one_object() {
        let fenced = format!("```json\n{PRETTY}\n```\n");
        // Every prefix of a call may still be one.
        for text in [fenced.as_str(), PRETTY] {
            for (i, _) in text.char_indices() {
                assert!(could_be(&text[..i]), "{:?}", &text[..i]);
            }
            assert!(could_be(text));
        }
        for text in [
            "Sure",
            "`x",
            "```py",
            "```json x",
            "```json\nThe",
            "{\"a\": 1} and",
            "```json\n{\"a\": 1}\n```\nDone",
            "```json\n{\"a\": 1}\n``x",
            "{\"a\": \"}\"} more",
        ] {
            assert!(!could_be(text), "{text:?}");
        }
        // A brace inside a string does not close the object.
        assert!(could_be("{\"a\": \"}\" "));
    }
}
