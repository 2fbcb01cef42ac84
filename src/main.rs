//! `postal`: serve the API and administer accounts, keys and the ledger (cli.md).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "postal",
    version,
    about = "Postal-code data service: serve and administer"
)]
struct Cli {
    /// SQLite database file.
    #[arg(
        long,
        global = true,
        env = "POSTAL_DB",
        default_value = "data/postal.db"
    )]
    db: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (imports the dataset first when the database has none).
    Serve {
        #[arg(long, env = "POSTAL_LISTEN", default_value = "127.0.0.1:8080")]
        listen: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve { listen } => {
            let _ = (&cli.db, listen);
            anyhow::bail!("serve: not built yet")
        }
    }
}
