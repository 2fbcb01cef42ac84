//! Databases built once and cached: an import of the sample takes seconds and of
//! `allCountries.zip` a minute, and most tests only need a copy of the result.
//!
//! A template is a directory under `target/tmp/templates/` named after its purpose and a
//! fingerprint of its inputs (each file's path, size and modification time: the source
//! files and the binary that builds it). Every test binary of a run, and later runs, use
//! it as long as the fingerprint holds; a changed input (a rebuilt `postal-import`)
//! builds a new one and removes the old. Built under a lock file, into a `.part`
//! directory renamed when complete, so concurrent test binaries and threads build it once
//! and never see half of it.

use std::fs::{self, File};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The directory of template `name` made from `inputs` by `build` (which fills the empty
/// directory it is given), built now if it is not cached yet.
pub fn cached(name: &str, inputs: &[&Path], build: impl FnOnce(&Path)) -> PathBuf {
    let root = super::scratch().join("templates");
    fs::create_dir_all(&root).expect("creating target/tmp/templates");
    let mut hasher = DefaultHasher::new();
    for input in inputs {
        let meta = fs::metadata(input)
            .unwrap_or_else(|e| panic!("template {name}: input {}: {e}", input.display()));
        input.hash(&mut hasher);
        meta.len().hash(&mut hasher);
        meta.modified().ok().hash(&mut hasher);
    }
    let dir = root.join(format!("{name}-{:016x}", hasher.finish()));
    let lock = File::create(root.join(format!("{name}.lock"))).expect("the template's lock");
    lock.lock().expect("locking the template");
    if !dir.is_dir() {
        // Older fingerprints of this template are stale: their inputs changed.
        for entry in fs::read_dir(&root)
            .expect("listing the templates")
            .flatten()
        {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            if file.starts_with(&format!("{name}-")) {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        let part = root.join(format!("{name}.part"));
        let _ = fs::remove_dir_all(&part);
        fs::create_dir_all(&part).expect("creating the template directory");
        build(&part);
        fs::rename(&part, &dir).expect("completing the template");
    }
    dir
}

/// What one run of a program printed.
#[derive(Debug, Clone)]
pub struct Run {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// `postal-import --db <dir>/postal.db args...` into a new template directory, its
/// output kept beside the database (`run.stdout`, `run.stderr`, `run.code`) so that a
/// test of the import can check the run that made the template. Fingerprinted by the
/// binary, the arguments that are files, and `also` (files the import reads without
/// being told, such as `countryInfo.txt` beside a source).
pub fn import(name: &str, postal_import: &str, args: &[&Path], also: &[&Path]) -> PathBuf {
    let mut inputs = vec![Path::new(postal_import)];
    inputs.extend(args.iter().filter(|a| a.is_file()));
    inputs.extend(also);
    let dir = cached(name, &inputs, |dir| {
        let output = Command::new(postal_import)
            .arg("--db")
            .arg(dir.join("postal.db"))
            .args(args)
            .env_remove("POSTAL_DB")
            .env_remove("POSTAL_IMPORT_TIMINGS")
            .stdin(Stdio::null())
            .output()
            .expect("running postal-import");
        fs::write(dir.join("run.stdout"), &output.stdout).expect("keeping stdout");
        fs::write(dir.join("run.stderr"), &output.stderr).expect("keeping stderr");
        let code = output
            .status
            .code()
            .map_or("none".into(), |c| c.to_string());
        fs::write(dir.join("run.code"), code).expect("keeping the exit code");
        assert!(
            output.status.success(),
            "template {name}: postal-import {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    });
    dir.join("postal.db")
}

/// `sources` imported by `postal-import` with the shared `countryInfo.txt` (the tests run
/// offline, and a fixture has none beside it) into template `name`: its database.
pub fn imported(name: &str, postal_import: &str, sources: &[PathBuf]) -> PathBuf {
    let info = super::geonames("countryInfo.txt");
    let mut args = vec![Path::new("--country-info"), &info];
    args.extend(sources.iter().map(PathBuf::as_path));
    import(name, postal_import, &args, &[])
}

/// The run of `postal-import` that made the template whose database is `db`.
pub fn run_of(db: &Path) -> Run {
    let dir = db.parent().expect("a template's directory");
    let read = |file: &str| fs::read_to_string(dir.join(file)).expect("a template's run");
    Run {
        exit_code: read("run.code").parse().ok(),
        stdout: read("run.stdout"),
        stderr: read("run.stderr"),
    }
}

/// A copy of template `db` at `to` (a test's own database).
pub fn copy(db: &Path, to: &Path) -> PathBuf {
    fs::copy(db, to)
        .unwrap_or_else(|e| panic!("copying {} to {}: {e}", db.display(), to.display()));
    to.to_path_buf()
}
