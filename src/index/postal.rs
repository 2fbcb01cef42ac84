//! The postal data in memory: every code's first record, for lookup, validation and bulk,
//! and the other places of the codes that have several (`/api/places`, `/api/verify`).
//!
//! Why: in WAL mode a SQLite connection throws its whole page cache away when it starts a
//! read after another connection's commit, and the billing writer commits hundreds of times
//! a second. Every lookup then re-read its b-tree pages from the OS, and a bulk of 1,000
//! random codes took 7-11 ms of such reads (perf, bench/api.sh). The data changes only by
//! `postal-import`, so the server holds it in memory: about 0.9 M distinct keys of the full
//! dataset. [`PostalIndex::generation`] tells when the file holds a new dataset
//! (`dataset.generation`, which only the import's swap changes); the server then
//! loads the new one and swaps it in, answering from the old until then.

use std::collections::HashMap;

use foldhash::fast::RandomState;

use hashbrown::HashTable;

use anyhow::{Context, Result};
use rusqlite::Connection;

use super::by_country::ByCountry;
use super::city::CityIndex;
use super::geo::{GeoIndex, GeoSource};
use super::history::{DatasetHistory, Retired};
use keys::{Keys, LONG, pack};

mod keys;
use crate::db;
pub use crate::db::postal::PlaceRecord;
use crate::db::postal::{CountryData, Coverage, RecordRow};
use crate::domain::postal_code::{
    CanonicalCode, ShortBuffer, ShortParse, ShortQuery, ZipInput, canonical, is_canonical,
};
use crate::domain::{CountryCode, PostalQuery};

/// The verdict on one record of `/api/validate-bulk`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Found; the canonical stored key (`normalized`).
    Valid(CanonicalCode),
    NotFound,
    InvalidFormat,
    UnknownCountry,
}

pub struct PostalIndex {
    generation: i64,
    /// By the country code's slot, not hashed; foldhash, not SipHash, in each country's
    /// table: it is built from the dataset and only read after, so a caller's codes
    /// cannot grow a probe sequence. Hashing was a fifth of `/api/validate-bulk`'s work
    /// (issue 37).
    countries: ByCountry<CountryData>,
    /// country -> its codes' first records in source order.
    first: ByCountry<CountryCodes>,
    coverage: Coverage,
    /// The same first records, by place (nearest, radius, autocomplete, countries).
    geo: GeoIndex,
    /// When this dataset was read from the file (operations: /metrics).
    loaded_at: std::time::SystemTime,
    /// When `postal-import` swapped this dataset in (`dataset.imported_at`, unix seconds;
    /// operations: /metrics, to tell a stale dataset from a recent restart).
    imported_at: Option<i64>,
    /// Place names for /api/city and /api/suggest, loaded and swapped with the rest.
    city: CityIndex,
    /// Retired codes, provenance and the latest changes (docs/dataset.md).
    history: DatasetHistory,
}

/// One place of a postal code (`/api/places`): its name, region (admin name1/code1),
/// county (admin name2) and coordinates, in every country.
#[derive(Debug, Clone, PartialEq)]
pub struct CodePlace {
    pub city: String,
    /// "" when absent.
    pub state: String,
    /// "" when absent.
    pub st: String,
    pub county: Option<String>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
}

/// Every place of a postal code (its records in source order, the first one first) and the
/// code as stored (canonical).
#[derive(Debug, Clone, PartialEq)]
pub struct CodePlaces {
    pub zipcode: String,
    pub places: Vec<CodePlace>,
}

/// What [`PostalIndex::find_short`] made of a code.
enum Short<'a> {
    /// The code of this rank among the country's.
    Found(&'a CountryCodes, u32),
    /// No stored key (or no data of the country).
    Missing,
    /// Not a code whatever the data (`PostalQuery::parse` says `None`).
    Invalid,
    /// Too long or not ASCII for `ShortQuery`: ask `PostalQuery`.
    Long,
}

/// The fields of a code's first record the geography endpoints show, borrowed.
pub struct PlaceView<'a> {
    pub postal_code: &'a str,
    /// The place name, or the municipality of a JP office code (`PostalIndex::city_name`).
    pub city: &'a str,
    /// "" when absent.
    pub admin_name1: &'a str,
    /// "" when absent.
    pub admin_code1: &'a str,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
}

/// One country's codes: each compact key's first record, in key (byte) order, so that a
/// code's rank in that order (`Nearby::rank`, from the geography index) finds its record
/// without reading or hashing its key.
///
/// The hash table holds only ranks (4 bytes a code) and compares through `keys`. A key of
/// at most 8 bytes (all but 15 k of the full set's 0.9 M: FR's `75754CEDEX15` and the like)
/// is packed into 8 bytes by rank, hashed and compared as one integer: a slice of an arena
/// and a byte compare were a fifth of `/api/validate-bulk`'s work (issue 37), and the 8
/// bytes take less than the arena's 6 bytes and 4-byte end a key did. A
/// `HashMap<Box<str>, u32>` took about 44 bytes a code (a heap key each).
struct CountryCodes {
    keys: Keys,
    /// Ranks, hashed by their key ([`Keys::hash`]).
    table: HashTable<u32>,
    /// Whether every code's canonical form ([`canonical`]) is its key (JP's `100-0001` is
    /// `1000001`; US, DE, GB store their keys): then a code found needs no record read.
    canonical_keys: bool,
    /// By rank; their texts are in `texts`.
    records: Vec<StoredRecord>,
    texts: Box<str>,
    /// The other records of the codes, by rank of their code then in source order: those
    /// of rank r end at `others_end[r]` (and start where rank r - 1's end).
    others: Vec<OtherRecord>,
    others_end: Vec<u32>,
}

/// A record of a code after its first: only what `/api/places` shows (24 bytes, its name
/// tab-terminated in the country's arena, its region shared with every record of the
/// same region). About 0.75 M of them on the full set: 88 k codes have several records,
/// IN's post offices and MX's colonias most.
struct OtherRecord {
    latitude: f64,
    longitude: f64,
    /// Offset of `place name\t` in the country's texts.
    name: u32,
    /// Offset of `admin name1\tadmin code1\tadmin name2\t` in the country's texts.
    region: u32,
}

/// A country's codes as the load reads them: the first record of each key, in source
/// order, and the other records with the source position of their code's first.
#[derive(Default)]
struct ReadCodes {
    by_key: HashMap<Box<str>, u32>,
    records: Vec<StoredRecord>,
    texts: String,
    others: Vec<(u32, OtherRecord)>,
    regions: HashMap<Box<str>, u32>,
}

impl ReadCodes {
    /// Keeps `r`, a later record of the code whose first record is at `first`.
    fn other(&mut self, first: u32, r: &RecordRow<'_>) {
        let region = [r.admin_name1, r.admin_code1, r.admin_name2]
            .map(|v| v.unwrap_or(""))
            .join("\t")
            + "\t";
        let texts = &mut self.texts;
        let region = *self
            .regions
            .entry(region.into())
            .or_insert_with_key(|text| {
                let at = offset(texts.len());
                texts.push_str(text);
                at
            });
        let name = offset(self.texts.len());
        self.texts.push_str(r.place_name);
        self.texts.push('\t');
        let other = OtherRecord {
            latitude: stored_coordinate(r.latitude),
            longitude: stored_coordinate(r.longitude),
            name,
            region,
        };
        self.others.push((first, other));
    }
}

/// An offset into a country's texts (a few MB; the largest, about 12 MB): a file that
/// made one pass 4 GiB would be caught here rather than wrap.
fn offset(at: usize) -> u32 {
    u32::try_from(at).expect("a country's record texts under 4 GiB")
}

/// The tab-terminated fields of `texts` from `at`.
fn fields_at(texts: &str, at: u32) -> impl Iterator<Item = &str> {
    texts[at as usize..].split('\t')
}

impl CountryCodes {
    /// Puts the records read in source order in key order, and indexes them.
    fn new(country: CountryCode, read: ReadCodes) -> CountryCodes {
        let mut keyed: Vec<(Box<str>, u32)> = read.by_key.into_iter().collect();
        keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut records: Vec<Option<StoredRecord>> = read.records.into_iter().map(Some).collect();
        // Source position of a first record -> rank of its code.
        let mut rank_of = vec![0u32; records.len()];
        for (rank, (_, at)) in keyed.iter().enumerate() {
            rank_of[*at as usize] = rank as u32;
        }
        let mut others = read.others;
        // Stable: each code's records stay in source order.
        others.sort_by_key(|(first, _)| rank_of[*first as usize]);
        let mut others_end = vec![0u32; keyed.len()];
        for (i, (first, _)) in others.iter().enumerate() {
            others_end[rank_of[*first as usize] as usize] = i as u32 + 1;
        }
        for rank in 1..others_end.len() {
            others_end[rank] = others_end[rank].max(others_end[rank - 1]);
        }
        // A new vector of exactly its length: collecting in place would keep the sorted
        // pairs' larger block (32 bytes a record for 24).
        let mut kept = Vec::with_capacity(others.len());
        kept.extend(others.into_iter().map(|(_, other)| other));
        let long: Vec<&str> = keyed
            .iter()
            .map(|(k, _)| &**k)
            .filter(|k| pack(k.as_bytes()).is_none())
            .collect();
        let mut codes = CountryCodes {
            keys: Keys {
                packed: Vec::with_capacity(keyed.len()),
                long_keys: String::with_capacity(long.iter().map(|k| k.len()).sum()),
                long_ends: Vec::with_capacity(long.len()),
                hasher: RandomState::default(),
            },
            table: HashTable::with_capacity(keyed.len()),
            canonical_keys: true,
            records: Vec::with_capacity(keyed.len()),
            // A copy of exactly its length: `shrink_to_fit` may keep the block (mimalloc's
            // realloc keeps one that is at most half unused), up to half of it spare.
            texts: Box::from(read.texts.as_str()),
            others: kept,
            others_end,
        };
        for (rank, (key, at)) in keyed.iter().enumerate() {
            codes.keys.push(key);
            let record = records[*at as usize].take().expect("each record once");
            let stored = record.with_text(&codes.texts).postal_code();
            codes.canonical_keys &= is_canonical(country, stored, key);
            codes.records.push(record);
            let keys = &codes.keys;
            codes
                .table
                .insert_unique(keys.hash(key.as_bytes()), rank as u32, |r| {
                    keys.hash(keys.bytes(*r))
                });
        }
        codes
    }

    fn key(&self, rank: u32) -> &str {
        // Every key was a `str`, packed or not.
        std::str::from_utf8(self.keys.bytes(rank)).unwrap_or_default()
    }

    fn get(&self, key: &str) -> Option<RecordRef<'_>> {
        self.rank(key).and_then(|r| self.at(r))
    }

    fn rank(&self, key: &str) -> Option<u32> {
        self.rank_bytes(key.as_bytes())
    }

    /// Keys are hashed as bytes, so that a key on the stack needs no UTF-8 check.
    #[inline]
    fn rank_bytes(&self, key: &[u8]) -> Option<u32> {
        self.keys.find(&self.table, key)
    }

    /// The canonical form of the code of `rank` ([`canonical`] of its stored code).
    #[inline]
    fn canonical(&self, country: CountryCode, rank: u32) -> Option<CanonicalCode> {
        if self.canonical_keys {
            let entry = self.keys.packed.get(rank as usize)?;
            if entry[0] != LONG {
                return Some(CanonicalCode::padded(*entry));
            }
        }
        Some(CanonicalCode::of(country, self.at(rank)?.postal_code()))
    }

    /// Every place of the code of `rank`: its first record, then the others.
    fn places(&self, rank: u32) -> Option<Vec<CodePlace>> {
        let first = self.at(rank)?.code_place();
        let end = self.others_end[rank as usize] as usize;
        let start = match rank {
            0 => 0,
            r => self.others_end[r as usize - 1] as usize,
        };
        let others = self.others[start..end].iter().map(|o| {
            let city = fields_at(&self.texts, o.name).next().unwrap_or("");
            let mut region = fields_at(&self.texts, o.region);
            let mut next = || region.next().unwrap_or("").to_string();
            let (state, st, county) = (next(), next(), next());
            CodePlace {
                city: city.to_string(),
                state,
                st,
                county: Some(county).filter(|c| !c.is_empty()),
                latitude: coordinate(o.latitude),
                longitude: coordinate(o.longitude),
            }
        });
        Some(std::iter::once(first).chain(others).collect())
    }

    fn at(&self, rank: u32) -> Option<RecordRef<'_>> {
        let stored = self.records.get(rank as usize)?;
        Some(stored.with_text(&self.texts))
    }

    fn len(&self) -> usize {
        self.records.len()
    }
}

/// A record kept compact (32 bytes, its text in its country's arena): 0.9 M of them are
/// in memory.
///
/// Why an arena, not a `Box<str>` each: 0.9 M small allocations, interleaved on the
/// loading thread with the load's temporaries, left partly used allocator pages behind
/// when an import's reload freed them, and the server's RSS grew with every import
/// (`bench/import-under-load.sh`, README); one arena a country is freed whole.
///
/// The text holds postal code, place name, admin name/code 1-3 and timezone, each followed
/// by a tab ("" for an absent value).
struct StoredRecord {
    /// `texts[start..end]` of its country.
    start: u32,
    end: u32,
    /// NaN for an absent coordinate (SQLite cannot store a NaN, so none is ambiguous).
    latitude: f64,
    longitude: f64,
    /// `i32::MIN` for none (GeoNames' accuracy is 1 to 6).
    accuracy: i32,
}

fn stored_coordinate(value: Option<f64>) -> f64 {
    value.unwrap_or(f64::NAN)
}

fn coordinate(value: f64) -> Option<f64> {
    (!value.is_nan()).then_some(value)
}

/// A stored record and its text.
#[derive(Clone, Copy)]
struct RecordRef<'a> {
    text: &'a str,
    stored: &'a StoredRecord,
}

impl StoredRecord {
    /// Stores `r`, its text appended to `texts`.
    fn new(r: &PlaceRecord, texts: &mut String) -> StoredRecord {
        let start = texts.len();
        let optional = [
            &r.admin_name1,
            &r.admin_code1,
            &r.admin_name2,
            &r.admin_code2,
            &r.admin_name3,
            &r.admin_code3,
            &r.timezone,
        ];
        for field in [Some(&r.postal_code), Some(&r.place_name)]
            .into_iter()
            .chain(optional.into_iter().map(Option::as_ref))
        {
            texts.push_str(field.map_or("", |f| f.as_str()));
            texts.push('\t');
        }
        StoredRecord {
            start: offset(start),
            end: offset(texts.len()),
            latitude: stored_coordinate(r.latitude),
            longitude: stored_coordinate(r.longitude),
            accuracy: r
                .accuracy
                .and_then(|a| i32::try_from(a).ok())
                .unwrap_or(i32::MIN),
        }
    }

    /// This record with its text, from its country's arena.
    fn with_text<'a>(&'a self, texts: &'a str) -> RecordRef<'a> {
        RecordRef {
            text: &texts[self.start as usize..self.end as usize],
            stored: self,
        }
    }
}

impl<'a> RecordRef<'a> {
    fn postal_code(self) -> &'a str {
        // A byte loop, as in `place`: a code is a few bytes, too short for memchr.
        let end = self.text.bytes().position(|b| b == b'\t');
        &self.text[..end.unwrap_or(self.text.len())]
    }

    fn place(self) -> PlaceView<'a> {
        // A plain byte loop: the fields are a few bytes long, shorter than what `split`'s
        // memchr needs to pay off (it was a tenth of nearest-bulk's time, perf).
        let mut rest: &str = self.text;
        let mut next = || {
            let end = rest.bytes().position(|b| b == b'\t').unwrap_or(rest.len());
            let field = &rest[..end];
            rest = rest.get(end + 1..).unwrap_or("");
            field
        };
        PlaceView {
            postal_code: next(),
            city: next(),
            admin_name1: next(),
            admin_code1: next(),
            latitude: coordinate(self.stored.latitude),
            longitude: coordinate(self.stored.longitude),
        }
    }

    fn code_place(self) -> CodePlace {
        // postal code, place name, admin name1, admin code1, admin name2, ...
        let mut fields = self.text.split('\t').skip(1);
        let mut next = || fields.next().unwrap_or("").to_string();
        let (city, state, st, county) = (next(), next(), next(), next());
        CodePlace {
            city,
            state,
            st,
            county: Some(county).filter(|c| !c.is_empty()),
            latitude: coordinate(self.stored.latitude),
            longitude: coordinate(self.stored.longitude),
        }
    }

    fn record(self) -> PlaceRecord {
        let mut fields = self.text.split('\t');
        let mut next = || fields.next().unwrap_or("").to_string();
        let (postal_code, place_name) = (next(), next());
        let mut optional = || Some(next()).filter(|v| !v.is_empty());
        PlaceRecord {
            postal_code,
            place_name,
            admin_name1: optional(),
            admin_code1: optional(),
            admin_name2: optional(),
            admin_code2: optional(),
            admin_name3: optional(),
            admin_code3: optional(),
            timezone: optional(),
            latitude: coordinate(self.stored.latitude),
            longitude: coordinate(self.stored.longitude),
            accuracy: (self.stored.accuracy != i32::MIN).then_some(i64::from(self.stored.accuracy)),
        }
    }
}

impl PostalIndex {
    /// What identifies the dataset in the file: `dataset.generation`, which every
    /// import's swap changes (and nothing else).
    pub fn generation(conn: &Connection) -> Result<i64> {
        db::dataset::generation(conn)
    }

    /// The dataset of the database file at `path`, loaded now.
    pub fn open(path: &std::path::Path) -> Result<PostalIndex> {
        PostalIndex::load(&db::open(path)?)
    }

    /// Reads the whole dataset in one read transaction.
    pub fn load(conn: &Connection) -> Result<PostalIndex> {
        let tx = conn.unchecked_transaction()?;
        let generation = Self::generation(&tx)?;
        let imported_at = db::dataset::imported_at(&tx)?;
        let mut countries = ByCountry::default();
        let mut coverage = Coverage {
            records: 0,
            countries: 0,
        };
        let loaded = db::postal::loaded_countries(&tx)?;
        for row in &loaded {
            let Some(code) = CountryCode::parse(&row.code) else {
                continue;
            };
            coverage.records += row.data.record_count;
            coverage.countries += 1;
            countries.insert(code, row.data.clone());
        }
        let mut read: HashMap<CountryCode, ReadCodes> = HashMap::new();
        // The admin levels (1, 2, 3) some record of each country carries, name or code.
        let mut levels: HashMap<CountryCode, [bool; 3]> = HashMap::new();
        db::postal::for_each_record(&tx, |r| {
            let Some(country) = CountryCode::parse(r.country) else {
                return Ok(());
            };
            let carried = levels.entry(country).or_default();
            let admin = [
                (r.admin_name1, r.admin_code1),
                (r.admin_name2, r.admin_code2),
                (r.admin_name3, r.admin_code3),
            ];
            for (level, (name, code)) in admin.into_iter().enumerate() {
                carried[level] |= name.is_some() || code.is_some();
            }
            let of_country = read.entry(country).or_default();
            if let Some(&first) = of_country.by_key.get(r.compact_key) {
                of_country.other(first, r);
                return Ok(());
            }
            let record = r.to_record();
            let at = of_country.records.len() as u32;
            of_country.by_key.insert(Box::from(r.compact_key), at);
            let stored = StoredRecord::new(&record, &mut of_country.texts);
            of_country.records.push(stored);
            Ok(())
        })?;
        let first: ByCountry<CountryCodes> = read
            .into_iter()
            .map(|(country, codes)| (country, CountryCodes::new(country, codes)))
            .collect();
        let geo = GeoIndex::build(
            &loaded,
            first.iter().flat_map(|(country, codes)| {
                codes
                    .records
                    .iter()
                    .enumerate()
                    .map(|(rank, record)| GeoSource {
                        country: *country,
                        key: codes.key(rank as u32),
                        latitude: coordinate(record.latitude),
                        longitude: coordinate(record.longitude),
                    })
            }),
            &levels,
        )?;
        let city = CityIndex::load(&tx)?;
        let history = DatasetHistory::load(&tx, generation)?;
        tx.finish().context("reading the postal data")?;
        // The full scans filled this connection's page cache (up to 64 MB, `db::configure`),
        // which nothing reads again: give it back.
        db::shrink_memory(conn)?;
        // And the load's temporaries, freed on this thread.
        crate::alloc::release_freed_memory();
        Ok(PostalIndex {
            generation,
            countries,
            first,
            coverage,
            geo,
            loaded_at: std::time::SystemTime::now(),
            imported_at,
            city,
            history,
        })
    }

    /// Retired codes, provenance and the latest changes.
    pub fn history(&self) -> &DatasetHistory {
        &self.history
    }

    /// The retired code `zipcode` names (an import removed it, none brought it back).
    pub fn retired(&self, country: CountryCode, zipcode: &ZipInput) -> Option<&Retired> {
        let shapes = self
            .countries
            .get(country)
            .map_or("", |d| d.key_shapes.as_str());
        self.retired_text(country, &zipcode.text(shapes))
    }

    /// [`PostalIndex::retired`] of a code given as text (`/api/validate-bulk`).
    pub fn retired_text(&self, country: CountryCode, input: &str) -> Option<&Retired> {
        let query = PostalQuery::parse(country, input)?;
        self.history.retired(country, &query)
    }

    /// The generation this index was loaded at.
    pub fn loaded_generation(&self) -> i64 {
        self.generation
    }

    pub fn coverage(&self) -> Coverage {
        self.coverage
    }

    /// The place names (city search, suggestions).
    pub fn city(&self) -> &CityIndex {
        &self.city
    }

    pub fn loaded_at(&self) -> std::time::SystemTime {
        self.loaded_at
    }

    /// Unix seconds of the import that swapped this dataset in; `None` when the file
    /// does not say.
    pub fn imported_at(&self) -> Option<i64> {
        self.imported_at
    }

    /// (countries, distinct postal codes) held in memory.
    pub fn size(&self) -> (usize, usize) {
        (
            self.countries.len(),
            self.first.values().map(CountryCodes::len).sum(),
        )
    }

    /// The geography of the same records.
    pub fn geo(&self) -> &GeoIndex {
        &self.geo
    }

    /// The first record of the code stored under `key` (a compact key).
    pub fn place(&self, country: CountryCode, key: &str) -> Option<PlaceView<'_>> {
        let record = self.first.get(country)?.get(key)?;
        Some(self.with_city(country, record.place()))
    }

    /// The first record of the code of `rank` (`Nearby::rank`: its place among the
    /// country's compact keys in byte order, as the geography index sorts them).
    pub fn place_at(&self, country: CountryCode, rank: u32) -> Option<PlaceView<'_>> {
        let record = self.first.get(country)?.at(rank)?;
        Some(self.with_city(country, record.place()))
    }

    fn with_city<'a>(&'a self, country: CountryCode, mut view: PlaceView<'a>) -> PlaceView<'a> {
        view.city = self.city_name(country, view.postal_code, view.city);
        view
    }

    /// The city a code's answers name (`/api/lookup`, `/api/distance`, the geography
    /// endpoints): its first record's place name, except for a JP office code, whose place
    /// name is a company or an office (`東映太秦映画村`): its municipality (`Kyoto Shi`;
    /// `index::city`'s `place_jp_offices`, issue 34). `/api/metacode` keeps the place name.
    pub fn city_name<'a>(
        &'a self,
        country: CountryCode,
        postal_code: &str,
        place_name: &'a str,
    ) -> &'a str {
        self.office_city(country, postal_code, place_name)
            .unwrap_or(place_name)
    }

    /// The municipality of a JP office code, named in place of its place name
    /// (`city_name`); `None` for every other code (a test of the country first).
    pub fn office_city(
        &self,
        country: CountryCode,
        postal_code: &str,
        place_name: &str,
    ) -> Option<&str> {
        if country != CountryCode::JP || place_name.is_ascii() {
            return None;
        }
        self.city
            .office_city(country, &canonical(country, postal_code))
    }

    /// The first record (in source order) of a postal code, after normalisation.
    pub fn lookup(&self, country: CountryCode, zipcode: &ZipInput) -> Option<PlaceRecord> {
        let query = self.query(country, zipcode)?;
        self.find(country, &query).map(RecordRef::record)
    }

    /// [`PostalIndex::lookup`]'s record, borrowed, naming the city its answers name
    /// (`with_city`): `/api/lookup` copies out only the fields it shows. A code sent as
    /// text is found without allocating (`find_text`).
    pub fn first_place(&self, country: CountryCode, zipcode: &ZipInput) -> Option<PlaceView<'_>> {
        // As `query`: a country without data has nothing to match.
        self.countries.get(country)?;
        let record = match zipcode {
            ZipInput::Text(text) => self.find_text(country, text)?,
            ZipInput::Integer(_) => self.find(country, &self.query(country, zipcode)?)?,
        };
        Some(self.with_city(country, record.place()))
    }

    /// The first record of a code given as text: found by `ShortQuery`'s keys, or by
    /// `PostalQuery`'s for a code too long or not ASCII for them (the same keys either
    /// way).
    fn find_text(&self, country: CountryCode, input: &str) -> Option<RecordRef<'_>> {
        match self.find_short(country, input.as_bytes()) {
            Short::Found(codes, rank) => codes.at(rank),
            Short::Missing | Short::Invalid => None,
            Short::Long => self.find(country, &PostalQuery::parse(country, input)?),
        }
    }

    /// A code given as its text's bytes, looked up by `ShortQuery`'s keys in a buffer on
    /// the stack (`/api/lookup` and each record of `/api/validate-bulk`). Always inlined:
    /// as a call it cost validate-bulk 24 instructions a record (bench/counts.sh: 388 /
    /// 364).
    #[inline(always)]
    fn find_short(&self, country: CountryCode, code: &[u8]) -> Short<'_> {
        let Some(codes) = self.first.get(country) else {
            return Short::Missing;
        };
        let mut buffer = ShortBuffer::default();
        match ShortQuery::parse(country, code, &mut buffer) {
            ShortParse::Invalid => Short::Invalid,
            ShortParse::Long => Short::Long,
            ShortParse::Query(short) => match short.first_found(|key| codes.rank_bytes(key)) {
                Some(rank) => Short::Found(codes, rank),
                None => Short::Missing,
            },
        }
    }

    /// Every place of a postal code, after normalisation: the first record (lookup's),
    /// then the others in source order.
    pub fn places(&self, country: CountryCode, zipcode: &ZipInput) -> Option<CodePlaces> {
        let query = self.query(country, zipcode)?;
        let of_country = self.first.get(country)?;
        let rank = query.candidates().find_map(|key| of_country.rank(key))?;
        Some(CodePlaces {
            zipcode: canonical(country, of_country.at(rank)?.postal_code()),
            places: of_country.places(rank)?,
        })
    }

    /// Whether a postal code exists in the country's data.
    pub fn exists(&self, country: CountryCode, zipcode: &ZipInput) -> bool {
        self.query(country, zipcode)
            .is_some_and(|query| self.find(country, &query).is_some())
    }

    /// The verdict on a code given as the bytes of its text (`/api/validate-bulk`, per
    /// record: a slice of bytes needs no check of its ends' characters): a short
    /// code is looked up without allocating (`ShortQuery`); a code not found, or too long
    /// for that, takes `PostalQuery`'s path, which also says whether it is well-formed.
    /// Inlined into its one caller, validate-bulk's loop: as a call it cost 24
    /// instructions a record (bench/counts.sh: 295 / 271).
    #[inline]
    pub fn check_code(&self, country: CountryCode, code: &[u8]) -> Verdict {
        let Some(data) = self.countries.get(country) else {
            return Verdict::UnknownCountry;
        };
        // Whether `PostalQuery`'s keys, the same as `ShortQuery`'s, were looked up already.
        let missing = match self.find_short(country, code) {
            Short::Invalid => return Verdict::InvalidFormat,
            Short::Found(codes, rank) => match codes.canonical(country, rank) {
                Some(code) => return Verdict::Valid(code),
                None => false,
            },
            // Whether a code not found is well-formed is `PostalQuery`'s to say.
            Short::Missing => true,
            Short::Long => false,
        };
        let Some(query) = std::str::from_utf8(code)
            .ok()
            .and_then(|input| PostalQuery::parse(country, input))
        else {
            return Verdict::InvalidFormat;
        };
        let found = if missing {
            None
        } else {
            self.find(country, &query)
        };
        match found {
            Some(record) => Verdict::Valid(CanonicalCode::of(country, record.postal_code())),
            None if query.is_well_formed(&data.key_shapes, data.postal_regex.as_deref()) => {
                Verdict::NotFound
            }
            None => Verdict::InvalidFormat,
        }
    }

    /// The normalised query of a `zipcode`: an integer is zero-padded by the country's key
    /// shapes; a country without data has nothing to match.
    fn query(&self, country: CountryCode, zipcode: &ZipInput) -> Option<PostalQuery> {
        let data = self.countries.get(country)?;
        PostalQuery::parse(country, &zipcode.text(&data.key_shapes))
    }

    /// The first candidate key of `query` that is stored.
    fn find(&self, country: CountryCode, query: &PostalQuery) -> Option<RecordRef<'_>> {
        let of_country = self.first.get(country)?;
        query.candidates().find_map(|key| of_country.get(key))
    }
}

#[cfg(test)]
mod tests;
