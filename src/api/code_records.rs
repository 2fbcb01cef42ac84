//! The `records` of a body read for their codes (`/api/validate-bulk`): parsed straight
//! from the body's bytes into light items, not into a `serde_json::Value` tree.
//!
//! Why: the tree of 1,000 records (a `BTreeMap` and four `String`s a record), the two
//! strings copied out of it and its drop were half of a validate-bulk request's
//! instructions (issue 37, docs/performance.md). Here a record's `postalCode` and
//! `countryCode`, when strings, go into one text shared by all records; whatever else an
//! item holds is kept as `Value`s, so that the body is still all there: the fingerprint
//! of an idempotent request ([`CodeRecords::to_value`]) is that of the same body parsed
//! into a `Value`, and the contract's checks see what they saw in the tree (the last of
//! two same keys wins, as in a `Map`).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::contract::MAX_BULK_RECORDS;

/// `records`, an array, read for its items' codes.
pub struct CodeRecords {
    /// Every `postalCode` and `countryCode` string of the items, one after another.
    pub texts: Arc<str>,
    pub items: Vec<CodeItem>,
}

/// An item of `records`.
pub enum CodeItem {
    /// An object: its two codes, and its other fields as sent.
    Object {
        postal_code: Field,
        country_code: Field,
        rest: Map<String, Value>,
    },
    /// Anything else (it has no codes).
    Other(Value),
}

/// A code field of an item.
pub enum Field {
    Absent,
    /// A string: these bytes of [`CodeRecords::texts`].
    Text(Range<u32>),
    /// Not a string.
    Other(Value),
}

impl Field {
    /// The string, if the field is one.
    pub fn text<'t>(&self, texts: &'t str) -> Option<&'t str> {
        match self {
            Field::Text(range) => texts.get(range.start as usize..range.end as usize),
            _ => None,
        }
    }
}

impl CodeRecords {
    /// The records as the `Value` the body's `records` would have parsed into.
    pub fn to_value(&self) -> Value {
        let field = |f: &Field| match f {
            Field::Absent => None,
            Field::Text(_) => f.text(&self.texts).map(|s| Value::String(s.to_owned())),
            Field::Other(value) => Some(value.clone()),
        };
        let items = self.items.iter().map(|item| match item {
            CodeItem::Object {
                postal_code,
                country_code,
                rest,
            } => {
                let mut object = rest.clone();
                for (name, f) in [("postalCode", postal_code), ("countryCode", country_code)] {
                    if let Some(value) = field(f) {
                        object.insert(name.to_owned(), value);
                    }
                }
                Value::Object(object)
            }
            CodeItem::Other(value) => value.clone(),
        });
        Value::Array(items.collect())
    }
}

/// A body that is a JSON object: its fields, but for a `records` array, read for its
/// codes; a `records` that is not an array stays among the fields. (The caller says
/// "Invalid JSON body" to any error, as to a body that is not an object.)
pub fn object_with_code_records(
    body: &str,
) -> serde_json::Result<(Map<String, Value>, Option<CodeRecords>)> {
    let mut deserializer = serde_json::Deserializer::from_str(body);
    let body = deserializer.deserialize_map(BodyVisitor {
        body_len: body.len(),
    })?;
    // As `serde_json::from_str`: nothing but white space after the value.
    deserializer.end()?;
    Ok(body)
}

struct BodyVisitor {
    body_len: usize,
}

impl<'de> Visitor<'de> for BodyVisitor {
    type Value = (Map<String, Value>, Option<CodeRecords>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Map::new();
        let mut records = None;
        while let Some(name) = map.next_key::<String>()? {
            if name != "records" {
                fields.insert(name, map.next_value()?);
                continue;
            }
            // The last `records` wins, as in a `Map`.
            let seed = RecordsSeed {
                body_len: self.body_len,
            };
            match map.next_value_seed(seed)? {
                RecordsValue::Array(array) => {
                    fields.remove("records");
                    records = Some(array);
                }
                RecordsValue::Other(value) => {
                    records = None;
                    fields.insert(name, value);
                }
            }
        }
        Ok((fields, records))
    }
}

/// The value of `records`: an array read for its codes, or any other value as sent.
enum RecordsValue {
    Array(CodeRecords),
    Other(Value),
}

/// Reads the value of `records`.
struct RecordsSeed {
    body_len: usize,
}

impl<'de> DeserializeSeed<'de> for RecordsSeed {
    type Value = RecordsValue;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<RecordsValue, D::Error> {
        deserializer.deserialize_any(RecordsVisitor {
            body_len: self.body_len,
        })
    }
}

/// The visit methods of a scalar that is not what a visitor looks for: the `Value`
/// serde_json's own visitor would make of it, wrapped by `$wrap`; with `strings`, of a
/// string too.
macro_rules! otherwise_a_value {
    ($wrap:expr) => {
        fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
            Ok($wrap(Value::Bool(v)))
        }

        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok($wrap(Value::Number(v.into())))
        }

        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok($wrap(Value::Number(v.into())))
        }

        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok($wrap(
                Number::from_f64(v).map_or(Value::Null, Value::Number),
            ))
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null))
        }
    };
    ($wrap:expr, strings) => {
        otherwise_a_value!($wrap);

        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v.to_owned())))
        }

        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v)))
        }
    };
}

/// `Value`'s own deserialization of what a visitor was handed (an array or an object).
fn value_of<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
    serde::Deserialize::deserialize(deserializer)
}

struct RecordsVisitor {
    body_len: usize,
}

impl<'de> Visitor<'de> for RecordsVisitor {
    type Value = RecordsValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    otherwise_a_value!(RecordsValue::Other, strings);

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RecordsValue, A::Error> {
        value_of(serde::de::value::MapAccessDeserializer::new(map)).map(RecordsValue::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RecordsValue, A::Error> {
        // Room for what the body can hold, so that neither grows record by record (their
        // reallocations were a tenth of the parse): a record with both codes takes at
        // least 32 bytes of the body, its codes usually less than a quarter of them (the
        // text grows past that if need be).
        let mut texts = String::with_capacity(self.body_len / 4);
        let mut items = Vec::with_capacity((self.body_len / 32).min(MAX_BULK_RECORDS));
        while let Some(item) = seq.next_element_seed(ItemSeed { texts: &mut texts })? {
            items.push(item);
        }
        Ok(RecordsValue::Array(CodeRecords {
            texts: Arc::from(texts),
            items,
        }))
    }
}

/// Reads an item of `records`, its code strings appended to `texts`.
struct ItemSeed<'t> {
    texts: &'t mut String,
}

impl<'de> DeserializeSeed<'de> for ItemSeed<'_> {
    type Value = CodeItem;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<CodeItem, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemSeed<'_> {
    type Value = CodeItem;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    otherwise_a_value!(CodeItem::Other, strings);

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<CodeItem, A::Error> {
        value_of(serde::de::value::SeqAccessDeserializer::new(seq)).map(CodeItem::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CodeItem, A::Error> {
        let (mut postal_code, mut country_code) = (Field::Absent, Field::Absent);
        let mut rest = Map::new();
        while let Some(name) = map.next_key::<Name<'de>>()? {
            let code = match name.as_str() {
                "postalCode" => &mut postal_code,
                "countryCode" => &mut country_code,
                other => {
                    let other = other.to_owned();
                    rest.insert(other, map.next_value()?);
                    continue;
                }
            };
            *code = map.next_value_seed(FieldSeed {
                texts: &mut *self.texts,
            })?;
        }
        Ok(CodeItem::Object {
            postal_code,
            country_code,
            rest,
        })
    }
}

/// A key of an item: borrowed from the body unless it has escapes.
enum Name<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Name<'_> {
    fn as_str(&self) -> &str {
        match self {
            Name::Borrowed(name) => name,
            Name::Owned(name) => name,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'de>, E> {
                Ok(Name::Borrowed(v))
            }

            fn visit_str<E>(self, v: &str) -> Result<Name<'de>, E> {
                Ok(Name::Owned(v.to_owned()))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

/// Reads a code field: a string into `texts`, anything else as a `Value`.
struct FieldSeed<'t> {
    texts: &'t mut String,
}

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Field;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Field, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<'_> {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    otherwise_a_value!(Field::Other);

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Field, E> {
        let start = self.texts.len();
        self.texts.push_str(v);
        // The body is at most 1 MiB (`MAX_BODY_BYTES`), its texts no longer.
        let offset = |at: usize| u32::try_from(at).map_err(|_| E::custom("body too large"));
        Ok(Field::Text(offset(start)?..offset(self.texts.len())?))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Field, E> {
        self.visit_str(&v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field, A::Error> {
        value_of(serde::de::value::SeqAccessDeserializer::new(seq)).map(Field::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field, A::Error> {
        value_of(serde::de::value::MapAccessDeserializer::new(map)).map(Field::Other)
    }
}

#[cfg(test)]
mod tests {
    use crate::api::contract::{ContractJson, Requested, record_codes, records_array};
    use crate::api::routes::validate_bulk::BulkRequest;
    use crate::domain::idempotency::Fingerprint;
    use serde_json::Value;

    /// What the `Value` tree made of `body`: its fingerprint, and the records' codes
    /// (postal code, country, echo) or the error's text.
    fn through_the_tree(body: &[u8]) -> Option<(Fingerprint, Result<Vec<String>, String>)> {
        let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
            return None;
        };
        let records = records_array(&fields).and_then(|items| {
            items
                .iter()
                .enumerate()
                .map(|(i, item)| record_codes(i, item))
                .collect::<Result<Vec<_>, _>>()
        });
        let records = records
            .map(|codes| {
                codes
                    .into_iter()
                    .map(|c| format!("{}|{}|{}", c.postal_code, c.country, c.country_input))
                    .collect()
            })
            .map_err(|e| e.text().to_owned());
        Some((Fingerprint::of(&fields).unwrap(), records))
    }

    fn read_for_codes(body: &[u8]) -> Option<(Fingerprint, Result<Vec<String>, String>)> {
        let request = ContractJson::<BulkRequest>::from_bytes(body).ok()?;
        let records = request
            .bulk_records()
            .map(|codes| {
                codes
                    .records
                    .iter()
                    .map(|r| {
                        format!(
                            "{}|{}|{}",
                            r.postal_code(&codes.texts),
                            r.country,
                            r.country_echo()
                        )
                    })
                    .collect()
            })
            .map_err(|e| e.text().to_owned());
        Some((request.fingerprint().unwrap(), records))
    }

    #[test]
    fn records_read_for_their_codes_give_what_the_value_tree_gave() {
        let many = format!(
            r#"{{"records":[{}]}}"#,
            vec![r#"{"postalCode":"1","countryCode":"US"}"#; 1001].join(",")
        );
        let bodies = [
            r#"{"apiKey":"k","records":[{"postalCode":"90210","countryCode":"US"}]}"#,
            r#"{"records":[{"countryCode":"us ","postalCode":" 90210","x":[1,{"a":null}]}]}"#,
            r#"{"records":[{"postalCode":"a\"b\\c\u00e9\n","countryCode":"\u0044E"}]}"#,
            r#"{"records":[{"post\u0061lCode":"1","countryCode":"GB","postalCode":"2"}]}"#,
            r#"{"records":[{"postalCode":5,"countryCode":"US"}]}"#,
            r#"{"records":[{"postalCode":"  ","countryCode":"US"}]}"#,
            r#"{"records":[{"postalCode":"1","countryCode":"XX"}]}"#,
            r#"{"records":[{"postalCode":"1","countryCode":"US"},{"postalCode":"2"},3]}"#,
            r#"{"records":[{"postalCode":"1","countryCode":"US"},3,{"postalCode":[]}]}"#,
            r#"{"records":[null,true,1.0,-2,1e3,"s",[]]}"#,
            r#"{"records":[]}"#,
            r#"{"records":{"postalCode":"1"}}"#,
            r#"{"records":"x"}"#,
            r#"{"records":null}"#,
            r#"{"records":[{"postalCode":"1","countryCode":"US"}],"records":7}"#,
            r#"{"records":7,"records":[{"postalCode":"1","countryCode":"US"}]}"#,
            r#"{"records":[{"postalCode":"1","countryCode":"DE","countryCode":"ſe"}]}"#,
            r#"{"limit":1.50,"records":[{"postalCode":"1","countryCode":"FR","n":1e2}]}"#,
            r#"{}"#,
            r#"[]"#,
            r#"{"records":[{"postalCode":"1","countryCode":"US"}]} x"#,
            r#"{"records":[{"postalCode":"1","countryCode":"US"]}"#,
            "{\"records\":[{\"postalCode\":\"\u{1}\",\"countryCode\":\"US\"}]}",
            many.as_str(),
        ];
        for body in bodies {
            assert_eq!(
                read_for_codes(body.as_bytes()),
                through_the_tree(body.as_bytes()),
                "{body}"
            );
        }
        // Not UTF-8 inside a field the records do not read.
        let bad = b"{\"records\":[{\"postalCode\":\"1\",\"countryCode\":\"US\",\"x\":\"\xff\"}]}";
        assert_eq!(read_for_codes(bad), None);
        assert_eq!(through_the_tree(bad), None);
    }
}
