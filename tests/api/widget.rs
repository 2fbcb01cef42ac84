//! The checkout widget (`GET /widget.js`) in headless Chromium, on pages served from other
//! local origins than the API's: the allowed origin fills the fields and flags a city that
//! does not belong to the code; another origin is refused; the per-IP limit gives 429 with
//! `Retry-After`, which the page can read.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use fantoccini::Client;
use serde_json::{Value, json};

use crate::browser::with_seconds_left_in_the_minute;
use crate::helpers::spawn_app;
use crate::swagger_ui::{Driver, browser, connect};

/// A new local port (another origin than the API's) and its origin.
fn origin() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let origin = format!("http://{}", listener.local_addr().unwrap());
    (listener, origin)
}

/// Serves `html` for every request on `listener`, from a thread of its own.
fn serve_page(listener: TcpListener, html: String) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                html.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
}

/// A checkout form with the widget of `api` pinned (its versioned URL and integrity), for
/// `key`, German codes.
fn checkout_page(api: &str, key: &str) -> String {
    format!(
        r#"<!doctype html><html><body>
<form id="checkout">
  <input data-postal="zipcode" id="zip">
  <input data-postal="city" id="city">
  <input data-postal="state" id="state">
  <output data-postal="status" id="status"></output>
</form>
<script src="{api}{path}" integrity="{integrity}" crossorigin="anonymous"
  data-key="{key}" data-country="DE" data-delay="50"></script>
</body></html>"#,
        path = postal::api::widget::versioned_path(),
        integrity = postal::api::widget::integrity(),
    )
}

/// Runs `script` until it returns `expected` (20 s at most); what it returned last.
async fn until(client: &Client, script: &str, expected: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = client
            .execute(script, vec![])
            .await
            .expect("running a script");
        if &got == expected || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sets an input's value and fires the event a shopper's typing or leaving it fires.
async fn enter(client: &Client, id: &str, value: &str, event: &str) {
    client
        .execute(
            "const e = document.getElementById(arguments[0]); e.value = arguments[1]; \
             e.dispatchEvent(new Event(arguments[2]));",
            vec![json!(id), json!(value), json!(event)],
        )
        .await
        .expect("typing");
}

const FORM: &str = "document.getElementById('checkout')";

async fn state(client: &Client) -> Value {
    let script = format!(
        "const f = {FORM}; return [f.getAttribute('data-postal-state'), \
         f.getAttribute('data-postal-verdict'), f.getAttribute('data-postal-error'), \
         document.getElementById('city').value, document.getElementById('state').value, \
         document.getElementById('city').getAttribute('aria-invalid'), \
         Array.from(document.querySelectorAll('datalist option')).map(o => o.value), \
         document.getElementById('status').textContent];"
    );
    client
        .execute(&script, vec![])
        .await
        .expect("reading the form")
}

#[test]
fn the_widget_fills_a_form_on_its_origin_and_is_refused_elsewhere_and_over_the_limit() {
    let Some((chromium, chromedriver)) = browser() else {
        return;
    };
    let app = spawn_app();
    let (account, _) = app.create_account();
    // The shop's page, and another site's; the key is the shop's, 4 requests a minute.
    let (shop_listener, shop) = origin();
    let (other_listener, elsewhere) = origin();
    let created = app.cli(&[
        "key",
        "create",
        &account,
        "--publishable",
        "--origin",
        &shop,
        "--per-ip-minute",
        "4",
    ]);
    let key = created["apiKey"].as_str().unwrap().to_owned();
    let html = checkout_page(&app.address, &key);
    serve_page(shop_listener, html.clone());
    serve_page(other_listener, html);
    let before = app.balance_micros(&account);

    let dir = testkit::tempdir();
    let dir = dir.path();
    let driver = Driver::start(&chromedriver, &dir.join("chromedriver.log"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (refused, filled, conflict, limited) = runtime.block_on(async {
        let client = connect(&driver, &chromium, &dir.join("profile")).await;
        // Another site's page with the shop's key: 403, which the page can read.
        client.goto(&elsewhere).await.expect("the other page");
        until(
            &client,
            "return document.querySelector('datalist') !== null",
            &json!(true),
        )
        .await;
        enter(&client, "zip", "80804", "input").await;
        let refused_script = format!("return {FORM}.getAttribute('data-postal-error');");
        until(&client, &refused_script, &json!("403")).await;
        let refused = state(&client).await;

        with_seconds_left_in_the_minute(30);
        client.goto(&shop).await.expect("the shop's page");
        until(
            &client,
            "return document.querySelector('datalist') !== null",
            &json!(true),
        )
        .await;
        // A code with one place: city and region filled, then checked (2 requests).
        enter(&client, "zip", "80804", "input").await;
        let verdict = format!("return {FORM}.getAttribute('data-postal-verdict');");
        until(&client, &verdict, &json!("match")).await;
        let filled = state(&client).await;
        // A code with three places: offered, and the city typed before flagged (2 more).
        enter(&client, "zip", "77716", "input").await;
        until(&client, &verdict, &json!("conflict")).await;
        let conflict = state(&client).await;
        // The fifth request of the minute from this IP: 429 with Retry-After.
        enter(&client, "city", "Hofstetten", "change").await;
        until(&client, &refused_script, &json!("429")).await;
        let limited = state(&client).await;
        let _ = client.close().await;
        (refused, filled, conflict, limited)
    });

    assert_eq!(refused[0], "error", "{refused}");
    assert_eq!(refused[2], "403", "{refused}");
    assert_eq!(refused[7], "Origin not allowed for this key", "{refused}");
    assert_eq!(
        filled,
        json!([
            "filled",
            "match",
            null,
            "München",
            "Bayern",
            "false",
            ["München"],
            "München"
        ])
    );
    assert_eq!(conflict[0], "conflict", "{conflict}");
    assert_eq!(conflict[1], "conflict", "{conflict}");
    assert_eq!(conflict[3], "München", "{conflict}");
    assert_eq!(conflict[4], "Baden-Württemberg", "{conflict}");
    assert_eq!(conflict[5], "true", "{conflict}");
    assert_eq!(
        conflict[6],
        json!(["Haslach im Kinzigtal", "Hofstetten", "Fischerbach"])
    );
    assert_eq!(
        conflict[7],
        "München is not at 77716: Haslach im Kinzigtal, Hofstetten, Fischerbach"
    );
    assert_eq!(limited[0], "error", "{limited}");
    assert_eq!(limited[2], "429", "{limited}");
    let text = limited[7].as_str().unwrap();
    assert!(
        text.starts_with("Rate limit exceeded (retry in ") && text.ends_with(" s)"),
        "{text}"
    );
    // 4 billed queries: the refusals charged nothing.
    assert_eq!(app.balance_micros(&account), before - 4 * 28);
}

/// `/widget.js` and its pinned URL: the same bytes, `nosniff`, loadable from any origin;
/// the pinned one immutable. docs/browser.md shows this version's URL and Subresource
/// Integrity value, computed here from the served bytes.
#[test]
fn the_widget_is_also_served_at_its_pinned_url_with_the_integrity_the_docs_show() {
    use base64::Engine;
    use sha2::{Digest, Sha256, Sha384};

    let app = spawn_app();
    let current = app.get_with("/widget.js", &[]);
    assert_eq!(current.status, 200);
    let digest = hex::encode(Sha256::digest(current.text.as_bytes()));
    let pinned_path = format!("/widget.{}.js", &digest[..16]);
    let integrity = format!(
        "sha384-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha384::digest(current.text.as_bytes()))
    );
    let pinned = app.get_with(&pinned_path, &[]);
    assert_eq!(pinned.status, 200, "{pinned_path}");
    assert_eq!(pinned.text, current.text);
    for (answer, cache) in [
        (&current, "public, max-age=3600"),
        (&pinned, "public, max-age=31536000, immutable"),
    ] {
        assert_eq!(answer.header("cache-control"), Some(cache));
        assert_eq!(
            answer.header("content-type"),
            Some("text/javascript; charset=utf-8")
        );
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(answer.header("access-control-allow-origin"), Some("*"));
        assert_eq!(
            answer.header("cross-origin-resource-policy"),
            Some("cross-origin")
        );
    }
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/browser.md")).unwrap();
    assert!(
        docs.contains(&format!("https://postal.example{pinned_path}"))
            && docs.contains(&format!("integrity=\"{integrity}\"")),
        "docs/browser.md must show {pinned_path} and {integrity}"
    );
    // Another hash is no page.
    assert_eq!(app.get_with("/widget.0000000000000000.js", &[]).status, 404);
}
