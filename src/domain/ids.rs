//! The public ids of the customer's side (an account, a key, a top-up, a dashboard
//! session) and the names of the providers customers sign in with: each its own type, so
//! one cannot be passed where another is meant. An id is made fresh here or taken as
//! given (a customer's, the processor's, a stored one): an unknown id is the store's
//! answer ("no such account"), not a parse error, as before.

use rand::RngExt;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `len` random base62 characters (ids, and the random part of an API key).
pub(crate) fn random_base62(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(BASE62[rng.random_range(0..BASE62.len())]))
        .collect()
}

/// A public id: `new` takes any text, `fresh` (with a prefix and a count of random
/// base62 characters) draws one; `as_str` and `Display` are its text, which the drivers
/// store (`db::sqlite::decode`, `db::pg::decode`).
macro_rules! public_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The id of this text, as given (unchecked: the store knows it or not).
            pub fn new(text: impl Into<String>) -> $name {
                $name(text.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }
    };
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $random:literal) => {
        public_id!($(#[$meta])* $name);

        impl $name {
            /// A new id: `
            #[doc = $prefix]
            /// ` and random base62 characters.
            pub fn fresh() -> $name {
                $name(format!("{}{}", $prefix, random_base62($random)))
            }
        }
    };
}

public_id!(
    /// An account's public id: `acct_` + 12 base62 characters.
    AccountId,
    "acct_",
    12
);

public_id!(
    /// An API key's public id (never the key): `key_` + 12 base62 characters.
    KeyId,
    "key_",
    12
);

public_id!(
    /// A dashboard session's public id, by which the customer lists and ends it (never
    /// its cookie): `ses_` + 12 characters (`domain::dashboard::new_session_id`).
    SessionId
);

public_id!(
    /// The name of an OpenID Connect provider customers sign in with (`postal provider
    /// add <name>`), in its sign-in URL (`/account/signin/{name}`).
    ProviderName
);

public_id!(
    /// A top-up's public id: `top_` + 16 base62 characters (also the idempotency key of
    /// its Checkout Session's creation).
    TopupId,
    "top_",
    16
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_topup_id_is_top_and_16_base62_characters() {
        let id = TopupId::fresh();
        let random = id.as_str().strip_prefix("top_").unwrap();
        assert_eq!(random.len(), 16);
        assert!(random.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(id, TopupId::fresh());
    }

    #[test]
    fn an_id_is_its_text_as_given() {
        let id = TopupId::new("top_given");
        assert_eq!(id.to_string(), "top_given");
        assert_eq!(String::from(id.clone()), "top_given");
        assert!(id == *"top_given");
    }
}
