//! `postal`: serve the API and administer accounts, keys and the ledger (cli.md). The
//! commands live in `cli/`, one module per command group.

mod cli;

fn main() -> std::process::ExitCode {
    postal::alloc::disable_huge_pages();
    cli::main()
}
