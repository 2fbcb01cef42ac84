//! The operator's mail relay (`postal mail`, docs/alerts.md; issue 51 item 1): settings
//! checked and stored without their password ever printed, `mail test` through a local
//! SMTP sink (testkit::smtp), the relay's refusals and plain text off loopback refused; on
//! the file and on a cluster's ledger.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use testkit::smtp::{Options, SmtpSink};

const PASSWORD: &str = "relay-Pa55word";
const FROM: &str = "Postal <billing@example.com>";
const OFF: &str = "no mail relay is set: e-mail alerts are off";

/// The result of one run of `postal`.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Its JSON, once it succeeded.
    fn json(&self) -> Value {
        assert_eq!(self.code, Some(0), "{}", self.stderr);
        serde_json::from_str(&self.stdout).expect("postal prints JSON")
    }

    /// Its error, once it failed with `code`.
    fn failed(&self, code: i32) -> &str {
        assert_eq!(self.code, Some(code), "{} {}", self.stdout, self.stderr);
        assert!(self.stdout.is_empty(), "{}", self.stdout);
        &self.stderr
    }
}

/// `postal TARGET... ARGS...` (`--db PATH` or `--ledger URL`) with `env` set.
fn postal(target: &[&str], args: &[&str], env: &[(&str, &str)]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_postal"))
        .args(target)
        .args(args)
        .env_remove("POSTAL_DB")
        .env_remove("POSTAL_LEDGER")
        .env_remove("TEST_MAIL_PASSWORD")
        .envs(env.iter().copied())
        .output()
        .expect("running postal");
    let run = Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        !run.stdout.contains(PASSWORD) && !run.stderr.contains(PASSWORD),
        "the password printed: {} {}",
        run.stdout,
        run.stderr
    );
    run
}

/// `mail smtp` of `url` with the user `postal` and its password from the environment.
fn set_relay(target: &[&str], url: &str) -> Value {
    postal(
        target,
        &[
            "mail",
            "smtp",
            "--url",
            url,
            "--from",
            FROM,
            "--user",
            "postal",
            "--password-env",
            "TEST_MAIL_PASSWORD",
        ],
        &[("TEST_MAIL_PASSWORD", PASSWORD)],
    )
    .json()
}

/// What `show` answers for the relay `url` with the user `postal`, set at `shown`'s time.
fn shown_with_user(url: &str, shown: &Value) -> Value {
    assert!(
        shown["updatedAt"].as_i64().unwrap() > 1_700_000_000,
        "{shown}"
    );
    json!({"enabled": true, "url": url, "from": FROM, "user": "postal",
           "password": "(set)", "updatedAt": shown["updatedAt"]})
}

fn file_db(dir: &Path) -> Vec<String> {
    vec![
        "--db".into(),
        dir.join("postal.db").to_string_lossy().into_owned(),
    ]
}

/// `mail smtp` stores what it prints, the password only as `(set)` (from the environment
/// or a private file, never the command line); `show` prints the same; `off` removes it and
/// `show` then says e-mail alerts are off.
#[test]
fn a_relay_is_stored_and_shown_without_its_password_and_off_removes_it() {
    let dir = testkit::tempdir();
    let db = file_db(dir.path());
    let db: Vec<&str> = db.iter().map(String::as_str).collect();
    let off = json!({"enabled": false, "note": OFF});
    assert_eq!(postal(&db, &["mail", "show"], &[]).json(), off);

    let url = "smtp://127.0.0.1:2525";
    let shown = set_relay(&db, url);
    assert_eq!(shown, shown_with_user(url, &shown));
    assert_eq!(postal(&db, &["mail", "show"], &[]).json(), shown);

    // Without a user: no password.
    let plain = postal(
        &db,
        &[
            "mail",
            "smtp",
            "--url",
            "smtps://mail.example.com",
            "--from",
            "billing@example.com",
        ],
        &[],
    )
    .json();
    assert_eq!(
        plain,
        json!({"enabled": true, "url": "smtps://mail.example.com", "from": "billing@example.com",
               "password": "(none)", "updatedAt": plain["updatedAt"]})
    );

    // From a private file; a file others may read is refused.
    let file = dir.path().join("relay.password");
    std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let from_file = |mode: u32| {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        postal(
            &db,
            &[
                "mail",
                "smtp",
                "--url",
                url,
                "--from",
                FROM,
                "--user",
                "postal",
                "--password-file",
                file.to_str().unwrap(),
            ],
            &[],
        )
    };
    let refused = from_file(0o644);
    assert!(
        refused.failed(2).contains("is open to group or others"),
        "{}",
        refused.stderr
    );
    let shown = from_file(0o600).json();
    assert_eq!(shown, shown_with_user(url, &shown));

    // A password needs a user and a user a password; no password on the command line.
    let mut smtp = vec!["mail", "smtp", "--url", url, "--from", FROM];
    for (extra, env, error) in [
        (
            vec!["--user", "postal"],
            vec![],
            "--user needs the relay's password",
        ),
        (
            vec!["--password-env", "TEST_MAIL_PASSWORD"],
            vec![("TEST_MAIL_PASSWORD", PASSWORD)],
            "--password-file and --password-env need --user",
        ),
        (
            vec!["--user", "postal", "--password-env", "TEST_MAIL_PASSWORD"],
            vec![],
            "the environment variable TEST_MAIL_PASSWORD is not set",
        ),
        (
            vec!["--user", "postal", "--password", "x"],
            vec![],
            "unexpected argument '--password'",
        ),
    ] {
        smtp.truncate(6);
        smtp.extend(extra);
        let run = postal(&db, &smtp, &env);
        assert!(run.failed(2).contains(error), "{smtp:?}: {}", run.stderr);
    }
    assert_eq!(postal(&db, &["mail", "show"], &[]).json(), shown);

    assert_eq!(
        postal(&db, &["mail", "off"], &[]).json(),
        json!({"enabled": false, "wasEnabled": true})
    );
    assert_eq!(postal(&db, &["mail", "show"], &[]).json(), off);
    assert_eq!(
        postal(&db, &["mail", "off"], &[]).json(),
        json!({"enabled": false, "wasEnabled": false})
    );
}

/// A URL of another scheme, without a host or with credentials in it, and a From that is
/// not a mailbox, are refused with what to give (exit 2), and the relay stays as it was.
#[test]
fn bad_settings_are_refused_with_a_clear_error_and_nothing_is_stored() {
    let dir = testkit::tempdir();
    let db = file_db(dir.path());
    let db: Vec<&str> = db.iter().map(String::as_str).collect();
    let attempts = [
        (
            "http://mail.example.com",
            FROM,
            "the relay URL \"http://mail.example.com\" has the scheme \"http\": give \
             smtp://HOST[:PORT] (STARTTLS, port 587 by default) or smtps://HOST[:PORT] \
             (implicit TLS, port 465 by default)",
        ),
        ("smtp://", FROM, "the relay URL \"smtp://\" has no host"),
        ("smtps:/", FROM, "the relay URL \"smtps:/\" has no host"),
        (
            "smtp://me:secret@mail.example.com",
            FROM,
            "holds a user or password: give the user as --user",
        ),
        (
            "smtp://mail.example.com:587",
            "Postal billing",
            "the sender \"Postal billing\" is not a mailbox such as \"Postal \
             <billing@example.com>\"",
        ),
        (
            "smtp://mail.example.com:587",
            "Postal <billing>",
            "the sender \"Postal <billing>\" is not a mailbox",
        ),
    ];
    for (url, from, error) in attempts {
        let run = postal(&db, &["mail", "smtp", "--url", url, "--from", from], &[]);
        assert!(
            run.failed(2).contains(error),
            "{url} {from}: {}",
            run.stderr
        );
    }
    assert_eq!(
        postal(&db, &["mail", "show"], &[]).json(),
        json!({"enabled": false, "note": OFF})
    );

    let url = "smtp://localhost:2525";
    let shown = set_relay(&db, url);
    for (url, from, error) in attempts {
        let run = postal(&db, &["mail", "smtp", "--url", url, "--from", from], &[]);
        assert!(
            run.failed(2).contains(error),
            "{url} {from}: {}",
            run.stderr
        );
    }
    assert_eq!(postal(&db, &["mail", "show"], &[]).json(), shown);
}

/// `mail test` sends one message through the relay (AUTH with the stored user and
/// password, on loopback in plain text: the sink offers no STARTTLS): From the stored
/// sender, To the address, the test subject, a Message-ID and a Date; it prints the
/// relay's reply.
#[test]
fn mail_test_delivers_one_message_with_the_right_from_to_and_subject() {
    let sink = SmtpSink::start_with(Options {
        auth: true,
        ..Options::default()
    });
    let dir = testkit::tempdir();
    let db = file_db(dir.path());
    let db: Vec<&str> = db.iter().map(String::as_str).collect();
    let run = postal(&db, &["mail", "test", "someone@example.com"], &[]);
    assert!(
        run.failed(2).contains(
            "no mail relay is set: e-mail alerts are off; set one with `postal mail smtp`"
        ),
        "{}",
        run.stderr
    );

    set_relay(&db, &format!("smtp://127.0.0.1:{}", sink.port()));
    let run = postal(&db, &["mail", "test", "someone at example.com"], &[]);
    assert!(
        run.failed(2)
            .contains("\"someone at example.com\" is not an e-mail address"),
        "{}",
        run.stderr
    );
    let sent = postal(&db, &["mail", "test", "someone@example.com"], &[]).json();
    assert_eq!(
        sent,
        json!({"to": "someone@example.com", "reply": "250 2.0.0 Ok: queued as TEST1"})
    );
    let messages = sink.wait_for(1, Duration::from_secs(10));
    assert_eq!(messages.len(), 1, "{messages:?}");
    let message = &messages[0];
    assert_eq!(message.from, "billing@example.com");
    assert_eq!(message.to, ["someone@example.com"]);
    assert_eq!(
        message.auth,
        Some(("postal".to_owned(), PASSWORD.to_owned()))
    );
    assert_eq!(message.header("From").as_deref(), Some(FROM));
    assert_eq!(message.header("To").as_deref(), Some("someone@example.com"));
    assert_eq!(
        message.header("Subject").as_deref(),
        Some("Postal: test message")
    );
    let id = message.header("Message-ID").expect("a Message-ID");
    assert!(
        id.starts_with('<') && id.ends_with('>') && id.contains('@'),
        "{id}"
    );
    assert!(message.header("Date").is_some(), "{}", message.data);
    assert!(
        message
            .header("Content-Type")
            .unwrap()
            .starts_with("text/plain"),
        "{}",
        message.data
    );
    assert!(
        message.body().contains("postal mail test"),
        "{}",
        message.data
    );
    assert_eq!(sink.messages().len(), 1);
}

/// A relay that refuses the recipient fails `mail test` (exit 1) with its SMTP code and
/// text; one that takes no AUTH while a user is set, and one that is not there, with
/// what happened.
#[test]
fn a_relay_refusing_the_recipient_fails_mail_test_with_its_smtp_code() {
    let sink = SmtpSink::start_with(Options {
        refuse_rcpt: Some(550),
        auth: true,
        ..Options::default()
    });
    let dir = testkit::tempdir();
    let db = file_db(dir.path());
    let db: Vec<&str> = db.iter().map(String::as_str).collect();
    set_relay(&db, &format!("smtp://127.0.0.1:{}", sink.port()));
    let run = postal(&db, &["mail", "test", "nobody@example.com"], &[]);
    let error = run.failed(1);
    assert!(
        error.contains(
            "the relay did not take the message: SMTP 550 5.1.1 <nobody@example.com>: \
             Recipient address rejected"
        ),
        "{error}"
    );
    assert!(sink.messages().is_empty());

    // A 4xx too, and nothing listening.
    let sink = SmtpSink::start_with(Options {
        refuse_rcpt: Some(451),
        auth: true,
        ..Options::default()
    });
    set_relay(&db, &format!("smtp://127.0.0.1:{}", sink.port()));
    let run = postal(&db, &["mail", "test", "nobody@example.com"], &[]);
    assert!(run.failed(1).contains("SMTP 451 5.1.1"), "{}", run.stderr);
    // A user and password for a relay that takes no AUTH: not sent in vain.
    let no_auth = SmtpSink::start();
    set_relay(&db, &format!("smtp://127.0.0.1:{}", no_auth.port()));
    let run = postal(&db, &["mail", "test", "nobody@example.com"], &[]);
    assert!(
        run.failed(1).contains(
            "the relay did not take the message: the relay offers no AUTH PLAIN or LOGIN"
        ),
        "{}",
        run.stderr
    );
    assert!(no_auth.messages().is_empty());
    let closed = testkit::free_port();
    set_relay(&db, &format!("smtp://127.0.0.1:{closed}"));
    let run = postal(&db, &["mail", "test", "nobody@example.com"], &[]);
    assert!(
        run.failed(1)
            .contains("the relay did not take the message: connection refused"),
        "{}",
        run.stderr
    );
}

/// This machine's first address that is not loopback (`hostname -I`), if any.
fn outside_address() -> Option<String> {
    let output = Command::new("hostname").arg("-I").output().ok()?;
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .filter_map(|a| a.parse::<std::net::IpAddr>().ok())
        .find(|a| a.is_ipv4() && !a.is_loopback())
        .map(|a| a.to_string())
}

/// Off loopback `smtp://` needs STARTTLS: a relay that does not offer it gets no
/// password and no message.
#[test]
fn off_loopback_a_relay_without_starttls_is_refused() {
    let Some(address) = outside_address() else {
        eprintln!("skipped: this machine has no address but loopback (hostname -I)");
        return;
    };
    let sink = SmtpSink::start_with(Options {
        bind: "0.0.0.0".parse().unwrap(),
        auth: true,
        ..Options::default()
    });
    let dir = testkit::tempdir();
    let db = file_db(dir.path());
    let db: Vec<&str> = db.iter().map(String::as_str).collect();
    set_relay(&db, &format!("smtp://{address}:{}", sink.port()));
    let run = postal(&db, &["mail", "test", "someone@example.com"], &[]);
    assert!(
        run.failed(1)
            .contains("the relay did not take the message: the relay offers no STARTTLS"),
        "{}",
        run.stderr
    );
    // The same sink on loopback takes it: only the address differed.
    set_relay(&db, &format!("smtp://127.0.0.1:{}", sink.port()));
    postal(&db, &["mail", "test", "someone@example.com"], &[]).json();
    let messages = sink.wait_for(1, Duration::from_secs(10));
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0].auth,
        Some(("postal".to_owned(), PASSWORD.to_owned()))
    );
}

/// On a cluster's ledger: `mail smtp`, `show`, `test` and `off` as on the file.
#[test]
fn on_a_cluster_ledger_the_relay_is_set_shown_used_and_removed() {
    let Some(pg) = testkit::pg::PgCluster::start() else {
        return;
    };
    let url = pg.url();
    let ledger = ["--ledger", url.as_str()];
    assert_eq!(
        postal(&ledger, &["mail", "show"], &[]).json(),
        json!({"enabled": false, "note": OFF})
    );
    let sink = SmtpSink::start_with(Options {
        auth: true,
        ..Options::default()
    });
    let relay = format!("smtp://127.0.0.1:{}", sink.port());
    let shown = set_relay(&ledger, &relay);
    assert_eq!(shown, shown_with_user(&relay, &shown));
    assert_eq!(postal(&ledger, &["mail", "show"], &[]).json(), shown);
    assert_eq!(
        pg.i64("SELECT count(*) FROM mail_settings WHERE password IS NOT NULL"),
        1
    );
    postal(&ledger, &["mail", "test", "ops@example.com"], &[]).json();
    let messages = sink.wait_for(1, Duration::from_secs(10));
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].to, ["ops@example.com"]);
    assert_eq!(
        postal(&ledger, &["mail", "off"], &[]).json(),
        json!({"enabled": false, "wasEnabled": true})
    );
    assert_eq!(
        postal(&ledger, &["mail", "show"], &[]).json(),
        json!({"enabled": false, "note": OFF})
    );
}
