//! City search v4 beyond JP and MX (issue 34) on the whole `allCountries.zip` with
//! `cities500.zip`: a town, never the district named after it; a city's other name that a
//! typo reaches; what forms add (a code the data lacks, the country in its own language);
//! a name in another script, named; regions by their official and English names; and the
//! municipality of a JP office code as its lookup's city. Expected code sets are read
//! from the database file with SQL.

use serde_json::{Value, json};

use crate::city_v3::{assert_same, city, codes_where};
use crate::helpers::{TestApp, full_template, spawn_app_on};

#[test]
fn towns_forms_other_scripts_regions_and_offices_on_the_whole_dataset() {
    let _heavy = crate::helpers::loads_the_full_dataset();
    let app = spawn_app_on(full_template());
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5.00"]);
    towns_not_the_districts_named_after_them(&app, &key);
    other_names_forms_and_scripts(&app, &key);
    regions_by_their_official_and_english_names(&app, &key);
    the_city_of_a_jp_office_code_is_its_municipality(&app, &key);
}

/// A district, Bezirk, okres or arrondissement named like its town holds other towns: the
/// town answers (every place of its name, unnamed), not the district.
fn towns_not_the_districts_named_after_them(app: &TestApp, key: &str) {
    let cases = [
        ("AT", "Mödling", 1),
        ("AT", "Sankt Johann im Pongau", 1),
        ("CH", "Biel/Bienne", 6),
        ("BE", "Leuven", 1),
        ("BE", "Gent", 1),
        ("BE", "Antwerpen", 7),
        ("DE", "Gießen", 5),
        ("CZ", "Karlovy Vary", 1),
        ("CZ", "Hradec Králové", 1),
    ];
    for (country, name, count) in cases {
        let expected = codes_where(&app.db, country, "place_name = ?2", &[name]);
        assert_eq!(expected.len(), count, "{name}: the data changed");
        let (status, codes, c, s, _) = city(app, key, json!({"city": name, "country": country}));
        assert_eq!((status, c, s), (200, None, None), "{name}");
        assert_same(&codes, &expected, name);
    }
    // A city of a million people is its admin unit, suburbs and all (Bruxelles' 19
    // communes, which the gazetteer lists as towns of their own).
    let brussels = codes_where(
        &app.db,
        "BE",
        "admin_name2 = 'Bruxelles (19 communes)'",
        &[],
    );
    let (status, codes, c, ..) = city(app, key, json!({"city": "Brussels", "country": "BE"}));
    assert_eq!(
        (status, c.as_deref()),
        (200, Some("Bruxelles (19 communes)"))
    );
    assert_same(&codes, &brussels, "Brussels");
    // A city written only in an admin column, which holds no other town, still answers
    // with that unit's codes (Toronto's 41 FSAs, one of them the place named Toronto).
    let toronto = codes_where(&app.db, "CA", "admin_name2 = 'Toronto'", &[]);
    let (status, codes, c, ..) = city(app, key, json!({"city": "Toronto", "country": "CA"}));
    assert_eq!((status, c.as_deref()), (200, Some("Toronto")));
    assert_same(&codes, &toronto, "Toronto");
}

fn other_names_forms_and_scripts(app: &TestApp, key: &str) {
    let named = |query: &str, country: &str, sql: &str, args: &[&str], name: &str| {
        let expected = codes_where(&app.db, country, sql, args);
        assert!(!expected.is_empty(), "{query}: the data changed");
        let (status, codes, c, ..) = city(app, key, json!({"city": query, "country": country}));
        assert_eq!((status, c.as_deref()), (200, Some(name)), "{query}");
        assert_same(&codes, &expected, query);
    };
    // An English name one letter from a city's other name (`Coruna`), and from a hamlet's
    // own name (`Coruña`, Las Palmas): the city of 245,468 people.
    named(
        "Corunna",
        "ES",
        "place_name = 'A Coruña' AND admin_name1 = 'Galicia'",
        &[],
        "A Coruña",
    );
    // Names equally close: the data's own first (villages and towns the gazetteer knows,
    // or a city under 100,000 people, also called so).
    named(
        "Pnelem",
        "ID",
        "place_name = 'Pelem' AND admin_code1 = '35'",
        &[],
        "Pelem",
    );
    let gudalur = "place_name = 'Gudalur' AND admin_name1 = 'Tamil Nadu'";
    named("Gdualur", "IN", gudalur, &[], "Gudalur");
    // Codes the data lacks, in the country's format, and the country in its own language,
    // before or after the code.
    let warszawa = "place_name = 'Warszawa' AND admin_name1 = 'Mazovia'";
    named("00-950 Warszawa", "PL", warszawa, &[], "Warszawa");
    named("Warszawa 00-950", "PL", warszawa, &[], "Warszawa");
    named("Warszawa, Polska", "PL", warszawa, &[], "Warszawa");
    named("Warszawa 00-950, Polska", "PL", warszawa, &[], "Warszawa");
    let london = "place_name = 'London' AND admin_name1 = 'England'";
    named("London SW1A 1AA", "GB", london, &[], "London");
    named("SW1A 1AA London, UK", "GB", london, &[], "London");
    named("London SW1A 1AA, UK", "GB", london, &[], "London");
    // A name that ends like the country, or begins with a code's letters, after a code of
    // the data: the name, whole.
    for (query, country, name) in [
        ("69935-000 Assis Brasil", "BR", "Assis Brasil"),
        ("42-260 Kamienica Polska", "PL", "Kamienica Polska"),
        ("3731 De Bilt", "NL", "De Bilt"),
    ] {
        named(query, country, "place_name = ?2", &[name], name);
    }
    named("Roma, Italia", "IT", "place_name = 'Roma'", &[], "Roma");
    // Genève's numbered districts (`Genève 11`) are Genève's (docs/city.md, "Districts").
    let geneve = "place_name = 'Genève' OR place_name GLOB 'Genève [0-9]*'";
    named("Genève, Suisse", "CH", geneve, &[], "Genève");
    // A name found through another script's transliteration names the place it found;
    // the same name as the data writes it does not.
    let lviv = "place_name = 'Львів' AND admin_name1 = 'Lvivska'";
    named("Lviv", "UA", lviv, &[], "Львів");
    let expected = codes_where(&app.db, "UA", lviv, &[]);
    let (status, codes, c, ..) = city(app, key, json!({"city": "Львів", "country": "UA"}));
    assert_eq!((status, c), (200, None));
    assert_same(&codes, &expected, "Львів");
}

/// A state filter takes a region's official name, in each official language, and its
/// English name; GeoNames writes some of DE's Länder both ways, and both are the Land.
fn regions_by_their_official_and_english_names(app: &TestApp, key: &str) {
    let cases: [(&str, &str, &[&str], &str); 8] = [
        (
            "DE",
            "München",
            &["Bayern", "Bavaria"],
            "admin_name1 = 'Bayern'",
        ),
        (
            "PL",
            "Kraków",
            &["Małopolskie", "Lesser Poland"],
            "admin_name1 = 'Lesser Poland'",
        ),
        ("IT", "Milano", &["Lombardy", "Lombardia"], "1 = 1"),
        (
            "ES",
            "Barcelona",
            &["Catalonia", "Catalunya", "Cataluña"],
            "1 = 1",
        ),
        (
            "NL",
            "Haarlem",
            &["Noord-Holland", "North Holland"],
            "1 = 1",
        ),
        ("CH", "Lausanne", &["Vaud", "Waadt"], "1 = 1"),
        ("BE", "Gent", &["Flanders", "Vlaanderen"], "1 = 1"),
        ("AT", "Innsbruck", &["Tyrol", "Tirol"], "1 = 1"),
    ];
    for (country, name, states, region) in cases {
        // The place, and its numbered districts (`Lausanne 25`).
        let sql = format!("(place_name = ?2 OR place_name GLOB ?2 || ' [0-9]*') AND {region}");
        let expected = codes_where(&app.db, country, &sql, &[name]);
        assert!(!expected.is_empty(), "{name}: the data changed");
        let unfiltered = city(app, key, json!({"city": name, "country": country}));
        for state in states {
            let body = json!({"city": name, "country": country, "state": state});
            let (status, codes, ..) = city(app, key, body);
            assert_eq!(status, 200, "{name}, {state}");
            assert_eq!(codes, unfiltered.1, "{name}, {state}");
            assert_same(&codes, &expected, state);
        }
    }
    // The same names as a query's trailing words (the state a form appends).
    for (country, query, name, sql) in [
        (
            "DE",
            "München Bavaria",
            "München",
            "place_name = 'München' AND admin_name1 = 'Bayern'",
        ),
        (
            "DE",
            "Dresden Saxony",
            "Dresden",
            "place_name = 'Dresden' AND admin_name1 = 'Sachsen'",
        ),
        (
            "PL",
            "Kraków Małopolskie",
            "Kraków",
            "place_name = 'Kraków'",
        ),
    ] {
        let expected = codes_where(&app.db, country, sql, &[]);
        assert!(!expected.is_empty(), "{query}: the data changed");
        let (status, codes, c, ..) = city(app, key, json!({"city": query, "country": country}));
        assert_eq!((status, c.as_deref()), (200, Some(name)), "{query}");
        assert_same(&codes, &expected, query);
    }
    // A region of another country's name is still no region here.
    let body = json!({"city": "München", "country": "DE", "state": "Styria"});
    assert_eq!(city(app, key, body).0, 404);
    // DE: a code GeoNames files under `Bavaria` is in Bayern too (/api/verify's region).
    let verify = |state: &str| -> Value {
        let body = json!({"apiKey": key, "country": "DE", "zipcode": "82317",
                          "city": "Finanzamt", "state": state});
        app.post("/api/verify", &body).body
    };
    assert_eq!(verify("Bayern")["result"], "match");
    assert_eq!(verify("Bavaria")["result"], "match");
}

/// JP office codes carry a company or an office in the place-name column: their lookup's
/// city is the municipality (the town of a district, else the city), their metacode's
/// placeName the company, and the town's city search holds them.
fn the_city_of_a_jp_office_code_is_its_municipality(app: &TestApp, key: &str) {
    let cases = [
        // Kyoto Shi's admin columns, no ward, a name that places it nowhere.
        ("6168586", "Kyoto Shi", "東映太秦映画村"),
        // Kameda Gun's: the town of the records at its point (Higashionuma, Nanae Cho).
        (
            "0411392",
            "Nanae Cho",
            "株式会社　プリンスホテル　函館大沼プリンスホテル",
        ),
        // One of Tokyo's wards.
        ("1008918", "Chiyoda Ku", "国土交通省"),
    ];
    for (code, municipality, company) in cases {
        let body = json!({"apiKey": key, "country": "JP", "zipcode": code});
        let lookup = app.lookup(body.clone());
        assert_eq!(lookup.status, 200, "{code}");
        assert_eq!(lookup.body["city"], municipality, "{code}");
        let meta = app.post("/api/metacode", &body);
        assert_eq!(meta.body["meta"]["placeName"], company, "{code}");
        let distance = app.post(
            "/api/distance",
            &json!({"apiKey": key, "from": {"zipcode": code, "country": "JP"},
                    "to": {"zipcode": "1000001", "country": "JP"}}),
        );
        assert_eq!(distance.body["from"]["city"], municipality, "{code}");
    }
    let (status, codes, c, ..) = city(app, key, json!({"city": "Nanae", "country": "JP"}));
    assert_eq!((status, c.as_deref()), (200, Some("Nanae Cho")));
    assert!(codes.contains(&"0411392".to_string()), "{codes:?}");
    // An ordinary code's city stays its place name.
    let body = json!({"apiKey": key, "country": "JP", "zipcode": "1600022"});
    assert_eq!(app.lookup(body).body["city"], "Shinjuku");
}
