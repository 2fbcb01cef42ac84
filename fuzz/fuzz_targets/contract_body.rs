//! The request-body parser (`src/api/contract.rs`): any bytes become a JSON object or the
//! contract's 400, and every field reader answers a value or a 400, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use postal::api::contract::ContractJson;
use postal::api::routes::city::CityRequest;
use postal::api::routes::validate_bulk::BulkRequest;
use postal::api::types::CodeRequest;
use postal::domain::PostalQuery;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(body) = ContractJson::<CodeRequest>::from_bytes(bytes) {
        let _ = body.api_key("Missing required field: apiKey");
        let country = body.country();
        if let (Ok(zipcode), Ok(country)) = (body.zipcode(), country) {
            // Integers are padded to the country's length; "99999" stands for its shapes.
            let text = zipcode.text("99999");
            let _ = PostalQuery::parse(country, &text);
        }
        let _ = body.zipcode_echo();
    }
    if let Ok(body) = ContractJson::<CityRequest>::from_bytes(bytes) {
        let _ = body.required_text("city").map(postal::domain::text::fold);
        let _ = body.optional_text("state");
        let _ = body.optional_text("ST");
    }
    if let Ok(body) = ContractJson::<BulkRequest>::from_bytes(bytes) {
        if let Ok(records) = body.bulk_records() {
            assert!((1..=1000).contains(&records.len()));
            for record in records {
                assert!(!record.postal_code.trim().is_empty());
                let _ = PostalQuery::parse(record.country, &record.postal_code);
            }
        }
    }
});
