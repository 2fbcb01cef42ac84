//! City search v5 (issue 52) on the whole `allCountries.zip` with `cities500.zip`: a city
//! district by its number however it is written, never a radius of other districts nor
//! another number; a name the data lacks is no hamlet a letter from it; TR's districts and
//! metropolitan provinces, CO's municipios and PH's cities are the cities, before villages
//! of their names; JP codes without their ward are placed by their name; regions by their
//! official names as their countries write them.
//! Expected code sets are read from the database file with SQL.

use serde_json::json;

use crate::city_full::placed_by_their_name;
use crate::city_v3::{assert_same, city, codes_where};
use crate::helpers::{TestApp, full_template, spawn_app_on};

#[test]
fn districts_far_villages_tr_municipalities_and_official_regions_on_the_whole_dataset() {
    let _heavy = crate::helpers::loads_the_full_dataset();
    let app = spawn_app_on(full_template());
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5.00"]);
    a_district_answers_its_own_codes_however_its_number_is_written(&app, &key);
    a_name_the_data_lacks_is_no_far_hamlet(&app, &key);
    tr_districts_and_metropolitan_provinces_are_the_cities(&app, &key);
    co_municipios_and_ph_cities_are_the_cities(&app, &key);
    jp_codes_without_their_ward_are_placed_by_their_name(&app, &key);
    regions_by_their_official_names(&app, &key);
}

/// Paris, Lyon and Marseille's arrondissements, which the data writes `Paris 02`, asked as
/// people and the gazetteer write them: the arrondissement's codes, never the codes
/// around its point (`Paris 13e Arrondissement` answered 252 codes of 19 arrondissements
/// and two suburbs) nor another number (`Paris 2` answered Paris 20, `Paris 2e
/// Arrondissement` the 12th's radius).
fn a_district_answers_its_own_codes_however_its_number_is_written(app: &TestApp, key: &str) {
    for (city_name, count) in [("Paris", 20), ("Lyon", 9), ("Marseille", 16)] {
        for n in 1..=count {
            let data = format!("{city_name} {n:02}");
            let expected = codes_where(&app.db, "FR", "place_name = ?2", &[&data]);
            assert!(!expected.is_empty(), "{data}: the data changed");
            let ordinal = if n == 1 {
                "1er".to_string()
            } else {
                format!("{n}e")
            };
            for query in [
                data.clone(),
                format!("{city_name} {n}"),
                format!("{city_name} {ordinal}"),
                format!("{city_name} {ordinal} Arrondissement"),
                format!("{city_name} {ordinal} arr."),
            ] {
                let (status, codes, c, s, _) =
                    city(app, key, json!({"city": query, "country": "FR"}));
                assert_eq!(status, 200, "{query}");
                assert_same(&codes, &expected, &query);
                if query == data {
                    assert_eq!((c, s), (None, None), "{query}: the data's own name");
                } else {
                    assert_eq!(c.as_deref(), Some(data.as_str()), "{query}");
                }
            }
        }
    }
    // A typo of the city's name still finds it, with a number kept: `Marseile 5e`.
    let expected = codes_where(&app.db, "FR", "place_name = 'Marseille 05'", &[]);
    let (status, codes, c, ..) = city(app, key, json!({"city": "Marseile 5e", "country": "FR"}));
    assert_eq!((status, c.as_deref()), (200, Some("Marseille 05")));
    assert_same(&codes, &expected, "Marseile 5e");
}

/// `La Hague`, a commune the data writes by its old communes (`Beaumont-Hague`...), answered
/// `Lahage`, a hamlet of one code 700 km away: a typo is not taken for a hamlet far from
/// every place the query's words name.
fn a_name_the_data_lacks_is_no_far_hamlet(app: &TestApp, key: &str) {
    let (status, codes, ..) = city(app, key, json!({"city": "La Hague", "country": "FR"}));
    assert_eq!((status, codes.len()), (404, 0), "La Hague");
    let lahage = codes_where(&app.db, "FR", "place_name = 'Lahage'", &[]);
    assert_eq!(lahage, ["31370"], "the data changed");
    let (status, codes, c, ..) = city(app, key, json!({"city": "Lahage", "country": "FR"}));
    assert_eq!((status, c), (200, None), "its own name");
    assert_same(&codes, &lahage, "Lahage");
    // A typo no other name holds still finds the hamlet, and so does one in the region
    // the query names.
    let (status, codes, c, ..) = city(app, key, json!({"city": "Lahagr", "country": "FR"}));
    assert_eq!((status, c.as_deref()), (200, Some("Lahage")));
    assert_same(&codes, &lahage, "Lahagr");
    let (status, codes, c, ..) = city(
        app,
        key,
        json!({"city": "Lahague", "state": "Occitanie", "country": "FR"}),
    );
    assert_eq!((status, c.as_deref()), (200, Some("Lahage")));
    assert_same(&codes, &lahage, "Lahague in Occitanie");
    // A town a letter away is found anywhere, as before.
    let (status, _, c, ..) = city(app, key, json!({"city": "Marseile", "country": "FR"}));
    assert_eq!((status, c.as_deref()), (200, Some("Marseille")));
}

/// TR writes its cities only in the admin columns (the place names are mahalle and
/// villages): every district is a city, and a metropolitan province (law 6360) is one whole,
/// before the villages of their names (`Kadıköy` answered 33 codes of villages across the
/// country, `Kocaeli` a village of Balıkesir).
fn tr_districts_and_metropolitan_provinces_are_the_cities(app: &TestApp, key: &str) {
    let kadikoy = codes_where(
        &app.db,
        "TR",
        "admin_name1 = 'İstanbul' AND admin_name2 = 'Kadiköy'",
        &[],
    );
    assert!(kadikoy.len() > 10, "the data changed: {kadikoy:?}");
    let (status, codes, c, s, _) = city(app, key, json!({"city": "Kadıköy", "country": "TR"}));
    assert_eq!(
        (status, c.as_deref(), s.as_deref()),
        (200, Some("Kadiköy"), Some("İstanbul"))
    );
    assert_same(&codes, &kadikoy, "Kadıköy");
    let kocaeli = codes_where(&app.db, "TR", "admin_name1 = 'Kocaeli'", &[]);
    let (status, codes, c, ..) = city(app, key, json!({"city": "Kocaeli", "country": "TR"}));
    assert_eq!((status, c.as_deref()), (200, Some("Kocaeli")));
    assert_same(&codes, &kocaeli, "Kocaeli");
    // The village is found in its own province.
    let village = codes_where(
        &app.db,
        "TR",
        "place_name = 'Kocaeli' AND admin_name1 = 'Balikesir'",
        &[],
    );
    assert_eq!(village.len(), 1, "the data changed");
    let (status, codes, c, ..) = city(
        app,
        key,
        json!({"city": "Kocaeli", "state": "Balikesir", "country": "TR"}),
    );
    assert_eq!((status, c), (200, None));
    assert_same(&codes, &village, "Kocaeli in Balıkesir");
    // A province that is no metropolitan municipality is not a city: its central district
    // of the same name is (Çorum).
    let corum = codes_where(
        &app.db,
        "TR",
        "admin_name1 = 'Çorum' AND admin_name2 = 'Çorum'",
        &[],
    );
    let (status, codes, ..) = city(app, key, json!({"city": "Çorum", "country": "TR"}));
    assert_eq!(status, 200);
    assert_same(&codes, &corum, "Çorum");
}

/// CO's municipios (admin name2) and PH's cities (admin name3, Metro Manila's) are the
/// cities as TR's districts are: a name answers one whole municipio, the one a person
/// means first, not every place of its name across the country (`Argelia` answered 7
/// codes of three departments), and a municipio named as its department answers the
/// municipio (`Boyacá` in Boyacá answered the department's 59 codes); `Pasig` answered 51
/// codes around its point and `City of Makati` was 404.
fn co_municipios_and_ph_cities_are_the_cities(app: &TestApp, key: &str) {
    let municipio = |a1: &str, a2: &str| {
        let codes = codes_where(
            &app.db,
            "CO",
            "admin_name1 = ?2 AND admin_name2 = ?3",
            &[a1, a2],
        );
        assert!(!codes.is_empty(), "the data changed: {a2}, {a1}");
        codes
    };
    let (status, codes, c, s, _) = city(app, key, json!({"city": "Argelia", "country": "CO"}));
    assert_eq!(
        (status, c.as_deref(), s.as_deref()),
        (200, Some("Argelia"), Some("Cauca"))
    );
    assert_same(&codes, &municipio("Cauca", "Argelia"), "Argelia");
    let (status, codes, ..) = city(
        app,
        key,
        json!({"city": "Argelia", "state": "Antioquia", "country": "CO"}),
    );
    assert_eq!(status, 200);
    assert_same(
        &codes,
        &municipio("Antioquia", "Argelia"),
        "Argelia, Antioquia",
    );
    let (status, codes, ..) = city(
        app,
        key,
        json!({"city": "Boyacá", "state": "Boyaca", "country": "CO"}),
    );
    assert_eq!(status, 200);
    assert_same(&codes, &municipio("Boyaca", "Boyacá"), "Boyacá, Boyacá");
    for (query, unit) in [
        ("Pasig", "City of Pasig"),
        ("Pasig City", "City of Pasig"),
        ("City of Makati", "City of Makati"),
        ("Makati", "City of Makati"),
    ] {
        let expected = codes_where(&app.db, "PH", "admin_name3 = ?2", &[unit]);
        assert!(expected.len() > 10, "the data changed: {unit}");
        let (status, codes, c, ..) = city(app, key, json!({"city": query, "country": "PH"}));
        assert_eq!((status, c.as_deref()), (200, Some(unit)), "{query}");
        assert_same(&codes, &expected, query);
    }
}

/// A JP code the data writes under a designated city without its ward (`Kita10-Jonishi`,
/// `Sapporo Shi`, no admin name3) is its ward's when the records of one ward only carry
/// its place name: `札幌市中央区` answered 103 of Japan Post's 285 codes, now 182; a code
/// so placed is no other ward's.
fn jp_codes_without_their_ward_are_placed_by_their_name(app: &TestApp, key: &str) {
    let own = codes_where(
        &app.db,
        "JP",
        "admin_name2 = 'Sapporo Shi' AND admin_name3 = 'Chuo Ku'",
        &[],
    );
    let named = placed_by_their_name(&app.db, "Sapporo Shi", "Chuo Ku");
    assert!(named.len() > 50, "the data changed: {named:?}");
    let (status, chuo, c, ..) = city(app, key, json!({"city": "札幌市中央区", "country": "JP"}));
    assert_eq!((status, c.as_deref()), (200, Some("Chuo Ku")));
    for code in own.iter().chain(&named) {
        assert!(chuo.contains(code), "{code} is Chuo Ku's");
    }
    let (status, kita, ..) = city(app, key, json!({"city": "札幌市北区", "country": "JP"}));
    assert_eq!(status, 200);
    assert!(!kita.is_empty());
    for code in &named {
        assert!(!kita.contains(code), "{code} is Chuo Ku's, not Kita Ku's");
    }
}

/// A `state` as the country writes its region officially, bilingual forms and all
/// (`Trentino-Alto Adige/Südtirol` is ISTAT's; `Vlaams Gewest`, `Région wallonne`, `Région
/// de Bruxelles-Capitale` the Belgian regions' own), answers as the data's name does.
fn regions_by_their_official_names(app: &TestApp, key: &str) {
    let cases = [
        (
            "IT",
            "Trento",
            "Trentino-Alto Adige/Südtirol",
            "Trentino-Alto Adige",
        ),
        (
            "IT",
            "Aosta",
            "Valle d'Aosta/Vallée d'Aoste",
            "Valle D'Aosta",
        ),
        ("BE", "Gent", "Vlaams Gewest", "Vlaanderen"),
        ("BE", "Namur", "Région wallonne", "Wallonie"),
        (
            "BE",
            "Ixelles",
            "Région de Bruxelles-Capitale",
            "Bruxelles-Capitale",
        ),
        ("FR", "Rennes", "Brittany", "Bretagne"),
    ];
    for (country, name, official, data) in cases {
        let body = |state: &str| json!({"city": name, "state": state, "country": country});
        let (status, codes, ..) = city(app, key, body(data));
        assert_eq!(status, 200, "{name}, {data}");
        assert!(!codes.is_empty());
        let (status, official_codes, ..) = city(app, key, body(official));
        assert_eq!(status, 200, "{name}, {official}");
        assert_same(&official_codes, &codes, official);
    }
}
