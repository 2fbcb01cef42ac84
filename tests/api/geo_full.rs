//! /api/nearest and /api/radius on the whole `allCountries.zip`, against a brute-force
//! scan: the haversine distance from each of 1,000 points to every code's first record
//! (read from the file with SQL, not through the service) that a dot product of unit
//! vectors cannot rule out, ordered by distance, then country, then compact code
//! (docs/geography.md). The same codes must come back in the
//! same order. The whole dataset is imported once per test run (`full_template`).

use std::cmp::Ordering;
use std::collections::HashSet;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

use crate::helpers::{full_template, spawn_app_on};

/// A code's first record, as the brute force knows it.
struct Code {
    country: String,
    key: String,
    latitude: f64,
    longitude: f64,
}

/// The textbook haversine on the mean Earth radius (docs/geography.md), with the cosine of
/// the code's latitude computed once (the same `f64` as computing it each time).
fn haversine_km(lat1: f64, lon1: f64, cos_phi1: f64, lat2: f64, lon2: f64, cos_phi2: f64) -> f64 {
    let d_phi = (lat2 - lat1).to_radians();
    let d_lambda = (lon2 - lon1).to_radians();
    let a = (d_phi / 2.0).sin().powi(2) + cos_phi1 * cos_phi2 * (d_lambda / 2.0).sin().powi(2);
    2.0 * EARTH_KM * a.sqrt().min(1.0).asin()
}

/// The mean Earth radius of `haversine_km`.
const EARTH_KM: f64 = 6371.0088;

/// The point on the unit sphere at (`lat`, `lon`) in degrees.
fn unit_vector(lat: f64, lon: f64) -> [f64; 3] {
    let (phi, lambda) = (lat.to_radians(), lon.to_radians());
    [
        phi.cos() * lambda.cos(),
        phi.cos() * lambda.sin(),
        phi.sin(),
    ]
}

fn metres(km: f64) -> f64 {
    (km * 1000.0).round() / 1000.0
}

fn compact(code: &str) -> String {
    code.chars()
        .filter(|c| *c != ' ' && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// Every code's first record with coordinates, straight from the file.
fn first_records(db: &std::path::Path) -> Vec<Code> {
    let conn = rusqlite::Connection::open(db).expect("opening the database");
    let mut stmt = conn
        .prepare("SELECT country, compact_key, latitude, longitude FROM postal_codes ORDER BY id")
        .unwrap();
    let mut seen = HashSet::new();
    let mut codes = Vec::new();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<f64>>(2)?,
                r.get::<_, Option<f64>>(3)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (country, key, latitude, longitude) = row.unwrap();
        if !seen.insert((country.clone(), key.clone())) {
            continue;
        }
        if let (Some(latitude), Some(longitude)) = (latitude, longitude) {
            codes.push(Code {
                country,
                key,
                latitude,
                longitude,
            });
        }
    }
    codes
}

/// 1,000 points: fixed ones across the antimeridian (Aleutians, Fiji, Chatham Islands,
/// Chukotka) and near the poles (Svalbard, both poles), then points near random codes
/// (where the data is dense) and points uniform on the sphere.
fn points(codes: &[Code], rng: &mut StdRng) -> Vec<(f64, f64)> {
    let mut points = vec![
        (51.7, 179.9),
        (51.88, -176.65),
        (52.9, 173.2),
        (52.0, 180.0),
        (52.0, -180.0),
        (-18.14, 178.44),
        (-16.8, 179.99),
        (-16.8, -179.99),
        (-17.0, 180.0),
        (-43.95, -176.56),
        (-44.0, 179.5),
        (-43.8, -176.2),
        (65.0, 179.9),
        (66.0, -179.5),
        (78.22, 15.65),
        (79.0, 12.0),
        (80.5, 20.0),
        (77.0, 15.5),
        (89.9, 45.0),
        (90.0, 0.0),
        (-90.0, 0.0),
        (-89.5, 123.0),
    ];
    while points.len() < 700 {
        let code = &codes[rng.random_range(0..codes.len())];
        let lat = (code.latitude + rng.random_range(-0.3..0.3)).clamp(-90.0, 90.0);
        let mut lon = code.longitude + rng.random_range(-0.3..0.3);
        if lon > 180.0 {
            lon -= 360.0;
        }
        if lon < -180.0 {
            lon += 360.0;
        }
        points.push((lat, lon));
    }
    while points.len() < 1000 {
        let lat = (rng.random_range(-1.0f64..1.0)).asin().to_degrees();
        points.push((lat, rng.random_range(-180.0..180.0)));
    }
    points
}

/// (country, compact code, distanceKm) of each result.
fn answered(results: &Value) -> Vec<(String, String, f64)> {
    results
        .as_array()
        .expect("results")
        .iter()
        .map(|p| {
            (
                p["country"].as_str().unwrap().to_string(),
                compact(p["zipcode"].as_str().unwrap()),
                p["distanceKm"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn nearest_and_radius_answer_what_a_brute_force_haversine_scan_of_all_countries_finds() {
    let _heavy = crate::helpers::loads_the_full_dataset();
    let db = full_template();
    let codes = first_records(db);
    assert!(codes.len() > 900_000, "{}", codes.len());
    let cos_phi: Vec<f64> = codes
        .iter()
        .map(|c| c.latitude.to_radians().cos())
        .collect();

    let app = spawn_app_on(db);
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5.00"]);

    // Every code as a unit vector. A dot product orders codes as the great-circle distance
    // does, up to rounding: the haversine (the oracle) is computed for every code a dot
    // product cannot rule out, with a margin far above any rounding (1e-9 of the cosine:
    // 285 m at the nearest codes, millimetres farther away), instead of for all 1.6 M
    // codes at each of the 1,000 points (50 s of the test run).
    let unit: Vec<[f64; 3]> = codes
        .iter()
        .map(|c| unit_vector(c.latitude, c.longitude))
        .collect();
    const MARGIN: f64 = 1e-9;

    let mut rng = StdRng::seed_from_u64(20261122);
    let points = points(&codes, &mut rng);
    let mut dots: Vec<f64> = Vec::with_capacity(codes.len());
    let mut kth: Vec<f64> = Vec::with_capacity(codes.len());
    let mut truncated_seen = 0;
    for (n, &(lat, lon)) in points.iter().enumerate() {
        let cos_center = lat.to_radians().cos();
        let p = unit_vector(lat, lon);
        dots.clear();
        dots.extend(unit.iter().map(|u| u[0] * p[0] + u[1] * p[1] + u[2] * p[2]));
        // The haversine distance of every code whose cosine is at least `cos` - MARGIN.
        let within_cos = |cos: f64| -> Vec<(f64, usize)> {
            dots.iter()
                .enumerate()
                .filter(|(_, d)| **d >= cos - MARGIN)
                .map(|(i, _)| {
                    let c = &codes[i];
                    (
                        haversine_km(lat, lon, cos_center, c.latitude, c.longitude, cos_phi[i]),
                        i,
                    )
                })
                .collect()
        };
        let order = |a: &(f64, usize), b: &(f64, usize)| -> Ordering {
            a.0.total_cmp(&b.0)
                .then_with(|| codes[a.1].country.cmp(&codes[b.1].country))
                .then_with(|| codes[a.1].key.cmp(&codes[b.1].key))
        };
        let expected = |list: &[(f64, usize)]| -> Vec<(String, String, f64)> {
            list.iter()
                .map(|(km, i)| {
                    (
                        codes[*i].country.clone(),
                        codes[*i].key.clone(),
                        metres(*km),
                    )
                })
                .collect()
        };

        // Nearest 10 (a few points with other limits).
        let limit = [10, 10, 10, 1, 100][n % 5];
        kth.clear();
        kth.extend_from_slice(&dots);
        let (_, limit_th, _) = kth.select_nth_unstable_by(limit - 1, |a, b| b.total_cmp(a));
        let mut nearest = within_cos(*limit_th);
        nearest.sort_by(order);
        nearest.truncate(limit);
        let reply =
            app.nearest(json!({"apiKey": key, "latitude": lat, "longitude": lon, "limit": limit}));
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        assert_eq!(
            answered(&reply.body["results"]),
            expected(&nearest),
            "nearest {limit} to ({lat}, {lon})"
        );

        // Radius: mostly up to 50 km, every tenth point 500 km (truncated where dense).
        let radius = if n % 10 == 0 {
            500.0
        } else {
            rng.random_range(0.5..50.0)
        };
        let mut within: Vec<(f64, usize)> = within_cos((radius / EARTH_KM).cos())
            .into_iter()
            .filter(|(km, _)| *km <= radius)
            .collect();
        within.sort_by(order);
        let truncated = within.len() > 1000;
        within.truncate(1000);
        let reply = app
            .radius(json!({"apiKey": key, "latitude": lat, "longitude": lon, "radiusKm": radius}));
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        assert_eq!(
            answered(&reply.body["results"]),
            expected(&within),
            "{radius} km around ({lat}, {lon})"
        );
        assert_eq!(reply.body["truncated"], json!(truncated));
        truncated_seen += usize::from(truncated);
    }
    assert!(truncated_seen > 10, "{truncated_seen} truncated radii");
    // 2,000 queries at 28 micro-dollars from 5.028 USD.
    assert_eq!(app.balance_micros(&account), 5_028_000 - 2000 * 28);
}
