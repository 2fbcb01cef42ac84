//! The shapes of the geography operations (docs/geography.md): requests, responses and
//! their examples from the real data, apart from the operations that use them (`geo`).

use super::*;

/// A postal code's first record, where it is.
#[derive(Debug, Clone, PartialEq, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct Place {
    /// The code as the data writes it (JP: seven digits, as metacode).
    pub zipcode: String,
    /// ISO 3166-1 alpha-2 code.
    pub country: String,
    /// Place name.
    pub city: String,
    /// Admin name 1 (state, region), "" when the record has none.
    pub state: String,
    /// Admin code 1, "" when the record has none.
    #[oai(rename = "ST")]
    #[serde(rename = "ST")]
    pub st: String,
    pub latitude: f64,
    pub longitude: f64,
    /// Great-circle distance from the question's point, km, rounded to the metre.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distance_km: Option<f64>,
}

impl Place {
    pub(super) fn new(country: CountryCode, view: &PlaceView<'_>, km: Option<f64>) -> Place {
        Place {
            zipcode: canonical(country, view.postal_code),
            country: country.to_string(),
            city: view.place_name.to_string(),
            state: view.admin_name1.to_string(),
            st: view.admin_code1.to_string(),
            latitude: view.latitude.unwrap_or_default(),
            longitude: view.longitude.unwrap_or_default(),
            distance_km: km.map(round_km),
        }
    }

    pub(super) fn distance_to(&self, other: &Place) -> f64 {
        crate::domain::geo::haversine_km(
            self.latitude,
            self.longitude,
            other.latitude,
            other.longitude,
        )
    }
}

/// Body of /api/nearest.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct NearestRequest {
    /// -90 to 90.
    #[oai(validator(minimum(value = "-90"), maximum(value = "90")))]
    pub latitude: f64,
    /// -180 to 180.
    #[oai(validator(minimum(value = "-180"), maximum(value = "180")))]
    pub longitude: f64,
    // Only codes of this country (ISO 3166-1 alpha-2); default: every country. (A plain
    // comment: a described `$ref` becomes an `allOf`, which generated clients cannot
    // read; the CountryCode schema states the rule.)
    pub country: Option<CountryField>,
    /// 1 to 100, default 10.
    #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
    pub limit: Option<u64>,
    /// Only codes at most this far, km (greater than 0).
    #[oai(validator(minimum(value = "0", exclusive)))]
    pub max_km: Option<f64>,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: String,
}

/// 200 of /api/nearest.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct NearestResponse {
    /// Nearest first.
    pub results: Vec<Place>,
    #[oai(flatten)]
    #[serde(flatten)]
    pub envelope: Envelope,
}

/// Body of /api/radius: `zipcode` (and `country`) or `latitude` and `longitude`.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct RadiusRequest {
    /// The centre's postal code (string or integer, as /api/lookup).
    pub zipcode: Option<ZipCodeValue>,
    // With `zipcode`: its country (default `US`); with coordinates: only codes of this
    // country. (A plain comment: a described `$ref` becomes an `allOf`, which generated
    // clients cannot read; the CountryCode schema states the rule.)
    pub country: Option<CountryField>,
    /// The centre's latitude, -90 to 90 (instead of `zipcode`).
    #[oai(validator(minimum(value = "-90"), maximum(value = "90")))]
    pub latitude: Option<f64>,
    /// The centre's longitude, -180 to 180 (instead of `zipcode`).
    #[oai(validator(minimum(value = "-180"), maximum(value = "180")))]
    pub longitude: Option<f64>,
    /// Greater than 0, at most 500.
    #[oai(validator(minimum(value = "0", exclusive), maximum(value = "500")))]
    pub radius_km: f64,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: String,
}

/// 200 of /api/radius.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct RadiusResponse {
    /// Nearest first, at most 1,000.
    pub results: Vec<Place>,
    /// More than 1,000 codes are within the radius; the nearest 1,000 answered.
    pub truncated: bool,
    #[oai(flatten)]
    #[serde(flatten)]
    pub envelope: Envelope,
}

/// One end of /api/distance.
#[derive(Debug, Object)]
pub struct CodeRef {
    /// Postal code (string or integer, as /api/lookup).
    pub zipcode: ZipCodeValue,
    // ISO 3166-1 alpha-2 code; default `US`. (A plain comment: a described `$ref`
    // becomes an `allOf`, which generated clients cannot read; the CountryCode schema
    // states the rule.)
    pub country: Option<CountryField>,
}

/// Body of /api/distance.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct DistanceRequest {
    pub from: CodeRef,
    pub to: CodeRef,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: String,
}

/// 200 of /api/distance.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct DistanceResponse {
    /// Great-circle distance, km, rounded to the metre.
    pub km: f64,
    /// The same in international miles, three decimals.
    pub miles: f64,
    pub from: Place,
    pub to: Place,
    #[oai(flatten)]
    #[serde(flatten)]
    pub envelope: Envelope,
}

/// Body of /api/autocomplete.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct AutocompleteRequest {
    /// The beginning of a code; spaces and hyphens are ignored, and white space around it.
    // White space is written out (Unicode White_Space, what `str::trim` drops), not `\s`:
    // `\s` of ECMAScript also takes U+FEFF, Python's also U+001C..U+001F.
    #[oai(validator(
        pattern = r"^[\t\n\u000B\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]*[ -]*[A-Za-z0-9][A-Za-z0-9 -]*[\t\n\u000B\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]*$"
    ))]
    pub q: String,
    // ISO 3166-1 alpha-2 code; default `US`. (A plain comment: a described `$ref`
    // becomes an `allOf`, which generated clients cannot read; the CountryCode schema
    // states the rule.)
    pub country: Option<CountryField>,
    /// 1 to 100, default 10.
    #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
    pub limit: Option<u64>,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: String,
}

/// A code that starts with `q`.
#[derive(Debug, Clone, Object, Serialize)]
pub struct Suggestion {
    pub zipcode: String,
    /// The place name of its first record.
    pub city: String,
}

/// 200 of /api/autocomplete.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct AutocompleteResponse {
    /// In code order (of the compact forms).
    pub results: Vec<Suggestion>,
    #[oai(flatten)]
    #[serde(flatten)]
    pub envelope: Envelope,
}

/// Body of /api/countries.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct CountriesRequest {
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: String,
}

/// A country with data.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct CountryEntry {
    /// ISO 3166-1 alpha-2 code.
    pub code: String,
    pub name: String,
    /// Records (places) in the data.
    pub records: i64,
    /// Distinct postal codes.
    pub codes: u64,
    /// GeoNames' postal-code format (`#` a digit, `@` a letter); "" when none.
    pub format: String,
    /// GeoNames' postal-code regex; "" when none.
    pub regex: String,
    /// The country's first code in code order.
    pub example: Option<String>,
    /// The admin levels (1 to 3) some record of the country carries.
    pub admin_levels: Vec<u8>,
}

/// 200 of /api/countries (free).
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct CountriesResponse {
    /// By code.
    pub countries: Vec<CountryEntry>,
    #[oai(flatten)]
    #[serde(flatten)]
    pub envelope: Envelope,
}

/// One point of /api/nearest-bulk.
#[derive(Debug, Object)]
pub struct BulkPoint {
    /// -90 to 90.
    #[oai(validator(minimum(value = "-90"), maximum(value = "90")))]
    pub latitude: f64,
    /// -180 to 180.
    #[oai(validator(minimum(value = "-180"), maximum(value = "180")))]
    pub longitude: f64,
    /// Yours, echoed in the point's result.
    pub id: Option<PointId>,
}

/// A point's `id` in /api/nearest-bulk: any string, or an integer every JSON client holds
/// exactly (-(2^53 - 1) to 2^53 - 1, RFC 7493), echoed as sent.
/// Serialized as the value sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointId(pub Value);

impl PointId {
    /// Whether `value` is an `id` the server echoes.
    pub(super) fn admits(value: &Value) -> bool {
        match value {
            Value::String(_) => true,
            Value::Number(n) => n
                .as_i64()
                .is_some_and(|v| v.unsigned_abs() <= MAX_ZIPCODE_INTEGER),
            _ => false,
        }
    }
}

json_value!(
    PointId,
    "string_or_safe_integer",
    {
        let safe = MAX_ZIPCODE_INTEGER as f64;
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            one_of: vec![
                MetaSchemaRef::Inline(Box::new(MetaSchema::new("string"))),
                MetaSchemaRef::Inline(Box::new(MetaSchema {
                    minimum: Some(-safe),
                    maximum: Some(safe),
                    ..MetaSchema::new("integer")
                })),
            ],
            ..MetaSchema::ANY
        }))
    },
    PointId::admits
);

/// Body of /api/nearest-bulk.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct NearestBulkRequest {
    /// 1 to 1,000 points.
    #[oai(validator(min_items = 1, max_items = 1000))]
    pub records: Vec<BulkPoint>,
    /// Per point: 1 to 100, default 10.
    #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
    pub limit: Option<u64>,
    // Only codes of this country; default: every country. (A plain comment: a described
    // `$ref` becomes an `allOf`, which generated clients cannot read; the CountryCode
    // schema states the rule.)
    pub country: Option<CountryField>,
    /// Only codes at most this far, km.
    #[oai(validator(minimum(value = "0", exclusive)))]
    pub max_km: Option<f64>,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: String,
}

/// The nearest codes of one point.
#[derive(Debug, Object, Serialize)]
pub struct PointResult {
    /// The point's index in `records`.
    pub index: u64,
    /// The point's `id`, when it had one.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<PointId>,
    /// Nearest first.
    pub results: Vec<Place>,
}

/// 200 of /api/nearest-bulk.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct NearestBulkResponse {
    /// In request order.
    pub results: Vec<PointResult>,
    /// Points x 0.000028 USD.
    pub total_cost: f64,
    #[oai(flatten)]
    #[serde(flatten)]
    pub envelope: Envelope,
}

const EXAMPLE_KEY: &str = "pk_your_api_key";

fn example_place(
    zipcode: &str,
    country: &str,
    city: &str,
    state: (&str, &str),
    at: (f64, f64),
    km: Option<f64>,
) -> Place {
    Place {
        zipcode: zipcode.into(),
        country: country.into(),
        city: city.into(),
        state: state.0.into(),
        st: state.1.into(),
        latitude: at.0,
        longitude: at.1,
        distance_km: km,
    }
}

fn example_nearest_places() -> Vec<Place> {
    let england = ("England", "ENG");
    vec![
        example_place(
            "SW1A",
            "GB",
            "Westminster Abbey",
            england,
            (51.5018, -0.1328),
            Some(0.0),
        ),
        example_place(
            "EC1A",
            "GB",
            "London",
            england,
            (51.5085, -0.1257),
            Some(0.892),
        ),
    ]
}

impl Example for NearestRequest {
    fn example() -> Self {
        NearestRequest {
            latitude: 51.5018,
            longitude: -0.1328,
            country: Some(CountryField("GB".into())),
            limit: Some(2),
            max_km: None,
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for NearestResponse {
    fn example() -> Self {
        NearestResponse {
            results: example_nearest_places(),
            envelope: example_envelope(4.999972),
        }
    }
}

impl Example for RadiusRequest {
    fn example() -> Self {
        RadiusRequest {
            zipcode: Some(ZipCodeValue(Value::String("SW1A".into()))),
            country: Some(CountryField("GB".into())),
            latitude: None,
            longitude: None,
            radius_km: 0.5,
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for RadiusResponse {
    fn example() -> Self {
        RadiusResponse {
            results: example_nearest_places().into_iter().take(1).collect(),
            truncated: false,
            envelope: example_envelope(4.999972),
        }
    }
}

impl Example for DistanceRequest {
    fn example() -> Self {
        DistanceRequest {
            from: CodeRef {
                zipcode: ZipCodeValue(Value::String("90210".into())),
                country: Some(CountryField("US".into())),
            },
            to: CodeRef {
                zipcode: ZipCodeValue(Value::String("10001".into())),
                country: Some(CountryField("US".into())),
            },
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for DistanceResponse {
    fn example() -> Self {
        DistanceResponse {
            km: 3948.243,
            miles: 2453.325,
            from: example_place(
                "90210",
                "US",
                "Beverly Hills",
                ("California", "CA"),
                (34.0901, -118.4065),
                None,
            ),
            to: example_place(
                "10001",
                "US",
                "New York",
                ("New York", "NY"),
                (40.7484, -73.9967),
                None,
            ),
            envelope: example_envelope(4.999972),
        }
    }
}

impl Example for AutocompleteRequest {
    fn example() -> Self {
        AutocompleteRequest {
            q: "9021".into(),
            country: Some(CountryField("US".into())),
            limit: Some(3),
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for AutocompleteResponse {
    fn example() -> Self {
        let suggestion = |zipcode: &str| Suggestion {
            zipcode: zipcode.into(),
            city: "Beverly Hills".into(),
        };
        AutocompleteResponse {
            results: vec![
                suggestion("90210"),
                suggestion("90211"),
                suggestion("90212"),
            ],
            envelope: example_envelope(4.999972),
        }
    }
}

impl Example for CountriesResponse {
    fn example() -> Self {
        CountriesResponse {
            countries: vec![CountryEntry {
                code: "AD".into(),
                name: "Andorra".into(),
                records: 7,
                codes: 7,
                format: "AD###".into(),
                regex: "^(?:AD)*(\\d{3})$".into(),
                example: Some("AD100".into()),
                admin_levels: vec![1],
            }],
            envelope: example_free_envelope(),
        }
    }
}

impl Example for NearestBulkRequest {
    fn example() -> Self {
        NearestBulkRequest {
            records: vec![BulkPoint {
                latitude: 51.5018,
                longitude: -0.1328,
                id: Some(PointId(Value::String("westminster".into()))),
            }],
            limit: Some(2),
            country: None,
            max_km: None,
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for NearestBulkResponse {
    fn example() -> Self {
        NearestBulkResponse {
            results: vec![PointResult {
                index: 0,
                id: Some(PointId(Value::String("westminster".into()))),
                results: example_nearest_places(),
            }],
            total_cost: 0.000028,
            envelope: example_envelope(4.999972),
        }
    }
}

impl crate::api::contract::DocumentedBody for NearestRequest {}
impl crate::api::contract::DocumentedBody for RadiusRequest {
    /// Either `zipcode` or `latitude`, and either `zipcode` or `longitude`: a `zipcode`
    /// alone, or `latitude` and `longitude` without one (OpenAPI 3.0 has no `not`; two
    /// "exactly one of" say it).
    fn body_schema() -> MetaSchemaRef {
        // Each with its property's schema, as in RadiusRequest (which lints tell apart).
        let degrees = |limit: f64| {
            MetaSchemaRef::Inline(Box::new(MetaSchema {
                minimum: Some(-limit),
                maximum: Some(limit),
                ..MetaSchema::new_with_format("number", "double")
            }))
        };
        let exactly_one = |other: MetaSchemaRef| {
            MetaSchemaRef::Inline(Box::new(MetaSchema {
                one_of: vec![given("zipcode", ZipCodeValue::schema_ref()), other],
                ..MetaSchema::ANY
            }))
        };
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            all_of: vec![
                Self::schema_ref(),
                exactly_one(given("latitude", degrees(90.0))),
                exactly_one(given("longitude", degrees(180.0))),
            ],
            ..MetaSchema::ANY
        }))
    }
}
impl crate::api::contract::DocumentedBody for DistanceRequest {}
impl crate::api::contract::DocumentedBody for AutocompleteRequest {}
impl crate::api::contract::DocumentedBody for CountriesRequest {}
impl crate::api::contract::DocumentedBody for NearestBulkRequest {}
