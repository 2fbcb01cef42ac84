//! The ledger's TLS and password (docs/cluster.md, "TLS and the password"): a PostgreSQL
//! with `ssl = on` and a certificate from a CA made for the test, SCRAM for the `ledger`
//! role over TCP.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use postal::db::pg::{self, LedgerConfig, Security};
use tempfile::TempDir;

use crate::helpers::{PgCluster, one_at_a_time, postal};

/// The ledger role's password: a space, a `;` and a quote, as a generated one may hold.
const PASSWORD: &str = "pa ss;w'rd";

/// `openssl args...` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A throwaway CA (`ca.crt`), a server certificate it signed for `localhost` and
/// 127.0.0.1 (`server.crt`, `server.key`), and a second CA that signed nothing
/// (`other-ca.crt`). P-256 keys: made in milliseconds.
fn certificates() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for ca in ["ca", "other-ca"] {
        let (key, crt, subject) = (
            format!("{ca}.key"),
            format!("{ca}.crt"),
            format!("/CN={ca}"),
        );
        let mut args = vec!["req", "-x509", "-days", "2", "-subj", &subject];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &crt]);
        args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
        args.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
        openssl(dir.path(), &args);
    }
    let mut args = vec!["req", "-subj", "/CN=localhost"];
    args.extend(ec);
    args.extend(["-keyout", "server.key", "-out", "server.csr"]);
    openssl(dir.path(), &args);
    std::fs::write(
        dir.path().join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir.path(),
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    );
    dir
}

/// A PostgreSQL with TLS on (the certificate of `certs`), logging its connections, and a
/// `ledger` role that signs in over TCP with `PASSWORD` (SCRAM); the harness's own
/// `postal` role stays trusted.
fn tls_cluster(certs: &Path) -> Option<PgCluster> {
    let pg = PgCluster::start_with(|data| {
        for file in ["server.crt", "server.key"] {
            std::fs::copy(certs.join(file), data.join(file)).unwrap();
        }
        let key = data.join("server.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut conf = std::fs::read_to_string(data.join("postgresql.conf")).unwrap();
        conf.push_str("\nssl = on\nlog_connections = on\n");
        std::fs::write(data.join("postgresql.conf"), conf).unwrap();
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             host all ledger 127.0.0.1/32 scram-sha-256\n\
             host all ledger ::1/128 scram-sha-256\n\
             host all all 127.0.0.1/32 trust\n",
        )
        .unwrap();
    })?;
    pg.execute(&format!(
        "CREATE ROLE ledger LOGIN SUPERUSER PASSWORD '{}'",
        PASSWORD.replace('\'', "''")
    ));
    Some(pg)
}

/// A password file of mode 0600 holding `password` and a newline.
fn password_file(dir: &Path, password: &str) -> PathBuf {
    let path = dir.join("ledger-password");
    std::fs::write(&path, format!("{password}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn ca(certs: &Path, name: &str) -> String {
    certs.join(name).display().to_string()
}

#[test]
fn the_ledger_is_reached_over_tls_verified_against_its_ca_with_the_password_from_a_file() {
    let _one = one_at_a_time();
    let certs = certificates();
    let Some(pg) = tls_cluster(certs.path()) else {
        return;
    };
    let password = password_file(certs.path(), PASSWORD);
    let port = pg.port();
    let ca = ca(certs.path(), "ca.crt");
    let url =
        format!("postgres://ledger@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={ca}");
    let verified = postal(
        &url,
        &[
            "--ledger-password-file",
            password.to_str().unwrap(),
            "ledger",
            "verify",
        ],
    );
    assert_eq!(verified.code, 0, "{}", verified.stderr);
    assert!(
        pg.log()
            .contains("connection authorized: user=ledger database=postgres SSL enabled"),
        "{}",
        pg.log()
    );

    // The certificate names 127.0.0.1 too; the libpq `key=value` words are read alike.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for url in [
        format!("postgres://ledger@127.0.0.1:{port}/postgres?sslrootcert={ca}"),
        format!(
            "host=localhost port={port} user=ledger dbname=postgres sslmode=verify-full sslrootcert='{ca}'"
        ),
    ] {
        let ledger = LedgerConfig::parse(&url, Some(&password)).unwrap();
        assert_eq!(ledger.security(), Security::Verified, "{url}");
        let ssl: bool = runtime.block_on(async {
            let client = pg::connect(&ledger).await.unwrap();
            client
                .query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .await
                .unwrap()
                .get(0)
        });
        assert!(ssl, "{url}");
    }
}

#[test]
fn a_ledger_whose_certificate_the_ca_did_not_sign_or_that_names_another_host_is_refused() {
    let _one = one_at_a_time();
    let certs = certificates();
    let Some(pg) = tls_cluster(certs.path()) else {
        return;
    };
    let password = password_file(certs.path(), PASSWORD);
    let password = password.to_str().unwrap();
    let port = pg.port();

    let other_ca = ca(certs.path(), "other-ca.crt");
    let url = format!(
        "postgres://ledger@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={other_ca}"
    );
    let refused = postal(
        &url,
        &["--ledger-password-file", password, "ledger", "verify"],
    );
    assert_eq!(refused.code, 1);
    assert_eq!(
        refused.stderr,
        format!(
            "error: connecting to the ledger postgres://ledger:***@localhost:{port}/postgres?\
             sslmode=verify-full&sslrootcert={other_ca}: error performing TLS handshake: \
             invalid peer certificate: UnknownIssuer\n"
        )
    );

    // Reached at 127.0.0.1 under a name the certificate does not hold: verify-full
    // checks the name, not only the chain.
    let url = format!(
        "host=ledger.example hostaddr=127.0.0.1 port={port} user=ledger dbname=postgres \
         sslmode=verify-full sslrootcert={}",
        ca(certs.path(), "ca.crt")
    );
    let refused = postal(
        &url,
        &["--ledger-password-file", password, "ledger", "verify"],
    );
    assert_eq!(refused.code, 1);
    assert_eq!(
        refused.stderr,
        format!(
            "error: connecting to the ledger {url}: error performing TLS handshake: invalid \
             peer certificate: certificate not valid for name \"ledger.example\"; certificate \
             is only valid for DnsName(\"localhost\") or IpAddress(127.0.0.1)\n"
        )
    );
}

#[test]
fn the_password_file_replaces_the_url_s_and_no_error_shows_either() {
    let _one = one_at_a_time();
    let certs = certificates();
    let Some(pg) = tls_cluster(certs.path()) else {
        return;
    };
    let port = pg.port();
    let ca = ca(certs.path(), "ca.crt");
    let url = format!("postgres://ledger:{PASSWORD}@localhost:{port}/postgres?sslrootcert={ca}");
    let shown = format!("postgres://ledger:***@localhost:{port}/postgres?sslrootcert={ca}");
    assert_eq!(postal(&url, &["ledger", "verify"]).code, 0);

    let wrong = password_file(certs.path(), "not-the-password");
    let refused = postal(
        &url,
        &[
            "--ledger-password-file",
            wrong.to_str().unwrap(),
            "ledger",
            "verify",
        ],
    );
    assert_eq!(refused.code, 1);
    assert_eq!(
        refused.stderr,
        format!(
            "error: connecting to the ledger {shown}: db error: FATAL: password authentication \
             failed for user \"ledger\"\n"
        )
    );
}

#[test]
fn a_password_file_missing_or_open_to_others_and_clear_text_off_loopback_are_the_operator_s_mistakes()
 {
    let dir = tempfile::tempdir().unwrap();
    let local = "postgres://ledger@127.0.0.1:1/postgres";
    let missing = dir.path().join("missing");
    let run = postal(
        local,
        &[
            "--ledger-password-file",
            missing.to_str().unwrap(),
            "ledger",
            "verify",
        ],
    );
    assert_eq!((run.code, run.stdout.as_str()), (2, ""));
    assert_eq!(
        run.stderr,
        format!(
            "error: reading the ledger password file {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );

    let open = password_file(dir.path(), PASSWORD);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = postal(
        local,
        &[
            "--ledger-password-file",
            open.to_str().unwrap(),
            "ledger",
            "verify",
        ],
    );
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        format!(
            "error: the ledger password file {0} is open to group or others (mode 0644); allow \
             its owner only: chmod 600 {0}\n",
            open.display()
        )
    );

    let run = postal(
        "postgres://ledger:s3cret@db.example/postgres?sslmode=disable",
        &["ledger", "verify"],
    );
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "error: sslmode=disable refused: the ledger's host db.example is not this machine, and \
         the connection would carry its password and charges in clear text. Turn TLS on in its \
         PostgreSQL (ssl = on) and remove sslmode (TLS verified in full is the default off this \
         machine), with sslrootcert=PATH for a private CA; or reach it through loopback (an SSH \
         tunnel, a proxy on this machine)\n"
    );
}
