//! Structured outputs: OpenAI's `response_format` turned into an engine
//! [`Constraint`].
//!
//! ```text
//!   {"type": "text"}                                  free text
//!   {"type": "json_object"}                           any JSON object
//!   {"type": "json_schema", "json_schema":
//!      {"name", "schema", "strict"}}                  JSON valid under `schema`
//!   {"type": "regex", "regex": "..."}                 fak: the whole output matches
//!   {"type": "lark", "lark": "..."}                   fak: llguidance's Lark dialect
//! ```
//!
//! The engine compiles the constraint when the request is added; one that
//! does not compile is a 400 with `param: response_format`.

use serde_json::Value;

use fak_engine::Constraint;

use crate::error::ApiError;

const PARAM: &str = "response_format";

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_param(PARAM, message)
}

/// The constraint of a `response_format` value (`None`: free text).
pub fn response_format(v: Option<&Value>) -> Result<Option<Constraint>, ApiError> {
    let Some(v) = v else { return Ok(None) };
    if v.is_null() {
        return Ok(None);
    }
    let Some(obj) = v.as_object() else {
        return Err(bad("response_format must be an object with a \"type\""));
    };
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
    let text_field = |name: &str| -> Result<String, ApiError> {
        obj.get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                bad(format!(
                    "response_format {kind} needs \"{name}\" as a string"
                ))
            })
    };
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some(Constraint::JsonObject)),
        "json_schema" => {
            let Some(js) = obj.get("json_schema").and_then(Value::as_object) else {
                return Err(bad(
                    "response_format json_schema needs \"json_schema\": {\"name\", \"schema\"}",
                ));
            };
            match js.get("name") {
                Some(Value::String(n)) if !n.is_empty() => {}
                _ => return Err(bad("json_schema.name must be a non-empty string")),
            }
            match js.get("schema") {
                None => Ok(Some(Constraint::JsonSchema("{}".into()))),
                Some(s @ (Value::Object(_) | Value::Bool(_))) => {
                    Ok(Some(Constraint::JsonSchema(s.to_string())))
                }
                Some(_) => Err(bad("json_schema.schema must be a JSON schema (an object)")),
            }
        }
        "regex" => Ok(Some(Constraint::Regex(text_field("regex")?))),
        "lark" => Ok(Some(Constraint::Lark(text_field("lark")?))),
        other => Err(bad(format!(
            "response_format type '{other}' is not one of text, json_object, json_schema, regex, lark"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn response_formats_map_to_constraints() {
        assert_eq!(response_format(None).unwrap(), None);
        assert_eq!(
            response_format(Some(&json!({"type": "text"}))).unwrap(),
            None
        );
        assert_eq!(
            response_format(Some(&json!({"type": "json_object"}))).unwrap(),
            Some(Constraint::JsonObject)
        );
        let s = json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer"}}});
        assert_eq!(
            response_format(Some(&s)).unwrap(),
            Some(Constraint::JsonSchema("{\"type\":\"integer\"}".into()))
        );
        assert_eq!(
            response_format(Some(&json!({"type": "regex", "regex": "a+"}))).unwrap(),
            Some(Constraint::Regex("a+".into()))
        );
        for bad in [
            json!("json"),
            json!({"type": "yaml"}),
            json!({"type": "json_schema"}),
            json!({"type": "json_schema", "json_schema": {"schema": {}}}),
            json!({"type": "json_schema", "json_schema": {"name": "x", "schema": 3}}),
            json!({"type": "regex"}),
        ] {
            let e = response_format(Some(&bad)).unwrap_err();
            assert_eq!(e.body()["error"]["param"], "response_format", "{bad}");
        }
    }
}
