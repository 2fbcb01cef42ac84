//! Examples of the shared shapes and of the postal operations' responses (the OpenAPI
//! document's, from the real data), apart from the shapes themselves (`types`).

use super::*;

pub(in crate::api) fn example_performance() -> Performance {
    Performance {
        auth_time: Some(Millis(std::time::Duration::from_micros(11))),
        rate_limit_check_time: Some(Millis(std::time::Duration::from_micros(6))),
        balance_time: Some(Millis(std::time::Duration::from_micros(212))),
        processing_time: Some(Millis(std::time::Duration::from_micros(14))),
        total_time: Millis(std::time::Duration::from_micros(262)),
    }
}

pub(in crate::api) fn example_envelope(balance: f64) -> Envelope {
    Envelope {
        balance,
        performance: example_performance(),
        rate_limit: example_rate_limit(),
        billed: true,
    }
}

/// The envelope of a free operation (`totalTime` only).
pub(in crate::api) fn example_free_envelope() -> Envelope {
    Envelope {
        balance: 4.999972,
        performance: Performance {
            auth_time: None,
            rate_limit_check_time: None,
            balance_time: None,
            processing_time: None,
            total_time: Millis(std::time::Duration::from_micros(105)),
        },
        rate_limit: example_rate_limit(),
        billed: false,
    }
}

pub(in crate::api) fn example_rate_limit() -> RateLimitStatus {
    let off = || WindowUse {
        limit: None,
        current: None,
        approaching_limit: false,
    };
    RateLimitStatus {
        enabled: false,
        per_minute: off(),
        per_hour: off(),
        per_day: off(),
    }
}

impl Example for LookupResponse {
    fn example() -> Self {
        LookupResponse {
            city: "Beverly Hills".into(),
            state: "California".into(),
            st: "CA".into(),
            latitude: Some(34.0901),
            longitude: Some(-118.4065),
            envelope: example_envelope(4.999972),
        }
    }
}

impl Example for CityResponse {
    fn example() -> Self {
        CityResponse {
            zipcodes: ["94102", "94103", "94104"].map(String::from).to_vec(),
            matched_city: Some("San Francisco".into()),
            matched_state: Some("California".into()),
            matched_st: Some("CA".into()),
            envelope: example_envelope(4.999972),
        }
    }
}

impl Example for MetaResponse {
    fn example() -> Self {
        MetaResponse {
            meta: Meta::World(Box::new(WorldMeta {
                postal_code: "1000001".into(),
                country: "JP".into(),
                place_name: "Chiyoda".into(),
                latitude: Some(35.6841),
                longitude: Some(139.7521),
                timezone: Some("Asia/Tokyo".into()),
                admin_name1: Some("Tokyo To".into()),
                admin_code1: Some("40".into()),
                admin_name2: Some("Chiyoda Ku".into()),
                admin_code2: None,
                admin_name3: None,
                admin_code3: None,
                accuracy: None,
                admin_level1: None,
                admin_level2: None,
                municipality: None,
                city: None,
            })),
            envelope: example_envelope(4.999972),
        }
    }
}

impl Example for ValidateResponse {
    fn example() -> Self {
        ValidateResponse {
            valid: true,
            zipcode: ZipCodeValue(Value::String("SW1A 1AA".into())),
            response_time: Millis(std::time::Duration::from_micros(262)),
            envelope: example_envelope(4.999972),
        }
    }
}

impl Example for BulkResponse {
    fn example() -> Self {
        let result = |code: &str,
                      country: &str,
                      normalized: Option<&str>,
                      reason: Option<Reason>| BulkResult {
            postal_code: code.into(),
            country_code: country.into(),
            valid: normalized.is_some(),
            normalized: normalized.map(String::from),
            reason: NullableReason(reason),
        };
        BulkResponse {
            results: vec![
                result("90210", "US", Some("90210"), None),
                result("SW1A 1AA", "GB", Some("SW1A"), None),
                result("ABCDE", "US", None, Some(Reason::InvalidFormat)),
            ],
            total_cost: 0.000084,
            envelope: example_envelope(4.999916),
        }
    }
}

impl Example for AboutResponse {
    fn example() -> Self {
        AboutResponse {
            about: "postal: postal-code lookup, validation and city search over GeoNames data, billed per query."
                .into(),
            version: env!("CARGO_PKG_VERSION").into(),
            coverage: "1,648,448 postal codes in 120 countries. Data: GeoNames (CC BY 4.0)".into(),
            usage: "POST JSON with your apiKey to /api/lookup ...".into(),
            envelope: example_free_envelope(),
        }
    }
}
