//! The reader of tool calls: a reply's text, as it is generated, turned
//! into content and calls ([`CallParser`]), the same for streamed and
//! whole answers. Under `tool_choice: "auto"` it also reads a reply that
//! is one call written as a bare or fenced JSON object
//! ([`super::whole`]).

use std::sync::Arc;

use serde_json::{json, Value};

use fak_tokenizer::ToolSyntax;

use super::whole::{self, WholeCall};

/// One piece of a reply read by [`CallParser`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text outside calls (the message's content).
    Text(String),
    /// A call begins: its index and the function's name.
    Start { index: usize, name: String },
    /// More of call `index`'s arguments (JSON text).
    Args { index: usize, text: String },
    /// Call `index` is complete.
    End { index: usize },
}

/// How the current call is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Between markers (`<tool_call>` ... `</tool_call>`).
    Tagged,
    /// The whole reply is the call's JSON (Llama 3, or a Hermes model
    /// that left the tags out): it ends with the reply.
    Bare,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before anything (Llama: the first byte decides).
    Start,
    /// Free text.
    Text,
    /// Inside a call, before its arguments.
    Head,
    /// Inside the arguments.
    Args,
    /// After a call's end.
    Between,
    /// Held: the reply so far may still be one call written as a JSON
    /// object ([`whole::could_be`]), read at the end.
    Whole,
}

const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "}\n</tool_call>";

/// Reads tool calls out of a reply as it is generated, holding back only
/// what could still be a marker, so streamed pieces concatenate to the
/// same content and arguments as a whole reply.
#[derive(Debug)]
pub struct CallParser {
    syntax: ToolSyntax,
    state: State,
    buf: String,
    /// Calls started so far.
    calls: usize,
    frame: Frame,
    /// `tool_choice: "auto"`: a reply that is one call object is a call.
    whole: Option<Arc<WholeCall>>,
}

/// How `syntax`'s calls are framed, when not bare.
fn frame_of(syntax: ToolSyntax) -> Frame {
    match syntax {
        ToolSyntax::Hermes => Frame::Tagged,
        ToolSyntax::Llama3Json => Frame::Bare,
    }
}

/// The longest suffix of `s` that is a proper prefix of `marker`.
fn held(s: &str, marker: &str) -> usize {
    (1..marker.len().min(s.len() + 1))
        .rev()
        .find(|&n| s.is_char_boundary(s.len() - n) && marker.starts_with(&s[s.len() - n..]))
        .unwrap_or(0)
}

impl CallParser {
    pub fn new(syntax: ToolSyntax) -> CallParser {
        CallParser {
            syntax,
            state: State::Start,
            buf: String::new(),
            calls: 0,
            frame: frame_of(syntax),
            whole: None,
        }
    }

    /// Also reads a reply that is, as a whole, one call written as a
    /// JSON object (`tool_choice: "auto"`; see [`super::whole`]).
    pub fn with_whole(mut self, whole: Option<Arc<WholeCall>>) -> CallParser {
        self.whole = whole;
        self
    }

    fn head(&self) -> (&'static str, &'static str) {
        let key = match self.syntax {
            ToolSyntax::Hermes => "\", \"arguments\": ",
            ToolSyntax::Llama3Json => "\", \"parameters\": ",
        };
        match self.frame {
            Frame::Tagged => ("\n{\"name\": \"", key),
            Frame::Bare => ("{\"name\": \"", key),
        }
    }

    /// The head read so far is no call in the template's shape (only
    /// unconstrained text can get here): under auto, a bare one may still
    /// be a call object (decided at the end); otherwise it is content.
    fn leave_head(&mut self, out: &mut Vec<Piece>) {
        let bare = self.frame == Frame::Bare;
        self.frame = frame_of(self.syntax);
        if bare && self.whole.is_some() {
            self.state = State::Whole;
            return;
        }
        self.state = State::Text;
        let t = std::mem::take(&mut self.buf);
        out.push(Piece::Text(if bare {
            t
        } else {
            format!("{HERMES_OPEN}{t}")
        }));
    }

    /// Reads more of the reply.
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        loop {
            let before = (self.state, self.buf.len());
            self.step(&mut out);
            if (self.state, self.buf.len()) == before {
                return out;
            }
        }
    }

    fn step(&mut self, out: &mut Vec<Piece>) {
        match self.state {
            State::Start => {
                if let Some(c) = self.buf.chars().next() {
                    self.state = if c == '{' {
                        self.frame = Frame::Bare;
                        State::Head
                    } else if self.whole.is_some() && whole::could_be(&self.buf) {
                        State::Whole
                    } else {
                        State::Text
                    };
                }
            }
            State::Whole => {
                if !whole::could_be(&self.buf) {
                    // What was held is content; the opener may still come.
                    self.state = State::Text;
                }
            }
            State::Text => {
                if self.syntax == ToolSyntax::Llama3Json {
                    if !self.buf.is_empty() {
                        out.push(Piece::Text(std::mem::take(&mut self.buf)));
                    }
                    return;
                }
                if let Some(at) = self.buf.find(HERMES_OPEN) {
                    if at > 0 {
                        out.push(Piece::Text(self.buf[..at].to_string()));
                    }
                    self.buf.drain(..at + HERMES_OPEN.len());
                    self.state = State::Head;
                } else {
                    let keep = held(&self.buf, HERMES_OPEN);
                    let n = self.buf.len() - keep;
                    if n > 0 {
                        out.push(Piece::Text(self.buf.drain(..n).collect()));
                    }
                }
            }
            State::Head => {
                let (open, key) = self.head();
                let Some(rest) = self.buf.strip_prefix(open) else {
                    if !open.starts_with(self.buf.as_str()) {
                        self.leave_head(out);
                    }
                    return;
                };
                if let Some(q) = rest.find('"') {
                    if rest[q..].starts_with(key) {
                        let name = rest[..q].to_string();
                        let skip = open.len() + q + key.len();
                        self.buf.drain(..skip);
                        out.push(Piece::Start {
                            index: self.calls,
                            name,
                        });
                        self.calls += 1;
                        self.state = State::Args;
                    } else if !key.starts_with(&rest[q..]) {
                        self.leave_head(out);
                    }
                }
            }
            State::Args => {
                let index = self.calls - 1;
                match self.frame {
                    Frame::Tagged => {
                        if let Some(at) = self.buf.find(HERMES_CLOSE) {
                            if at > 0 {
                                out.push(Piece::Args {
                                    index,
                                    text: self.buf[..at].to_string(),
                                });
                            }
                            self.buf.drain(..at + HERMES_CLOSE.len());
                            out.push(Piece::End { index });
                            self.state = State::Between;
                        } else {
                            let keep = held(&self.buf, HERMES_CLOSE);
                            let n = self.buf.len() - keep;
                            if n > 0 {
                                out.push(Piece::Args {
                                    index,
                                    text: self.buf.drain(..n).collect(),
                                });
                            }
                        }
                    }
                    Frame::Bare => {
                        // The call's closing brace is the reply's last
                        // byte: hold one back.
                        let keep = usize::from(self.buf.ends_with('}'));
                        let n = self.buf.len() - keep;
                        if n > 0 {
                            out.push(Piece::Args {
                                index,
                                text: self.buf.drain(..n).collect(),
                            });
                        }
                    }
                }
            }
            State::Between => {
                let next = "\n<tool_call>";
                if let Some(rest) = self.buf.strip_prefix(next) {
                    let rest = rest.to_string();
                    self.buf = rest;
                    self.state = State::Head;
                } else if !next.starts_with(self.buf.as_str()) {
                    // Text after the calls (the grammar allows none).
                    self.state = State::Text;
                }
            }
        }
    }

    /// The end of the reply: what was held back.
    pub fn finish(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.buf);
        match self.state {
            State::Start | State::Text => {
                if !rest.is_empty() {
                    out.push(Piece::Text(rest));
                }
            }
            State::Whole => match self.whole.as_ref().and_then(|w| w.read(&rest)) {
                Some((name, text)) => {
                    let index = self.calls;
                    self.calls += 1;
                    out.push(Piece::Start { index, name });
                    out.push(Piece::Args { index, text });
                    out.push(Piece::End { index });
                }
                None if rest.is_empty() => {}
                None => out.push(Piece::Text(rest)),
            },
            State::Head => {}
            State::Args => {
                let index = self.calls - 1;
                let complete = self.frame == Frame::Bare && rest == "}";
                if !complete && !rest.is_empty() {
                    out.push(Piece::Args { index, text: rest });
                }
                if complete {
                    out.push(Piece::End { index });
                }
            }
            State::Between => {}
        }
        self.state = State::Text;
        self.frame = frame_of(self.syntax);
        out
    }
}

/// A call read from a whole reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub name: String,
    pub arguments: String,
    /// Whether it ended (not cut by `max_tokens`).
    pub complete: bool,
}

/// A whole reply read at once: its content and its calls.
#[cfg(test)]
pub fn read_all(syntax: ToolSyntax, text: &str) -> (String, Vec<Call>) {
    read_with(CallParser::new(syntax), text)
}

/// A whole reply read by `p`: its content and its calls.
pub fn read_with(mut p: CallParser, text: &str) -> (String, Vec<Call>) {
    let mut pieces = p.push(text);
    pieces.extend(p.finish());
    let mut content = String::new();
    let mut calls: Vec<Call> = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => content.push_str(&t),
            Piece::Start { name, .. } => calls.push(Call {
                name,
                arguments: String::new(),
                complete: false,
            }),
            Piece::Args { index, text } => {
                if let Some(c) = calls.get_mut(index) {
                    c.arguments.push_str(&text);
                }
            }
            Piece::End { index } => {
                if let Some(c) = calls.get_mut(index) {
                    c.complete = true;
                }
            }
        }
    }
    (content, calls)
}

/// The id of call `index` of a reply whose ids start from `base`.
pub fn call_id(base: u128, index: usize) -> String {
    format!("call_{:024x}", (base >> 32).wrapping_add(index as u128))
}

/// A fresh base for a reply's call ids.
pub fn new_base() -> u128 {
    rand::random()
}

/// The OpenAI `tool_calls` of complete calls.
pub fn calls_json(base: u128, calls: &[Call]) -> Vec<Value> {
    calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.complete)
        .map(|(i, c)| {
            json!({"id": call_id(base, i), "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect()
}

/// The template's view of complete calls (arguments as JSON objects).
pub fn template_calls(base: u128, calls: &[Call]) -> Vec<fak_tokenizer::ToolCall> {
    calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.complete)
        .map(|(i, c)| fak_tokenizer::ToolCall {
            id: call_id(base, i),
            kind: "function".into(),
            function: fak_tokenizer::FunctionCall {
                name: c.name.clone(),
                arguments: serde_json::from_str(&c.arguments)
                    .unwrap_or_else(|_| Value::String(c.arguments.clone())),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces_of(syntax: ToolSyntax, parts: &[&str]) -> (String, Vec<Call>) {
        pieces_with(CallParser::new(syntax), parts)
    }

    fn pieces_with(mut p: CallParser, parts: &[&str]) -> (String, Vec<Call>) {
        // Streamed in the given pieces, reassembled.
        let mut all = Vec::new();
        for s in parts {
            all.extend(p.push(s));
        }
        all.extend(p.finish());
        let mut content = String::new();
        let mut calls: Vec<Call> = Vec::new();
        for x in all {
            match x {
                Piece::Text(t) => content.push_str(&t),
                Piece::Start { index, name } => {
                    assert_eq!(index, calls.len());
                    calls.push(Call {
                        name,
                        arguments: String::new(),
                        complete: false,
                    })
                }
                Piece::Args { index, text } => calls[index].arguments.push_str(&text),
                Piece::End { index } => calls[index].complete = true,
            }
        }
        (content, calls)
    }

    #[test]
    fn hermes_calls_are_read_whole_and_streamed_byte_by_byte() {
        let text = "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": {\"a\": 1}}}\n</tool_call>\n<tool_call>\n{\"name\": \"t2\", \"arguments\": {}}\n</tool_call>";
        let (content, calls) = read_all(ToolSyntax::Hermes, text);
        assert_eq!(content, "Let me check.");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(
            calls[0].arguments,
            "{\"city\": \"Paris\", \"n\": {\"a\": 1}}"
        );
        assert!(calls[0].complete && calls[1].complete);
        assert_eq!(calls[1].arguments, "{}");
        let bytes: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(pieces_of(ToolSyntax::Hermes, &refs), (content, calls));
    }

    #[test]
    fn hermes_bare_calls_are_calls() {
        let text = "{\"name\": \"f\", \"arguments\": {\"x\": 1}}";
        let (c, calls) = read_all(ToolSyntax::Hermes, text);
        assert_eq!(c, "");
        assert_eq!(calls[0].name, "f");
        assert_eq!(calls[0].arguments, "{\"x\": 1}");
        assert!(calls[0].complete);
    }

    #[test]
    fn hermes_text_and_cut_calls() {
        let (c, calls) = read_all(ToolSyntax::Hermes, "Just text with <tool and more.");
        assert_eq!(c, "Just text with <tool and more.");
        assert!(calls.is_empty());
        let (c, calls) = read_all(
            ToolSyntax::Hermes,
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": ",
        );
        assert_eq!(c, "");
        assert_eq!(calls.len(), 1);
        assert!(!calls[0].complete);
        assert!(calls_json(1, &calls).is_empty());
    }

    #[test]
    fn an_opener_without_a_call_stays_in_the_content() {
        // Regression: a head whose key was not the call's dropped the
        // `<tool_call>` it had read from the content.
        let text = "<tool_call>\n{\"name\": \"f\", \"oops\": 1}";
        assert_eq!(
            read_all(ToolSyntax::Hermes, text),
            (text.to_string(), vec![])
        );
    }

    #[test]
    fn llama_calls_and_text() {
        let text = "{\"name\": \"f\", \"parameters\": {\"x\": {\"y\": 2}}}";
        let (c, calls) = read_all(ToolSyntax::Llama3Json, text);
        assert_eq!(c, "");
        assert_eq!(calls[0].arguments, "{\"x\": {\"y\": 2}}");
        assert!(calls[0].complete);
        let bytes: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(pieces_of(ToolSyntax::Llama3Json, &refs), (c, calls));
        let (c, calls) = read_all(ToolSyntax::Llama3Json, "No {call} here}");
        assert_eq!(c, "No {call} here}");
        assert!(calls.is_empty());
    }

    fn whole_call() -> Option<Arc<WholeCall>> {
        let tools = [super::super::Tool {
            name: "get_weather".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"], "additionalProperties": false}),
        }];
        Some(Arc::new(WholeCall::new(ToolSyntax::Hermes, &tools)))
    }

    /// Every split of `text` into characters, streamed, gives what the
    /// whole reply gives.
    fn streamed_and_whole(text: &str) -> (String, Vec<Call>) {
        let whole = read_with(
            CallParser::new(ToolSyntax::Hermes).with_whole(whole_call()),
            text,
        );
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        let p = CallParser::new(ToolSyntax::Hermes).with_whole(whole_call());
        assert_eq!(pieces_with(p, &refs), whole, "{text:?}");
        whole
    }

    #[test]
    fn auto_reads_a_reply_that_is_one_fenced_or_bare_object() {
        let obj = "{\n  \"name\": \"get_weather\",\n  \"arguments\": {\"city\": \"Lima\"}\n}";
        for text in [
            format!("```json\n{obj}\n```"),
            format!("\n{obj}\n"),
            obj.to_string(),
        ] {
            let (content, calls) = streamed_and_whole(&text);
            assert_eq!(content, "", "{text:?}");
            assert_eq!(calls.len(), 1);
            assert_eq!(calls[0].name, "get_weather");
            assert_eq!(calls[0].arguments, "{\"city\": \"Lima\"}");
            assert!(calls[0].complete);
            // Without the auto reading it stays content.
            let (c, calls) = read_all(ToolSyntax::Hermes, &text);
            assert!(calls.is_empty() && c == text, "{text:?}");
        }
        // Not one call object: content, exactly as generated.
        for text in [
            format!("Here it is:\n```json\n{obj}\n```"),
            format!("```json\n{obj}\n```\nDone."),
            format!("{obj}\n{obj}"),
            "```json\n{\"name\": \"get_news\", \"arguments\": {}}\n```".to_string(),
            "```json\n{\"name\": \"get_weather\", \"arguments\": {}}\n```".to_string(),
            "```python\nprint(1)\n```".to_string(),
            " Plain text.".to_string(),
        ] {
            let (content, calls) = streamed_and_whole(&text);
            assert!(calls.is_empty(), "{text:?}");
            assert_eq!(content, text);
        }
        // A tagged call after a fence opening is still read as tagged.
        let text = "```\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
        let (content, calls) = streamed_and_whole(text);
        assert_eq!(content, "```\n");
        assert_eq!(calls[0].arguments, "{\"city\": \"Oslo\"}");
    }

    #[test]
    fn auto_streams_text_once_it_cannot_be_an_object() {
        let mut p = CallParser::new(ToolSyntax::Hermes).with_whole(whole_call());
        // Held while it may still be a fenced object...
        assert!(p.push("  ``").is_empty());
        assert!(p.push("`json\n").is_empty());
        // ...and released once it cannot.
        assert_eq!(p.push("Sure"), vec![Piece::Text("  ```json\nSure".into())]);
        assert_eq!(p.push(", more."), vec![Piece::Text(", more.".into())]);
        // Text that cannot open an object streams from the first byte.
        let mut p = CallParser::new(ToolSyntax::Hermes).with_whole(whole_call());
        assert_eq!(p.push("Hi"), vec![Piece::Text("Hi".into())]);
    }
}
