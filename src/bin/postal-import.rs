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
