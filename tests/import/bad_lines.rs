//! Malformed lines (cli.md): skipped, counted, reported on stderr as `file:line: reason`
//! (at most 20 of them); more than 1% of the lines bad fails the import, exit 1, old data kept.

use std::path::{Path, PathBuf};

use crate::helpers::{
    assert_summary, counts_by_country, fixture, import_with_country_info, number, open,
    record_counts, us_line,
};

/// Writes `lines` US lines to `dir/name`; the 1-based line numbers in `bad` are malformed,
/// alternately with 11 columns instead of 12 and with an unparsable latitude.
fn postal_file(dir: &Path, name: &str, lines: usize, bad: &[usize]) -> PathBuf {
    let mut text = String::new();
    for number in 1..=lines {
        let line = us_line(number);
        match bad.iter().position(|&b| b == number) {
            Some(k) if k % 2 == 0 => text.push_str(line.strip_suffix('\t').unwrap()),
            Some(_) => text.push_str(&line.replace("34.0901", "north")),
            None => text.push_str(&line),
        }
        text.push('\n');
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The stderr lines that report a bad line of `file`.
fn reported<'a>(stderr: &'a str, file: &Path) -> Vec<&'a str> {
    let prefix = format!("{}:", file.display());
    stderr.lines().filter(|l| l.starts_with(&prefix)).collect()
}

#[test]
fn a_few_malformed_lines_are_skipped_reported_with_file_and_line_and_the_rest_imported() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let file = postal_file(dir.path(), "US.txt", 1000, &[10, 500, 999]);

    let run = import_with_country_info(&db, &file);
    run.assert_success();
    assert_summary(&run, 997, 1);

    let shown = reported(&run.stderr, &file);
    assert_eq!(shown.len(), 3, "stderr: {}", run.stderr);
    let f = file.display();
    assert!(shown[0].starts_with(&format!("{f}:10: ")) && shown[0].contains("columns"));
    assert!(shown[1].starts_with(&format!("{f}:500: ")) && shown[1].contains("coordinates"));
    assert!(shown[2].starts_with(&format!("{f}:999: ")) && shown[2].contains("columns"));

    let conn = open(&db);
    assert_eq!(counts_by_country(&conn), vec![("US".to_string(), 997)]);
    let place_count = |place: &str| {
        conn.query_row(
            "SELECT count(*) FROM postal_codes WHERE place_name = ?1",
            [place],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
    };
    assert_eq!(place_count("Place 500"), 0);
    assert_eq!(place_count("Place 501"), 1);
}

#[test]
fn at_most_twenty_bad_lines_are_shown_and_the_others_only_counted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let bad: Vec<usize> = (1..=25).map(|k| k * 100).collect(); // 25 of 3000: 0.83%
    let file = postal_file(dir.path(), "US.txt", 3000, &bad);

    let run = import_with_country_info(&db, &file);
    run.assert_success();
    assert_summary(&run, 2975, 1);

    let shown = reported(&run.stderr, &file);
    assert_eq!(shown.len(), 20, "stderr: {}", run.stderr);
    assert!(shown[19].starts_with(&format!("{}:2000: ", file.display())));
    assert!(run.stderr.contains("5 more"), "stderr: {}", run.stderr);
}

#[test]
fn exactly_one_percent_of_bad_lines_is_still_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let bad: Vec<usize> = (1..=10).map(|k| k * 97).collect();
    let file = postal_file(dir.path(), "US.txt", 1000, &bad);

    let run = import_with_country_info(&db, &file);
    run.assert_success();
    assert_summary(&run, 990, 1);
}

#[test]
fn more_than_one_percent_of_bad_lines_fails_with_exit_1_and_keeps_the_old_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    import_with_country_info(&db, &fixture("PL.txt")).assert_success();

    let bad: Vec<usize> = (1..=11).map(|k| k * 90).collect(); // 11 of 1000: 1.1%
    let file = postal_file(dir.path(), "US.txt", 1000, &bad);
    let run = import_with_country_info(&db, &file);

    assert_eq!(run.exit_code, Some(1), "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "", "no summary line for a failed import");
    assert_eq!(reported(&run.stderr, &file).len(), 11);
    assert!(
        run.stderr.contains("11 of 1000 lines are bad"),
        "stderr: {}",
        run.stderr
    );
    let conn = open(&db);
    assert_eq!(counts_by_country(&conn), vec![("PL".to_string(), 4)]);
    assert_eq!(record_counts(&conn), vec![("PL".to_string(), 4)]);
}

#[test]
fn reported_line_numbers_count_blank_lines_and_crlf_line_ends() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    // Lines 1-200 good, 201-202 blank, 203 bad, 204-400 good, 401 bad; CRLF throughout.
    let mut lines: Vec<String> = (1..=200).map(us_line).collect();
    lines.extend([
        String::new(),
        String::new(),
        "US\t99999\tBroken".to_string(),
    ]);
    lines.extend((204..=400).map(us_line));
    lines.push(us_line(401).replace("-118.4065", "west"));
    let file = dir.path().join("US.txt");
    std::fs::write(&file, lines.join("\r\n") + "\r\n").unwrap();

    let run = import_with_country_info(&db, &file);
    run.assert_success();
    assert_summary(&run, 397, 1);
    let shown = reported(&run.stderr, &file);
    let f = file.display();
    assert_eq!(shown.len(), 2, "stderr: {}", run.stderr);
    assert!(shown[0].starts_with(&format!("{f}:203: ")), "{shown:?}");
    assert!(shown[1].starts_with(&format!("{f}:401: ")), "{shown:?}");
    let conn = open(&db);
    let carriage_returns_stored = number(
        &conn,
        "SELECT count(*) FROM postal_codes WHERE place_name LIKE '%' || char(13) || '%'
            OR admin_code3 IS NOT NULL OR accuracy IS NOT NULL",
    );
    assert_eq!(carriage_returns_stored, 0, "the \\r of CRLF is not data");
}

fn check(db: &Path, file: &Path) -> crate::helpers::Run {
    crate::helpers::import(
        db,
        [
            std::ffi::OsStr::new("--check"),
            std::ffi::OsStr::new("--country-info"),
            crate::helpers::geonames("countryInfo.txt").as_os_str(),
            file.as_os_str(),
        ],
    )
}

#[test]
fn check_reports_counts_and_bad_lines_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let file = postal_file(dir.path(), "US.txt", 1000, &[10, 500, 999]);

    let run = check(&db, &file);
    run.assert_success();
    assert!(
        run.stdout
            .starts_with("checked 997 records, 1 countries, 3 bad lines in "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with(": an import would succeed\n"),
        "{}",
        run.stdout
    );
    let shown = reported(&run.stderr, &file);
    assert_eq!(shown.len(), 3, "stderr: {}", run.stderr);
    assert!(shown[1].starts_with(&format!("{}:500: ", file.display())));
    assert!(!db.exists(), "--check created the database");
}

#[test]
fn check_of_a_file_an_import_would_refuse_exits_1_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let file = postal_file(dir.path(), "US.txt", 100, &[1, 2]);

    let run = check(&db, &file);
    assert_eq!(run.exit_code, Some(1), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .starts_with("checked 98 records, 1 countries, 2 bad lines in "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with(": an import would fail\n"),
        "{}",
        run.stdout
    );
    assert!(!db.exists());
}
