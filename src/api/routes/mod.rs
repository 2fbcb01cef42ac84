//! One file per operation of postal-api.md section 4 (and its GET for pages, its legacy
//! alias), each in the same shape: the route (an `#[OpenApi]` struct whose handlers read
//! the `State` from the request data), the operation on the one billed path (`parse`,
//! `queries`, `work`: `billed::Operation`), the answer mapped to the response, then the
//! request and response shapes with their examples. What operations share stays in
//! `api/` (the billed path, the envelope, the one error type, `types` for the shared
//! shapes); `geo` holds what the geography operations share.
//!
//! Siblings may use each other's operation shapes (metacode and validate read a code as
//! lookup does, verify-bulk asks verify's question); nothing here reaches back into
//! `api/`'s plumbing beyond those shared parts.

pub(crate) mod about;
pub(crate) mod autocomplete;
pub mod city;
pub(crate) mod countries;
pub(crate) mod dataset;
pub(crate) mod distance;
pub(crate) mod geo;
pub(crate) mod lookup;
pub(crate) mod metacode;
pub(crate) mod nearest;
pub(crate) mod nearest_bulk;
pub(crate) mod places;
pub(crate) mod radius;
pub(crate) mod suggest;
pub(crate) mod validate;
pub mod validate_bulk;
pub(crate) mod verify;
pub(crate) mod verify_bulk;

/// `Apis`, the type of every route, and `apis()`, its value (unit structs: the state
/// reaches the handlers as request data).
macro_rules! routes {
    ($($api:path),* ; $($more:path),* $(,)?) => {
        pub type Apis = ($($api,)* ($($more,)*),);

        pub fn apis() -> Apis {
            ($($api,)* ($($more,)*),)
        }
    };
}

// Every route, in the order of the OpenAPI document's paths (poem-openapi writes them in
// this order; `openapi.yaml` is compared byte for byte). poem-openapi implements `OpenApi`
// for tuples of up to 16: the routes after the `;` are a tuple nested as the last.
routes!(
    lookup::LookupApi,
    city::CityApi,
    metacode::MetacodeApi,
    validate::ValidateApi,
    validate_bulk::ValidateBulkApi,
    about::AboutApi,
    nearest::NearestApi,
    radius::RadiusApi,
    distance::DistanceApi,
    autocomplete::AutocompleteApi,
    countries::CountriesApi,
    nearest_bulk::NearestBulkApi,
    suggest::SuggestApi,
    places::PlacesApi;
    verify::VerifyApi,
    verify_bulk::VerifyBulkApi,
    dataset::DatasetApi,
    // The dashboard's, in the order its paths had when they were one struct.
    crate::api::account::MeApi,
    crate::api::account::KeysApi,
    crate::api::account::LimitsApi,
    crate::api::account::UsageApi,
    crate::api::account::SessionsApi,
    crate::api::account::UnlinkApi,
    crate::api::account::StartsApi,
    crate::api::account::AuditApi,
    crate::api::account::SignOutApi,
    crate::api::account::TopupsApi,
    crate::api::account::AlertsApi,
);
