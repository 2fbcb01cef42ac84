//! The body of every 200: the response type serialized straight to bytes by serde.
//!
//! poem-openapi's `Json<T>` first converts the answer to a `serde_json::Value` tree (a
//! new `String` for every key of a `BTreeMap`, every nested object too), then writes the
//! tree out and drops it. Under `bench/api.sh` that was a few per cent of the server's
//! CPU for a lookup, most of it in the allocator (perf, docs/money.md). [`Reply`] keeps
//! the OpenAPI side of `Json<T>` (the schema comes from `T`'s derived `Object`) and
//! writes `T` with its `serde::Serialize` instead. Both derives name the fields the same
//! way; `tests::replies_are_the_json_of_the_documented_type` checks every response
//! example both ways.

use poem::{IntoResponse, Response};
use poem_openapi::ApiResponse;
use poem_openapi::payload::{Json, Payload};
use poem_openapi::registry::{MetaResponses, MetaSchemaRef, Registry};
use poem_openapi::types::{ToJSON, Type};
use serde::Serialize;

/// A JSON 200 of type `T`.
pub struct Reply<T>(pub T);

impl<T: Type> Payload for Reply<T> {
    const CONTENT_TYPE: &'static str = Json::<T>::CONTENT_TYPE;

    fn check_content_type(content_type: &str) -> bool {
        Json::<T>::check_content_type(content_type)
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

impl<T: Serialize + Send> IntoResponse for Reply<T> {
    fn into_response(self) -> Response {
        poem::web::Json(self.0).into_response()
    }
}

impl<T: ToJSON + Serialize + Send> ApiResponse for Reply<T> {
    fn meta() -> MetaResponses {
        <Json<T> as ApiResponse>::meta()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

#[cfg(test)]
mod tests {
    use poem_openapi::types::{Example, ToJSON};
    use serde::Serialize;

    use crate::api::geo::{
        AutocompleteResponse, CountriesResponse, DistanceResponse, NearestBulkResponse,
        NearestResponse, RadiusResponse,
    };
    use crate::api::suggest::SuggestResponse;
    use crate::api::types::*;

    /// serde writes the JSON the OpenAPI document describes (the `ToJSON` of the derived
    /// `Object`), field for field, on the example of each response.
    fn same<T: Example + ToJSON + Serialize>() {
        let example = T::example();
        let documented = example.to_json().expect("an object");
        let written = serde_json::to_value(&example).unwrap();
        assert_eq!(written, documented, "{}", T::name());
    }

    #[test]
    fn replies_are_the_json_of_the_documented_type() {
        same::<LookupResponse>();
        same::<CityResponse>();
        same::<MetaResponse>();
        same::<ValidateResponse>();
        same::<BulkResponse>();
        same::<AboutResponse>();
        same::<NearestResponse>();
        same::<RadiusResponse>();
        same::<DistanceResponse>();
        same::<AutocompleteResponse>();
        same::<CountriesResponse>();
        same::<NearestBulkResponse>();
        same::<SuggestResponse>();
    }
}
