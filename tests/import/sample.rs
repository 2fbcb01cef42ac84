//! sample.zip (AD, CA, DE, GB, JP, LV, MD, MT, US): what one import of it stores and prints.

use crate::helpers::{
    Record, SAMPLE_COUNTS, SAMPLE_ROWS, assert_summary, counts_by_country, number, open, owned,
    record, record_counts, sample, text,
};

#[test]
fn every_line_of_sample_zip_is_stored_under_its_country() {
    let conn = open(&sample().db);
    assert_eq!(counts_by_country(&conn), owned(&SAMPLE_COUNTS));
    assert_eq!(
        number(&conn, "SELECT count(*) FROM postal_codes"),
        SAMPLE_ROWS
    );
}

#[test]
fn the_countries_table_holds_all_252_countries_with_the_loaded_counts() {
    let conn = open(&sample().db);
    assert_eq!(number(&conn, "SELECT count(*) FROM countries"), 252);
    assert_eq!(record_counts(&conn), owned(&SAMPLE_COUNTS));
    let (name, regex): (String, String) = conn
        .query_row(
            "SELECT name, postal_regex FROM countries WHERE code = 'US'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (name.as_str(), regex.as_str()),
        ("United States", r"^\d{5}(-\d{4})?$")
    );
}

#[test]
fn the_import_prints_one_summary_line_with_rows_and_countries() {
    let run = &sample().run;
    assert_summary(run, SAMPLE_ROWS, 9);
    assert_eq!(
        run.stderr, "",
        "no bad lines, no progress bar off a terminal"
    );
}

#[test]
fn us_90210_is_beverly_hills_los_angeles_county_california() {
    let conn = open(&sample().db);
    assert_eq!(
        record(&conn, "US", "90210", "Beverly Hills"),
        Record {
            country: "US".into(),
            postal_code: "90210".into(),
            compact_key: "90210".into(),
            place_name: "Beverly Hills".into(),
            admin_name1: text("California"),
            admin_code1: text("CA"),
            admin_name2: text("Los Angeles"),
            admin_code2: text("037"),
            admin_name3: None,
            admin_code3: None,
            latitude: Some(34.0901),
            longitude: Some(-118.4065),
            accuracy: None,
            timezone: text("America/Los_Angeles"),
        }
    );
}
