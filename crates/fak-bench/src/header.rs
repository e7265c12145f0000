//! The header every report starts with: which schema, engine, machine,
//! thread count and model file a run measured.
//!
//! [`RunHeader`] is `#[serde(flatten)]`ed first into each report, so its
//! keys lead the report in this order:
//!
//! ```text
//! schema, engine, engine_version, cpu, isa, threads, model, model_sha256
//! ```
//!
//! A key that a report's schema never had (the probes run no model; the
//! evict report has no engine_version) is `None` and not written, so every
//! `/1` schema keeps exactly its keys.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use fak_model::Model;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The leading keys of every report (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunHeader {
    /// Schema tag of the report, e.g. `fak-bench-single/1`.
    pub schema: &'static str,
    /// `fak`, or absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<String>,
    /// The CPU's `model name` (see [`cpu_model`]).
    pub cpu: String,
    /// The kernel path the run used ([`fak_kernels::isa()`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isa: Option<String>,
    pub threads: usize,
    /// The model file's name ([`model_file_name`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Hex SHA-256 of the model file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_sha256: Option<String>,
}

/// This crate's version: the workspace's, which the `fak` binary shares.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

impl RunHeader {
    /// The header of a run of `model` (loaded from `path`): every key set.
    ///
    /// # Errors
    ///
    /// Reading `path` for its SHA-256.
    pub fn model_run(schema: &'static str, path: &Path, model: &Model) -> Result<RunHeader> {
        Ok(RunHeader {
            schema,
            engine: Some("fak"),
            engine_version: Some(ENGINE_VERSION.to_string()),
            cpu: cpu_model(),
            isa: Some(fak_kernels::isa().name().to_string()),
            threads: model.threads(),
            model: Some(model_file_name(path)),
            model_sha256: Some(sha256_file(path)?),
        })
    }

    /// The header of a machine probe on `threads` threads: schema, cpu and
    /// threads only.
    pub fn probe(schema: &'static str, threads: usize) -> RunHeader {
        RunHeader {
            schema,
            engine: None,
            engine_version: None,
            cpu: cpu_model(),
            isa: None,
            threads,
            model: None,
            model_sha256: None,
        }
    }
}

/// The model file's name as the reports record it.
pub fn model_file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The first `model name` line of /proc/cpuinfo, or "unknown".
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| parse_cpu_model(&s))
        .unwrap_or_else(|| "unknown".to_string())
}

/// Extracts the `model name` value from /proc/cpuinfo text.
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    })
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex SHA-256 of a file, streamed in 1 MiB chunks.
///
/// # Errors
///
/// Opening or reading the file.
pub fn sha256_file(path: &Path) -> Result<String> {
    let io = |what| {
        move |source| Error::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    };
    let mut f = File::open(path).map_err(io("opening"))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io("reading"))?;
        if n == 0 {
            break;
        }
        h.update(buf.get(..n).unwrap_or_default());
    }
    Ok(hex(&h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_line_is_found() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\nflags\t: fpu\n";
        assert_eq!(parse_cpu_model(text).as_deref(), Some("AMD EPYC 9B14"));
        assert_eq!(parse_cpu_model("processor : 0\n"), None);
    }

    /// A probe's header writes only schema, cpu and threads, in that order.
    #[test]
    fn absent_keys_are_not_written() {
        let h = RunHeader::probe("x/1", 3);
        let v = serde_json::to_value(&h).expect("json");
        let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
        assert_eq!(keys.len(), 3);
        assert_eq!(v["threads"], 3);
        let text = serde_json::to_string(&h).expect("json");
        assert!(text.starts_with(r#"{"schema":"x/1","cpu":"#), "{text}");
        assert!(text.ends_with(r#""threads":3}"#), "{text}");
    }

    #[test]
    fn sha256_of_a_missing_file_is_an_error() {
        let e = sha256_file(Path::new("/nonexistent/fak-bench")).unwrap_err();
        assert_eq!(e.to_string(), "opening /nonexistent/fak-bench");
    }
}
