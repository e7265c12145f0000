//! What one chat-template render may spend: minijinja instructions and
//! output bytes. A template is untrusted input (it comes with the model
//! file), so every render runs inside both limits (see `chat`).

/// Instructions one render may execute (minijinja's fuel): real templates
/// spend tens per message (the test `real_templates_fit_the_limits`
/// renders 2,000 messages with SmolLM2's and Qwen2.5's), a hostile one is
/// stopped after a few seconds at most.
pub const TEMPLATE_FUEL: u64 = 20_000_000;

/// Bytes one render may write: far beyond any real prompt (a 128k-token
/// context is well under 1 MiB of text), small enough to hold in memory.
pub const TEMPLATE_MAX_OUTPUT: usize = 16 << 20;

/// A render's limit, named in `TokenizerError::TemplateLimit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateLimit {
    /// [`TEMPLATE_FUEL`] instructions.
    Fuel,
    /// [`TEMPLATE_MAX_OUTPUT`] bytes of output.
    Output,
}

impl std::fmt::Display for TemplateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateLimit::Fuel => write!(f, "fuel limit of {TEMPLATE_FUEL} instructions"),
            TemplateLimit::Output => write!(f, "output limit of {TEMPLATE_MAX_OUTPUT} bytes"),
        }
    }
}
