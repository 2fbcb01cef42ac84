//! The harness of postal's test binaries (`tests/api`, `cluster`, `import`, `money`), on
//! the model of cargo's `cargo-test-support`: one copy of what they all need.
//!
//! - [`template`]: databases built once (an import) and cached under cargo's scratch
//!   directory, shared by every test binary of a run and by later runs until an input
//!   changes;
//! - [`serve`]: `postal serve` as a process of its own (started, drained, stopped);
//! - [`client`]: a blocking HTTP client that says `(status, body)`;
//! - [`pg`]: a PostgreSQL of the test's own, from a data directory made once per run;
//! - [`load`]: billed clients hammering a server until told to stop;
//! - [`webhooks`]: a customer's webhook receiver, recording and scripted, and the check
//!   of its requests' signatures with the official `standardwebhooks` package;
//! - [`smtp`]: a stand-in SMTP relay that keeps the messages it takes;
//! - [`python`]: Python with a pinned PyPI package, in a venv made once;
//! - [`require`]: tests that need a tool the machine lacks skip with one line (and fail
//!   in CI, `POSTAL_REQUIRE_TOOLS`).
//!
//! Nothing here links the `postal` library: the binaries are run, their paths given by
//! the tests (`env!("CARGO_BIN_EXE_postal")`), so tests keep one copy of its types.

pub mod client;
pub mod load;
pub mod pg;
pub mod python;
pub mod serve;
pub mod smtp;
pub mod template;
pub mod webhooks;

use std::path::{Path, PathBuf};

pub use client::Client;
pub use serve::Serve;

/// The repository's root (the `postal` package).
pub fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// A file of the offline GeoNames copy beside the repository (`../shared/geonames/`).
pub fn geonames(name: &str) -> PathBuf {
    let dir = repo().join("../shared/geonames");
    assert!(
        dir.is_dir(),
        "the tests read the GeoNames files in {} (the shared folder beside the repository; \
         see README.md)",
        dir.display()
    );
    dir.join(name)
}

/// A hand-made file under `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    repo().join("tests/fixtures").join(name)
}

/// Cargo's scratch directory for tests (`target/tmp`, `CARGO_TARGET_TMPDIR`): what the
/// tests keep for the whole run (templates, a PostgreSQL data directory) lives here, not
/// in `/tmp`, so that a run leaves nothing behind there.
pub fn scratch() -> PathBuf {
    // A test binary is target/<profile>/deps/<name>-<hash>.
    let exe = std::env::current_exe().expect("the test binary's path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("a test binary under target/<profile>/deps");
    let dir = target.join("tmp");
    std::fs::create_dir_all(&dir).expect("creating target/tmp");
    dir
}

/// A temporary directory under [`scratch`], removed when dropped.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("t-")
        .tempdir_in(scratch())
        .expect("a temporary directory")
}

/// Whether `program` can be run (on `PATH`, or a path that exists). When it cannot, the
/// test says in one line what to install and is skipped (returns `false`), unless
/// `POSTAL_REQUIRE_TOOLS` is set (CI): then the test fails.
pub fn require(program: &str, install: &str) -> bool {
    let found = if program.contains('/') {
        Path::new(program).exists()
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
    };
    if found {
        return true;
    }
    assert!(
        std::env::var_os("POSTAL_REQUIRE_TOOLS").is_none(),
        "POSTAL_REQUIRE_TOOLS is set but {program} was not found ({install})"
    );
    eprintln!("skipped: {program} not found ({install})");
    false
}

/// A free loopback port (bound, then let go).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("binding a port")
        .local_addr()
        .expect("its address")
        .port()
}

/// `../shared/geonames/allCountries.zip` imported by `postal-import` with its defaults
/// (`countryInfo.txt` and `cities500.zip` beside it): the one import of the whole dataset
/// per run, checked by `tests/import/full_dataset.rs` and read by the API's tests on the
/// full dataset. Its database; [`template::run_of`] tells what the import printed.
pub fn full_dataset(postal_import: &str) -> PathBuf {
    template::import(
        "allCountries",
        postal_import,
        &[&geonames("allCountries.zip")],
        &[&geonames("countryInfo.txt"), &geonames("cities500.zip")],
    )
}

/// `tests/fixtures/tiny.txt`: 147 real US lines (90001 to 90299, Beverly Hills 90210
/// among them), for servers whose tests only look up 90210 (the cluster's nodes, the money
/// tests' `postal serve`).
pub fn tiny() -> PathBuf {
    fixture("tiny.txt")
}

/// [`tiny`] imported once per run: its database.
pub fn tiny_dataset(postal_import: &str) -> PathBuf {
    template::imported("tiny", postal_import, &[tiny()])
}
