//! `postal`: serve the API and administer accounts, keys and the ledger (cli.md). The
//! commands live in `cli/`, one module per command group.

mod cli;

// mimalloc, not glibc's malloc: measured in Cargo.toml's note on the dependency.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
