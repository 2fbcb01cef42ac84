//! What the dashboard's documented operations take from a request: the signed-in session
//! (a security scheme of the OpenAPI document: the session cookie), the same with the
//! checks of a change (CSRF token, Origin), and a JSON object body parsed as the type `T`
//! it is documented as.

use std::sync::Arc;

use poem::{Request, RequestBody};
use poem_openapi::ApiExtractor;
use poem_openapi::ApiExtractorType;
use poem_openapi::ExtractParamOptions;
use poem_openapi::registry::{MetaRequest, MetaSchemaRef, MetaSecurityScheme, Registry};
use poem_openapi::types::{ParseFromJSON, Type};
use serde_json::Value;

use super::{Dashboard, Session};
use crate::api::ApiError;

const SCHEME: &str = "SessionCookie";

fn register_scheme(registry: &mut Registry) {
    registry.create_security_scheme(
        SCHEME,
        MetaSecurityScheme {
            ty: "apiKey",
            description: Some(
                "The dashboard's session, set by signing in at /account (docs/account.md): \
                 the cookie `postal_session` on plain http, `__Host-postal_session` when the \
                 public URL is https. A change also needs `X-CSRF-Token` (from \
                 /account/api/me) and an `Origin` equal to the public URL's.",
            ),
            name: Some("postal_session"),
            key_in: Some("cookie"),
            scheme: None,
            bearer_format: None,
            flows: None,
            openid_connect_url: None,
        },
    );
}

fn dashboard(request: &Request) -> Result<&Arc<Dashboard>, ApiError> {
    request
        .data::<Arc<Dashboard>>()
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("no dashboard in the request data")))
}

/// A request of a signed-in customer (else 401 `Not signed in`).
pub(super) struct Signed(pub Session);

/// A change by a signed-in customer: also its session's `X-CSRF-Token` and the public
/// URL's `Origin` (else 403, nothing changed).
pub(super) struct Changing(pub Session);

macro_rules! session_extractor {
    ($ty:ident, $check:ident) => {
        impl<'a> ApiExtractor<'a> for $ty {
            const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::SecurityScheme];
            type ParamType = ();
            type ParamRawType = ();

            fn register(registry: &mut Registry) {
                register_scheme(registry);
            }

            fn security_schemes() -> Vec<&'static str> {
                vec![SCHEME]
            }

            async fn from_request(
                request: &'a Request,
                _body: &mut RequestBody,
                _options: ExtractParamOptions<()>,
            ) -> poem::Result<Self> {
                let dash = dashboard(request)?;
                Ok($ty(dash.$check(request).await?))
            }
        }
    };
}

/// A change of keys, limits, identities or money (a new key, a roll, a revoke, limits, a
/// link, an unlink, a top-up): `Changing`, by a session that signed in within the last 15
/// minutes (else 403, nothing changed: sign in again).
pub(super) struct Recent(pub Session);

session_extractor!(Signed, session);
session_extractor!(Changing, changing);
session_extractor!(Recent, recent);

/// The most a dashboard request body holds.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// A JSON object body parsed as its documented type `T`: what the OpenAPI document says of
/// `T` (types, bounds, required fields) is what is accepted.
///
/// Not poem-openapi's `Json<T>`: it answers a misfit with a plain-text 400 that names no
/// field (stack.md, 2(a)), and its `String` takes a number. So each field is first held to
/// its documented schema, strictly, for the dashboard's texts; then `T` is parsed (which
/// runs the same validators).
pub(super) struct Body<T>(pub T);

/// A type a dashboard operation takes as its body.
pub(super) trait DashboardBody: Type + ParseFromJSON + Send {
    /// The answer to a field of its documented JSON type outside its documented bounds (a
    /// `validator`): `Invalid '<field>'`, or the text of the rule the bound stands for
    /// (the CLI's), for a field that has one.
    fn out_of_bounds(field: &str) -> ApiError {
        invalid(field)
    }
}

/// A field missing, of another JSON type than documented, or out of bounds.
pub(super) fn invalid(field: &str) -> ApiError {
    ApiError::bad_request(format!("Invalid '{field}'"))
}

impl<'a, T: DashboardBody> ApiExtractor<'a> for Body<T> {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    async fn from_request(
        _request: &'a Request,
        body: &mut RequestBody,
        _options: ExtractParamOptions<()>,
    ) -> poem::Result<Self> {
        let bytes = crate::api::contract::read_body(body, MAX_BODY_BYTES, NOT_AN_OBJECT).await?;
        Ok(Body(parse::<T>(&bytes)?))
    }

    fn request_meta() -> Option<MetaRequest> {
        crate::api::contract::json_request(T::schema_ref())
    }
}

const NOT_AN_OBJECT: &str = "Request body must be a JSON object";

/// `bytes` as a `T`: a JSON object whose every field fits `T`'s documented schema, in the
/// order the schema lists them; else the first misfit's 400.
fn parse<T: DashboardBody>(bytes: &[u8]) -> Result<T, ApiError> {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(bytes) else {
        return Err(ApiError::bad_request(NOT_AN_OBJECT));
    };
    let mut registry = Registry::new();
    T::register(&mut registry);
    if let Some(schema) = registry.schemas.get(&*T::name()) {
        for (name, property) in &schema.properties {
            match fields.get(*name) {
                None | Some(Value::Null) if schema.required.contains(name) => {
                    return Err(invalid(name));
                }
                None | Some(Value::Null) => {}
                Some(value) => match misfit(&registry, property, value) {
                    None => {}
                    Some(Misfit::Type) => return Err(invalid(name)),
                    Some(Misfit::Bounds) => return Err(T::out_of_bounds(name)),
                },
            }
        }
    }
    T::parse_from_json(Some(Value::Object(fields))).map_err(|e| {
        ApiError::internal(anyhow::anyhow!(
            "a body that fits {}'s schema did not parse: {}",
            T::name(),
            e.into_message()
        ))
    })
}

/// How a value does not fit its schema.
#[derive(Debug, PartialEq, Eq)]
enum Misfit {
    /// Another JSON type (a number for a string, 1.5 for an integer), a value outside
    /// the type's format (-1 for a `uint32`) or not among an enum's.
    Type,
    /// Its type, beyond a `validator` (`minimum`, `maximum`, `maxLength`, ...).
    Bounds,
}

/// Whether `value` fits `schema` (as far as the dashboard's bodies use schemas: scalars,
/// enums and arrays of them; a nested object is left to `T`'s parse).
fn misfit(registry: &Registry, schema: &MetaSchemaRef, value: &Value) -> Option<Misfit> {
    let schema = match schema {
        MetaSchemaRef::Inline(schema) => schema.as_ref(),
        MetaSchemaRef::Reference(name) => registry.schemas.get(name)?,
    };
    if let Some(found) = schema
        .all_of
        .iter()
        .find_map(|s| misfit(registry, s, value))
    {
        return Some(found);
    }
    if !schema.enum_items.is_empty() && !schema.enum_items.contains(value) {
        return Some(Misfit::Type);
    }
    let within = |n: f64| {
        let above = schema
            .minimum
            .is_none_or(|min| match schema.exclusive_minimum {
                Some(true) => n > min,
                _ => n >= min,
            });
        let below = schema
            .maximum
            .is_none_or(|max| match schema.exclusive_maximum {
                Some(true) => n < max,
                _ => n <= max,
            });
        above && below
    };
    match (schema.ty, value) {
        ("string", Value::String(text)) => {
            let chars = text.chars().count();
            let long = schema.max_length.is_some_and(|max| chars > max);
            let short = schema.min_length.is_some_and(|min| chars < min);
            (long || short).then_some(Misfit::Bounds)
        }
        ("integer", Value::Number(n)) => {
            let n = n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from));
            let Some(n) = n.filter(|n| format_holds(schema.format, *n)) else {
                return Some(Misfit::Type);
            };
            // The bounds of the document are f64; the counts compared are far below 2^53.
            (!within(n as f64)).then_some(Misfit::Bounds)
        }
        ("number", Value::Number(n)) => (!within(n.as_f64()?)).then_some(Misfit::Bounds),
        ("boolean", Value::Bool(_)) | ("object", Value::Object(_)) => None,
        ("array", Value::Array(items)) => {
            let item = schema.items.as_deref();
            if item.is_some_and(|item| items.iter().any(|v| misfit(registry, item, v).is_some())) {
                return Some(Misfit::Type);
            }
            let many = schema.max_items.is_some_and(|max| items.len() > max);
            let few = schema.min_items.is_some_and(|min| items.len() < min);
            (many || few).then_some(Misfit::Bounds)
        }
        ("string" | "integer" | "number" | "boolean" | "object" | "array", _) => Some(Misfit::Type),
        _ => None,
    }
}

/// Whether the integer `n` is within its documented format (`uint32`: 0 to 2^32 - 1).
fn format_holds(format: Option<&str>, n: i128) -> bool {
    let range = match format {
        Some("int8") => i128::from(i8::MIN)..=i128::from(i8::MAX),
        Some("int16") => i128::from(i16::MIN)..=i128::from(i16::MAX),
        Some("int32") => i128::from(i32::MIN)..=i128::from(i32::MAX),
        Some("uint8") => 0..=i128::from(u8::MAX),
        Some("uint16") => 0..=i128::from(u16::MAX),
        Some("uint32") => 0..=i128::from(u32::MAX),
        Some("uint64") => 0..=i128::from(u64::MAX),
        _ => i128::from(i64::MIN)..=i128::from(i64::MAX),
    };
    range.contains(&n)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::keys::{NewKeyKind, NewKeyRequest, RollRequest};
    use super::super::limits::LimitsRequest;
    use super::super::topups::TopupRequest;
    use super::*;

    fn refusal<T: DashboardBody + std::fmt::Debug>(body: Value) -> String {
        let bytes = serde_json::to_vec(&body).unwrap();
        parse::<T>(&bytes).unwrap_err().text().to_owned()
    }

    #[test]
    fn a_body_that_is_not_a_json_object_is_refused() {
        for bytes in [&b"[1, 2]"[..], b"", b"{\"name\":"] {
            let error = parse::<NewKeyRequest>(bytes).unwrap_err();
            assert_eq!(error.text(), "Request body must be a JSON object");
        }
    }

    #[test]
    fn a_body_that_fits_its_schema_parses_as_its_type() {
        let bytes = serde_json::to_vec(&json!({
            "name": "shop", "kind": "publishable", "origins": ["https://shop.example"],
            "perIpMinute": 10, "maxPerMinute": null, "maxPerDay": 4_294_967_295u64,
            "unknown": true,
        }))
        .unwrap();
        let request = parse::<NewKeyRequest>(&bytes).unwrap();
        assert_eq!(request.name.as_deref(), Some("shop"));
        assert!(matches!(request.kind, Some(NewKeyKind::Publishable)));
        assert_eq!(request.origins.unwrap(), ["https://shop.example"]);
        assert_eq!(
            (
                request.per_ip_minute,
                request.max_per_minute,
                request.max_per_day
            ),
            (Some(10), None, Some(u32::MAX))
        );
    }

    #[test]
    fn a_field_of_another_json_type_than_documented_is_invalid() {
        assert_eq!(
            refusal::<TopupRequest>(json!({"amount": 5})),
            "Invalid 'amount'"
        );
        assert_eq!(
            refusal::<NewKeyRequest>(json!({"name": 7})),
            "Invalid 'name'"
        );
        assert_eq!(
            refusal::<NewKeyRequest>(json!({"kind": "other"})),
            "Invalid 'kind'"
        );
        assert_eq!(
            refusal::<NewKeyRequest>(json!({"origins": "x"})),
            "Invalid 'origins'"
        );
        assert_eq!(
            refusal::<NewKeyRequest>(json!({"origins": [1]})),
            "Invalid 'origins'"
        );
        assert_eq!(
            refusal::<RollRequest>(json!({"graceHours": 1.5})),
            "Invalid 'graceHours'"
        );
        assert_eq!(
            refusal::<RollRequest>(json!({"graceHours": "1"})),
            "Invalid 'graceHours'"
        );
    }

    #[test]
    fn a_missing_required_field_is_invalid() {
        assert_eq!(refusal::<TopupRequest>(json!({})), "Invalid 'amount'");
        assert_eq!(
            refusal::<TopupRequest>(json!({"amount": null})),
            "Invalid 'amount'"
        );
    }

    #[test]
    fn a_count_outside_its_format_or_below_its_minimum_is_invalid() {
        for value in [json!(0), json!(-1), json!(4_294_967_296u64)] {
            assert_eq!(
                refusal::<NewKeyRequest>(json!({"maxPerDay": value})),
                "Invalid 'maxPerDay'"
            );
        }
    }

    #[test]
    fn a_bound_that_stands_for_a_rule_answers_the_rule_s_text() {
        for hours in [0, 169] {
            assert_eq!(
                refusal::<RollRequest>(json!({"graceHours": hours})),
                "graceHours must be 1 to 168 (7 days)"
            );
        }
        assert_eq!(
            refusal::<LimitsRequest>(json!({"perHour": 0})),
            "a limit must be at least 1 (use --off to remove limits)"
        );
        assert_eq!(
            refusal::<NewKeyRequest>(json!({"name": "n".repeat(101)})),
            "key name must be 1 to 100 characters"
        );
        // Characters, not bytes: 100 of them fit.
        let bytes = serde_json::to_vec(&json!({"name": "ü".repeat(100)})).unwrap();
        assert!(parse::<NewKeyRequest>(&bytes).is_ok());
    }
}
