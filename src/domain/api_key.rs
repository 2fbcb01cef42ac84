//! API keys (the secret a caller presents), their SHA-256 hash, and the public ids of
//! keys and accounts.
//!
//! - A key is a prefix + 32 base62 characters drawn from the OS-seeded CSPRNG: 190 random
//!   bits. It is shown once, at creation; the database keeps only its SHA-256. The prefix
//!   names its kind: `sk_` a secret key (for servers), `pub_` a publishable one (for web
//!   pages, bound to origins); keys made before kinds existed start `pk_` and are secret
//!   keys forever. The server never reads the prefix: the kind is the key row's.
//! - A key id is `key_` + 12 base62 characters, an account id `acct_` + 12: drawn
//!   independently of the secret, so they reveal nothing of it (71 random bits, enough
//!   that a collision, which the database's UNIQUE constraint would refuse, never happens).

use sha2::{Digest, Sha256};

use crate::domain::ids::{KeyId, random_base62};
use crate::domain::origin::{Origin, OriginPattern};

/// The prefix of a new secret key.
pub const SECRET_PREFIX: &str = "sk_";
/// The prefix of a publishable key.
pub const PUBLISHABLE_PREFIX: &str = "pub_";
/// Base62 characters after the prefix: 32 x log2(62) = 190 bits.
pub const KEY_RANDOM_CHARS: usize = 32;

words! {
    /// What a key may do: a secret key everything, a publishable key the read operations a
    /// form needs, from its origins only (`domain::origin`), rate-limited per client IP.
    /// Its text is the one stored in `api_keys.kind` and shown by `key list`.
    pub enum KeyKind {
        Secret => "secret",
        Publishable => "publishable",
    }
}

impl KeyKind {
    /// The kind of a key with these rules (`None`: a secret key).
    pub fn of(publishable: Option<&Publishable>) -> KeyKind {
        match publishable {
            Some(_) => KeyKind::Publishable,
            None => KeyKind::Secret,
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            KeyKind::Secret => SECRET_PREFIX,
            KeyKind::Publishable => PUBLISHABLE_PREFIX,
        }
    }
}

/// Requests a minute per client IP of a publishable key unless `--per-ip-minute` says
/// otherwise.
pub const DEFAULT_PER_IP_MINUTE: u32 = 60;

/// What binds a publishable key: the origins whose pages may send it, its limit per
/// client IP and its budget. A secret key has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publishable {
    /// Never empty.
    pub origins: Vec<OriginPattern>,
    pub per_ip_minute: u32,
    pub budget: Budget,
}

/// A publishable key's total over every client IP (`--max-per-minute`, `--max-per-day`):
/// at most `per_minute` requests in a UTC minute and `per_day` in a UTC day, each at
/// least 1; `None` bounds nothing (the default). The per-IP limit bounds one visitor; a
/// botnet or an IPv6 range is many, and this is what bounds them all together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    pub per_minute: Option<u32>,
    pub per_day: Option<u32>,
}

impl Budget {
    pub const UNLIMITED: Budget = Budget {
        per_minute: None,
        per_day: None,
    };

    pub fn is_unlimited(&self) -> bool {
        *self == Budget::UNLIMITED
    }
}

impl Publishable {
    /// Whether a request with this `Origin` header may use the key.
    pub fn allows(&self, origin: Option<&str>) -> bool {
        origin
            .and_then(Origin::parse)
            .is_some_and(|origin| self.origins.iter().any(|p| p.matches(&origin)))
    }
}

/// A freshly generated key. Not `Debug`/`Display`, so it does not end up in logs
/// by accident: [`ApiKey::expose`] is the one way to read it.
pub struct ApiKey(String);

/// The SHA-256 of a key's text: what the database stores and looks up.
pub type KeyHash = [u8; 32];

impl ApiKey {
    pub fn generate(kind: KeyKind) -> ApiKey {
        ApiKey(format!(
            "{}{}",
            kind.prefix(),
            random_base62(KEY_RANDOM_CHARS)
        ))
    }

    /// The key's text, to show once to its owner.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> KeyHash {
        hash_presented_key(&self.0)
    }

    /// Its prefix and first 4 random characters (`sk_AbCd`): enough to tell an account's
    /// keys apart, 24 bits of its at least 190.
    pub fn hint(&self) -> String {
        let prefix = self.0.find('_').map_or(0, |i| i + 1);
        self.0.chars().take(prefix + 4).collect()
    }
}

/// The hash of whatever a caller sent as `apiKey`. Any text hashes: an unknown key is
/// simply a hash that no row holds (401).
pub fn hash_presented_key(presented: &str) -> KeyHash {
    Sha256::digest(presented.as_bytes()).into()
}

/// A fresh key for an account: its public id, its kind (publishable when it has
/// `publishable` rules) and its secret, to store (hashed) and show once.
pub fn fresh_key(publishable: Option<&Publishable>) -> (KeyId, KeyKind, ApiKey) {
    let kind = KeyKind::of(publishable);
    (KeyId::fresh(), kind, ApiKey::generate(kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_key_has_its_kind_prefix_and_32_base62_characters() {
        for (kind, prefix) in [
            (KeyKind::Secret, SECRET_PREFIX),
            (KeyKind::Publishable, PUBLISHABLE_PREFIX),
        ] {
            let key = ApiKey::generate(kind);
            let random = key.expose().strip_prefix(prefix).unwrap();
            assert_eq!(random.len(), KEY_RANDOM_CHARS);
            assert!(random.bytes().all(|b| b.is_ascii_alphanumeric()));
            assert_eq!(KeyKind::from_stored(kind.as_str()), Some(kind));
        }
        assert!(KEY_RANDOM_CHARS as f64 * 62_f64.log2() >= 128.0);
    }

    #[test]
    fn generated_keys_and_ids_do_not_repeat() {
        let keys: HashSet<String> = (0..10_000)
            .map(|_| ApiKey::generate(KeyKind::Secret).expose().to_owned())
            .collect();
        assert_eq!(keys.len(), 10_000);
        let ids: HashSet<KeyId> = (0..10_000).map(|_| KeyId::fresh()).collect();
        assert_eq!(ids.len(), 10_000);
    }

    #[test]
    fn the_hash_of_a_key_is_the_sha256_of_its_text() {
        assert_eq!(
            hex::encode(hash_presented_key("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let key = ApiKey::generate(KeyKind::Publishable);
        assert_eq!(key.hash(), hash_presented_key(key.expose()));
    }

    #[test]
    fn public_ids_have_their_prefixes() {
        let (key, account) = (KeyId::fresh(), crate::domain::ids::AccountId::fresh());
        assert!(key.as_str().starts_with("key_") && key.as_str().len() == 16);
        assert!(account.as_str().starts_with("acct_") && account.as_str().len() == 17);
    }
}
