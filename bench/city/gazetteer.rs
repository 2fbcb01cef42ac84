//! The gazetteer's categories of the city benchmark (issue 18): the cities people mean,
//! judged by where the answer's codes are, not by their name.
//!
//! (a) the three most populous places of `cities500.zip` in each country where the data
//!     has at least 5 postal codes within 10 km of them, asked by their name;
//! (b) the same places by a sample of their Latin-script alternate names and one
//!     native-script name;
//! (c) the same places as forms send them: a postal code before the name, `Name, ST`,
//!     `Name State`, `Name, Country`, upper case with trailing punctuation.
//!
//! An answer is right when the median point of its codes lies within 25 km of the
//! gazetteer's point and it holds at least 20% of the codes within 10 km of it (the
//! issue's criterion). A second figure judges it by the city's own codes, as the data
//! names them (docs/city.md, "What a city answers"): right when the median lies within
//! 25 km and it holds at least 20% of the codes within 25 km whose place name or admin
//! name of a city level (its core) is one of the city's names or begins with one (`Praha 1`, `Karachi
//! Gpo`); where the data names no code so (ID's kelurahan around Jakarta), as the first.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use anyhow::{Context, Result};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use serde_json::{Value, json};

use postal::domain::CountryCode;
use postal::domain::city_match::{admin_core, city_levels};
use postal::domain::geo::haversine_km;
use postal::domain::postal_code::canonical;
use postal::domain::text::fold;

const TOP: usize = 3;
const MIN_NEAR: usize = 5;
const NEAR_KM: f64 = 10.0;
const MEDIAN_KM: f64 = 25.0;
const SHARE: f64 = 0.2;

struct City {
    country: String,
    name: String,
    latin: Vec<String>,
    native: Vec<String>,
    latitude: f64,
    longitude: f64,
    /// The codes within `NEAR_KM` (canonical), the nearest first.
    near: Vec<String>,
    /// The codes within `MEDIAN_KM` the data names as the city's (`own_names`).
    own: Vec<String>,
    /// The nearest code's region (admin name1, code1).
    state: String,
    st: String,
}

struct Ask {
    category: &'static str,
    city: usize,
    text: String,
}

/// A code's point and region, per (country, canonical code): its first record.
type Points = HashMap<(String, String), (f64, f64, String, String)>;
/// The names the data gives a code, per (country, canonical code): every record's place
/// name and the core of its admin names at the country's city levels (docs/city.md),
/// folded.
type CodeNames = HashMap<(String, String), HashSet<String>>;

fn points(conn: &rusqlite::Connection) -> Result<(Points, CodeNames)> {
    let mut stmt = conn.prepare(
        "SELECT country, postal_code, latitude, longitude, coalesce(admin_name1, ''),
                coalesce(admin_code1, ''), place_folded, admin_name2, admin_name3
         FROM postal_codes ORDER BY id",
    )?;
    let mut rows = stmt.query([])?;
    let mut out = Points::new();
    let mut names = CodeNames::new();
    while let Some(r) = rows.next()? {
        let country: String = r.get(0)?;
        let Some(cc) = CountryCode::parse(&country) else {
            continue;
        };
        let code = canonical(cc, &r.get::<_, String>(1)?);
        let of_code = names.entry((country.clone(), code.clone())).or_default();
        of_code.insert(r.get(6)?);
        let admins = [
            r.get::<_, String>(4)?,
            r.get::<_, Option<String>>(7)?.unwrap_or_default(),
            r.get::<_, Option<String>>(8)?.unwrap_or_default(),
        ];
        for (level, admin) in (1..).zip(admins) {
            if !admin.is_empty() && city_levels(&country).contains(&level) {
                of_code.insert(fold(&admin_core(&country, &admin)));
            }
        }
        let (Some(lat), Some(lon)) = (r.get::<_, Option<f64>>(2)?, r.get::<_, Option<f64>>(3)?)
        else {
            continue;
        };
        out.entry((country, code))
            .or_insert((lat, lon, r.get(4)?, r.get(5)?));
    }
    Ok((out, names))
}

/// Whether the data names a code as the city of `names` (folded): one of its names, or a
/// name beginning with one of them and a space.
fn own_names(code_names: &HashSet<String>, names: &[String]) -> bool {
    code_names.iter().any(|n| {
        names.iter().any(|city| {
            n == city
                || (n.len() > city.len()
                    && n.starts_with(city.as_str())
                    && n.as_bytes()[city.len()] == b' ')
        })
    })
}

fn is_latin(name: &str) -> bool {
    name.chars().any(char::is_uppercase) && name.chars().all(|c| (c as u32) < 0x250)
}

fn cities(
    gazetteer: &str,
    points: &Points,
    code_names: &CodeNames,
    seed: u64,
) -> Result<Vec<City>> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(gazetteer)?)?;
    let mut text = String::new();
    archive
        .by_index(0)?
        .read_to_string(&mut text)
        .context("reading the gazetteer")?;
    let mut by_country: HashMap<&str, Vec<(i64, Vec<&str>)>> = HashMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() == 19 {
            by_country
                .entry(f[8])
                .or_default()
                .push((f[14].parse().unwrap_or(0), f));
        }
    }
    /// A code, its point and region.
    type Code<'a> = (&'a str, f64, f64, &'a str, &'a str);
    let mut codes_of: HashMap<&str, Vec<Code>> = HashMap::new();
    for ((country, code), (lat, lon, state, st)) in points {
        codes_of
            .entry(country)
            .or_default()
            .push((code, *lat, *lon, state, st));
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut countries: Vec<&&str> = codes_of.keys().collect();
    countries.sort();
    for country in countries {
        let codes = &codes_of[*country];
        let Some(places) = by_country.get_mut(*country) else {
            continue;
        };
        places.sort_by_key(|p| std::cmp::Reverse(p.0));
        let mut found = 0;
        for (_, f) in places.iter().take(60) {
            let (lat, lon): (f64, f64) = (f[4].parse()?, f[5].parse()?);
            let mut around: Vec<(f64, &str, &str, &str)> = codes
                .iter()
                .map(|(code, clat, clon, state, st)| {
                    (haversine_km(lat, lon, *clat, *clon), *code, *state, *st)
                })
                .filter(|(km, ..)| *km <= MEDIAN_KM)
                .collect();
            // The name without the word the gazetteer appends (`Dededo Village`).
            let core = [" Village", " Parish"]
                .iter()
                .find_map(|w| f[1].strip_suffix(w))
                .unwrap_or(f[1]);
            let mut names: Vec<String> = [f[1], core]
                .into_iter()
                .chain(f[3].split(','))
                .map(fold)
                .filter(|n| n.len() >= 2)
                .collect();
            names.sort();
            names.dedup();
            let own: Vec<String> = around
                .iter()
                .filter(|(_, code, ..)| {
                    code_names
                        .get(&(country.to_string(), code.to_string()))
                        .is_some_and(|n| own_names(n, &names))
                })
                .map(|(_, code, ..)| code.to_string())
                .collect();
            around.retain(|(km, ..)| *km <= NEAR_KM);
            let mut near = around;
            if near.len() < MIN_NEAR {
                continue;
            }
            near.sort_by(|a, b| a.0.total_cmp(&b.0));
            let alternates: Vec<&str> = f[3].split(',').filter(|a| !a.is_empty()).collect();
            let mut latin: Vec<String> = alternates
                .iter()
                .filter(|a| is_latin(a) && **a != f[1])
                .map(|a| a.to_string())
                .collect();
            latin.shuffle(&mut rng);
            latin.truncate(2);
            let native: Vec<String> = alternates
                .iter()
                .filter(|a| !a.is_ascii() && !is_latin(a) && a.chars().any(char::is_alphabetic))
                .collect::<Vec<_>>()
                .choose(&mut rng)
                .map(|a| vec![a.to_string()])
                .unwrap_or_default();
            out.push(City {
                country: country.to_string(),
                name: f[1].to_string(),
                latin,
                native,
                latitude: lat,
                longitude: lon,
                near: near.iter().map(|n| n.1.to_string()).collect(),
                own,
                state: near[0].2.to_string(),
                st: near[0].3.to_string(),
            });
            found += 1;
            if found == TOP {
                break;
            }
        }
    }
    Ok(out)
}

fn asks(cities: &[City], country_names: &HashMap<String, String>) -> Vec<Ask> {
    let mut out = Vec::new();
    for (i, c) in cities.iter().enumerate() {
        out.push(Ask {
            category: "(a) name",
            city: i,
            text: c.name.clone(),
        });
        for name in c.latin.iter().chain(&c.native) {
            out.push(Ask {
                category: "(b) other names",
                city: i,
                text: name.clone(),
            });
        }
        let mut forms = vec![
            format!("{} {}", c.near[0], c.name),
            format!("{}!", c.name.to_uppercase()),
        ];
        if !c.st.is_empty() && c.st.chars().any(|ch| ch.is_ascii_alphabetic()) {
            forms.push(format!("{}, {}", c.name, c.st));
        }
        if !c.state.is_empty() {
            forms.push(format!("{} {}", c.name, c.state));
        }
        if let Some(country) = country_names.get(&c.country) {
            forms.push(format!("{}, {country}", c.name));
        }
        for text in forms {
            out.push(Ask {
                category: "(c) form input",
                city: i,
                text,
            });
        }
    }
    out
}

#[derive(Default)]
struct Counts {
    n: usize,
    right: usize,
    wrong: usize,
    /// Of `wrong`: near the city, too few of its codes (`Verdict::Part`).
    part: usize,
    /// Right by the city's own codes (`judge_own`).
    own: usize,
    missing: usize,
    times: Vec<f64>,
}

/// Runs the categories against every server and prints them.
pub fn run(
    conn: &rusqlite::Connection,
    gazetteer: &str,
    seed: u64,
    servers: &[(String, String, String)],
    agent: &ureq::Agent,
) -> Result<()> {
    let (points, code_names) = points(conn)?;
    let cities = cities(gazetteer, &points, &code_names, seed)?;
    let country_names: HashMap<String, String> = conn
        .prepare("SELECT code, name FROM countries WHERE record_count > 0")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let asks = asks(&cities, &country_names);
    println!(
        "gazetteer categories: {} places of {} countries, {} queries",
        cities.len(),
        cities
            .iter()
            .map(|c| &c.country)
            .collect::<HashSet<_>>()
            .len(),
        asks.len()
    );
    for (label, url, key) in servers {
        let mut counts: Vec<(&str, Counts)> = Vec::new();
        let mut misses = Vec::new();
        for ask in &asks {
            let c = &cities[ask.city];
            let mut body = json!({"apiKey": key, "city": ask.text, "country": c.country});
            if c.country == "US" {
                body["ST"] = json!(c.st);
            }
            let mut response = agent
                .post(format!("{url}/api/city"))
                .header("content-type", "application/json")
                .send(body.to_string())?;
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            let reply: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let at = match counts.iter().position(|(k, _)| *k == ask.category) {
                Some(at) => at,
                None => {
                    counts.push((ask.category, Counts::default()));
                    counts.len() - 1
                }
            };
            let tally = &mut counts[at].1;
            tally.n += 1;
            if let Some(ms) = reply["performance"]["processingTime"]
                .as_str()
                .and_then(|t| t.trim_end_matches("ms").parse::<f64>().ok())
            {
                tally.times.push(ms);
            }
            if status != 200 {
                tally.missing += 1;
                misses.push(format!(
                    "  {} {} {:?}: {status}",
                    ask.category, c.country, ask.text
                ));
                continue;
            }
            let codes: Vec<&str> = reply["zipcodes"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let verdict = judge(c, &codes, &points);
            let own = judge_own(c, &codes, &points);
            tally.own += usize::from(own);
            if verdict == Verdict::Right {
                tally.right += 1;
            } else {
                tally.wrong += 1;
                tally.part += usize::from(verdict == Verdict::Part);
                misses.push(format!(
                    "  {} {} {:?}: {} codes, matchedCity {} ({verdict:?}; {} by its own {} codes)",
                    ask.category,
                    c.country,
                    ask.text,
                    codes.len(),
                    reply["matchedCity"],
                    if own { "right" } else { "wrong" },
                    c.own.len(),
                ));
            }
        }
        for (category, t) in &mut counts {
            t.times.sort_by(f64::total_cmp);
            let pct = |n: usize| 100.0 * n as f64 / t.n.max(1) as f64;
            let at = |p: f64| {
                t.times
                    .get(((t.times.len() as f64 - 1.0) * p).round() as usize)
                    .copied()
                    .unwrap_or(f64::NAN)
            };
            println!(
                "{label:>8}: {category:<16} {:>4} queries: right {:5.1}%  wrong place {:5.1}% (of it near, too few codes {:4.1}%)  404 {:5.1}%  right by the city's own codes {:5.1}%  processingTime p50 {:.3} ms  p99 {:.3} ms",
                t.n,
                pct(t.right),
                pct(t.wrong),
                pct(t.part),
                pct(t.missing),
                pct(t.own),
                at(0.5),
                at(0.99)
            );
        }
        if std::env::var_os("SHOW_MISSES").is_some() {
            println!("  gazetteer misses of {label}:");
            for m in &misses {
                println!("{m}");
            }
        }
    }
    Ok(())
}

/// Right by the city's own codes: the answer's median point within `MEDIAN_KM` of the
/// city, and `SHARE` of the codes the data names as the city in the answer; where it
/// names none, as `judge`.
fn judge_own(city: &City, codes: &[&str], points: &Points) -> bool {
    let verdict = judge(city, codes, points);
    if city.own.is_empty() || verdict == Verdict::Far {
        return verdict == Verdict::Right;
    }
    let answered: HashSet<&str> = codes.iter().copied().collect();
    let held = city
        .own
        .iter()
        .filter(|c| answered.contains(c.as_str()))
        .count();
    held as f64 >= SHARE * city.own.len() as f64
}

/// Right: the answer's median point within `MEDIAN_KM` of the city, and `SHARE` of the
/// codes within `NEAR_KM` of it in the answer.
fn judge(city: &City, codes: &[&str], points: &Points) -> Verdict {
    let mut lats = Vec::new();
    let mut lons = Vec::new();
    for code in codes {
        if let Some((lat, lon, ..)) = points.get(&(city.country.clone(), code.to_string())) {
            lats.push(*lat);
            lons.push(*lon);
        }
    }
    if lats.is_empty() {
        return Verdict::Far;
    }
    lats.sort_by(f64::total_cmp);
    lons.sort_by(f64::total_cmp);
    let (lat, lon) = (lats[lats.len() / 2], lons[lons.len() / 2]);
    if haversine_km(lat, lon, city.latitude, city.longitude) > MEDIAN_KM {
        return Verdict::Far;
    }
    let answered: HashSet<&str> = codes.iter().copied().collect();
    let held = city
        .near
        .iter()
        .filter(|c| answered.contains(c.as_str()))
        .count();
    if held as f64 >= SHARE * city.near.len() as f64 {
        Verdict::Right
    } else {
        Verdict::Part
    }
}

/// How an answer of codes is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Right,
    /// Wrong: its median point lies within `MEDIAN_KM` of the city, but it holds fewer
    /// than `SHARE` of the codes near it (a part of the city, or a small town beside
    /// others: `Vaduz`, 1 of LI's codes within 10 km).
    Part,
    /// Wrong: another place (or no code with coordinates).
    Far,
}
