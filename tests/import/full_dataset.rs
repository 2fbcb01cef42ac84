//! The whole `../shared/geonames/allCountries.zip` (about 20 s in a debug build). The
//! import is the run's one import of the whole dataset (`testkit::full_dataset`): the API's
//! tests on the full dataset serve the database this test checks, and whichever binary
//! comes first makes it, with this run of `postal-import`.

use crate::helpers::{
    POSTAL_IMPORT, Run, assert_summary, counts_by_country, number, open, owned, record_counts,
};

/// Rows per country, as `../shared/geonames/README.md` lists them (and `awk` on
/// allCountries.txt counts them).
#[rustfmt::skip]
const README_COUNTS: [(&str, i64); 120] = [
    ("AD", 7), ("AI", 1), ("AL", 494), ("AR", 20260), ("AS", 1), ("AT", 18957), ("AU", 18521), ("AX", 37),
    ("AZ", 1186), ("BD", 1349), ("BE", 2781), ("BG", 5304), ("BM", 112), ("BR", 5525), ("BY", 3133), ("CA", 1657),
    ("CC", 1), ("CH", 4520), ("CL", 346), ("CN", 2352), ("CO", 3681), ("CR", 473), ("CX", 1), ("CY", 1127),
    ("CZ", 15507), ("DE", 23297), ("DK", 1159), ("DO", 544), ("DZ", 15951), ("EC", 1225), ("EE", 5398), ("ES", 37867),
    ("FI", 3576), ("FK", 1), ("FM", 4), ("FO", 130), ("FR", 51611), ("GB", 27450), ("GF", 77), ("GG", 14),
    ("GI", 1), ("GL", 33), ("GP", 105), ("GS", 1), ("GT", 548), ("GU", 21), ("HK", 1), ("HM", 1),
    ("HN", 38), ("HR", 6774), ("HT", 236), ("HU", 3571), ("ID", 81058), ("IE", 139), ("IM", 87), ("IN", 155570),
    ("IO", 1), ("IS", 195), ("IT", 18415), ("JE", 5), ("JP", 146883), ("KE", 890), ("KR", 35583), ("LI", 13),
    ("LK", 1837), ("LT", 21870), ("LU", 4519), ("LV", 6101), ("MA", 1325), ("MC", 29), ("MD", 1753), ("MH", 2),
    ("MK", 220), ("MO", 1), ("MP", 3), ("MQ", 100), ("MT", 73), ("MW", 491), ("MX", 144655), ("MY", 2818),
    ("NC", 52), ("NF", 1), ("NL", 4334), ("NO", 5132), ("NR", 1), ("NU", 1), ("NZ", 1738), ("PA", 729),
    ("PE", 96943), ("PF", 207), ("PH", 2317), ("PK", 2563), ("PL", 72899), ("PM", 2), ("PN", 1), ("PR", 177),
    ("PT", 206942), ("PW", 1), ("RE", 152), ("RO", 37915), ("RS", 1155), ("RU", 43538), ("SE", 18870), ("SG", 121154),
    ("SI", 556), ("SJ", 8), ("SK", 5233), ("SM", 26), ("TC", 1), ("TH", 903), ("TR", 36307), ("UA", 29571),
    ("US", 41490), ("UY", 1964), ("VA", 1), ("VI", 16), ("WF", 3), ("WS", 1), ("YT", 21), ("ZA", 3920),
];

#[test]
fn the_whole_allcountries_zip_loads_1648448_rows_of_120_countries_as_the_readme_counts_them() {
    // `postal-import --db DB allCountries.zip`, as the helpers' `import` runs it.
    let db = testkit::full_dataset(POSTAL_IMPORT);
    let made = testkit::template::run_of(&db);
    let run = Run {
        exit_code: made.exit_code,
        stdout: made.stdout,
        stderr: made.stderr,
    };
    run.assert_success();
    assert_summary(&run, 1_648_448, 120);
    assert_eq!(run.stderr, "", "allCountries.zip has no bad lines");

    let conn = open(&db);
    assert_eq!(
        number(&conn, "SELECT count(*) FROM postal_codes"),
        1_648_448
    );
    assert_eq!(README_COUNTS.iter().map(|(_, n)| n).sum::<i64>(), 1_648_448);
    assert_eq!(counts_by_country(&conn), owned(&README_COUNTS));
    assert_eq!(record_counts(&conn), owned(&README_COUNTS));
    assert_eq!(
        number(
            &conn,
            "SELECT count(*) FROM postal_codes WHERE timezone IS NULL AND latitude IS NOT NULL"
        ),
        0,
        "every record with coordinates has a timezone"
    );
}
