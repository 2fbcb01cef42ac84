//! City search v3 on the whole `allCountries.zip` with `cities500.zip`: the cities that
//! GeoNames writes in the admin columns (MX, TR, KR, RU), names in other languages, and
//! 404 for placeholders and nonsense in every country. Expected code sets are read from the
//! database file with SQL.

use postal::domain::CountryCode;
use postal::domain::geo::haversine_km;
use postal::domain::postal_code::canonical;
use serde_json::json;

use crate::city_v3::{NOT_PLACES, assert_same, city, codes_where};
use crate::helpers::{full_template, spawn_app_on};

#[test]
fn the_cities_of_the_admin_columns_answer_with_their_codes() {
    let _heavy = crate::helpers::loads_the_full_dataset();
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

/// The codes whose point (that of its first record by place name, as the index reads
/// them) lies within the radius of a disc holding the gazetteer
/// city's population at 5,000 people per km² (2 to 25 km; docs/city.md, "Cities the
/// data never names"), as the index keeps points (f32).
fn area_codes(db: &std::path::Path, country: &str, city: &str) -> (f64, Vec<String>) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let (lat, lon, population): (f64, f64, f64) = conn
        .query_row(
            "SELECT latitude, longitude, population FROM gazetteer
             WHERE country = ?1 AND name = ?2 ORDER BY population DESC LIMIT 1",
            [country, city],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let radius = (population / (std::f64::consts::PI * 5_000.0))
        .sqrt()
        .clamp(2.0, 25.0);
    let cc = CountryCode::parse(country).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    let mut stmt = conn
        .prepare(
            "SELECT postal_code, latitude, longitude FROM postal_codes
             WHERE country = ?1 AND latitude IS NOT NULL ORDER BY place_folded, id",
        )
        .unwrap();
    let mut rows = stmt.query([country]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        let code = canonical(cc, &r.get::<_, String>(0).unwrap());
        let (la, lo): (f64, f64) = (r.get(1).unwrap(), r.get(2).unwrap());
        seen.entry(code).or_insert((la as f32, lo as f32));
    }
    let codes = seen
        .into_iter()
        .filter(|(_, (la, lo))| haversine_km(f64::from(*la), f64::from(*lo), lat, lon) <= radius)
        .map(|(code, _)| code)
        .collect();
    (radius, codes)
}

#[test]
fn cities_the_data_never_names_answer_the_codes_around_them() {
    let _heavy = crate::helpers::loads_the_full_dataset();
    let app = spawn_app_on(full_template());
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5.00"]);
    // ID writes only kelurahan: Jakarta (8.5 M people) answered `Jakarta Baru` (Maluku,
    // 2,400 km away) and Surabaya the village of that name in Lampung.
    for (city_name, query, km) in [
        ("Jakarta", "Jakarta", 23.0),
        ("Jakarta", "Jacarta", 23.0),
        ("Surabaya", "Surabaya", 13.0),
        ("Surabaya", "surabaya, indonesia", 13.0),
    ] {
        let (radius, expected) = area_codes(&app.db, "ID", city_name);
        assert!(radius > km && radius < km + 1.0, "{city_name}: {radius} km");
        assert!(expected.len() >= 100, "{city_name}: {}", expected.len());
        let (status, codes, c, ..) = city(&app, &key, json!({"city": query, "country": "ID"}));
        assert_eq!((status, c.as_deref()), (200, Some(city_name)), "{query}");
        assert_same(&codes, &expected, query);
    }
    let village = codes_where(&app.db, "ID", "place_name = 'Surabaya'", &[]);
    assert!(!village.is_empty());
    let (_, surabaya) = area_codes(&app.db, "ID", "Surabaya");
    assert!(village.iter().all(|c| !surabaya.contains(c)));
    // HU writes every Budapest code at one point: Buda, its western half (510,108 people),
    // answers them (not the village Boda), named Buda in Budapest.
    let budapest = codes_where(&app.db, "HU", "place_name = 'Budapest'", &[]);
    let (status, codes, c, s, t) = city(&app, &key, json!({"city": "Buda", "country": "HU"}));
    assert_eq!(
        (status, c.as_deref(), s.as_deref(), t.as_deref()),
        (200, Some("Buda"), Some("Budapest"), Some("BU"))
    );
    assert_same(&codes, &area_codes(&app.db, "HU", "Buda").1, "Buda");
    assert!(budapest.iter().all(|c| codes.contains(c)));
    // IN: Delhi is a city-state in admin name1, not the two codes of the village Delhi in
    // Madhya Pradesh.
    let delhi = codes_where(&app.db, "IN", "admin_name1 = 'Delhi'", &[]);
    assert!(delhi.len() >= 90, "{}", delhi.len());
    let (status, codes, c, s, _) = city(&app, &key, json!({"city": "Delhi", "country": "IN"}));
    assert_eq!(
        (status, c.as_deref(), s.as_deref()),
        (200, Some("Delhi"), Some("Delhi"))
    );
    assert_same(&codes, &delhi, "Delhi");
}

#[test]
fn placeholders_and_nonsense_find_nothing_in_any_country() {
    let _heavy = crate::helpers::loads_the_full_dataset();
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

/// The codes of a JP municipality of admin name2 `?2` (SQL for `codes_where`).
const MUNICIPALITY: &str =
    "trim(admin_name2) = ?2 OR (place_name = ?2 AND coalesce(trim(admin_name2), '') = '')";

/// Names as Japan and Mexico write them (issue 34): kanji are matched as written, so two
/// cities whose kanji share a Chinese reading stay two (`富山市` Toyama and `福山市` Fukuyama
/// both folded to `fu shan shi`, and Toyama answered Fukuyama's codes); a prefecture or
/// state is known by its official, romanised and short names (`東京都`, `Tokyo`, `Tokyo
/// To`; `Ciudad de México`, `CDMX`, and the data's `Distrito Federal`).
#[test]
fn names_as_japan_and_mexico_write_them() {
    let _heavy = crate::helpers::loads_the_full_dataset();
    let app = spawn_app_on(full_template());
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5.00"]);
    for (query, unit, name, state) in [
        ("富山市", "Toyama Shi", "Toyama Shi", "Toyama Ken"),
        ("福山市", "Fukuyama Shi", "Fukuyama Shi", "Hiroshima Ken"),
    ] {
        // The unit's codes, and its own general code, which the data writes without admin
        // columns under the unit's name (`Toyama Shi` 939-0000).
        let expected = codes_where(&app.db, "JP", MUNICIPALITY, &[unit]);
        assert!(expected.len() >= 300, "{unit}: {}", expected.len());
        let (status, codes, c, s, _) = city(&app, &key, json!({"city": query, "country": "JP"}));
        assert_eq!(
            (status, c.as_deref(), s.as_deref()),
            (200, Some(name), Some(state)),
            "{query}"
        );
        assert_same(&codes, &expected, query);
    }
    // さいたま市 is Saitama Shi, not Shitamachi (one reading of it).
    let saitama = codes_where(&app.db, "JP", MUNICIPALITY, &["Saitama Shi"]);
    let (status, codes, c, ..) = city(&app, &key, json!({"city": "さいたま市", "country": "JP"}));
    assert_eq!((status, c.as_deref()), (200, Some("Saitama Shi")));
    assert_same(&codes, &saitama, "さいたま市");
    let shinjuku = codes_where(&app.db, "JP", MUNICIPALITY, &["Shinjuku Ku"]);
    for (query, state) in [
        ("新宿区", "東京都"),
        ("新宿区", "Tokyo"),
        ("Shinjuku", "東京都"),
        ("Shinjuku", "Tokyo To"),
        ("Shinjuku", "tokyo-to"),
    ] {
        let (status, codes, c, s, _) = city(
            &app,
            &key,
            json!({"city": query, "state": state, "country": "JP"}),
        );
        assert_eq!(
            (status, c.as_deref(), s.as_deref()),
            (200, Some("Shinjuku Ku"), Some("Tokyo To")),
            "{query} {state}"
        );
        assert_same(&codes, &shinjuku, query);
    }
    // A prefecture's name does not admit another prefecture's city.
    let (status, ..) = city(
        &app,
        &key,
        json!({"city": "新宿区", "state": "大阪府", "country": "JP"}),
    );
    assert_eq!(status, 404);
    let cuauhtemoc = codes_where(
        &app.db,
        "MX",
        "admin_name1 = 'Distrito Federal' AND trim(admin_name2) = 'Cuauhtémoc'",
        &[],
    );
    assert!(cuauhtemoc.len() >= 50, "{}", cuauhtemoc.len());
    for state in [
        "Ciudad de México",
        "Ciudad de Mexico",
        "CDMX",
        "Distrito Federal",
    ] {
        let (status, codes, _, s, _) = city(
            &app,
            &key,
            json!({"city": "Cuauhtémoc", "state": state, "country": "MX"}),
        );
        assert_eq!(
            (status, s.as_deref()),
            (200, Some("Distrito Federal")),
            "{state}"
        );
        assert_same(&codes, &cuauhtemoc, state);
    }
}

/// City search v4 (issue 34): the post's municipalities are the cities. A designated
/// city's ward answers all of its codes by its romaji and its kanji (it answered the one
/// code named after it); a city named like its prefecture, or like neighbourhoods elsewhere,
/// answers the city; MX municipios and ciudades answer whole, the most populous first.
#[test]
fn the_posts_municipalities_are_the_cities() {
    let _heavy = crate::helpers::loads_the_full_dataset();
    let app = spawn_app_on(full_template());
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5.00"]);
    // (country, queries with their state, SQL of the unit's codes, matchedCity, matchedState)
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str, &'a str, &'a str);
    let cases: [Case; 9] = [
        (
            "JP",
            &[
                ("Fushimi-ku", ""),
                ("Fushimi Ku", "Kyoto"),
                ("京都市伏見区", ""),
                ("伏見区", "京都府"),
            ],
            // Its codes, its general code (no admin columns), and the offices of Kyoto Shi
            // whose name begins with the ward's kanji.
            "admin_name1 = 'Kyoto Fu' AND (trim(admin_name3) = 'Fushimi Ku' \
             OR (place_name = 'Fushimi Ku' AND coalesce(trim(admin_name2), '') = '') \
             OR (trim(admin_name2) = 'Kyoto Shi' AND coalesce(trim(admin_name3), '') = '' \
                 AND (replace(replace(place_name, ' ', ''), '　', '') LIKE '京都市伏見区%' \
                   OR replace(replace(place_name, ' ', ''), '　', '') LIKE '伏見区%')))",
            "Fushimi Ku",
            "Kyoto Fu",
        ),
        (
            "JP",
            &[
                ("Fukushima", ""),
                ("Fukushima", "Fukushima Ken"),
                ("福島市", ""),
            ],
            "admin_name1 = 'Fukushima Ken' AND (trim(admin_name2) = 'Fukushima Shi' \
             OR (place_name = 'Fukushima Shi' AND coalesce(trim(admin_name2), '') = ''))",
            "Fukushima Shi",
            "Fukushima Ken",
        ),
        (
            "JP",
            &[("Minato", ""), ("港区", "東京都"), ("Minato-ku", "Tokyo")],
            "admin_name1 = 'Tokyo To' AND (trim(admin_name2) = 'Minato Ku' \
             OR (place_name = 'Minato Ku' AND coalesce(trim(admin_name2), '') = ''))",
            "Minato Ku",
            "Tokyo To",
        ),
        (
            "JP",
            &[("Kita-ku", "Tokyo To"), ("北区", "東京都")],
            "admin_name1 = 'Tokyo To' AND (trim(admin_name2) = 'Kita Ku' \
             OR (place_name = 'Kita Ku' AND coalesce(trim(admin_name2), '') = ''))",
            "Kita Ku",
            "Tokyo To",
        ),
        (
            "JP",
            &[("Yamagata", ""), ("山形市", "")],
            "admin_name1 = 'Yamagata Ken' AND (trim(admin_name2) = 'Yamagata Shi' \
             OR (place_name = 'Yamagata Shi' AND coalesce(trim(admin_name2), '') = ''))",
            "Yamagata Shi",
            "Yamagata Ken",
        ),
        (
            "MX",
            &[("Matamoros", ""), ("Matamoros", "Tamaulipas")],
            "admin_name1 = 'Tamaulipas' AND admin_name2 = 'Matamoros'",
            "Matamoros",
            "Tamaulipas",
        ),
        (
            "MX",
            &[("Centro", "Tabasco"), ("Centro", "")],
            "admin_name1 = 'Tabasco' AND admin_name2 = 'Centro'",
            "Centro",
            "Tabasco",
        ),
        (
            "MX",
            &[
                ("Victoria de Durango", ""),
                ("Victoria de Durango", "Durango"),
            ],
            "admin_name1 = 'Durango' AND admin_name3 = 'Victoria de Durango'",
            "Victoria de Durango",
            "Durango",
        ),
        (
            "MX",
            &[
                ("Ciudad de México", "Ciudad de México"),
                ("Ciudad de Mexico", "CDMX"),
            ],
            "admin_name1 = 'Distrito Federal' AND admin_name3 = 'Ciudad de México'",
            "Ciudad de México",
            "Distrito Federal",
        ),
    ];
    for (country, queries, sql, name, state) in cases {
        let mut expected = codes_where(&app.db, country, sql, &[]);
        if name == "Fushimi Ku" {
            // And the offices of Kyoto Shi that lie at the ward's points.
            let placed = offices_at_the_points_of(&app.db, "Kyoto Fu", "Kyoto Shi", name);
            assert!(!placed.is_empty());
            expected.extend(placed);
            // And its codes without a ward that only its records name so (issue 52).
            expected.extend(placed_by_their_name(&app.db, "Kyoto Shi", name));
            expected.sort();
            expected.dedup();
        }
        assert!(expected.len() >= 90, "{sql}: {}", expected.len());
        for (query, filter) in queries {
            let mut body = json!({"city": query, "country": country});
            if !filter.is_empty() {
                body["state"] = json!(filter);
            }
            let (status, codes, c, s, _) = city(&app, &key, body);
            assert_eq!(
                (status, c.as_deref(), s.as_deref()),
                (200, Some(name), Some(state)),
                "{query} {filter}"
            );
            assert_same(&codes, &expected, query);
        }
    }
}

/// JP: the ordinary codes of a city or district `a2` that the data leaves without their
/// ward or town, whose place name the records of `ward` only carry there: the ward's by
/// their name (`index::city`'s `place_jp_by_name`, written again here in SQL).
pub(crate) fn placed_by_their_name(db: &std::path::Path, a2: &str, ward: &str) -> Vec<String> {
    // The names that the records of one ward or town only carry, `ward`'s among them, in
    // one pass over `a2`'s records (a subquery per row took 48 s of CPU on Sapporo).
    let condition = "admin_name2 = ?2 AND coalesce(admin_name3, '') = '' \
        AND place_name NOT GLOB '*[^ -~]*' \
        AND lower(place_name) IN (SELECT lower(place_name) FROM postal_codes \
            WHERE country = 'JP' AND admin_name2 = ?2 AND admin_name3 <> '' \
            GROUP BY lower(place_name) \
            HAVING count(DISTINCT admin_name3) = 1 AND max(admin_name3 = ?3))";
    codes_where(db, "JP", condition, &[a2, ward])
}

/// JP: the office codes of a designated city (`a1`, `a2`) that neither a ward column nor
/// their name places in a ward, whose nearest ordinary records all lie in `ward`: the
/// ward's by their point (`index::city`'s `place_jp_offices`, written again here from
/// the rows, as the server compares points: in f32).
fn offices_at_the_points_of(db: &std::path::Path, a1: &str, a2: &str, ward: &str) -> Vec<String> {
    let table = include_str!("../../src/index/city/build/jp_municipalities.tsv");
    let kanji: Vec<&str> = table
        .lines()
        .filter_map(|l| match l.split('\t').collect::<Vec<_>>()[..] {
            [t1, t2, t3, names] if t1 == a1 && t2 == a2 && !t3.is_empty() => Some(names),
            _ => None,
        })
        .flat_map(|names| names.split(','))
        .collect();
    let conn = rusqlite::Connection::open(db).unwrap();
    type Row = (String, String, String, Option<f64>, Option<f64>);
    let rows: Vec<Row> = conn
        .prepare(
            "SELECT postal_code, place_name, coalesce(trim(admin_name3), ''), latitude, longitude \
             FROM postal_codes WHERE country = 'JP' AND admin_name1 = ?1 AND trim(admin_name2) = ?2",
        )
        .unwrap()
        .query_map([a1, a2], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let points: Vec<(f32, f32, &str)> = rows
        .iter()
        .filter(|(_, place, a3, ..)| place.is_ascii() && !a3.is_empty())
        .filter_map(|(_, _, a3, lat, lon)| Some(((*lat)? as f32, (*lon)? as f32, a3.as_str())))
        .collect();
    let jp = CountryCode::parse("JP").unwrap();
    rows.iter()
        .filter(|(_, place, a3, ..)| !place.is_ascii() && a3.is_empty())
        .filter(|(_, place, ..)| {
            let name: String = place.chars().filter(|c| !c.is_whitespace()).collect();
            !kanji.iter().any(|k| name.starts_with(k))
        })
        .filter_map(|(code, _, _, lat, lon)| {
            let (lat, lon) = ((*lat)? as f32, (*lon)? as f32);
            let far = |p: &(f32, f32, &str)| (p.0 - lat).powi(2) + (p.1 - lon).powi(2);
            let least = points.iter().map(far).min_by(f32::total_cmp)?;
            let there: Vec<&str> = points
                .iter()
                .filter(|p| far(p) == least)
                .map(|p| p.2)
                .collect();
            (there.iter().all(|a3| *a3 == ward)).then(|| canonical(jp, code))
        })
        .collect()
}
