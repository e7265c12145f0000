//! `--state-dir`: sessions on disk, one file each, so a restarted server
//! continues them.
//!
//! ```text
//!   DIR/sess_<32 hex>.session:
//!     fak-session 1\n              magic and format version
//!     <sha256 hex of the rest>\n   checksum
//!     {"model", "owner", "id", "tokens", "messages", "lineage", ...}
//!   written to a .tmp file, synced, renamed: a reader never sees half a file
//! ```
//!
//! A file is refused (one log line, the others still load) when its magic,
//! version or checksum is wrong, when it was written for another model
//! (length and SHA-256 of the first MiB of the GGUF file), or when no
//! configured API key owns it. KV rows are not stored: a restored session
//! is recomputed at its next request, which gives the same rows.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Evicted, Owner, PublicId, Record, Segment, StoredMessage};

const MAGIC: &str = "fak-session";
const VERSION: u32 = 1;

/// Why a state file was refused.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a fak session file (bad magic line)")]
    Magic,
    #[error("format version {0}, this server reads version {VERSION}")]
    Version(String),
    #[error("truncated or corrupt: the checksum does not match")]
    Checksum,
    #[error("unreadable contents: {0}")]
    Json(#[from] serde_json::Error),
    #[error("written for another model ({0})")]
    Model(String),
    #[error("its API key is not configured on this server")]
    Owner,
    #[error("the file name does not match the session id {0}")]
    Name(PublicId),
}

/// One session as stored.
#[derive(Debug, Serialize, Deserialize)]
pub struct Stored {
    pub model: String,
    pub owner: String,
    pub id: PublicId,
    pub parent: Option<PublicId>,
    pub created: u64,
    pub last_used: u64,
    pub tokens: Vec<u32>,
    pub messages: Vec<StoredMessage>,
    pub lineage: Vec<Segment>,
    pub evicted: Vec<Evicted>,
    pub close: Option<(String, usize)>,
    pub appends: usize,
    /// The tools rendered into the conversation (files without: none).
    #[serde(default)]
    pub tools: Option<Vec<serde_json::Value>>,
}

/// The state directory of a server.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    model: String,
    /// Each owner's stored name (a hash of its API key).
    owners: Vec<(Owner, String)>,
}

/// The stored name of an API key (no key: `anonymous`).
fn owner_name(key: Option<&str>) -> String {
    match key {
        None => "anonymous".into(),
        Some(k) => {
            let d = Sha256::digest(format!("fak-session-owner\0{k}").as_bytes());
            d[..16].iter().map(|b| format!("{b:02x}")).collect()
        }
    }
}

/// The model's identity: file length and SHA-256 of its first MiB.
///
/// # Errors
///
/// The file cannot be read.
pub fn model_id(path: &Path) -> std::io::Result<String> {
    let f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let mut head = Vec::new();
    f.take(1 << 20).read_to_end(&mut head)?;
    let d = Sha256::digest(&head);
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{len}:{hex}"))
}

fn hex_sha(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Store {
    /// The store in `dir` (created if missing) for `model` and `keys`.
    ///
    /// # Errors
    ///
    /// The directory cannot be created or the model read.
    pub fn open(dir: &Path, model: &Path, keys: &[String]) -> std::io::Result<Store> {
        if dir.exists() && !dir.is_dir() {
            // `create_dir_all` would say "File exists", which reads as if
            // the directory were the problem.
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "exists and is not a directory",
            ));
        }
        std::fs::create_dir_all(dir)?;
        let owners = if keys.is_empty() {
            vec![(Owner(0), owner_name(None))]
        } else {
            keys.iter()
                .enumerate()
                .map(|(i, k)| (Owner(i as u64 + 1), owner_name(Some(k))))
                .collect()
        };
        Ok(Store {
            dir: dir.to_path_buf(),
            model: model_id(model)?,
            owners,
        })
    }

    fn path(&self, id: PublicId) -> PathBuf {
        self.dir.join(format!("{id}.session"))
    }

    /// Writes a session atomically.
    ///
    /// # Errors
    ///
    /// I/O errors.
    pub fn write(&self, id: PublicId, r: &Record, tokens: &[u32]) -> std::io::Result<()> {
        let owner = self
            .owners
            .iter()
            .find(|(o, _)| *o == r.owner)
            .map(|(_, n)| n.clone())
            .unwrap_or_default();
        let s = Stored {
            model: self.model.clone(),
            owner,
            id,
            parent: r.parent,
            created: r.created,
            last_used: r.last_used_unix,
            tokens: tokens.to_vec(),
            messages: r.messages.clone(),
            lineage: r.lineage.clone(),
            evicted: r.evicted.clone(),
            close: r.close.clone(),
            appends: r.appends,
            tools: r.tools.clone(),
        };
        let payload = serde_json::to_vec(&s).map_err(std::io::Error::other)?;
        let final_path = self.path(id);
        let tmp = final_path.with_extension("session.tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            write!(f, "{MAGIC} {VERSION}\n{}\n", hex_sha(&payload))?;
            f.write_all(&payload)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &final_path)
    }

    /// Deletes a session's file (a missing one is fine).
    pub fn remove(&self, id: PublicId) {
        let _ = std::fs::remove_file(self.path(id));
    }

    /// Reads one file.
    ///
    /// # Errors
    ///
    /// [`StateError`] saying why it is refused.
    pub fn read(&self, path: &Path) -> Result<(Stored, Owner), StateError> {
        let bytes = std::fs::read(path)?;
        let mut parts = bytes.splitn(3, |&b| b == b'\n');
        let head = parts.next().unwrap_or_default();
        let head = std::str::from_utf8(head).map_err(|_| StateError::Magic)?;
        let version = head
            .strip_prefix(MAGIC)
            .and_then(|v| v.strip_prefix(' '))
            .ok_or(StateError::Magic)?;
        if version != VERSION.to_string() {
            return Err(StateError::Version(version.to_string()));
        }
        let sum = parts.next().unwrap_or_default();
        let payload = parts.next().ok_or(StateError::Checksum)?;
        if hex_sha(payload).as_bytes() != sum {
            return Err(StateError::Checksum);
        }
        let s: Stored = serde_json::from_slice(payload)?;
        if s.model != self.model {
            return Err(StateError::Model(s.model));
        }
        let owner = self
            .owners
            .iter()
            .find(|(_, n)| *n == s.owner)
            .map(|(o, _)| *o)
            .ok_or(StateError::Owner)?;
        let expected = self.path(s.id);
        if expected.file_name() != path.file_name() {
            return Err(StateError::Name(s.id));
        }
        Ok((s, owner))
    }

    /// Every `*.session` file of the directory, in name order.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "session"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The model's identity as files record it.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// An owner's stored name (a hash of its API key).
    pub fn owner_name(&self, o: Owner) -> Option<&str> {
        self.owners
            .iter()
            .find(|(x, _)| *x == o)
            .map(|(_, n)| n.as_str())
    }

    /// The owner a stored name belongs to, if its key is configured.
    pub fn owner_named(&self, name: &str) -> Option<Owner> {
        self.owners.iter().find(|(_, n)| n == name).map(|(o, _)| *o)
    }
}

/// Writes `payload` to `path` under a `magic` line and its checksum,
/// atomically (a .tmp file, synced, renamed).
///
/// # Errors
///
/// I/O errors.
pub fn write_checked(path: &Path, magic: &str, payload: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        write!(f, "{magic}\n{}\n", hex_sha(payload))?;
        f.write_all(payload)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// The payload of a file [`write_checked`] wrote with `magic`.
///
/// # Errors
///
/// [`StateError`] when the magic line or the checksum is wrong.
pub fn read_checked(path: &Path, magic: &str) -> Result<Vec<u8>, StateError> {
    let bytes = std::fs::read(path)?;
    let mut parts = bytes.splitn(3, |&b| b == b'\n');
    if parts.next() != Some(magic.as_bytes()) {
        return Err(StateError::Magic);
    }
    let sum = parts.next().unwrap_or_default();
    let payload = parts.next().ok_or(StateError::Checksum)?;
    if hex_sha(payload).as_bytes() != sum {
        return Err(StateError::Checksum);
    }
    Ok(payload.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fak_engine::SessionId;

    fn store(dir: &Path, model: &Path) -> Store {
        Store::open(dir, model, &["k1".into()]).expect("open")
    }

    #[test]
    fn round_trip_and_refusals() {
        let dir = std::env::temp_dir().join(format!("fak-persist-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("dir");
        let model = dir.join("m.gguf");
        std::fs::write(&model, b"model bytes").expect("model");
        let st = store(&dir.join("state"), &model);
        let id = PublicId(0xabc);
        let r = Record::new(
            Owner(1),
            SessionId {
                slot: 0,
                generation: 0,
            },
            None,
        );
        st.write(id, &r, &[1, 2, 3]).expect("write");
        let files = st.files();
        assert_eq!(files.len(), 1);
        let (s, o) = st.read(&files[0]).expect("read");
        assert_eq!((s.tokens, o), (vec![1, 2, 3], Owner(1)));

        let good = std::fs::read(&files[0]).expect("bytes");
        let check = |bytes: &[u8], want: fn(&StateError) -> bool| {
            std::fs::write(&files[0], bytes).expect("write");
            let e = st.read(&files[0]).expect_err("refused");
            assert!(want(&e), "{e}");
        };
        check(&good[..good.len() - 3], |e| {
            matches!(e, StateError::Checksum)
        });
        let mut flipped = good.clone();
        let n = flipped.len() - 5;
        flipped[n] ^= 1;
        check(&flipped, |e| matches!(e, StateError::Checksum));
        check(&[b"fak-session 9".as_slice(), &good[13..]].concat(), |e| {
            matches!(e, StateError::Version(_))
        });
        check(b"hello", |e| matches!(e, StateError::Magic));
        // Another model, another key.
        std::fs::write(&files[0], &good).expect("write");
        std::fs::write(&model, b"other model").expect("model");
        let other = store(&dir.join("state"), &model);
        assert!(matches!(other.read(&files[0]), Err(StateError::Model(_))));
        std::fs::write(&model, b"model bytes").expect("model");
        let nokey = Store::open(&dir.join("state"), &model, &["k2".into()]).expect("open");
        assert!(matches!(nokey.read(&files[0]), Err(StateError::Owner)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A `--state-dir` that is a file is refused as not a directory (it
    /// said "File exists").
    #[test]
    fn a_file_is_not_a_state_dir() {
        let dir = std::env::temp_dir().join(format!("fak-persist-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (file, model) = (dir.join("state"), dir.join("m.gguf"));
        std::fs::write(&file, b"a file").expect("file");
        std::fs::write(&model, b"model bytes").expect("model");
        let Err(e) = Store::open(&file, &model, &[]) else {
            panic!("a file was taken as the state directory");
        };
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("not a directory"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
