//! The dashboard under load on a cluster node (issue 48): its store and its calls to
//! providers and Stripe run on threads of their own (`accounts::store`), so 50 clients
//! of the dashboard, some waiting on a provider that never answers and on a Stripe that
//! never answers, leave the API and `/readyz` alone.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::account::{Browser, add_provider_to, providers_for};

/// The dashboard's 503 when the store or the outside calls had no turn in time.
const BUSY: &str = "The account service is busy; try again in a moment";

/// A socket that accepts every connection and never says a word (nor closes one).
struct Silent {
    address: String,
    stop: Arc<AtomicBool>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => held.push(stream),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
                // Read what was sent, so no peer blocks on a full buffer; answer nothing.
                for stream in &mut held {
                    let _ = stream.set_nonblocking(true);
                    let _ = stream.read(&mut [0; 4096]);
                }
            }
        });
        Silent { address, stop }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn postal(args: &[&str], env: &[(&str, &str)]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_postal"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "postal {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or(Value::Null)
}

/// What a dashboard client asks, in turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ask {
    /// `GET /account` without a session.
    Page,
    /// `GET /account/api/me` with a cookie of no session.
    MadeUpCookie,
    /// The webhook with a bad signature.
    BadWebhook,
    /// A signed-in customer's usage.
    Usage,
    /// A sign-in with the provider that never answers.
    SilentProvider,
    /// A signed-in customer's top-up, Stripe never answering.
    SlowStripe,
}

/// An ask, its status, its error text (if JSON) and how long it took.
type Answer = (Ask, u16, String, Duration);

const ASKS: [Ask; 6] = [
    Ask::Page,
    Ask::MadeUpCookie,
    Ask::BadWebhook,
    Ask::Usage,
    Ask::SilentProvider,
    Ask::SlowStripe,
];

#[test]
fn fifty_dashboard_clients_leave_lookups_and_readyz_alone_on_a_cluster_node() {
    let _heavy = crate::helpers::timing_sensitive();
    let Some(pg) = testkit::pg::PgCluster::start() else {
        return;
    };
    // The ledger by host name, as docs/cluster.md writes it: a new connection looks the
    // name up on a blocking thread.
    let url = pg.url().replace("@127.0.0.1:", "@localhost:");
    assert!(url.contains("@localhost:"), "{url}");
    let dir = testkit::tempdir();
    let db = testkit::template::copy(crate::helpers::tiny_template(), &dir.path().join("node.db"));
    // Fifty browsers from one address: far beyond the per-address limit's 120 a minute,
    // which this test is not about (tests/api/strangers.rs is).
    let node = testkit::Serve::start(
        env!("CARGO_BIN_EXE_postal"),
        &db,
        &["--ledger", &url, "--account-requests-per-minute", "1000000"],
    );
    let address = node.address.clone();
    let Some(_providers) = providers_for(&[&address], &["--ledger", &url]) else {
        return;
    };
    let silent = Silent::start();
    add_provider_to(
        &["--ledger", &url],
        "silent",
        &silent.address,
        "postal",
        "secret-of-silent",
    );
    postal(
        &[
            "--ledger",
            &url,
            "payments",
            "stripe",
            "--api-base",
            &silent.address,
            "--secret-key-env",
            "TEST_STRIPE_KEY",
            "--webhook-secret-env",
            "TEST_STRIPE_WHSEC",
        ],
        &[
            ("TEST_STRIPE_KEY", "sk_test_silent"),
            ("TEST_STRIPE_WHSEC", "whsec_silent"),
        ],
    );

    // A signed-in customer, and an account for lookups with money for the whole run.
    let mut browser = Browser::new();
    browser.sign_in_at(&address, "p1", "dora");
    let (status, me) = browser.api_at(&address, "GET", "/me", None);
    assert_eq!(status, 200, "{me}");
    let csrf = me["csrfToken"].as_str().unwrap().to_owned();
    let cookie = browser.cookie_header(&format!("{address}/account"));
    let created = postal(&["--ledger", &url, "account", "create"], &[]);
    let account = created["accountId"].as_str().unwrap();
    postal(
        &[
            "--ledger", &url, "account", "topup", account, "--usd", "100",
        ],
        &[],
    );
    let key = created["apiKey"].as_str().unwrap().to_owned();

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let run_for = Duration::from_secs(15);
    let started = Instant::now();
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let clients: Vec<_> = (0..50)
        .map(|i| {
            let (agent, address, cookie, csrf) =
                (agent.clone(), address.clone(), cookie.clone(), csrf.clone());
            let answers = answers.clone();
            std::thread::spawn(move || {
                let mut turn = i;
                while started.elapsed() < run_for {
                    let ask = ASKS[turn % ASKS.len()];
                    turn += 1;
                    let asked = Instant::now();
                    let sent = match ask {
                        Ask::Page => agent.get(format!("{address}/account")).call(),
                        Ask::MadeUpCookie => agent
                            .get(format!("{address}/account/api/me"))
                            .header(
                                "Cookie",
                                "postal_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                            )
                            .call(),
                        Ask::BadWebhook => agent
                            .post(format!("{address}/account/stripe/webhook"))
                            .header("Stripe-Signature", "t=1,v1=00")
                            .send("{}"),
                        Ask::Usage => agent
                            .get(format!("{address}/account/api/usage"))
                            .header("Cookie", &cookie)
                            .call(),
                        Ask::SilentProvider => {
                            agent.get(format!("{address}/account/signin/silent")).call()
                        }
                        Ask::SlowStripe => agent
                            .post(format!("{address}/account/api/topups"))
                            .header("Cookie", &cookie)
                            .header("X-CSRF-Token", &csrf)
                            .header("Origin", &address)
                            .content_type("application/json")
                            .send(json!({"amount": "5.00"}).to_string()),
                    };
                    let (status, text) = match sent {
                        Ok(r) => {
                            let status = r.status().as_u16();
                            let body = r.into_body().read_to_string().unwrap_or_default();
                            // The sign-in's answers are pages: their text is in HTML.
                            let text = serde_json::from_str::<Value>(&body)
                                .ok()
                                .and_then(|v| v["error"].as_str().map(str::to_owned))
                                .or_else(|| body.contains(BUSY).then(|| BUSY.to_owned()))
                                .unwrap_or_default();
                            (status, text)
                        }
                        Err(e) => (0, e.to_string()),
                    };
                    let took = asked.elapsed();
                    answers.lock().unwrap().push((ask, status, text, took));
                }
            })
        })
        .collect();

    // Meanwhile, lookups one after another, and `/readyz` twice a second.
    let mut slowest_lookup = Duration::ZERO;
    let mut lookups = 0;
    let mut readyz = Vec::new();
    let mut next_readyz = Instant::now();
    while started.elapsed() < run_for {
        if Instant::now() >= next_readyz {
            let asked = Instant::now();
            let status = agent
                .get(format!("{address}/readyz"))
                .call()
                .map_or(0, |r| r.status().as_u16());
            readyz.push((status, asked.elapsed()));
            next_readyz += Duration::from_millis(500);
        }
        let asked = Instant::now();
        let status = agent
            .post(format!("{address}/api/lookup"))
            .content_type("application/json")
            .send(json!({"apiKey": key, "zipcode": "90210"}).to_string())
            .map_or(0, |r| r.status().as_u16());
        let took = asked.elapsed();
        assert_eq!(
            status,
            200,
            "lookup {lookups} after {:?}",
            started.elapsed()
        );
        slowest_lookup = slowest_lookup.max(took);
        lookups += 1;
    }
    for client in clients {
        client.join().unwrap();
    }
    let answers = answers.lock().unwrap();
    let slowest_answer = answers.iter().map(|a| a.3).max().unwrap_or_default();
    let slowest_readyz = readyz.iter().map(|r| r.1).max().unwrap_or_default();
    eprintln!(
        "{lookups} lookups, the slowest {slowest_lookup:?}; {} /readyz, the slowest \
         {slowest_readyz:?}; {} dashboard answers, the slowest {slowest_answer:?}",
        readyz.len(),
        answers.len()
    );
    let mut seen = std::collections::BTreeMap::<(String, u16), usize>::new();
    for (ask, status, _, _) in answers.iter() {
        *seen.entry((format!("{ask:?}"), *status)).or_default() += 1;
    }
    eprintln!("dashboard answers by ask and status: {seen:?}");

    assert!(
        slowest_lookup < Duration::from_secs(1),
        "{slowest_lookup:?}"
    );
    assert!(readyz.len() >= 25, "{readyz:?}");
    assert!(readyz.iter().all(|r| r.0 == 200), "{readyz:?}");
    assert!(
        slowest_answer < Duration::from_secs(10),
        "{slowest_answer:?}"
    );
    // Every ask was answered as it is without load; or, where the store or the outside
    // calls had no turn in time, 503 busy (the sign-in's as a page: a 503 page after
    // 3.03 s on a fresh clone's .ci/run failed this test before it read pages, issue 53).
    let busy = BUSY;
    let stripe_down = "The payment processor could not be reached; try again in a minute";
    let pending = "10 top-ups started in the last 24 hours are unpaid: pay one of them (its link \
                   is in the list) or wait until it expires";
    for (ask, status, text, took) in answers.iter() {
        let fine = match (ask, *status, text.as_str()) {
            (_, 503, t) if t == busy => true,
            (Ask::Page | Ask::Usage, 200, _) => true,
            (Ask::MadeUpCookie, 401, "Not signed in") => true,
            (Ask::BadWebhook, 400, _) => true,
            // The provider's metadata never came: the sign-in page says so (502); or the
            // sign-ins an address may start a minute were spent (429).
            (Ask::SilentProvider, 502 | 429, _) => true,
            // Stripe never answered: the top-up is failed; or 10 were under way already.
            (Ask::SlowStripe, 503, t) if t == stripe_down => true,
            (Ask::SlowStripe, 400, t) if t == pending => true,
            // One session's 120 requests a minute were spent.
            (Ask::Usage | Ask::SlowStripe, 429, "Too many requests in this session") => true,
            _ => false,
        };
        assert!(fine, "{ask:?}: {status} {text:?} after {took:?}");
    }
    // Each ask was answered, and the provider and Stripe were waited for.
    for (ask, status) in [
        (Ask::Page, 200),
        (Ask::MadeUpCookie, 401),
        (Ask::BadWebhook, 400),
        (Ask::Usage, 200),
        (Ask::SilentProvider, 502),
        (Ask::SlowStripe, 503),
    ] {
        let answered = seen.get(&(format!("{ask:?}"), status)).copied();
        assert!(
            answered.unwrap_or(0) > 0,
            "no {ask:?} answered {status}: {seen:?}"
        );
    }
}
