//! Black-box tests of `postal-import`: the real binary, run on temporary databases, its
//! results read back with rusqlite. Data comes from `../shared/geonames/` (never copied
//! into the repository), from the few hand-made lines in `tests/fixtures/`, and from
//! files the tests write into temporary directories.

// Running the binary, the shared sample.zip import, reading rows back.
mod helpers;

// sample.zip: rows per country, the summary line, US 90210.
mod sample;

// One record per country with its admin columns (JP, GB, MT from sample.zip; PL from a fixture).
mod records;

// Malformed lines: counted and reported, tolerated up to 1%, fatal above with the old data kept.
mod bad_lines;
// Files that are not GeoNames files: endless lines refused, downloads' redirects bounded.
mod bounds;

// Re-importing into a live database: concurrent readers, tables the import does not own.
mod replace;

// The gazetteer (cities500.zip): beside the source, by flag, missing or malformed.
mod gazetteer;

// The dataset's history: provenance, changes, retired codes, the shrink guard,
// --if-changed against a local HTTP server, overrides.
mod history;

// The kinds of SOURCE: a .txt file, a directory with its countryInfo.txt, a missing file.
mod sources;

// The whole allCountries.zip: 1,648,448 rows, 120 countries, the README's per-country table.
mod full_dataset;

// allCountries.zip imported under a load of billed requests and CLI top-ups: no long
// waits, no mix of old and new data; files created 0600. The longest test of the binary
// (over a minute): its name sorts first, so that libtest starts it first.
mod allcountries_under_load;
