//! City search v3 on the whole `allCountries.zip` with `cities500.zip`: the cities that
//! GeoNames writes in the admin columns (MX, TR, KR, RU), names in other languages, and
//! 404 for placeholders and nonsense in every country. Expected code sets are read from the
//! database file with SQL.

use serde_json::json;

use crate::city_v3::{NOT_PLACES, assert_same, city, codes_where};
use crate::helpers::{full_template, spawn_app_on};

#[test]
fn the_cities_of_the_admin_columns_answer_with_their_codes() {
    let app = spawn_app_on(full_template());
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5.00"]);
    // (country, queries, SQL of the expected codes, matchedCity, matchedState, matchedST)
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, &'a str, &'a str, &'a str);
    let cases: [Case; 9] = [
        (
            "MX",
            &["Guadalajara", "guadalajara, jalisco"],
            "admin_name2 = 'Guadalajara' AND admin_name1 = 'Jalisco' AND admin_code1 = '14'",
            "Guadalajara",
            "Jalisco",
            "14",
        ),
        (
            "MX",
            &["Monterrey"],
            "admin_name2 = 'Monterrey' AND admin_code1 = '19'",
            "Monterrey",
            "Nuevo León",
            "19",
        ),
        (
            "RU",
            &["Москва", "Moscow", "Moskva", "Moscou"],
            "admin_name1 = 'Москва' AND admin_code1 = '48'",
            "Москва",
            "Москва",
            "48",
        ),
        (
            "TR",
            &["Istanbul", "İstanbul"],
            "admin_name1 = 'İstanbul' AND admin_code1 = '34'",
            "İstanbul",
            "İstanbul",
            "34",
        ),
        (
            "KR",
            &["Seoul", "서울"],
            "admin_name1 = '서울특별시' AND admin_code1 = '11'",
            "서울특별시",
            "서울특별시",
            "11",
        ),
        // Where the place name is usually the city, a city written only in an admin
        // column (docs/city.md, the fallback).
        (
            "CA",
            &["Toronto", "Toronto, ON"],
            "admin_name2 = 'Toronto' AND admin_code1 = 'ON'",
            "Toronto",
            "Ontario",
            "ON",
        ),
        (
            "EE",
            &["Tallinn", "Reval"],
            "admin_name2 = 'Tallinn'",
            "Tallinn",
            "Harju maakond",
            "01",
        ),
        (
            "LK",
            &["Colombo"],
            "admin_name2 = 'Colombo'",
            "Colombo",
            "Western Province",
            "36",
        ),
        (
            "ES",
            &["Elche", "Elx"],
            "place_name = 'Elx/Elche'",
            "Elx/Elche",
            "Comunidad Valenciana",
            "VC",
        ),
    ];
    for (country, queries, sql, name, state, st) in cases {
        let expected = codes_where(&app.db, country, sql, &[]);
        assert!(expected.len() >= 17, "{sql}: {}", expected.len());
        for query in queries {
            let (status, codes, c, s, t) =
                city(&app, &key, json!({"city": query, "country": country}));
            assert_eq!(status, 200, "{query}");
            assert_same(&codes, &expected, query);
            assert_eq!(
                (c.as_deref(), s.as_deref(), t.as_deref()),
                (Some(name), Some(state), Some(st)),
                "{query}"
            );
        }
    }
    // Ankara is a province of the data: the city is its part near the city, not Çankara.
    let province = codes_where(&app.db, "TR", "admin_name1 = 'Ankara'", &[]);
    let (status, codes, c, ..) = city(&app, &key, json!({"city": "Ankara", "country": "TR"}));
    assert_eq!((status, c.as_deref()), (200, Some("Ankara")));
    assert!(
        codes.len() >= 20 && codes.iter().all(|c| province.contains(c)),
        "{codes:?}"
    );
    // ... but never above the place the data names so: München is its place, not the
    // Kreisfreie Stadt's 149 codes.
    let munich = codes_where(&app.db, "DE", "place_name = 'München'", &[]);
    for query in ["München", "Munchen"] {
        let (status, codes, c, ..) = city(&app, &key, json!({"city": query, "country": "DE"}));
        assert_eq!((status, c), (200, None), "{query}");
        assert_same(&codes, &munich, query);
    }
    // Guadalajara of Jalisco, not the neighbourhoods of that name in other states.
    let elsewhere = codes_where(
        &app.db,
        "MX",
        "place_name = 'Guadalajara' AND admin_code1 <> '14'",
        &[],
    );
    assert!(!elsewhere.is_empty());
}

#[test]
fn placeholders_and_nonsense_find_nothing_in_any_country() {
    let app = spawn_app_on(full_template());
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5.00"]);
    let conn = rusqlite::Connection::open(&app.db).unwrap();
    let countries: Vec<String> = conn
        .prepare("SELECT code FROM countries WHERE record_count > 0")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(countries.len(), 120);
    let mut found = Vec::new();
    for country in &countries {
        for query in NOT_PLACES {
            let (status, codes, c, ..) = city(
                &app,
                &key,
                json!({"city": query, "country": country, "state": "x"}),
            );
            if status != 404 {
                found.push(format!("{query} in {country}: {c:?} {}", codes.len()));
            }
        }
    }
    assert!(found.is_empty(), "{found:?}");
}
