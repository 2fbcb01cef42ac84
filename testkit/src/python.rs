//! Python with one PyPI package at a pinned version, in a venv under `target/` made once
//! and kept (the Stripe library for the payments stand-in, `standardwebhooks` for the
//! alerts' signatures).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The venv `target/<venv>`'s python with `package` at `version`, installed when missing
/// (under a file lock: every test binary may ask at once); `None` without python3 (one
/// line says so; `POSTAL_REQUIRE_TOOLS` makes it fail).
pub fn with_package(venv: &str, package: &str, version: &str) -> Option<PathBuf> {
    if !crate::require("python3", "python3 with venv and pip") {
        return None;
    }
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|p| p.into_inner());
    let target = crate::repo().join("target");
    std::fs::create_dir_all(&target).expect("creating target/");
    let lock =
        std::fs::File::create(target.join(format!("{venv}.lock"))).expect("the venv's lock file");
    lock.lock().expect("locking the venv");
    let dir = target.join(venv);
    let python = dir.join("bin/python");
    let has_package = Command::new(&python)
        .args([
            "-c",
            &format!(
                "import importlib.metadata as m, sys; sys.exit(m.version('{package}') != '{version}')"
            ),
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_package {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&dir)
            .status()
            .expect("python3 -m venv");
        assert!(made.success(), "python3 -m venv {}", dir.display());
        let pinned = format!("{package}=={version}");
        let installed = Command::new(dir.join("bin/pip"))
            .args(["install", "--quiet", &pinned])
            .status()
            .expect("pip install");
        assert!(installed.success(), "pip install {pinned}");
    }
    Some(python)
}
