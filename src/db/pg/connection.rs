//! How the ledger is reached (docs/cluster.md, "TLS and the password"): the connection
//! string parsed once at start, the password from a file, TLS required and verified off
//! this machine, and the one connect every ledger connection goes through.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Connection, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::redacted;

/// The connection that drives a ledger client (and carries its notifications).
pub type LedgerConnection =
    Connection<Socket, <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream>;

/// A ledger's connection string, parsed: where, who, with which password, and how the
/// connection is protected. Built once at start, so that a mistake in it is the
/// operator's, before anything runs; shown only without its password.
#[derive(Clone)]
pub struct LedgerConfig {
    config: Config,
    security: Security,
    tls: Arc<rustls::ClientConfig>,
    shown: String,
}

/// How a ledger connection is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    /// Clear text: only to this machine (loopback or a Unix socket).
    Plain,
    /// TLS, the server's certificate chained to a trusted root and naming the host
    /// (libpq's `verify-full`).
    Verified,
}

impl LedgerConfig {
    /// Parses the connection string `url` (a `postgres://` URL or libpq's `key=value`
    /// words), with the password read from `password_file` in place of any in `url`.
    /// Decides the connection's security (docs/cluster.md): plain on this machine unless
    /// TLS is asked for, TLS verified anywhere else, and clear text refused there.
    pub fn parse(url: &str, password_file: Option<&Path>) -> anyhow::Result<LedgerConfig> {
        let shown = redacted(url);
        let (rest, tls) = take_tls_params(url)
            .with_context(|| format!("the ledger's connection string {shown}"))?;
        // tokio-postgres' errors name the option, never its value.
        let mut config = Config::from_str(&rest)
            .map_err(|e| anyhow!("the ledger's connection string {shown}: {e}"))?;
        if let Some(path) = password_file {
            config.password(crate::db::secret_file::read(
                path,
                "the ledger password file",
            )?);
        }
        let mode = tls.mode.as_deref().map(Mode::parse).transpose()?;
        let security = decide(
            remote_host(&config).as_deref(),
            mode,
            tls.root_cert.is_some(),
        )?;
        config.ssl_mode(match security {
            Security::Plain => SslMode::Disable,
            Security::Verified => SslMode::Require,
        });
        let tls = match security {
            Security::Plain => client_config(rustls::RootCertStore::empty())?,
            Security::Verified => client_config(roots(tls.root_cert.as_deref())?)?,
        };
        Ok(LedgerConfig {
            config,
            security,
            tls: Arc::new(tls),
            shown,
        })
    }

    /// How connections to this ledger are protected.
    pub fn security(&self) -> Security {
        self.security
    }
}

/// The connection string without its password.
impl fmt::Display for LedgerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for LedgerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LedgerConfig")
            .field("url", &self.shown)
            .field("security", &self.security)
            .finish()
    }
}

/// Opens a connection to the ledger: the one way there, for the writer's connection and
/// the listener's. The caller drives the connection.
pub async fn open(ledger: &LedgerConfig) -> anyhow::Result<(Client, LedgerConnection)> {
    ledger
        .config
        .connect(MakeRustlsConnect::new((*ledger.tls).clone()))
        .await
        .with_context(|| format!("connecting to the ledger {}", ledger.shown))
}

/// Connects to the ledger and drives the connection on the current runtime.
pub async fn connect(ledger: &LedgerConfig) -> anyhow::Result<Client> {
    Ok(connect_task(ledger).await?.0)
}

/// As [`connect`], with the task that drives the connection: aborting it closes the
/// socket at once, and the server rolls back whatever transaction the connection had
/// open (a call given up on must not keep its locks until the server notices).
pub async fn connect_task(
    ledger: &LedgerConfig,
) -> anyhow::Result<(Client, tokio::task::JoinHandle<()>)> {
    let (client, connection) = open(ledger).await?;
    let task = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!("ledger connection closed: {e}");
        }
    });
    Ok((client, task))
}

/// A pool of at most `size` connections to the ledger, made when first wanted, on the
/// runtime that asks (the account store's): each connect bounded by `connect`, a wait for
/// a free connection by `wait`, every statement by `statement`.
pub fn pool(
    ledger: &LedgerConfig,
    size: usize,
    connect: Duration,
    wait: Duration,
    statement: Duration,
) -> anyhow::Result<deadpool_postgres::Pool> {
    use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, RecyclingMethod, Runtime};
    let mut config = ledger.config.clone();
    config.connect_timeout(connect);
    let manager = Manager::from_config(
        config,
        MakeRustlsConnect::new((*ledger.tls).clone()),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let bound = format!("SET statement_timeout = {}", statement.as_millis());
    deadpool_postgres::Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(connect))
        .recycle_timeout(Some(connect))
        .post_create(Hook::async_fn(move |client, _| {
            let bound = bound.clone();
            Box::pin(async move {
                client
                    .batch_execute(&bound)
                    .await
                    .map_err(HookError::Backend)
            })
        }))
        .build()
        .with_context(|| format!("a connection pool for the ledger {}", ledger.shown))
}

/// A connection lent by [`pool`], as the client it is.
pub struct Pooled(pub deadpool_postgres::Object);

impl std::ops::Deref for Pooled {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

/// libpq's `sslmode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> anyhow::Result<Mode> {
        Ok(match value {
            "disable" => Mode::Disable,
            "allow" => Mode::Allow,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            _ => bail!(
                "sslmode={value} is not one of disable, allow, prefer, require, verify-ca, \
                 verify-full"
            ),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Allow => "allow",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }
}

/// The security of a connection to `remote` (the first host not on this machine; `None`
/// when every host is loopback or a Unix socket) with `mode` (`None`: no sslmode), a CA
/// file given or not. Every TLS connection is verified in full: an unverified one (libpq's
/// `require`, `verify-ca` without the name) is open to whoever sits on the path, so the
/// three TLS modes mean the same here.
fn decide(remote: Option<&str>, mode: Option<Mode>, ca_file: bool) -> anyhow::Result<Security> {
    let tls = match mode {
        Some(Mode::Require | Mode::VerifyCa | Mode::VerifyFull) => true,
        Some(Mode::Disable | Mode::Allow | Mode::Prefer) => false,
        None => remote.is_some() || ca_file,
    };
    match (remote, mode) {
        (Some(host), Some(mode)) if !tls => bail!(
            "sslmode={} refused: the ledger's host {host} is not this machine, and the \
             connection would carry its password and charges in clear text. Turn TLS on in \
             its PostgreSQL (ssl = on) and remove sslmode (TLS verified in full is the \
             default off this machine), with sslrootcert=PATH for a private CA; or reach it \
             through loopback (an SSH tunnel, a proxy on this machine)",
            mode.name()
        ),
        _ if tls => Ok(Security::Verified),
        _ => Ok(Security::Plain),
    }
}

/// The first host of `config` that is not this machine (loopback: 127.0.0.0/8, ::1,
/// `localhost`; or a Unix socket). A host's `hostaddr`, when given, is where it connects.
fn remote_host(config: &Config) -> Option<String> {
    let (hosts, addrs) = (config.get_hosts(), config.get_hostaddrs());
    (0..hosts.len().max(addrs.len())).find_map(|i| match (addrs.get(i), hosts.get(i)) {
        (Some(addr), _) => (!addr.to_canonical().is_loopback()).then(|| addr.to_string()),
        (None, Some(Host::Tcp(name))) => {
            let loopback = name.eq_ignore_ascii_case("localhost")
                || name
                    .parse::<IpAddr>()
                    .is_ok_and(|addr| addr.to_canonical().is_loopback());
            (!loopback).then(|| name.clone())
        }
        _ => None,
    })
}

/// The roots a ledger's certificate must chain to: the certificates of the PEM file at
/// `ca_file` (`sslrootcert=PATH`), else the Mozilla roots built in (webpki-roots; also
/// for libpq's `sslrootcert=system`).
fn roots(ca_file: Option<&str>) -> anyhow::Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        None | Some("system") => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| anyhow!("reading the ledger's CA file {path}: {e}"))?;
            if certs.is_empty() {
                bail!("the ledger's CA file {path} holds no PEM certificate");
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| anyhow!("the ledger's CA file {path}: {e}"))?;
            }
        }
    }
    Ok(roots)
}

/// A TLS client of ring's, on rustls' safe protocol versions (1.2 and 1.3).
fn client_config(roots: rustls::RootCertStore) -> anyhow::Result<rustls::ClientConfig> {
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("the TLS client of the ledger")?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

/// The TLS words of a connection string, which tokio-postgres 0.7 does not know
/// (`sslrootcert`; `sslmode`'s `allow`, `verify-ca`, `verify-full`).
#[derive(Default)]
struct TlsParams {
    mode: Option<String>,
    root_cert: Option<String>,
}

/// `url` without its `sslmode` and `sslrootcert`, and their values.
fn take_tls_params(url: &str) -> anyhow::Result<(String, TlsParams)> {
    let mut tls = TlsParams::default();
    let mut take = |key: &str, value: String| match key {
        "sslmode" => {
            tls.mode = Some(value);
            true
        }
        "sslrootcert" => {
            tls.root_cert = Some(value);
            true
        }
        _ => false,
    };
    let Some(after_scheme) = ["postgres://", "postgresql://"]
        .iter()
        .find_map(|scheme| url.strip_prefix(scheme))
    else {
        // libpq's `key=value` words: the kept ones written again, quoted.
        let mut kept = Vec::new();
        for (key, value) in key_values(url)? {
            if !take(key, value.clone()) {
                let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
                kept.push(format!("{key}='{quoted}'"));
            }
        }
        return Ok((kept.join(" "), tls));
    };
    // As tokio-postgres reads a URL: the user info ends at the first `@`, the parameters
    // start at the first `?` after it, `&` between them, keys and values percent-encoded.
    let start = url.len() - after_scheme.len() + after_scheme.find('@').map_or(0, |at| at + 1);
    let Some(query) = url[start..].find('?').map(|q| start + q) else {
        return Ok((url.to_owned(), tls));
    };
    let mut kept = Vec::new();
    for pair in url[query + 1..].split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !take(&decode(key)?, decode(value)?) {
            kept.push(pair);
        }
    }
    let base = &url[..query];
    let rest = match kept.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", kept.join("&")),
    };
    Ok((rest, tls))
}

fn decode(s: &str) -> anyhow::Result<String> {
    Ok(percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .context("a parameter is not UTF-8 once decoded")?
        .into_owned())
}

/// libpq's `key = value` words as tokio-postgres reads them: a value quoted in `'` or
/// ending at white space, `\` escaping the next character.
fn key_values(s: &str) -> anyhow::Result<Vec<(&str, String)>> {
    let mut words = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(rest.len());
        let key = &rest[..end];
        rest = rest[end..].trim_start();
        let Some(after) = rest.strip_prefix('=').filter(|_| !key.is_empty()) else {
            bail!("expected `key=value` words");
        };
        rest = after.trim_start();
        let quoted = rest.starts_with('\'');
        let mut value = String::new();
        let mut chars = rest.char_indices().skip(usize::from(quoted));
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => value.extend(chars.next().map(|(_, c)| c)),
                '\'' if quoted => {
                    end = Some(i + 1);
                    break;
                }
                c if c.is_whitespace() && !quoted => {
                    end = Some(i);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = match end {
            Some(end) => end,
            None if quoted => bail!("a quoted value of {key} is not closed"),
            None => rest.len(),
        };
        if !quoted && value.is_empty() {
            bail!("{key} has no value");
        }
        words.push((key, value));
        rest = rest[end..].trim_start();
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn security(url: &str) -> Result<Security, String> {
        LedgerConfig::parse(url, None)
            .map(|ledger| ledger.security())
            .map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn a_ledger_on_this_machine_is_reached_in_clear_text_unless_tls_is_asked_for() {
        for url in [
            "postgres://postal@127.0.0.1:5432/postal",
            "postgres://postal@127.8.9.10/postal",
            "postgres://postal@[::1]:5432/postal",
            "postgres://postal@LOCALHOST/postal",
            "postgres://postal@localhost/postal?sslmode=prefer",
            "postgres://postal@%2Frun%2Fpostgresql/postal",
            "host=/run/postgresql user=postal",
            "host=db.example hostaddr=127.0.0.1 user=postal sslmode=disable",
        ] {
            assert_eq!(security(url), Ok(Security::Plain), "{url}");
        }
        for url in [
            "postgres://postal@localhost/postal?sslmode=require",
            "postgres://postal@127.0.0.1/postal?sslmode=verify-full",
            "host=localhost user=postal sslmode=verify-ca",
            "postgres://postal@localhost/postal?sslrootcert=system",
        ] {
            assert_eq!(security(url), Ok(Security::Verified), "{url}");
        }
    }

    #[test]
    fn a_ledger_elsewhere_is_reached_over_verified_tls_whatever_the_mode_asked() {
        for url in [
            "postgres://postal@db.example/postal",
            "postgres://postal@10.0.0.5:5432/postal?sslmode=require",
            "postgres://postal@[2001:db8::1]/postal?sslmode=verify-ca",
            "postgres://postal@localhost,db.example/postal",
            "host=localhost hostaddr=10.0.0.5 user=postal",
            "host=db.example user=postal sslmode=verify-full",
            "postgres://postal@127.0.0.2.example/postal",
        ] {
            assert_eq!(security(url), Ok(Security::Verified), "{url}");
        }
    }

    #[test]
    fn clear_text_to_a_ledger_elsewhere_is_refused_with_the_fix() {
        assert_eq!(
            security("postgres://postal:s3cret@db.example/postal?sslmode=disable"),
            Err(
                "sslmode=disable refused: the ledger's host db.example is not this machine, \
                 and the connection would carry its password and charges in clear text. Turn \
                 TLS on in its PostgreSQL (ssl = on) and remove sslmode (TLS verified in full \
                 is the default off this machine), with sslrootcert=PATH for a private CA; or \
                 reach it through loopback (an SSH tunnel, a proxy on this machine)"
                    .into()
            )
        );
        for url in [
            "host=localhost,10.1.2.3 user=postal sslmode=prefer",
            "postgres://postal@db.example/postal?sslmode=allow",
        ] {
            assert!(security(url).is_err_and(|e| e.contains("refused")), "{url}");
        }
    }

    #[test]
    fn tls_words_unknown_to_tokio_postgres_are_taken_out_and_the_rest_kept() {
        let (rest, tls) = take_tls_params(
            "postgres://u:p%3Fw@db.example:6432/postal?sslmode=verify-full&application_name=n\
             &sslrootcert=%2Fetc%2Fca%20file.pem",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u:p%3Fw@db.example:6432/postal?application_name=n"
        );
        assert_eq!(tls.mode.as_deref(), Some("verify-full"));
        assert_eq!(tls.root_cert.as_deref(), Some("/etc/ca file.pem"));

        let (rest, tls) = take_tls_params(
            "host=db.example sslrootcert = '/etc/my ca.pem' password='it\\'s' sslmode=verify-ca",
        )
        .unwrap();
        assert_eq!(rest, "host='db.example' password='it\\'s'");
        assert_eq!(tls.mode.as_deref(), Some("verify-ca"));
        assert_eq!(tls.root_cert.as_deref(), Some("/etc/my ca.pem"));
        let config = Config::from_str(&rest).unwrap();
        assert_eq!(config.get_password(), Some(&b"it's"[..]));

        assert_eq!(
            security("postgres://postal@db.example/postal?sslmode=verify"),
            Err(
                "sslmode=verify is not one of disable, allow, prefer, require, verify-ca, \
                 verify-full"
                    .into()
            )
        );
        assert_eq!(
            security("host=db.example password='s3cret"),
            Err(
                "the ledger's connection string host=db.example password=***: a quoted \
                 value of password is not closed"
                    .into()
            )
        );
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        assert_eq!(
            security("postgres://postal@db.example/postal?sslrootcert=/nonexistent/ca.pem"),
            Err(
                "reading the ledger's CA file /nonexistent/ca.pem: I/O error: No such file or \
                 directory (os error 2)"
                    .into()
            )
        );
    }

    #[test]
    fn the_password_file_gives_the_password_without_its_line_end() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("password");
        std::fs::write(&path, "s3 cret\r\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let ledger =
            LedgerConfig::parse("postgres://postal:in-url@127.0.0.1/postal", Some(&path)).unwrap();
        assert_eq!(ledger.config.get_password(), Some(&b"s3 cret"[..]));
        assert_eq!(ledger.to_string(), "postgres://postal:***@127.0.0.1/postal");
        assert!(!format!("{ledger:?}").contains("in-url"));

        let refused = |path: &Path| {
            format!(
                "{:#}",
                LedgerConfig::parse("postgres://postal@127.0.0.1/postal", Some(path)).unwrap_err()
            )
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let shown = path.display();
        assert_eq!(
            refused(&path),
            format!(
                "the ledger password file {shown} is open to group or others (mode 0640); \
                 allow its owner only: chmod 600 {shown}"
            )
        );
        std::fs::write(&path, "\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(
            refused(&path),
            format!("the ledger password file {shown} is empty")
        );
        let missing = dir.path().join("missing");
        assert_eq!(
            refused(&missing),
            format!(
                "reading the ledger password file {}: No such file or directory (os error 2)",
                missing.display()
            )
        );
    }
}
