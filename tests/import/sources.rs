//! What SOURCE can be (cli.md): a `.txt` file, a directory (every `.txt`/`.zip` in it, its
//! `countryInfo.txt`), and what happens when it does not exist.

use std::io::Write;

use crate::helpers::{
    assert_summary, counts_by_country, fixture, import, import_with_country_info, number, open,
    us_line,
};

#[test]
fn a_single_txt_file_is_imported_as_a_source() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let run = import_with_country_info(&db, &fixture("PL.txt"));
    run.assert_success();
    assert_summary(&run, 4, 1);
    let conn = open(&db);
    assert_eq!(counts_by_country(&conn), vec![("PL".to_string(), 4)]);
    assert_eq!(number(&conn, "SELECT count(*) FROM countries"), 252);
}

/// A hand-written countryInfo.txt row (19 tab-separated columns) for `code`.
fn country_info_row(code: &str, name: &str, format: &str, regex: &str) -> String {
    let columns = [
        code, "", "", "", name, "", "", "", "", "", "", "", "", format, regex, "", "", "", "",
    ];
    columns.join("\t")
}

#[test]
fn a_directory_source_reads_every_postal_file_in_it_and_its_own_country_info() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let source = dir.path().join("geonames");
    std::fs::create_dir(&source).unwrap();

    std::fs::copy(fixture("PL.txt"), source.join("PL.txt")).unwrap();
    let us: String = (1..=3).map(|i| us_line(i) + "\n").collect();
    let mut zip = zip::ZipWriter::new(std::fs::File::create(source.join("US.zip")).unwrap());
    zip.start_file("US.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    zip.write_all(us.as_bytes()).unwrap();
    zip.finish().unwrap();
    std::fs::write(source.join("readme.txt"), "not postal data\n").unwrap();
    std::fs::write(
        source.join("countryInfo.txt"),
        [
            "#ISO\tISO3\tISO-Numeric\tfips\tCountry\t...".to_string(),
            country_info_row("PL", "Poland (directory copy)", "##-###", r"^\d{2}-\d{3}$"),
            country_info_row("US", "United States (directory copy)", "#####", r"^\d{5}$"),
            String::new(),
        ]
        .join("\n"),
    )
    .unwrap();

    let run = import(&db, [&source]);
    run.assert_success();
    assert_summary(&run, 7, 2);

    let conn = open(&db);
    assert_eq!(
        counts_by_country(&conn),
        vec![("PL".to_string(), 4), ("US".to_string(), 3)]
    );
    let countries: Vec<(String, String)> = conn
        .prepare("SELECT code, name FROM countries ORDER BY code")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(
        countries,
        vec![
            ("PL".to_string(), "Poland (directory copy)".to_string()),
            (
                "US".to_string(),
                "United States (directory copy)".to_string()
            ),
        ]
    );
}

#[test]
fn a_missing_source_file_fails_with_exit_1_and_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    import_with_country_info(&db, &fixture("PL.txt")).assert_success();
    let missing = dir.path().join("nowhere/allCountries.zip");

    let run = import_with_country_info(&db, &missing);

    assert_eq!(run.exit_code, Some(1), "stderr: {}", run.stderr);
    assert_eq!(run.stdout, "");
    let message = run.stderr.trim_end();
    assert!(
        message.contains(&missing.display().to_string()) && message.contains("no such file"),
        "unclear message: {message:?}"
    );
    assert_eq!(message.lines().count(), 1, "one line: {message:?}");
    assert_eq!(
        counts_by_country(&open(&db)),
        vec![("PL".to_string(), 4)],
        "the old data stays"
    );
}
