//! Idempotent requests (docs/money.md, "Idempotent bulk requests"): the `Idempotency-Key`
//! a client sends, the fingerprint of the body it came with, and how long an answer is
//! kept for a retry.
//!
//! - **The key** is 1 to 255 visible ASCII characters (`!` to `~`: no space, no control,
//!   nothing outside ASCII), taken as sent, case and quotes included: a UUID, a ULID, an
//!   order number. It is the client's name for one request; retries of that request
//!   send it again. Keys are scoped per account (another account's same key is another
//!   request).
//! - **The fingerprint** is the SHA-256 of the body's canonical JSON without its
//!   top-level `apiKey`: object keys sorted, no white space, strings and numbers as
//!   serde_json writes the parsed values. So a retry whose key moved from the body to a
//!   header, or whose fields come in another order or spacing, is the same request; a
//!   retry with any other value (another record, another `limit`, `1.0` for `1`) is not.

use std::time::{Duration, SystemTime};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Longest key, in characters (= bytes: they are ASCII).
pub const MAX_KEY_CHARS: usize = 255;

/// How long an answer is replayed: 24 hours from when it was answered.
pub const ANSWER_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// An `Idempotency-Key` as sent: 1 to 255 characters from `!` to `~`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The key of a header value's bytes, or `None` when they are not 1 to 255 visible
    /// ASCII characters.
    pub fn parse(raw: &[u8]) -> Option<IdempotencyKey> {
        let visible = |b: &u8| (b'!'..=b'~').contains(b);
        if raw.is_empty() || raw.len() > MAX_KEY_CHARS || !raw.iter().all(visible) {
            return None;
        }
        // Visible ASCII is UTF-8.
        std::str::from_utf8(raw)
            .ok()
            .map(|text| IdempotencyKey(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The SHA-256 of a request body's canonical JSON without `apiKey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a body's fields (the JSON object as parsed). (Writing a parsed
    /// value cannot fail; the error is serde's signature.)
    pub fn of(fields: &Map<String, Value>) -> serde_json::Result<Fingerprint> {
        let canonical = serde_json::to_vec(&Canonical::Fields(fields))?;
        Ok(Fingerprint(Sha256::digest(&canonical).into()))
    }

    /// A fingerprint as stored.
    pub const fn from_bytes(bytes: [u8; 32]) -> Fingerprint {
        Fingerprint(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// Whether an answer given at `answered` may still be replayed at `now`.
pub fn replayable(answered: SystemTime, now: SystemTime) -> bool {
    answered
        .checked_add(ANSWER_TTL)
        .is_some_and(|until| now < until)
}

/// A JSON value written with its object keys sorted; the top level without `apiKey`.
enum Canonical<'a> {
    Fields(&'a Map<String, Value>),
    Value(&'a Value),
}

impl Serialize for Canonical<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (object, top) = match self {
            Canonical::Fields(fields) => (*fields, true),
            Canonical::Value(Value::Object(object)) => (object, false),
            Canonical::Value(Value::Array(items)) => {
                return serializer.collect_seq(items.iter().map(Canonical::Value));
            }
            Canonical::Value(scalar) => return scalar.serialize(serializer),
        };
        let mut entries: Vec<(&String, &Value)> = object
            .iter()
            .filter(|(name, _)| !(top && name.as_str() == "apiKey"))
            .collect();
        // serde_json's map is ordered only without its `preserve_order` feature, which
        // another crate of the tree could turn on: sort here.
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut map = serializer.serialize_map(Some(entries.len()))?;
        for (name, value) in entries {
            map.serialize_entry(name, &Canonical::Value(value))?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fingerprint(body: Value) -> Fingerprint {
        match body {
            Value::Object(fields) => Fingerprint::of(&fields).unwrap(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_key_is_one_to_255_visible_ascii_characters_taken_as_sent() {
        for good in [
            "a",
            "8e03978e-40d5-43e8-bc93-6894a57f9324",
            "\"quoted\"",
            "~!",
        ] {
            assert_eq!(
                IdempotencyKey::parse(good.as_bytes()).map(|k| k.as_str().to_owned()),
                Some(good.to_owned())
            );
        }
        assert!(IdempotencyKey::parse("x".repeat(255).as_bytes()).is_some());
        for bad in [
            &b""[..],
            b"with space",
            b"tab\t",
            b"caf\xc3\xa9",
            b"\x7f",
            "x".repeat(256).as_bytes(),
        ] {
            assert_eq!(IdempotencyKey::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_fingerprint_ignores_the_api_key_the_order_of_fields_and_spacing() {
        let sent = fingerprint(
            json!({"apiKey": "sk_a", "records": [{"postalCode": "90210", "countryCode": "US"}]}),
        );
        let moved = fingerprint(json!({"records": [{"countryCode": "US", "postalCode": "90210"}]}));
        let parsed: Value = serde_json::from_str(
            r#"{ "records" : [ {"countryCode":"US",  "postalCode":"90210"} ], "apiKey":"sk_b" }"#,
        )
        .unwrap();
        assert_eq!(sent, moved);
        assert_eq!(sent, fingerprint(parsed));
    }

    #[test]
    fn the_fingerprint_changes_with_any_other_value() {
        let base = fingerprint(json!({"records": [{"latitude": 1, "longitude": 2}], "limit": 1}));
        for other in [
            json!({"records": [{"latitude": 1, "longitude": 2}], "limit": 2}),
            json!({"records": [{"latitude": 1, "longitude": 2}], "limit": 1.0}),
            json!({"records": [{"latitude": 1, "longitude": 2}]}),
            json!({"records": [{"latitude": 1, "longitude": 2}, {"latitude": 1, "longitude": 2}], "limit": 1}),
            json!({"records": [{"latitude": 1, "longitude": 2, "apiKey": "x"}], "limit": 1}),
        ] {
            assert_ne!(base, fingerprint(other.clone()), "{other}");
        }
    }

    #[test]
    fn an_answer_is_replayable_for_24_hours() {
        let answered = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert!(replayable(answered, answered));
        assert!(replayable(
            answered,
            answered + ANSWER_TTL - Duration::from_secs(1)
        ));
        assert!(!replayable(answered, answered + ANSWER_TTL));
    }
}
