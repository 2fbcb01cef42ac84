//! City search v3 on the sample with the real gazetteer beside it (`cities500.zip`): the
//! cities the admin columns name, the names people type in their own language, what forms
//! send, population between same-named places, and 404 for placeholders and nonsense.
//! Every expected code set is read from the database file with SQL, not through the
//! service.

use std::collections::BTreeSet;
use std::path::Path;

use postal::domain::CountryCode;
use postal::domain::postal_code::canonical;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_on};

/// The canonical codes of `country`'s records matching `condition` (SQL over
/// `postal_codes`).
pub fn codes_where(db: &Path, country: &str, condition: &str, args: &[&str]) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let cc = CountryCode::parse(country).unwrap();
    let sql = format!("SELECT postal_code FROM postal_codes WHERE country = ?1 AND ({condition})");
    let mut params: Vec<&dyn rusqlite::ToSql> = vec![&country];
    for a in args {
        params.push(a);
    }
    let codes: BTreeSet<String> = conn
        .prepare(&sql)
        .unwrap()
        .query_map(params.as_slice(), |r| r.get::<_, String>(0))
        .unwrap()
        .map(|c| canonical(cc, &c.unwrap()))
        .collect();
    codes.into_iter().collect()
}

/// (status, zipcodes, matchedCity, matchedState, matchedST) of one /api/city question.
pub fn city(
    app: &TestApp,
    key: &str,
    body: Value,
) -> (
    u16,
    Vec<String>,
    Option<String>,
    Option<String>,
    Option<String>,
) {
    let mut body = body;
    body["apiKey"] = json!(key);
    let reply = app.city(body);
    let text = |f: &str| reply.body[f].as_str().map(str::to_string);
    let codes = reply.body["zipcodes"]
        .as_array()
        .map(|a| a.iter().map(|c| c.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    (
        reply.status,
        codes,
        text("matchedCity"),
        text("matchedState"),
        text("matchedST"),
    )
}

/// The same code sets, told by what differs (the sets run to thousands of codes).
#[track_caller]
pub fn assert_same(codes: &[String], expected: &[String], what: &str) {
    let got: BTreeSet<&String> = codes.iter().collect();
    let want: BTreeSet<&String> = expected.iter().collect();
    let extra: Vec<_> = got.difference(&want).take(10).collect();
    let missing: Vec<_> = want.difference(&got).take(10).collect();
    assert!(
        extra.is_empty() && missing.is_empty() && codes.len() == expected.len(),
        "{what}: {} codes, expected {}; extra {extra:?}, missing {missing:?}",
        codes.len(),
        expected.len()
    );
}

fn named(city: &str, state: &str, st: &str) -> (Option<String>, Option<String>, Option<String>) {
    (Some(city.into()), Some(state.into()), Some(st.into()))
}

#[test]
fn tokyo_answers_the_codes_of_the_metropolis_not_toyo() {
    let app = spawn_app();
    let key = app.api_key();
    // The metropolis: admin name1 `Tokyo To` in the region Tokyo To / 40 (the unit is a
    // name in one region, as every place).
    let expected = codes_where(
        &app.db,
        "JP",
        "admin_name1 = 'Tokyo To' AND admin_code1 = '40'",
        &[],
    );
    assert!(expected.len() > 3000, "{}", expected.len());
    for query in ["Tokyo", "TOKYO", "東京", "Tokio"] {
        let (status, codes, c, s, st) = city(&app, &key, json!({"city": query, "country": "JP"}));
        assert_eq!(status, 200, "{query}");
        assert_same(&codes, &expected, query);
        assert_eq!((c, s, st), named("Tokyo To", "Tokyo To", "40"), "{query}");
    }
    // Toyo, asked for by its own name, is still a Toyo: since city search v4 the town of
    // the post named so (Toyo Cho of Kochi Ken), not the neighbourhoods named Toyo.
    let (status, codes, c, s, _) = city(&app, &key, json!({"city": "Toyo", "country": "JP"}));
    assert_eq!(
        (status, c.as_deref(), s.as_deref()),
        (200, Some("Toyo Cho"), Some("Kochi Ken"))
    );
    let toyo = codes_where(
        &app.db,
        "JP",
        "trim(admin_name3) = 'Toyo Cho' OR place_name = 'Toyo Cho'",
        &[],
    );
    assert!(!toyo.is_empty());
    assert_same(&codes, &toyo, "Toyo");
}

#[test]
fn munich_in_every_language_answers_muenchen() {
    let app = spawn_app();
    let key = app.api_key();
    let expected = codes_where(
        &app.db,
        "DE",
        "place_name = 'München' AND admin_code1 = 'BY'",
        &[],
    );
    assert!(expected.len() > 50, "{}", expected.len());
    for query in ["Munich", "Monaco di Baviera", "Мюнхен", "munich."] {
        let (status, codes, c, s, st) = city(&app, &key, json!({"city": query, "country": "DE"}));
        assert_eq!(status, 200, "{query}");
        assert_eq!(codes, expected, "{query}");
        assert_eq!((c, s, st), named("München", "Bayern", "BY"), "{query}");
    }
    // The data's own name stays an exact answer, without matched*.
    let (status, _, c, ..) = city(&app, &key, json!({"city": "München", "country": "DE"}));
    assert_eq!((status, c), (200, None));
}

/// Postal codes are looked for within 8 words of either end of a query, not at every
/// position (a long query of code-like words cost a search at each, 0.6 ms a record):
/// codes there are cut, one deeper inside stays and the query matches nothing.
#[test]
fn codes_are_cut_near_either_end_of_a_query_not_deep_inside_a_long_one() {
    let app = spawn_app();
    let key = app.api_key();
    let berlin = codes_where(&app.db, "DE", "place_name = 'Berlin'", &[]);
    let codes = |n: usize| vec!["10115"; n].join(" ");
    for query in [
        format!("{} Berlin", codes(8)),
        format!("Berlin {}", codes(8)),
        format!("{} Berlin {}", codes(8), codes(8)),
    ] {
        let (status, found, ..) = city(&app, &key, json!({"city": query, "country": "DE"}));
        assert_eq!((status, &found), (200, &berlin), "{query}");
    }
    let deep = format!("{} Berlin", codes(20));
    let (status, ..) = city(&app, &key, json!({"city": deep, "country": "DE"}));
    assert_eq!(status, 404, "{deep}");
    // A name of several words and the country between 8 codes on either side: the
    // country's name is taken off the end of what is left, however long the query.
    let haslach = codes_where(&app.db, "DE", "place_name = 'Haslach im Kinzigtal'", &[]);
    assert!(!haslach.is_empty());
    let codes = |n: usize| vec!["77716"; n].join(" ");
    let query = format!("{} Haslach im Kinzigtal Germany {}", codes(8), codes(8));
    let (status, found, ..) = city(&app, &key, json!({"city": query, "country": "DE"}));
    assert_eq!((status, &found), (200, &haslach), "{query}");
}

#[test]
fn what_forms_send_a_postal_code_a_state_or_the_country_beside_the_city() {
    let app = spawn_app();
    let key = app.api_key();
    let berlin = codes_where(&app.db, "DE", "place_name = 'Berlin'", &[]);
    let (status, codes, c, ..) = city(&app, &key, json!({"city": "Berlin", "country": "DE"}));
    assert_eq!((status, &codes, c), (200, &berlin, None));
    for query in ["10115 Berlin", "Berlin 10115", "Berlin, Germany", "BERLIN!"] {
        let (status, codes, c, ..) = city(&app, &key, json!({"city": query, "country": "DE"}));
        assert_eq!(status, 200, "{query}");
        assert_eq!(codes, berlin, "{query}");
        if query != "BERLIN!" {
            assert_eq!(c.as_deref(), Some("Berlin"), "{query}");
        }
    }
    // A code of two words, written with a hyphen, a space or neither.
    let riga = codes_where(&app.db, "LV", "place_name = 'Riga'", &[]);
    for query in [
        "LV-1001 Riga",
        "LV 1001 Riga",
        "Riga LV 1001",
        "lv-1001, Riga, Latvia",
    ] {
        let (status, codes, c, ..) = city(&app, &key, json!({"city": query, "country": "LV"}));
        assert_eq!(status, 200, "{query}");
        assert_eq!(codes, riga, "{query}");
        assert_eq!(c.as_deref(), Some("Riga"), "{query}");
    }
    let chicago = codes_where(
        &app.db,
        "US",
        "place_name = 'Chicago' AND admin_code1 = 'IL'",
        &[],
    );
    for query in ["Chicago IL 60601", "Chicago, IL", "Chicago Illinois"] {
        let (status, codes, c, s, st) = city(
            &app,
            &key,
            json!({"city": query, "country": "US", "ST": "IL"}),
        );
        assert_eq!(status, 200, "{query}");
        assert_eq!(codes, chicago, "{query}");
        assert_eq!((c, s, st), named("Chicago", "Illinois", "IL"), "{query}");
    }
}

#[test]
fn portland_is_oregons_first_and_each_state_keeps_its_own() {
    let app = spawn_app();
    let key = app.api_key();
    for st in ["OR", "ME"] {
        let expected = codes_where(
            &app.db,
            "US",
            "place_name = 'Portland' AND admin_code1 = ?2",
            &[st],
        );
        let (status, codes, c, ..) = city(
            &app,
            &key,
            json!({"city": "Portland", "country": "US", "ST": st}),
        );
        assert_eq!((status, &codes, c), (200, &expected, None), "{st}");
    }
    // The US needs a state on /api/city (the contract); /api/suggest ranks by population.
    let reply = app.city(json!({"apiKey": key, "city": "Portland", "country": "US"}));
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.body["error"],
        "Missing 'state' or 'ST' in request body"
    );
    let reply = app.suggest(json!({"apiKey": key, "q": "Portland", "limit": 3}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let first = &reply.body["results"][0];
    assert_eq!(
        (first["city"].as_str(), first["ST"].as_str()),
        (Some("Portland"), Some("OR"))
    );
    let reply = app.suggest(json!({"apiKey": key, "q": "Springfield", "limit": 2}));
    let first = &reply.body["results"][0];
    // Springfield MO (170,188) before Springfield MA (154,341).
    assert_eq!(first["ST"].as_str(), Some("MO"), "{:?}", reply.body);
}

/// Queries that name no place: 404 in every country of the sample.
pub const NOT_PLACES: [&str; 7] = [
    "N/A",
    "TBD",
    "test",
    "unknown",
    "Xqzvbnmk",
    "Qwertyuiop",
    "asdf",
];

#[test]
fn placeholders_nonsense_and_a_city_of_another_country_find_nothing() {
    let app = spawn_app();
    let key = app.api_key();
    for country in ["AD", "CA", "DE", "GB", "JP", "LV", "MD", "MT", "US"] {
        let mut queries = NOT_PLACES.to_vec();
        if country != "JP" {
            queries.push("Tokyo");
        }
        for query in queries {
            let (status, codes, c, ..) = city(
                &app,
                &key,
                json!({"city": query, "country": country, "state": "x"}),
            );
            assert_eq!(status, 404, "{query} in {country}: {codes:?} {c:?}");
            if country != "US" {
                let (status, codes, c, ..) =
                    city(&app, &key, json!({"city": query, "country": country}));
                assert_eq!(status, 404, "{query} in {country}: {codes:?} {c:?}");
            }
        }
    }
}

#[test]
fn without_a_usable_gazetteer_city_search_answers_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("no-gazetteer.db");
    let pl = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/PL.txt");
    postal::import::run(&postal::import::Options {
        db: db.clone(),
        sources: vec![concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/geonames/sample.zip").into()],
        country_info: Some(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../shared/geonames/countryInfo.txt"
            )
            .into(),
        ),
        // A postal-code file: not the gazetteer format, so not used.
        gazetteer: Some(pl.into()),
        progress: false,
        allow_shrink: false,
        overrides: None,
        if_changed: false,
    })
    .unwrap();
    let app = spawn_app_on(&db);
    let key = app.api_key();
    let (status, ..) = city(&app, &key, json!({"city": "Munich", "country": "DE"}));
    assert_eq!(status, 404);
    let (status, codes, c, s, _) = city(&app, &key, json!({"city": "Tokyo", "country": "JP"}));
    assert_eq!(
        (status, c.as_deref(), s.as_deref()),
        (200, Some("Toyo"), Some("Tokyo To"))
    );
    let toyo = "place_name = 'Toyo' AND admin_name1 = 'Tokyo To' AND admin_code1 = '40'";
    assert_eq!(codes, codes_where(&app.db, "JP", toyo, &[]));
    // Form input is still cleaned.
    let (status, codes, ..) = city(
        &app,
        &key,
        json!({"city": "10115 München", "country": "DE"}),
    );
    assert_eq!(status, 200);
    assert_eq!(
        codes,
        codes_where(
            &app.db,
            "DE",
            "place_name = 'München' AND admin_code1 = 'BY'",
            &[]
        )
    );
}

/// Words cut short after the first (issue 34): `Frankfurt a.M.` is Frankfurt am Main, not
/// Frankfurt (Oder), which the typo step found; `Freiburg i. Br.` is Freiburg im Breisgau,
/// not Freiburg (Elbe); `Bad Homburg v.d.H.` was a 404.
#[test]
fn words_cut_short_find_the_city_written_in_full() {
    let app = spawn_app();
    let key = app.api_key();
    for (query, name, state, st) in [
        ("Frankfurt a.M.", "Frankfurt am Main", "Hessen", "HE"),
        ("Frankfurt a. M.", "Frankfurt am Main", "Hessen", "HE"),
        (
            "Freiburg i. Br.",
            "Freiburg im Breisgau",
            "Baden-Württemberg",
            "BW",
        ),
        (
            "Bad Homburg v.d.H.",
            "Bad Homburg vor der Höhe",
            "Hessen",
            "HE",
        ),
    ] {
        let (status, codes, c, s, t) = city(&app, &key, json!({"city": query, "country": "DE"}));
        assert_eq!(status, 200, "{query}");
        assert_eq!((c, s, t), named(name, state, st), "{query}");
        let expected = codes_where(&app.db, "DE", "place_name = ?2", &[name]);
        assert_same(&codes, &expected, query);
    }
    // The first word stays whole (3 letters or more).
    let (status, _, c, ..) = city(&app, &key, json!({"city": "Fr a.M.", "country": "DE"}));
    assert!(
        status == 404 || c.as_deref() != Some("Frankfurt am Main"),
        "{c:?}"
    );
}
