//! The geography benchmark's client (`bench/geo/run.sh` runs it against a release server on
//! the full dataset): `processingTime` p50/p99 of /api/nearest (limit 10), /api/radius
//! (25 km around London, Paris, New York) and /api/nearest-bulk (1,000 points), beside a
//! brute-force haversine scan of every code in this process, and the geography index's own
//! build time and memory.
//!
//! Usage: geo-bench DB URL API_KEY

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use postal::domain::CountryCode;
use postal::domain::geo::{Coordinates, Limit, haversine_km};
use postal::index::geo::{GeoIndex, GeoSource};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

const NEAREST_QUERIES: usize = 2000;
const RADIUS_QUERIES: usize = 500;
const BULK_QUERIES: usize = 30;
const BRUTE_QUERIES: usize = 50;

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn percentiles(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

fn processing_ms(body: &Value) -> f64 {
    body["performance"]["processingTime"]
        .as_str()
        .and_then(|t| t.trim_end_matches("ms").parse().ok())
        .expect("processingTime")
}

struct Code {
    country: String,
    key: String,
    latitude: f64,
    longitude: f64,
}

fn first_records(db: &str) -> Vec<Code> {
    let conn = rusqlite::Connection::open(db).expect("opening the database");
    let mut stmt = conn
        .prepare("SELECT country, compact_key, latitude, longitude FROM postal_codes ORDER BY id")
        .expect("prepare");
    let mut rows = stmt.query([]).expect("query");
    let mut seen = HashSet::new();
    let mut codes = Vec::new();
    while let Some(r) = rows.next().expect("row") {
        let country: String = r.get(0).unwrap();
        let key: String = r.get(1).unwrap();
        let (lat, lon): (Option<f64>, Option<f64>) = (r.get(2).unwrap(), r.get(3).unwrap());
        if seen.insert((country.clone(), key.clone()))
            && let (Some(latitude), Some(longitude)) = (lat, lon)
        {
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

/// The brute-force peer: haversine to every code, then the nearest 10 or those within `km`.
fn brute(codes: &[Code], lat: f64, lon: f64, within: Option<f64>) -> usize {
    let mut d: Vec<(f64, usize)> = codes
        .iter()
        .enumerate()
        .map(|(i, c)| (haversine_km(lat, lon, c.latitude, c.longitude), i))
        .collect();
    match within {
        Some(km) => d.iter().filter(|(x, _)| *x <= km).count(),
        None => {
            d.select_nth_unstable_by(10, |a, b| a.0.total_cmp(&b.0));
            10
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (db, url, key) = (&args[1], &args[2], &args[3]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = |path: &str, body: &Value| -> Value {
        let mut response = agent
            .post(format!("{url}{path}"))
            .header("content-type", "application/json")
            .send(body.to_string().as_bytes())
            .expect("request");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        serde_json::from_str(&response.body_mut().read_to_string().expect("body")).expect("json")
    };

    let codes = first_records(db);
    let mut rng = StdRng::seed_from_u64(7);
    let near_codes: Vec<(f64, f64)> = (0..NEAREST_QUERIES)
        .map(|_| {
            let c = &codes[rng.random_range(0..codes.len())];
            (
                (c.latitude + rng.random_range(-0.2..0.2)).clamp(-90.0, 90.0),
                (c.longitude + rng.random_range(-0.2..0.2)).clamp(-180.0, 180.0),
            )
        })
        .collect();

    println!(
        "geography benchmark: {} codes with coordinates",
        codes.len()
    );
    println!(
        "{:<34} {:>10} {:>10} {:>8}",
        "query (server processingTime)", "p50 ms", "p99 ms", "n"
    );
    let mut ms = Vec::new();
    for (lat, lon) in &near_codes {
        let body = post(
            "/api/nearest",
            &json!({"apiKey": key, "latitude": lat, "longitude": lon, "limit": 10}),
        );
        ms.push(processing_ms(&body));
    }
    let (p50, p99) = percentiles(ms);
    println!(
        "{:<34} {p50:>10.3} {p99:>10.3} {:>8}",
        "nearest, limit 10", NEAREST_QUERIES
    );

    for (city, lat, lon) in [
        ("London", 51.5074, -0.1278),
        ("Paris", 48.8566, 2.3522),
        ("New York", 40.7128, -74.0060),
    ] {
        let mut ms = Vec::new();
        let mut count = 0;
        for _ in 0..RADIUS_QUERIES {
            let body = post(
                "/api/radius",
                &json!({"apiKey": key, "latitude": lat, "longitude": lon, "radiusKm": 25}),
            );
            count = body["results"].as_array().map_or(0, Vec::len);
            ms.push(processing_ms(&body));
        }
        let (p50, p99) = percentiles(ms);
        println!(
            "{:<34} {p50:>10.3} {p99:>10.3} {:>8}",
            format!("radius 25 km, {city} ({count} codes)"),
            RADIUS_QUERIES
        );
    }

    let mut ms = Vec::new();
    let mut total = Vec::new();
    for round in 0..BULK_QUERIES {
        let records: Vec<Value> = near_codes[..1000]
            .iter()
            .enumerate()
            .map(|(i, (lat, lon))| json!({"latitude": lat, "longitude": lon, "id": i + round}))
            .collect();
        let body = post(
            "/api/nearest-bulk",
            &json!({"apiKey": key, "records": records}),
        );
        ms.push(processing_ms(&body));
        total.push(
            body["performance"]["totalTime"]
                .as_str()
                .and_then(|t| t.trim_end_matches("ms").parse::<f64>().ok())
                .unwrap_or(0.0),
        );
    }
    let (p50, p99) = percentiles(ms);
    println!(
        "{:<34} {p50:>10.3} {p99:>10.3} {:>8}",
        "nearest-bulk, 1,000 points", BULK_QUERIES
    );
    let (t50, t99) = percentiles(total);
    println!(
        "{:<34} {t50:>10.3} {t99:>10.3} {:>8}",
        "  (its totalTime)", BULK_QUERIES
    );

    // The brute-force peer, in this process, on the same kind of questions.
    let mut nearest_ms = Vec::new();
    let mut radius_ms = Vec::new();
    for (lat, lon) in near_codes.iter().take(BRUTE_QUERIES) {
        let t = Instant::now();
        std::hint::black_box(brute(&codes, *lat, *lon, None));
        nearest_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        std::hint::black_box(brute(&codes, 51.5074, -0.1278, Some(25.0)));
        radius_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (p50, p99) = percentiles(nearest_ms);
    println!(
        "{:<34} {p50:>10.3} {p99:>10.3} {:>8}",
        "brute force: nearest 10", BRUTE_QUERIES
    );
    let (p50, p99) = percentiles(radius_ms);
    println!(
        "{:<34} {p50:>10.3} {p99:>10.3} {:>8}",
        "brute force: radius 25 km, London", BRUTE_QUERIES
    );

    // The index alone: what it adds to the server's memory and load time.
    let conn = rusqlite::Connection::open(db).expect("opening the database");
    let sources: Vec<(CountryCode, &Code)> = codes
        .iter()
        .filter_map(|c| CountryCode::parse(&c.country).map(|cc| (cc, c)))
        .collect();
    let loaded = postal::db::postal::loaded_countries(&conn).expect("reading the countries");
    let before = rss_mb();
    let t = Instant::now();
    let index = GeoIndex::build(
        &loaded,
        sources.iter().map(|(country, c)| GeoSource {
            country: *country,
            key: &c.key,
            latitude: Some(c.latitude),
            longitude: Some(c.longitude),
        }),
        &HashMap::new(),
    )
    .expect("building the index");
    let built: Duration = t.elapsed();
    println!(
        "geography index: built in {:.0} ms, RSS +{:.0} MB ({} countries)",
        built.as_secs_f64() * 1000.0,
        rss_mb() - before,
        index.countries().len()
    );
    // The same 1,000 points as nearest-bulk, asked of the index alone (no places, no
    // HTTP): what of the bulk's processingTime the tree search is.
    let limit = Limit::parse(10).expect("limit");
    let mut ms = Vec::new();
    for _ in 0..BULK_QUERIES {
        let t = Instant::now();
        for (lat, lon) in &near_codes[..1000] {
            let center = Coordinates::parse(*lat, *lon).expect("coordinates");
            std::hint::black_box(index.nearest(&center, None, limit, None));
        }
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (p50, p99) = percentiles(ms);
    println!(
        "{:<34} {p50:>10.3} {p99:>10.3} {:>8}",
        "index alone: 1,000 nearest", BULK_QUERIES
    );
}
