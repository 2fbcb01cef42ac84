//! The gazetteer (`cities500.zip`, GeoNames' populated places): imported with the postal
//! data, from `--gazetteer FILE` or beside the postal source; a missing or malformed one
//! is said on stderr and not used, and never fails the import.

use std::collections::HashSet;
use std::io::Read;

use crate::helpers::{assert_summary, fixture, geonames, import, number, open};

const SAMPLE_COUNTRIES: [&str; 9] = ["AD", "CA", "DE", "GB", "JP", "LV", "MD", "MT", "US"];

fn args<'a>(extra: &'a [&'a str], source: &'a str) -> Vec<String> {
    let mut args = vec![
        "--country-info".to_string(),
        geonames("countryInfo.txt").display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(source.to_string());
    args
}

#[test]
fn the_whole_cities500_beside_the_sample_is_imported_for_the_sample_countries() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let sample = geonames("sample.zip").display().to_string();
    let run = import(&db, args(&[], &sample));
    run.assert_success();
    assert_summary(&run, 248_711, 9);
    // The file read independently: its rows of the sample's countries.
    let mut archive =
        zip::ZipArchive::new(std::fs::File::open(geonames("cities500.zip")).unwrap()).unwrap();
    let mut text = String::new();
    archive
        .by_name("cities500.txt")
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let countries: HashSet<&str> = SAMPLE_COUNTRIES.into_iter().collect();
    let expected = text
        .lines()
        .filter(|l| countries.contains(l.split('\t').nth(8).unwrap()))
        .count() as i64;
    assert!(expected > 40_000, "{expected}");
    let conn = open(&db);
    assert_eq!(number(&conn, "SELECT count(*) FROM gazetteer"), expected);
    let munich: (String, i64, String) = conn
        .query_row(
            "SELECT name, population, alternate_names FROM gazetteer WHERE id = 2867714",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(munich.0, "Munich");
    assert_eq!(munich.1, 1_505_005);
    assert!(munich.2.split(',').any(|n| n == "Monaco di Baviera"));
}

#[test]
fn a_gazetteer_given_by_flag_is_imported_and_a_later_import_without_one_empties_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let pl = fixture("PL.txt").display().to_string();
    let gazetteer = fixture("gazetteer.txt").display().to_string();
    // PL has postal data; the fixture's places are of DE, JP and US: none is kept.
    let run = import(&db, args(&["--gazetteer", &gazetteer], &pl));
    run.assert_success();
    assert_eq!(number(&open(&db), "SELECT count(*) FROM gazetteer"), 0);

    let source = dir.path().join("source");
    std::fs::create_dir(&source).unwrap();
    let us = "US\t97201\tPortland\tOregon\tOR\tMultnomah\t051\t\t\t45.5079\t-122.69\t4\n";
    std::fs::write(source.join("US.txt"), us).unwrap();
    let us_file = source.join("US.txt").display().to_string();
    // PL is replaced by US: a shrink, allowed.
    let run = import(
        &db,
        args(&["--gazetteer", &gazetteer, "--allow-shrink"], &us_file),
    );
    run.assert_success();
    let conn = open(&db);
    // Every US line of the fixture (Portland OR and ME, Springfields), nothing else.
    let expected = std::fs::read_to_string(fixture("gazetteer.txt"))
        .unwrap()
        .lines()
        .filter(|l| l.split('\t').nth(8) == Some("US"))
        .count() as i64;
    assert_eq!(expected, 9);
    assert_eq!(number(&conn, "SELECT count(*) FROM gazetteer"), expected);
    assert_eq!(
        number(&conn, "SELECT population FROM gazetteer WHERE id = 5746545"),
        652_503
    );
    drop(conn);

    // No cities500.zip beside the source and no flag: said, and the table is emptied.
    let run = import(&db, args(&[], &us_file));
    run.assert_success();
    assert!(
        run.stderr.contains(
            "no gazetteer (no cities500.zip beside the postal data, no --gazetteer): \
             city search answers from the postal data alone"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(number(&open(&db), "SELECT count(*) FROM gazetteer"), 0);
}

#[test]
fn a_missing_or_malformed_gazetteer_is_said_and_not_used_and_the_postal_data_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let pl = fixture("PL.txt").display().to_string();
    let missing = dir
        .path()
        .join("nowhere/cities500.zip")
        .display()
        .to_string();
    let run = import(&db, args(&["--gazetteer", &missing], &pl));
    run.assert_success();
    assert_summary(&run, 4, 1);
    assert!(
        run.stderr.contains(&format!(
            "gazetteer {missing} not used: no such file; city search answers from the postal data alone"
        )),
        "{}",
        run.stderr
    );

    // A postal-code file is not a gazetteer: 12 columns a line, not 19.
    let run = import(&db, args(&["--gazetteer", &pl], &pl));
    run.assert_success();
    assert_summary(&run, 4, 1);
    assert!(
        run.stderr
            .contains(&format!("{pl}:1: 12 columns, expected 19")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "gazetteer {pl} not used: no line of it is a gazetteer place (4 lines); \
             city search answers from the postal data alone"
        )),
        "{}",
        run.stderr
    );
    let conn = open(&db);
    assert_eq!(number(&conn, "SELECT count(*) FROM gazetteer"), 0);
    assert_eq!(number(&conn, "SELECT count(*) FROM postal_codes"), 4);
}

#[test]
fn a_directory_source_uses_its_cities500_zip_as_the_gazetteer_not_as_postal_codes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let source = dir.path().join("geonames");
    std::fs::create_dir(&source).unwrap();
    let us = "US\t97201\tPortland\tOregon\tOR\tMultnomah\t051\t\t\t45.5079\t-122.69\t4\n";
    std::fs::write(source.join("US.txt"), us).unwrap();
    let mut zip = zip::ZipWriter::new(std::fs::File::create(source.join("cities500.zip")).unwrap());
    zip.start_file("cities500.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    std::io::Write::write_all(
        &mut zip,
        std::fs::read(fixture("gazetteer.txt")).unwrap().as_slice(),
    )
    .unwrap();
    zip.finish().unwrap();
    let run = import(&db, args(&[], &source.display().to_string()));
    run.assert_success();
    assert_summary(&run, 1, 1);
    assert_eq!(number(&open(&db), "SELECT count(*) FROM gazetteer"), 9);
}
