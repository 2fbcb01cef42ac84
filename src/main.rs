//! `postal`: serve the API and administer accounts, keys and the ledger (cli.md). The
//! commands live in the library's `cli`, one module per command group.

fn main() -> std::process::ExitCode {
    postal::alloc::disable_huge_pages();
    postal::cli::main()
}
