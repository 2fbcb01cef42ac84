//! The dataset's history: provenance per import, the codes an import adds, removes and
//! moves, retired codes and a code that comes back, the shrink guard, `--if-changed`
//! against a local HTTP server, and overrides. Read back with `postal dataset show` /
//! `dataset changes` (the real `postal` binary) and rusqlite.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};
use sha2::Digest;

use crate::helpers::*;

const POSTAL: &str = env!("CARGO_BIN_EXE_postal");

/// `sample.zip`'s `sample.txt`, read once.
fn sample_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let file = std::fs::File::open(geonames("sample.zip")).unwrap();
        let mut archive = zip::ZipArchive::new(file).unwrap();
        let mut text = String::new();
        archive
            .by_name("sample.txt")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    })
}

/// The sample with `edit` applied to each line's columns (a line it answers `false` for is
/// dropped) and `extra` lines appended, written to `dir/name`.
fn edited_sample(
    dir: &Path,
    name: &str,
    edit: impl Fn(&mut [String]) -> bool,
    extra: &[&str],
) -> PathBuf {
    let mut out = String::new();
    for line in sample_text().lines() {
        let mut columns: Vec<String> = line.split('\t').map(str::to_string).collect();
        if edit(&mut columns) {
            out.push_str(&columns.join("\t"));
            out.push('\n');
        }
    }
    for line in extra {
        out.push_str(line);
        out.push('\n');
    }
    let path = dir.join(name);
    std::fs::write(&path, out).unwrap();
    path
}

/// The edits of the "second import": US 90209 and 90211 removed, US 90210's first record
/// 12 km north, DE 80331's first record another place, US 99999 added.
fn second_edit(c: &mut [String]) -> bool {
    match (c[0].as_str(), c[1].as_str()) {
        ("US", "90209" | "90211") => return false,
        ("US", "90210") => c[9] = "34.2".into(),
        ("DE", "80331") if c[2] == "München" => c[2] = "Altstadt".into(),
        _ => {}
    }
    true
}

const ADDED: &str = "US\t99999\tNowhere\tCalifornia\tCA\t\t\t\t\t34.0\t-118.0\t";

fn import_file(db: &Path, source: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<OsString> = vec![
        "--country-info".into(),
        geonames("countryInfo.txt").into_os_string(),
    ];
    args.extend(extra.iter().map(OsString::from));
    args.push(source.as_os_str().to_owned());
    import(db, args)
}

/// `postal --db DB ARGS...`: its exit code and stdout.
fn postal(db: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(POSTAL)
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("POSTAL_DB")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn postal_json(db: &Path, args: &[&str]) -> Value {
    let (code, stdout, stderr) = postal(db, args);
    assert_eq!(code, 0, "postal {args:?}: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn sha256(path: &Path) -> String {
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap().display().to_string()
}

fn generation(db: &Path) -> i64 {
    number(&open(db), "SELECT generation FROM dataset")
}

#[test]
fn an_import_of_the_sample_records_each_file_it_read_and_every_country_s_codes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    import(&db, [geonames("sample.zip")]).assert_success();
    let shown = postal_json(&db, &["dataset", "show"]);
    let p = &shown["provenance"];
    let file = |name: &str| {
        let path = geonames(name);
        json!({
            "location": canonical(&path),
            "bytes": std::fs::metadata(&path).unwrap().len(),
            "sha256": sha256(&path),
        })
    };
    let with = |mut base: Value, role: &str, extra: Value| {
        base["role"] = json!(role);
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        base
    };
    assert_eq!(
        p["sources"],
        json!([
            with(
                file("sample.zip"),
                "postal",
                json!({"entry": "sample.txt", "entryModified": "2026-11-21T23:08:08"})
            ),
            with(file("countryInfo.txt"), "country_info", json!({})),
            with(file("cities500.zip"), "gazetteer", json!({})),
        ])
    );
    // Every country is new: its codes are counted as added, none listed one by one.
    let counts: Vec<(String, i64, i64, i64)> = p["perCountry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(
                (c["removed"].as_i64(), c["moved"].as_i64()),
                (Some(0), Some(0))
            );
            (
                c["country"].as_str().unwrap().to_string(),
                c["records"].as_i64().unwrap(),
                c["codes"].as_i64().unwrap(),
                c["added"].as_i64().unwrap(),
            )
        })
        .collect();
    let conn = open(&db);
    let expected: Vec<(String, i64, i64, i64)> = SAMPLE_COUNTS
        .iter()
        .map(|(country, rows)| {
            let codes = number(
                &conn,
                &format!(
                    "SELECT count(DISTINCT compact_key) FROM postal_codes WHERE country = '{country}'"
                ),
            );
            (country.to_string(), *rows, codes, codes)
        })
        .collect();
    assert_eq!(counts, expected);
    assert_eq!(shown["generation"], 1);
    assert_eq!(shown["records"], SAMPLE_ROWS);
    assert_eq!(shown["codes"], expected.iter().map(|e| e.2).sum::<i64>());
    assert_eq!(shown["retiredCodes"], 0);
    assert_eq!(shown["changes"], json!([]));
    assert_eq!(
        (p["badLines"].clone(), p["allowShrink"].clone()),
        (json!(0), json!(false))
    );
    assert_eq!(p["overrides"], json!([]));
    assert_eq!(p["finishedAt"], shown["importedAt"]);
}

#[test]
fn a_second_import_lists_the_codes_added_removed_and_moved_and_retires_the_removed_until_they_return()
 {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let first = edited_sample(dir.path(), "first.txt", |_| true, &[]);
    import_file(&db, &first, &[]).assert_success();
    let second = edited_sample(dir.path(), "second.txt", second_edit, &[ADDED]);
    import_file(&db, &second, &[]).assert_success();

    let listed = postal_json(&db, &["dataset", "changes", "--since", "2026-01-01"]);
    let changes = listed["changes"].as_array().unwrap();
    let at = changes[0]["importedAt"].clone();
    let change = |country: &str, code: &str, change: &str, city: &str, lat: f64, lon: f64| {
        json!({"importedAt": at, "generation": 2, "country": country, "postalCode": code,
               "change": change, "city": city, "latitude": lat, "longitude": lon})
    };
    let mut moved_de = change("DE", "80331", "moved", "Altstadt", 48.1345, 11.571);
    moved_de["previousCity"] = json!("München");
    moved_de["previousLatitude"] = json!(48.1345);
    moved_de["previousLongitude"] = json!(11.571);
    let mut moved_us = change("US", "90210", "moved", "Beverly Hills", 34.2, -118.4065);
    moved_us["previousCity"] = json!("Beverly Hills");
    moved_us["previousLatitude"] = json!(34.0901);
    moved_us["previousLongitude"] = json!(-118.4065);
    assert_eq!(
        listed["changes"],
        json!([
            moved_de,
            change(
                "US",
                "90209",
                "removed",
                "Beverly Hills",
                34.0736,
                -118.4004
            ),
            moved_us,
            change("US", "90211", "removed", "Beverly Hills", 34.0652, -118.383),
            change("US", "99999", "added", "Nowhere", 34.0, -118.0),
        ])
    );
    let imports = listed["imports"].as_array().unwrap();
    assert_eq!(imports.len(), 2, "both imports of the period");
    let us = imports[0]["countries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["country"] == "US")
        .unwrap()
        .clone();
    assert_eq!(
        us,
        json!({"country": "US", "records": 41_489, "codes": 41_487, "added": 1, "removed": 2, "moved": 1})
    );
    // --country, and CSV.
    let de = postal_json(
        &db,
        &[
            "dataset",
            "changes",
            "--since",
            "2026-01-01",
            "--country",
            "de",
        ],
    );
    assert_eq!(de["changes"], json!([moved_de]));
    let (code, csv, _) = postal(
        &db,
        &[
            "dataset",
            "changes",
            "--since",
            "2026-01-01",
            "--country",
            "US",
            "--format",
            "csv",
        ],
    );
    assert_eq!(code, 0);
    let at = at.as_str().unwrap();
    assert_eq!(
        csv,
        format!(
            "importedAt,generation,country,postalCode,change,city,latitude,longitude,previousCity,previousLatitude,previousLongitude\n\
             {at},2,US,90209,removed,Beverly Hills,34.0736,-118.4004,,,\n\
             {at},2,US,90210,moved,Beverly Hills,34.2,-118.4065,Beverly Hills,34.0901,-118.4065\n\
             {at},2,US,90211,removed,Beverly Hills,34.0652,-118.383,,,\n\
             {at},2,US,99999,added,Nowhere,34,-118,,,\n"
        )
    );
    // A date after the imports: nothing; a bad date or country: exit 2.
    let none = postal_json(&db, &["dataset", "changes", "--since", "2999-01-01"]);
    assert_eq!(
        (none["imports"].clone(), none["changes"].clone()),
        (json!([]), json!([]))
    );
    assert_eq!(
        postal(&db, &["dataset", "changes", "--since", "yesterday"]).0,
        2
    );
    assert_eq!(
        postal(
            &db,
            &[
                "dataset",
                "changes",
                "--since",
                "2026-01-01",
                "--country",
                "XX"
            ]
        )
        .0,
        2
    );

    let retired = |db: &Path| -> Vec<(String, String, String, bool)> {
        open(db)
            .prepare(
                "SELECT country, postal_code, city, since = (SELECT max(finished_at) FROM imports WHERE generation = 2)
                 FROM retired_codes ORDER BY country, postal_code",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    };
    let beverly = |code: &str| {
        (
            "US".to_string(),
            code.to_string(),
            "Beverly Hills".to_string(),
            true,
        )
    };
    assert_eq!(retired(&db), [beverly("90209"), beverly("90211")]);

    // 90209 comes back: it is no longer retired; 90211 stays retired, dated as before.
    let third = edited_sample(
        dir.path(),
        "third.txt",
        |c| !(c[0] == "US" && c[1] == "90211"),
        &[ADDED],
    );
    import_file(&db, &third, &[]).assert_success();
    assert_eq!(retired(&db), [beverly("90211")]);
    let latest = postal_json(&db, &["dataset", "show"]);
    let added: Vec<&Value> = latest["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["generation"] == 3)
        .collect();
    assert_eq!(
        added
            .iter()
            .map(|c| (
                c["postalCode"].as_str().unwrap(),
                c["change"].as_str().unwrap()
            ))
            .collect::<Vec<_>>(),
        [("80331", "moved"), ("90209", "added"), ("90210", "moved")]
    );
    assert_eq!(latest["retiredCodes"], 1);
}

#[test]
fn an_import_that_loses_over_a_tenth_of_a_country_s_codes_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let first = edited_sample(dir.path(), "first.txt", |_| true, &[]);
    import_file(&db, &first, &[]).assert_success();
    let before = counts_by_country(&open(&db));
    // MT loses its codes starting with M or S (25 of 73); LV and AD are gone.
    let shrunk = edited_sample(
        dir.path(),
        "shrunk.txt",
        |c| {
            !(c[0] == "MT" && (c[1].starts_with('M') || c[1].starts_with('S')))
                && c[0] != "LV"
                && c[0] != "AD"
        },
        &[],
    );
    let run = import_file(&db, &shrunk, &[]);
    assert_eq!(run.exit_code, Some(1), "{run:?}");
    assert_eq!(
        run.stderr.lines().last().unwrap(),
        "postal-import: import refused: AD would vanish (7 codes), LV would vanish (697 codes), \
         MT would lose 34.2% of its codes (73 -> 48); the database keeps its old data \
         (--allow-shrink imports anyway)"
    );
    assert_eq!(generation(&db), 1);
    assert_eq!(counts_by_country(&open(&db)), before);

    import_file(&db, &shrunk, &["--allow-shrink"]).assert_success();
    assert_eq!(generation(&db), 2);
    let shown = postal_json(&db, &["dataset", "show"]);
    assert_eq!(shown["provenance"]["allowShrink"], true);
    assert_eq!(shown["countries"], 7);
    assert_eq!(shown["retiredCodes"], 7 + 697 + 25);
}

/// A one-file HTTP server on loopback: answers GET with the file's bytes and its `ETag` and
/// `Last-Modified`, or 304 when `If-None-Match` names the current ETag; records every
/// request head.
struct Upstream {
    url: String,
    state: Arc<Mutex<(Vec<u8>, String)>>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn start(body: Vec<u8>, etag: &str) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/US.txt", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new((body, etag.to_string())));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (served, seen) = (state.clone(), heads.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let (body, etag) = served.lock().unwrap().clone();
                let not_modified = head
                    .lines()
                    .any(|l| l.eq_ignore_ascii_case(&format!("if-none-match: {etag}")));
                seen.lock().unwrap().push(head);
                let validators = format!(
                    "ETag: {etag}\r\nLast-Modified: Sun, 22 Nov 2026 03:14:27 GMT\r\nConnection: close\r\n"
                );
                let _ = if not_modified {
                    stream.write_all(
                        format!("HTTP/1.1 304 Not Modified\r\n{validators}\r\n").as_bytes(),
                    )
                } else {
                    stream
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\n{validators}Content-Length: {}\r\n\r\n",
                                body.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|()| stream.write_all(&body))
                };
            }
        });
        Upstream { url, state, heads }
    }
}

#[test]
fn if_changed_imports_nothing_when_upstream_answers_304_and_imports_a_new_version() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let v1 = "US\t90210\tBeverly Hills\tCalifornia\tCA\t\t\t\t\t34.0901\t-118.4065\t\n";
    let upstream = Upstream::start(v1.as_bytes().to_vec(), "\"v1\"");
    let by_url = |extra: &[&str]| {
        let mut args: Vec<String> = vec![
            "--country-info".into(),
            geonames("countryInfo.txt").display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(upstream.url.clone());
        import(&db, args)
    };
    // The first run with --if-changed has nothing to compare with: it imports.
    let run = by_url(&["--if-changed"]);
    run.assert_success();
    assert!(
        run.stdout
            .starts_with("imported 1 records, 1 countries in "),
        "{}",
        run.stdout
    );
    let source = &postal_json(&db, &["dataset", "show"])["provenance"]["sources"][0];
    assert_eq!(source["location"], upstream.url.as_str());
    assert_eq!(source["etag"], "\"v1\"");
    assert_eq!(source["lastModified"], "Sun, 22 Nov 2026 03:14:27 GMT");
    assert_eq!(generation(&db), 1);

    let run = by_url(&["--if-changed"]);
    run.assert_success();
    assert_eq!(
        run.stdout,
        "unchanged: the postal sources are those of the last import; nothing imported\n"
    );
    assert_eq!(generation(&db), 1);
    let last = upstream
        .heads
        .lock()
        .unwrap()
        .last()
        .unwrap()
        .to_ascii_lowercase();
    assert!(last.contains("if-none-match: \"v1\"\r\n"), "{last}");
    assert!(
        last.contains("if-modified-since: sun, 22 nov 2026 03:14:27 gmt\r\n"),
        "{last}"
    );

    let v2 = format!("{v1}US\t90211\tBeverly Hills\tCalifornia\tCA\t\t\t\t\t34.0652\t-118.383\t\n");
    *upstream.state.lock().unwrap() = (v2.into_bytes(), "\"v2\"".to_string());
    let run = by_url(&["--if-changed"]);
    run.assert_success();
    assert!(
        run.stdout
            .starts_with("imported 2 records, 1 countries in "),
        "{}",
        run.stdout
    );
    assert_eq!(generation(&db), 2);
    let shown = postal_json(&db, &["dataset", "show"]);
    assert_eq!(shown["provenance"]["sources"][0]["etag"], "\"v2\"");
    assert_eq!(shown["changes"][0]["postalCode"], "90211");
    assert_eq!(shown["changes"][0]["change"], "added");

    // Without the flag, every run imports.
    by_url(&[]).assert_success();
    assert_eq!(generation(&db), 3);
}

#[test]
fn if_changed_compares_a_local_file_by_its_sha_256() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let file = dir.path().join("US.txt");
    std::fs::write(
        &file,
        "US\t90210\tBeverly Hills\t\t\t\t\t\t\t34.09\t-118.4\t\n",
    )
    .unwrap();
    import_file(&db, &file, &["--if-changed"]).assert_success();
    let run = import_file(&db, &file, &["--if-changed"]);
    run.assert_success();
    assert!(run.stdout.starts_with("unchanged: "), "{}", run.stdout);
    std::fs::write(
        &file,
        "US\t90210\tBeverly Hills\t\t\t\t\t\t\t34.10\t-118.4\t\n",
    )
    .unwrap();
    let run = import_file(&db, &file, &["--if-changed"]);
    run.assert_success();
    assert!(
        run.stdout.starts_with("imported 1 records"),
        "{}",
        run.stdout
    );
    assert_eq!(generation(&db), 2);
}

#[test]
fn if_changed_compares_with_the_sources_of_the_live_data_not_of_an_older_import() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    std::fs::write(
        &a,
        "US\t90210\tBeverly Hills\t\t\t\t\t\t\t34.09\t-118.4\t\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "US\t90211\tBeverly Hills\t\t\t\t\t\t\t34.06\t-118.38\t\n",
    )
    .unwrap();
    import_file(&db, &a, &["--if-changed"]).assert_success();
    // Another file imported since (as an operator might, by hand): a.txt unchanged on
    // disk is no longer what the live data holds, so it is imported again.
    import_file(&db, &b, &["--allow-shrink"]).assert_success();
    assert_eq!(generation(&db), 2);
    let run = import_file(&db, &a, &["--if-changed", "--allow-shrink"]);
    run.assert_success();
    assert!(
        run.stdout.starts_with("imported 1 records"),
        "{}",
        run.stdout
    );
    assert_eq!(generation(&db), 3);
    // Now it is the live data's source: unchanged.
    let run = import_file(&db, &a, &["--if-changed"]);
    assert!(run.stdout.starts_with("unchanged: "), "{}", run.stdout);
    assert_eq!(generation(&db), 3);
}

#[test]
fn overrides_are_applied_by_every_import_until_replaced_and_listed_in_the_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let source = edited_sample(dir.path(), "sample.txt", |_| true, &[]);
    let overrides = dir.path().join("overrides.txt");
    std::fs::write(
        &overrides,
        "# local corrections\n\
         add\tUS\t90210\tBEVERLY HILLS\tCalifornia\tCA\tLos Angeles\t037\t\t\t34.1\t-118.41\t4\n\
         add\tUS\t99998\tNew Town\tCalifornia\tCA\t\t\t\t\t34.0\t-118.0\t\n\
         remove\tUS\t90211\t\t\t\t\t\t\t\t\t\t\n",
    )
    .unwrap();
    let overrides_arg = overrides.display().to_string();
    import_file(&db, &source, &["--overrides", &overrides_arg]).assert_success();
    let check = |db: &Path| {
        let conn = open(db);
        let corrected = records(&conn, "US", "90210");
        assert_eq!(corrected.len(), 1, "{corrected:?}");
        assert_eq!(
            (
                corrected[0].place_name.as_str(),
                corrected[0].latitude,
                corrected[0].accuracy
            ),
            ("BEVERLY HILLS", Some(34.1), Some(4))
        );
        assert_eq!(records(&conn, "US", "99998")[0].place_name, "New Town");
        assert!(records(&conn, "US", "90211").is_empty());
    };
    check(&db);
    let shown = postal_json(&db, &["dataset", "show"]);
    assert_eq!(
        shown["provenance"]["overrides"],
        json!([
            {"line": 2, "action": "add", "country": "US", "postalCode": "90210", "placeName": "BEVERLY HILLS"},
            {"line": 3, "action": "add", "country": "US", "postalCode": "99998", "placeName": "New Town"},
            {"line": 4, "action": "remove", "country": "US", "postalCode": "90211", "placeName": ""},
        ])
    );
    let sources = shown["provenance"]["sources"].as_array().unwrap();
    let listed = sources.iter().find(|s| s["role"] == "overrides").unwrap();
    assert_eq!(listed["location"], canonical(&overrides).as_str());
    assert_eq!(listed["sha256"], sha256(&overrides).as_str());

    // The next import, without the flag, applies the stored overrides again.
    import_file(&db, &source, &[]).assert_success();
    check(&db);
    assert_eq!(
        postal_json(&db, &["dataset", "show"])["provenance"]["overrides"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // A bad line refuses the file: nothing changes, the stored overrides stay.
    let bad = dir.path().join("bad.txt");
    std::fs::write(
        &bad,
        "add\tUS\t90210\tX\t\t\t\t\t\t\t\t\t\nfix\tUS\t1\tX\t\t\t\t\t\t\t\t\t\n",
    )
    .unwrap();
    let run = import_file(&db, &source, &["--overrides", &bad.display().to_string()]);
    assert_eq!(run.exit_code, Some(1));
    assert_eq!(
        run.stderr.trim_end(),
        format!(
            "postal-import: {}:2: the first column must be add or remove, not \"fix\"",
            bad.display()
        )
    );
    assert_eq!(generation(&db), 2);
    check(&db);

    // A line of 100 KB is refused before it is held, as in every file an import reads.
    let long = dir.path().join("long.txt");
    let mut text = "# a comment\n".to_string();
    text.push_str(&"\t".repeat(100_000));
    std::fs::write(&long, text).unwrap();
    let run = import_file(&db, &source, &["--overrides", &long.display().to_string()]);
    assert_eq!(run.exit_code, Some(1));
    assert!(
        run.stderr.contains(&format!(
            "{}: line 2 is longer than 65536 bytes",
            long.display()
        )),
        "{}",
        run.stderr
    );
    assert_eq!(generation(&db), 2);

    // An empty file clears them.
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    import_file(&db, &source, &["--overrides", &empty.display().to_string()]).assert_success();
    let conn = open(&db);
    assert_eq!(records(&conn, "US", "90210")[0].place_name, "Beverly Hills");
    assert!(records(&conn, "US", "99998").is_empty());
    assert_eq!(number(&conn, "SELECT count(*) FROM overrides"), 0);
}
