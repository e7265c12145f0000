//! What the end-to-end tests of `fak serve` share: the real binary on an
//! ephemeral port under a watchdog, and a hand-written HTTP/1.1 client
//! (plain, chunked and server-sent-event bodies).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../models/smollm2-135m-instruct-q8_0.gguf"
);
pub const NAME: &str = "smollm2-135m-instruct-q8_0";

// ---------------------------------------------------------------- server

/// `fak serve` under a small sh watchdog that SIGKILLs it when this test
/// process closes the watchdog's stdin: on drop, and also when the process
/// exits without dropping (the shared server lives in a static) or dies.
/// It prints the server's pid on stdout; its exit status is the server's.
pub const WATCHDOG: &str = r#"exec 3<&0
"$0" "$@" </dev/null >/dev/null &
p=$!
echo "$p"
( read _ <&3; kill -9 $p 2>/dev/null ) &
w=$!
wait $p
s=$?
kill $w 2>/dev/null
exit $s"#;

pub struct Server {
    pub child: Child,
    pub port: u16,
    pub pid: u32,
    pub log: Arc<Mutex<Vec<String>>>,
}

/// Qwen2.5-Coder 0.5B: its template has tools (Hermes `<tool_call>`).
pub const QWEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
);

impl Server {
    pub fn start(flags: &[&str]) -> Server {
        Server::start_model(MODEL, flags)
    }

    pub fn start_model(model: &str, flags: &[&str]) -> Server {
        assert!(
            std::path::Path::new(model).exists(),
            "{model} is missing: run scripts/fetch-models.sh"
        );
        let mut child = Command::new("sh")
            .args(["-c", WATCHDOG, env!("CARGO_BIN_EXE_fak")])
            .args(["serve", "--model", model, "--port", "0", "--threads", "2"])
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start fak serve");
        let mut pid = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut pid)
            .expect("the watchdog's pid line");
        let pid: u32 = pid.trim().parse().expect("server pid");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let l = log.clone();
        thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let port = rest
                        .split(|c: char| c.is_whitespace())
                        .next()
                        .and_then(|a| a.rsplit(':').next())
                        .and_then(|p| p.parse::<u16>().ok());
                    if let Some(p) = port {
                        if let Some(tx) = tx.take() {
                            let _ = tx.send(p);
                        }
                    }
                }
                l.lock().unwrap().push(line);
            }
        });
        let port = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(p) => p,
            Err(_) => {
                drop(child.stdin.take());
                let _ = child.wait();
                panic!(
                    "fak serve printed no address; stderr: {:?}",
                    log.lock().unwrap()
                );
            }
        };
        let s = Server {
            child,
            port,
            pid,
            log,
        };
        let t = Instant::now();
        loop {
            if let Ok(r) = s.try_get("/health", &[]) {
                if r.status == 200 {
                    break;
                }
                assert_eq!(r.status, 503, "/health while loading: {}", r.text());
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "not healthy in 60 s; stderr: {:?}",
                s.log.lock().unwrap()
            );
            thread::sleep(Duration::from_millis(50));
        }
        s
    }

    /// The server's own pid (not the watchdog's).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn connect(&self) -> std::io::Result<TcpStream> {
        let s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(180)))?;
        s.set_write_timeout(Some(Duration::from_secs(60)))?;
        Ok(s)
    }

    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<Resp> {
        let mut s = self.connect()?;
        write_request(&mut s, method, path, headers, body)?;
        read_response(s)
    }

    pub fn try_get(&self, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Resp> {
        self.try_request("GET", path, headers, b"")
    }

    pub fn get(&self, path: &str) -> Resp {
        self.try_get(path, &[]).expect("GET")
    }

    pub fn post_raw(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        self.try_request("POST", path, headers, body)
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    pub fn post(&self, path: &str, body: &Value) -> Resp {
        self.post_raw(path, &[], body.to_string().as_bytes())
    }

    pub fn post_key(&self, path: &str, key: &str, body: &Value) -> Resp {
        let auth = format!("Bearer {key}");
        self.post_raw(
            path,
            &[("Authorization", auth.as_str())],
            body.to_string().as_bytes(),
        )
    }

    /// Opens a streaming request and returns its SSE reader after the head.
    pub fn stream(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> Sse {
        let mut s = self.connect().expect("connect");
        write_request(&mut s, "POST", path, headers, body.to_string().as_bytes()).expect("send");
        let mut r = BufReader::new(s);
        let (status, hdrs) = read_head(&mut r).expect("head");
        assert_eq!(status, 200, "stream status");
        let ct = header(&hdrs, "content-type").unwrap_or_default();
        assert!(ct.starts_with("text/event-stream"), "content-type {ct}");
        Sse {
            body: BodyReader::new(r, &hdrs),
            buf: Vec::new(),
        }
    }

    pub fn metrics(&self) -> Metrics {
        let r = self.get("/metrics");
        assert_eq!(r.status, 200);
        Metrics(r.text())
    }

    pub fn assert_healthy(&self) {
        let r = self.get("/health");
        assert_eq!(r.status, 200, "/health: {}", r.text());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // EOF on the watchdog's stdin: it kills the server, then exits.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------ http

pub fn write_request(
    s: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut msg = head.into_bytes();
    msg.extend_from_slice(body);
    s.write_all(&msg)?;
    s.flush()
}

pub type Headers = Vec<(String, String)>;

pub fn header(h: &Headers, name: &str) -> Option<String> {
    h.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.clone())
}

pub fn read_head(r: &mut BufReader<TcpStream>) -> std::io::Result<(u16, Headers)> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed before a response",
        ));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        r.read_line(&mut l)?;
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok((status, headers))
}

/// A response body: Content-Length, chunked, or up to EOF.
pub struct BodyReader {
    pub r: BufReader<TcpStream>,
    pub chunked: bool,
    /// Bytes left of the body (Content-Length) or of the current chunk.
    pub left: Option<usize>,
    pub done: bool,
}

impl BodyReader {
    pub fn new(r: BufReader<TcpStream>, h: &Headers) -> BodyReader {
        let chunked =
            header(h, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let left = if chunked {
            Some(0)
        } else {
            header(h, "content-length").and_then(|v| v.parse().ok())
        };
        BodyReader {
            r,
            chunked,
            left,
            done: false,
        }
    }

    /// The next piece of the body; `None` at its end.
    pub fn next(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        if self.chunked {
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "EOF inside a chunked body",
                ));
            }
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| std::io::Error::other(format!("bad chunk size {line:?}")))?;
            let mut data = vec![0; size];
            self.r.read_exact(&mut data)?;
            let mut crlf = [0; 2];
            self.r.read_exact(&mut crlf)?;
            if size == 0 {
                self.done = true;
                return Ok(None);
            }
            return Ok(Some(data));
        }
        match self.left {
            Some(0) => {
                self.done = true;
                Ok(None)
            }
            Some(n) => {
                let mut data = vec![0; n];
                self.r.read_exact(&mut data)?;
                self.left = Some(0);
                Ok(Some(data))
            }
            None => {
                let mut data = Vec::new();
                self.r.read_to_end(&mut data)?;
                self.done = true;
                Ok(if data.is_empty() { None } else { Some(data) })
            }
        }
    }
}

pub struct Resp {
    pub status: u16,
    pub headers: Headers,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        header(&self.headers, name)
    }

    pub fn ok(self) -> Value {
        assert_eq!(self.status, 200, "{}", self.text());
        self.json()
    }
}

pub fn read_response(s: TcpStream) -> std::io::Result<Resp> {
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r)?;
    let mut b = BodyReader::new(r, &headers);
    let mut body = Vec::new();
    while let Some(piece) = b.next()? {
        body.extend(piece);
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

/// Server-sent events of one response.
pub struct Sse {
    pub body: BodyReader,
    pub buf: Vec<u8>,
}

impl Sse {
    /// The `data:` payload of the next event; `None` at the end of the body.
    pub fn event(&mut self) -> Option<String> {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let ev: Vec<u8> = self.buf.drain(..at + 2).collect();
                let ev = String::from_utf8(ev).expect("UTF-8 event");
                let data: Vec<&str> = ev
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue;
                }
                return Some(data.join("\n"));
            }
            match self.body.next().expect("read stream") {
                Some(p) => self.buf.extend(p),
                None => {
                    assert!(
                        self.buf.iter().all(u8::is_ascii_whitespace),
                        "stream ended inside an event: {:?}",
                        String::from_utf8_lossy(&self.buf)
                    );
                    return None;
                }
            }
        }
    }

    /// Every event up to the end: JSON chunks and whether `[DONE]` ended it.
    pub fn rest(&mut self) -> (Vec<Value>, bool) {
        let mut chunks = Vec::new();
        while let Some(d) = self.event() {
            if d == "[DONE]" {
                assert!(self.event().is_none(), "events after [DONE]");
                return (chunks, true);
            }
            chunks.push(serde_json::from_str(&d).unwrap_or_else(|e| panic!("chunk {d}: {e}")));
        }
        (chunks, false)
    }
}

// --------------------------------------------------------------- metrics

pub struct Metrics(pub String);

impl Metrics {
    /// The value of the first sample named exactly `name` (labels allowed).
    pub fn value(&self, name: &str) -> f64 {
        self.try_value(name)
            .unwrap_or_else(|| panic!("no sample {name} in\n{}", self.0))
    }

    pub fn try_value(&self, name: &str) -> Option<f64> {
        self.0.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?;
            let rest = if rest.starts_with('{') {
                &rest[rest.find('}')? + 1..]
            } else {
                rest
            };
            if !rest.starts_with(' ') {
                return None;
            }
            rest.split_whitespace().next()?.parse().ok()
        })
    }

    pub fn line(&self, prefix: &str) -> Option<&str> {
        self.0.lines().find(|l| l.starts_with(prefix))
    }
}

/// Waits until nothing runs and KV usage is back to `baseline_kv`. A probe
/// request goes first: the gauges are set after each engine step, so
/// during a long prefill step they still show the state before it.
pub fn wait_idle(s: &Server, baseline_kv: f64, within: Duration) -> Metrics {
    let t = Instant::now();
    s.post(
        "/v1/completions",
        &json!({"prompt": "Hi", "max_tokens": 1, "temperature": 0}),
    )
    .ok();
    loop {
        let m = s.metrics();
        let running = m.value("vllm:num_requests_running");
        let kv = m.value("vllm:kv_cache_usage_perc");
        let waiting = m.value("vllm:num_requests_waiting");
        if running == 0.0 && waiting == 0.0 && (kv - baseline_kv).abs() < 1e-9 {
            return m;
        }
        assert!(
            t.elapsed() < within,
            "not idle within {within:?}: running {running}, waiting {waiting}, kv usage {kv} (baseline {baseline_kv})"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

// --------------------------------------------------------------- helpers

pub fn chat_body(content: &str, max_tokens: u32) -> Value {
    json!({
        "model": NAME,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
    })
}

pub fn chat_text(v: &Value) -> String {
    v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no message content in {v}"))
        .to_string()
}

pub fn completion_text(v: &Value) -> String {
    v["choices"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {v}"))
        .to_string()
}

pub fn cached(v: &Value) -> u64 {
    v["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("no usage.prompt_tokens_details.cached_tokens in {v}"))
}

/// Asserts an OpenAI-shaped error with `status`; returns the error object.
pub fn assert_error(r: &Resp, status: u16, what: &str) -> Value {
    assert_eq!(r.status, status, "{what}: {}", r.text());
    let v = r.json();
    let e = &v["error"];
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: error.message: {v}"
    );
    assert!(e["type"].is_string(), "{what}: error.type: {v}");
    assert!(
        e.as_object().is_some_and(|o| o.contains_key("code")),
        "{what}: error.code: {v}"
    );
    e.clone()
}

pub fn stream_text(chunks: &[Value], kind_chat: bool) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .filter_map(|c| {
            if kind_chat {
                c["delta"]["content"].as_str()
            } else {
                c["text"].as_str()
            }
        })
        .collect()
}
