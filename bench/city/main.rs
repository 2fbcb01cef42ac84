//! City search benchmark client (`bench/city/run.sh`): builds a seeded query set from the
//! data itself, asks it of this version and of the previous one, prints right / wrong /
//! 404 / false hits and the server's processingTime.
//!
//! Queries: real place names of every country (the larger places of each, where people
//! search), each in one way people type them: exact, one random edit (names of 5+ letters),
//! accents dropped, transliterated (ä -> ae, ø -> oe, å -> aa), abbreviated (Saint -> St.),
//! without spaces, with the state's name or code (or `City`) appended, shortened to its
//! first words; plus 100 nonsense words. A query's right answer is the place it was made
//! from (its name, folded); a query is only made when that place is the one with the most
//! postal codes among those it could mean (the ranking rule), and a typo only when it is
//! not itself the name of another place.

mod gazetteer;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

use postal::domain::text::fold;

/// Larger places per country the real-name queries are drawn from.
const TOP_PLACES: usize = 300;
const NONSENSE: usize = 100;

#[derive(Clone)]
struct Place {
    name: String,
    folded: String,
    state: String,
    st: String,
    codes: i64,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Kind {
    Exact,
    Typo,
    NoAccents,
    Transliterated,
    Abbreviated,
    NoSpaces,
    ExtraState,
    Shortened,
    Nonsense,
}

struct Query {
    kind: Kind,
    country: String,
    city: String,
    st: Option<String>,
    /// The folded name that must answer (None: nonsense, must be 404).
    expect: Option<String>,
}

struct Args {
    db: String,
    servers: Vec<(String, String, String)>, // (label, base url, api key)
    seed: u64,
    per_country: usize,
    /// `cities500.zip`: also run the gazetteer's categories (`gazetteer.rs`).
    gazetteer: Option<String>,
}

fn args() -> Result<Args> {
    let mut db = None;
    let mut servers = Vec::new();
    let mut seed = 8;
    let mut per_country = 10;
    let mut gazetteer = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--db" => db = it.next(),
            "--server" => {
                let spec = it.next().context("--server LABEL=URL=KEY")?;
                let parts: Vec<&str> = spec.splitn(3, '=').collect();
                if parts.len() != 3 {
                    bail!("--server LABEL=URL=KEY");
                }
                servers.push((parts[0].into(), parts[1].into(), parts[2].into()));
            }
            "--seed" => seed = it.next().context("--seed N")?.parse()?,
            "--per-country" => per_country = it.next().context("--per-country N")?.parse()?,
            "--gazetteer" => gazetteer = it.next(),
            other => bail!("unknown argument {other}"),
        }
    }
    Ok(Args {
        db: db.context("--db PATH")?,
        servers,
        seed,
        per_country,
        gazetteer,
    })
}

fn main() -> Result<()> {
    let args = args()?;
    let conn = rusqlite::Connection::open_with_flags(
        &args.db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )?;
    let mut places: HashMap<String, Vec<Place>> = HashMap::new();
    {
        let mut stmt = conn.prepare(
            "SELECT country, min(place_name), place_folded, coalesce(admin_name1, ''),
                    coalesce(admin_code1, ''), count(DISTINCT postal_code)
             FROM postal_codes GROUP BY country, place_folded, admin_name1, admin_code1",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            places.entry(r.get(0)?).or_default().push(Place {
                name: r.get(1)?,
                folded: r.get(2)?,
                state: r.get(3)?,
                st: r.get(4)?,
                codes: r.get(5)?,
            });
        }
    }
    let queries = generate(&places, args.seed, args.per_country);
    let mut by_kind: HashMap<Kind, usize> = HashMap::new();
    for q in &queries {
        *by_kind.entry(q.kind).or_default() += 1;
    }
    let mut kinds: Vec<_> = by_kind.into_iter().collect();
    kinds.sort();
    println!(
        "query set (seed {}): {} queries over {} countries: {}",
        args.seed,
        queries.len(),
        places.len(),
        kinds
            .iter()
            .map(|(k, n)| format!("{k:?} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    for (label, url, key) in &args.servers {
        let mut tally = Tally::default();
        let mut misses: Vec<String> = Vec::new();
        let mut by_country: HashMap<&str, Vec<f64>> = HashMap::new();
        let mut slowest: Option<(f64, String)> = None;
        for q in &queries {
            let mut body = json!({"apiKey": key, "city": q.city, "country": q.country});
            if let Some(st) = &q.st {
                body["ST"] = json!(st);
            }
            let mut response = agent
                .post(format!("{url}/api/city"))
                .header("content-type", "application/json")
                .send(body.to_string())?;
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            let reply: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let ms = reply["performance"]["processingTime"]
                .as_str()
                .and_then(|t| t.trim_end_matches("ms").parse::<f64>().ok());
            let outcome = judge(q, status, &reply);
            let expected = if q.expect.is_some() {
                Outcome::Right
            } else {
                Outcome::NotFound
            };
            if outcome != expected && misses.len() < 40 {
                misses.push(format!(
                    "  {:?} {} {:?}{} -> {} {}",
                    q.kind,
                    q.country,
                    q.city,
                    q.st.as_ref()
                        .map(|s| format!(" ST={s}"))
                        .unwrap_or_default(),
                    status,
                    reply
                        .get("matchedCity")
                        .map(|m| format!("matchedCity {m}"))
                        .unwrap_or_else(|| reply
                            .get("error")
                            .map(|e| e.to_string())
                            .unwrap_or("exact".into())),
                ));
            }
            if let Some(ms) = ms {
                by_country.entry(&q.country).or_default().push(ms);
                if slowest.as_ref().is_none_or(|(worst, _)| ms > *worst) {
                    slowest = Some((ms, format!("{} {:?}", q.country, q.city)));
                }
            }
            tally.add(q, outcome, ms);
        }
        tally.print(label);
        if let Some((ms, query)) = &slowest {
            println!("{label:>8}: slowest query {query}: processingTime {ms:.3} ms");
        }
        // The slowest country: its own p99 (the target holds for every country).
        let worst = by_country
            .iter()
            .map(|(country, times)| (percentile(times, 0.99), *country, times.len()))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((p99, country, n)) = worst {
            println!(
                "{label:>8}: slowest country {country}: processingTime p99 {p99:.3} ms ({n} queries)"
            );
        }
        // /api/suggest: the first four letters of every real name asked as they are typed.
        let mut suggest_ms = Vec::new();
        for q in queries.iter().filter(|q| q.expect.is_some()) {
            let typed: String = q.city.chars().take(4).collect();
            let body = json!({"apiKey": key, "q": typed, "country": q.country});
            let mut response = agent
                .post(format!("{url}/api/suggest"))
                .header("content-type", "application/json")
                .send(body.to_string())?;
            let text = response.body_mut().read_to_string().unwrap_or_default();
            let reply: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            if let Some(ms) = reply["performance"]["processingTime"]
                .as_str()
                .and_then(|t| t.trim_end_matches("ms").parse::<f64>().ok())
            {
                suggest_ms.push(ms);
            }
        }
        if !suggest_ms.is_empty() {
            println!(
                "{label:>8}: /api/suggest on the first 4 letters of each real name: processingTime p50 {:.3} ms  p99 {:.3} ms  ({} answered)",
                percentile(&suggest_ms, 0.5),
                percentile(&suggest_ms, 0.99),
                suggest_ms.len()
            );
        }
        if std::env::var_os("SHOW_MISSES").is_some() {
            println!("  first misses of {label}:");
            for m in misses {
                println!("{m}");
            }
        }
    }
    if let Some(path) = &args.gazetteer {
        gazetteer::run(&conn, path, args.seed, &args.servers, &agent)?;
    }
    Ok(())
}

/// The `q` quantile of `times` (nearest rank).
fn percentile(times: &[f64], q: f64) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Right,
    Wrong,
    NotFound,
}

fn judge(q: &Query, status: u16, reply: &Value) -> Outcome {
    match (&q.expect, status) {
        (_, 404) => Outcome::NotFound,
        (None, 200) => Outcome::Wrong,
        (Some(expect), 200) => {
            let answered = match reply.get("matchedCity").and_then(Value::as_str) {
                Some(m) => fold(m),
                // Exact: the query itself, folded, is the name.
                None => fold(&q.city),
            };
            if answered == *expect {
                Outcome::Right
            } else {
                Outcome::Wrong
            }
        }
        _ => Outcome::Wrong,
    }
}

#[derive(Default)]
struct Tally {
    real: usize,
    right: usize,
    wrong: usize,
    not_found: usize,
    exact_wrong: usize,
    nonsense: usize,
    false_hits: usize,
    times: Vec<f64>,
    per_kind: HashMap<Kind, (usize, usize)>,
}

impl Tally {
    fn add(&mut self, q: &Query, outcome: Outcome, ms: Option<f64>) {
        if let Some(ms) = ms {
            self.times.push(ms);
        }
        if q.expect.is_none() {
            self.nonsense += 1;
            if outcome != Outcome::NotFound {
                self.false_hits += 1;
            }
            return;
        }
        self.real += 1;
        let entry = self.per_kind.entry(q.kind).or_default();
        entry.1 += 1;
        match outcome {
            Outcome::Right => {
                self.right += 1;
                entry.0 += 1;
            }
            Outcome::Wrong => {
                self.wrong += 1;
                if q.kind == Kind::Exact {
                    self.exact_wrong += 1;
                }
            }
            Outcome::NotFound => self.not_found += 1,
        }
    }

    fn print(&mut self, label: &str) {
        self.times.sort_by(f64::total_cmp);
        let pct = |n: usize, of: usize| 100.0 * n as f64 / of.max(1) as f64;
        let at = |p: f64| {
            self.times
                .get(((self.times.len() as f64 - 1.0) * p).round() as usize)
                .copied()
                .unwrap_or(f64::NAN)
        };
        println!(
            "{label:>8}: right {:.1}%  wrong {:.1}%  404 {:.1}%  (of {} real names; wrong on exact names: {})  false hits {:.1}% (of {} nonsense)  processingTime p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
            pct(self.right, self.real),
            pct(self.wrong, self.real),
            pct(self.not_found, self.real),
            self.real,
            self.exact_wrong,
            pct(self.false_hits, self.nonsense),
            self.nonsense,
            at(0.5),
            at(0.99),
            at(1.0),
        );
        let mut kinds: Vec<_> = self.per_kind.iter().collect();
        kinds.sort();
        println!(
            "{:>8}  right by kind: {}",
            "",
            kinds
                .iter()
                .map(|(k, (r, n))| format!("{k:?} {r}/{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

fn generate(places: &HashMap<String, Vec<Place>>, seed: u64, per_country: usize) -> Vec<Query> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut countries: Vec<&String> = places.keys().collect();
    countries.sort();
    let mut queries = Vec::new();
    for country in &countries {
        let list = &places[*country];
        // The place each folded name means: the one with the most codes.
        let mut best: HashMap<&str, &Place> = HashMap::new();
        for p in list {
            let e = best.entry(p.folded.as_str()).or_insert(p);
            if p.codes > e.codes {
                *e = p;
            }
        }
        let names: HashSet<&str> = best.keys().copied().collect();
        let mut top: Vec<&Place> = best.values().copied().collect();
        top.sort_by(|a, b| b.codes.cmp(&a.codes).then(a.folded.cmp(&b.folded)));
        top.truncate(TOP_PLACES);
        top.shuffle(&mut rng);
        let us = country.as_str() == "US";
        let mut made = 0;
        let mut round = 0usize;
        for place in top {
            if made >= per_country {
                break;
            }
            if place.folded.is_empty() {
                continue;
            }
            let options = variants(place, list, &names, us, &mut rng);
            if options.is_empty() {
                continue;
            }
            // Round-robin over kinds so that the rare ones are represented.
            let (kind, city) = options[round % options.len()].clone();
            round += 1;
            queries.push(Query {
                kind,
                country: country.to_string(),
                city,
                st: us.then(|| place.st.clone()),
                expect: Some(place.folded.clone()),
            });
            made += 1;
        }
    }
    const SYLLABLES: &[&str] = &[
        "qu", "zor", "blim", "vex", "trak", "plo", "gri", "snu", "wib", "fla", "dro", "kex", "mip",
        "yat", "zu", "thr", "ork", "glo", "piv", "nux",
    ];
    let codes: Vec<&String> = countries.clone();
    for i in 0..NONSENSE {
        let word = if i % 2 == 0 {
            let len = rng.random_range(6..=12);
            (0..len)
                .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
                .collect::<String>()
        } else {
            let n = rng.random_range(2..=4);
            (0..n)
                .map(|_| *SYLLABLES.choose(&mut rng).unwrap_or(&"qu"))
                .collect::<String>()
        };
        let country = codes
            .choose(&mut rng)
            .map(|c| c.to_string())
            .unwrap_or_default();
        let st = (country == "US").then(|| {
            let states: Vec<&Place> = places["US"].iter().take(2000).collect();
            states
                .choose(&mut rng)
                .map(|p| p.st.clone())
                .unwrap_or_default()
        });
        queries.push(Query {
            kind: Kind::Nonsense,
            country,
            city: word,
            st,
            expect: None,
        });
    }
    queries
}

/// The ways to type `place` that this kind of query set covers, each with its text.
fn variants(
    place: &Place,
    list: &[Place],
    names: &HashSet<&str>,
    us: bool,
    rng: &mut StdRng,
) -> Vec<(Kind, String)> {
    let mut out = vec![(Kind::Exact, place.name.clone())];
    let letters = place.folded.replace(' ', "");
    if letters.len() >= 5 {
        for _ in 0..10 {
            let typo = one_edit(&place.name, rng);
            let folded = fold(&typo);
            if !folded.is_empty() && !names.contains(folded.as_str()) && folded != place.folded {
                out.push((Kind::Typo, typo));
                break;
            }
        }
    }
    if !place.name.is_ascii() {
        let plain = deunicode::deunicode(&place.name);
        out.push((Kind::NoAccents, plain));
        let mut spelled = String::new();
        for c in place.name.chars() {
            match c {
                'ä' => spelled.push_str("ae"),
                'ö' | 'ø' => spelled.push_str("oe"),
                'ü' => spelled.push_str("ue"),
                'å' => spelled.push_str("aa"),
                'Ä' => spelled.push_str("Ae"),
                'Ö' | 'Ø' => spelled.push_str("Oe"),
                'Ü' => spelled.push_str("Ue"),
                'Å' => spelled.push_str("Aa"),
                c => spelled.push(c),
            }
        }
        let folded = fold(&spelled);
        if folded != fold(&place.name) && !names.contains(folded.as_str()) {
            out.push((Kind::Transliterated, spelled));
        }
    }
    let words: Vec<&str> = place
        .name
        .split([' ', '-'])
        .filter(|w| !w.is_empty())
        .collect();
    let abbreviated: Vec<String> = words
        .iter()
        .map(|w| {
            match w.to_lowercase().as_str() {
                "saint" | "sankt" => "St.",
                "sainte" => "Ste",
                "fort" => "Ft",
                "mount" => "Mt",
                "port" => "Pt",
                _ => w,
            }
            .to_string()
        })
        .collect();
    if abbreviated.iter().zip(&words).any(|(a, w)| a != w) {
        let text = abbreviated.join(" ");
        if !names.contains(fold(&text).as_str()) {
            out.push((Kind::Abbreviated, text));
        }
    }
    if words.len() >= 2 {
        let joined = words.concat();
        if !names.contains(fold(&joined).as_str()) {
            out.push((Kind::NoSpaces, joined));
        }
        // Shortened: the first word(s), when this place is the one they mean.
        let first = fold(words[0]);
        if first.len() >= 4 && !names.contains(first.as_str()) {
            let prefix = format!("{first} ");
            let rival = list.iter().any(|p| {
                p.folded.starts_with(&prefix) && p.codes > place.codes && (!us || p.st == place.st)
            });
            if !rival {
                out.push((Kind::Shortened, words[0].to_string()));
            }
        }
    }
    let extra = if us && !place.st.is_empty() {
        format!("{} {}", place.name, place.st)
    } else if !place.state.is_empty() && rng.random_bool(0.5) {
        format!("{} {}", place.name, place.state)
    } else {
        format!("{} City", place.name)
    };
    if !names.contains(fold(&extra).as_str()) {
        out.push((Kind::ExtraState, extra));
    }
    out
}

/// One random edit on a letter: delete, insert, substitute or swap with the next.
fn one_edit(name: &str, rng: &mut StdRng) -> String {
    let mut chars: Vec<char> = name.chars().collect();
    let letters: Vec<usize> = (0..chars.len())
        .filter(|i| chars[*i].is_alphabetic())
        .collect();
    let Some(&at) = letters.choose(rng) else {
        return name.to_string();
    };
    let random_letter = |rng: &mut StdRng| char::from(b'a' + rng.random_range(0..26u8));
    match rng.random_range(0..4) {
        0 => {
            chars.remove(at);
        }
        1 => chars.insert(at, random_letter(rng)),
        2 => chars[at] = random_letter(rng),
        _ => {
            if at + 1 < chars.len() {
                chars.swap(at, at + 1);
            } else {
                chars.remove(at);
            }
        }
    }
    chars.into_iter().collect()
}
