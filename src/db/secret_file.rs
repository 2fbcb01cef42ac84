//! Secrets the operator keeps in private files: the ledger's password
//! (`--ledger-password-file`), a provider's client secret (`--client-secret-file`),
//! Stripe's secrets (`--secret-key-file`, `--webhook-secret-file`) and the mail relay's
//! password (`postal mail smtp --password-file`), all read by [`read`].

use std::path::Path;

use anyhow::{Context, bail};

/// The secret in the file at `path`, named `what` in errors ("the ledger password
/// file"): its content without the line end that closes it. Refused when it is not a
/// regular file, when group or others may read or write it (as libpq ignores such a
/// `.pgpass`: a secret that others can read is no longer one, and the operator must
/// know), or when empty.
pub fn read(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let metadata = std::fs::metadata(path).with_context(|| format!("reading {what} {shown}"))?;
    if !metadata.is_file() {
        bail!("{what} {shown} is not a file");
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "{what} {shown} is open to group or others (mode {mode:04o}); \
             allow its owner only: chmod 600 {shown}"
        );
    }
    let mut secret = std::fs::read(path).with_context(|| format!("reading {what} {shown}"))?;
    while secret.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
        secret.pop();
    }
    if secret.is_empty() {
        bail!("{what} {shown} is empty");
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn refused(path: &Path) -> String {
        format!("{:#}", read(path, "the test secret file").unwrap_err())
    }

    #[test]
    fn a_private_file_gives_its_secret_without_its_line_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "s3 cret\r\n").unwrap();
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(read(&path, "the test secret file").unwrap(), b"s3 cret");
        }
    }

    #[test]
    fn a_file_open_to_others_empty_missing_or_not_a_file_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        let shown = path.display();
        std::fs::write(&path, "s3cret\n").unwrap();
        for (mode, shown_mode) in [(0o640, "0640"), (0o604, "0604"), (0o620, "0620")] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                refused(&path),
                format!(
                    "the test secret file {shown} is open to group or others (mode \
                     {shown_mode}); allow its owner only: chmod 600 {shown}"
                )
            );
        }
        std::fs::write(&path, "\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            refused(&path),
            format!("the test secret file {shown} is empty")
        );
        assert_eq!(
            refused(dir.path()),
            format!(
                "the test secret file {} is not a file",
                dir.path().display()
            )
        );
        let missing = dir.path().join("missing");
        assert_eq!(
            refused(&missing),
            format!(
                "reading the test secret file {}: No such file or directory (os error 2)",
                missing.display()
            )
        );
    }
}
