//! `postal-import`: load or refresh the postal dataset (cli.md).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "postal-import",
    version,
    about = "Load or refresh the GeoNames postal-code dataset"
)]
struct Cli {
    /// SQLite database file.
    #[arg(long, env = "POSTAL_DB", default_value = "data/postal.db")]
    db: PathBuf,
    /// countryInfo.txt path or URL (default: beside the first source, else upstream).
    #[arg(long)]
    country_info: Option<String>,
    /// The GeoNames gazetteer (`cities500.zip` or its .txt), path or URL, for city search
    /// (default: `cities500.zip` beside the first source; upstream's when the postal data
    /// comes from upstream). Missing or malformed: said on stderr, not used.
    #[arg(long)]
    gazetteer: Option<String>,
    /// Parse the sources and report counts and bad lines; write nothing (the database is
    /// not opened). Exit 1 when an import of them would fail.
    #[arg(long)]
    check: bool,
    /// Import even when a country would lose more than 10% of its postal codes, or vanish
    /// (without it such an import is refused and nothing changes).
    #[arg(long)]
    allow_shrink: bool,
    /// A file of corrections (path or URL): lines of the postal format after a first
    /// column `add` or `remove`. Stored, and applied by this import and every later one
    /// until replaced (an empty file clears them).
    #[arg(long, value_name = "FILE")]
    overrides: Option<String>,
    /// Do nothing when the postal sources have not changed since the last import that
    /// read them: a conditional request (ETag, Last-Modified) for a URL, the SHA-256 for
    /// a file.
    #[arg(long)]
    if_changed: bool,
    /// GeoNames postal-code files: .txt, .zip, a directory, or an http(s) URL
    /// (default: upstream allCountries.zip).
    sources: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let options = postal::import::Options {
        db: cli.db,
        sources: cli.sources,
        country_info: cli.country_info,
        gazetteer: cli.gazetteer,
        progress: std::io::stderr().is_terminal(),
        allow_shrink: cli.allow_shrink,
        overrides: cli.overrides,
        if_changed: cli.if_changed,
    };
    if cli.check {
        return match postal::import::check(&options) {
            Ok(report) => {
                println!("{report}");
                ExitCode::from(u8::from(report.would_fail))
            }
            Err(e) => {
                eprintln!("postal-import: {e:#}");
                ExitCode::from(1)
            }
        };
    }
    match postal::import::run(&options) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("postal-import: {e:#}");
            ExitCode::from(1)
        }
    }
}
