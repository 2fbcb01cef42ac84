//! Files that are not GeoNames files are refused before they cost the machine's memory:
//! a line longer than 64 KiB (one endless line, a line of tabs), in a `.txt` or a zip,
//! with the file's name and line, exit 1 and the data kept; a download that redirects more
//! than 5 times fails.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

use crate::helpers::{counts_by_country, import, import_with_country_info, open, us_line};

fn zip_of(path: &std::path::Path, entry: &str, body: &[u8]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    zip.start_file(entry, zip::write::SimpleFileOptions::default())
        .unwrap();
    zip.write_all(body).unwrap();
    zip.finish().unwrap();
}

#[test]
fn a_line_longer_than_64_kib_is_refused_and_the_data_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let good = dir.path().join("US.txt");
    std::fs::write(&good, format!("{}\n{}\n", us_line(1), us_line(2))).unwrap();
    import_with_country_info(&db, &good).assert_success();

    // 300 KB of one line, zipped (a few hundred bytes); 100 KB of tabs after a good line.
    let endless = dir.path().join("endless.zip");
    zip_of(&endless, "DE.txt", &vec![b'x'; 300_000]);
    let tabs = dir.path().join("FR.txt");
    let mut text = format!("{}\n", us_line(3)).into_bytes();
    text.extend(vec![b'\t'; 100_000]);
    std::fs::write(&tabs, text).unwrap();
    for (source, name, line) in [
        (&endless, format!("{}:DE.txt", endless.display()), 1),
        (&tabs, tabs.display().to_string(), 2),
    ] {
        let run = import_with_country_info(&db, source);
        assert_eq!(run.exit_code, Some(1), "{}", run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "{name}: line {line} is longer than 65536 bytes: not a GeoNames file"
            )),
            "{}",
            run.stderr
        );
        assert_eq!(counts_by_country(&open(&db)), vec![("US".to_string(), 2)]);
    }
}

#[test]
fn a_download_redirected_more_than_5_times_fails() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 302 Found\r\nLocation: /hop{n}/US.txt\r\nContent-Length: 0\r\n\
                     Connection: close\r\n\r\n"
                )
                .as_bytes(),
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    let url = format!("{base}/US.txt");
    let run = import(
        &db,
        [
            url.as_str(),
            "--country-info",
            crate::helpers::geonames("countryInfo.txt")
                .to_str()
                .unwrap(),
        ],
    );
    assert_eq!(run.exit_code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("downloading {url}: more than 5 redirects")),
        "{}",
        run.stderr
    );
}
