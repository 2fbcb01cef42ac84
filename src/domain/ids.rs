//! The public ids of the customer's side (an account, a key, a top-up, a dashboard
//! session): each its own type, so one cannot be passed where another is meant. An id is
//! made fresh here or taken as given (a customer's, the processor's, a stored one): an
//! unknown id is the store's answer ("no such account"), not a parse error, as before.

use crate::domain::api_key::random_base62;

/// A public id: `new` takes any text, `fresh` draws one; `as_str` and `Display` are its
/// text, which the drivers store (`db::sqlite::decode`, `db::pg::decode`).
macro_rules! public_id {
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $random:literal) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The id of this text, as given (unchecked: the store knows it or not).
            pub fn new(text: impl Into<String>) -> $name {
                $name(text.into())
            }

            /// A new id: `
            #[doc = $prefix]
            /// ` and random base62 characters.
            pub fn fresh() -> $name {
                $name(format!("{}{}", $prefix, random_base62($random)))
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
}

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
