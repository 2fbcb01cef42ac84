//! What the dashboard's documented operations take from a request: the signed-in session
//! (a security scheme of the OpenAPI document: the session cookie), the same with the
//! checks of a change (CSRF token, Origin), and a JSON object body documented as `T`.

use std::marker::PhantomData;
use std::sync::Arc;

use poem::{Request, RequestBody};
use poem_openapi::ApiExtractor;
use poem_openapi::ApiExtractorType;
use poem_openapi::ExtractParamOptions;
use poem_openapi::registry::{MetaMediaType, MetaRequest, MetaSecurityScheme, Registry};
use poem_openapi::types::Type;
use serde_json::{Map, Value};

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

session_extractor!(Signed, session);
session_extractor!(Changing, changing);

/// The most a dashboard request body holds.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// A JSON object body, documented as `T`, read leniently (the handler reads its fields
/// and answers a bad one with its own text).
pub(super) struct Body<T> {
    pub fields: Map<String, Value>,
    documented: PhantomData<T>,
}

impl<'a, T: Type> ApiExtractor<'a> for Body<T> {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::RequestObject];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        T::register(registry);
    }

    fn request_meta() -> Option<MetaRequest> {
        Some(MetaRequest {
            description: None,
            required: true,
            content: vec![MetaMediaType {
                content_type: "application/json",
                schema: T::schema_ref(),
            }],
        })
    }

    async fn from_request(
        _request: &'a Request,
        body: &mut RequestBody,
        _options: ExtractParamOptions<()>,
    ) -> poem::Result<Self> {
        const INVALID: &str = "Request body must be a JSON object";
        let bytes = crate::api::contract::read_body(body, MAX_BODY_BYTES, INVALID).await?;
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(fields)) => Ok(Body {
                fields,
                documented: PhantomData,
            }),
            _ => Err(ApiError::bad_request(INVALID).into()),
        }
    }
}
