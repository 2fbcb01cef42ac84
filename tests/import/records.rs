//! Admin columns as each country's data fills them: JP, GB, MT from sample.zip; PL from
//! `tests/fixtures/PL.txt` (sample.zip has no PL; the fixture is four lines copied from
//! allCountries.txt).

use crate::helpers::{
    Record, fixture, import_with_country_info, open, record, records, sample, text,
};

#[test]
fn a_japanese_record_keeps_prefecture_and_city_and_a_compact_key_without_hyphen() {
    let conn = open(&sample().db);
    assert_eq!(
        record(&conn, "JP", "100-0001", "Chiyoda"),
        Record {
            country: "JP".into(),
            postal_code: "100-0001".into(),
            compact_key: "1000001".into(),
            place_name: "Chiyoda".into(),
            admin_name1: text("Tokyo To"),
            admin_code1: text("40"),
            admin_name2: text("Chiyoda Ku"),
            admin_code2: None,
            admin_name3: None,
            admin_code3: None,
            latitude: Some(35.6841),
            longitude: Some(139.7521),
            accuracy: None,
            timezone: text("Asia/Tokyo"),
        }
    );
}

#[test]
fn a_british_record_keeps_nation_county_and_district_with_its_code() {
    let conn = open(&sample().db);
    assert_eq!(
        record(&conn, "GB", "M9", "Manchester"),
        Record {
            country: "GB".into(),
            postal_code: "M9".into(),
            compact_key: "M9".into(),
            place_name: "Manchester".into(),
            admin_name1: text("England"),
            admin_code1: text("ENG"),
            admin_name2: text("Greater Manchester"),
            admin_code2: None,
            admin_name3: text("Manchester District (B)"),
            admin_code3: text("E08000003"),
            latitude: Some(53.522),
            longitude: Some(-2.2139),
            accuracy: None,
            timezone: text("Europe/London"),
        }
    );
}

#[test]
fn a_maltese_record_keeps_its_locality_and_letter_code() {
    let conn = open(&sample().db);
    assert_eq!(
        record(&conn, "MT", "ATD", "Attard"),
        Record {
            country: "MT".into(),
            postal_code: "ATD".into(),
            compact_key: "ATD".into(),
            place_name: "Attard".into(),
            admin_name1: text("Attard"),
            admin_code1: text("01"),
            admin_name2: None,
            admin_code2: None,
            admin_name3: None,
            admin_code3: None,
            latitude: Some(35.8917),
            longitude: Some(14.4319),
            accuracy: None,
            timezone: text("Europe/Malta"),
        }
    );
}

#[test]
fn a_polish_record_keeps_voivodeship_county_and_commune_with_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    import_with_country_info(&db, &fixture("PL.txt")).assert_success();
    let conn = open(&db);
    assert_eq!(
        records(&conn, "PL", "30-001"),
        vec![Record {
            country: "PL".into(),
            postal_code: "30-001".into(),
            compact_key: "30001".into(),
            place_name: "Kraków".into(),
            admin_name1: text("Lesser Poland"),
            admin_code1: text("77"),
            admin_name2: text("Kraków"),
            admin_code2: text("1261"),
            admin_name3: text("Kraków"),
            admin_code3: text("126101"),
            latitude: Some(50.0759),
            longitude: Some(19.941),
            accuracy: None,
            timezone: text("Europe/Warsaw"),
        }]
    );
    let folded: String = conn
        .query_row(
            "SELECT place_folded FROM postal_codes WHERE postal_code = '59-700'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(folded, "boleslawiec", "Ł is folded for the city search");
}
