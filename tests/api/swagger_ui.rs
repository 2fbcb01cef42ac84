//! Swagger UI in a real browser: headless Chromium, driven through chromedriver
//! (WebDriver), opens /docs, tries /api/lookup with a real key and reads the answer.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::helpers::spawn_app;

/// The Chromium flags that work on this kind of machine (no sandbox, no GPU, nothing that
/// reaches the network by itself).
const CHROMIUM_FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1600",
];

pub(crate) fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// Chromium and chromedriver, or `None` (the test skipped, or failed under
/// `POSTAL_REQUIRE_TOOLS`) when either is missing.
pub(crate) fn browser() -> Option<(PathBuf, PathBuf)> {
    const INSTALL: &str = "apt-get install -y chromium chromium-driver";
    if !testkit::require("chromium", INSTALL) || !testkit::require("chromedriver", INSTALL) {
        return None;
    }
    Some((on_path("chromium")?, on_path("chromedriver")?))
}

/// chromedriver on a free port, killed when dropped.
pub(crate) struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    pub(crate) fn start(chromedriver: &Path, log: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) async fn connect(driver: &Driver, chromium: &Path, profile: &Path) -> Client {
    let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|f| f.to_string()).collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {"binary": chromium, "args": args},
    });
    let serde_json::Value::Object(capabilities) = capabilities else {
        unreachable!()
    };
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match ClientBuilder::new(connector.clone())
            .capabilities(capabilities.clone())
            .connect(&driver.url)
            .await
        {
            Ok(client) => return client,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!(
                "no WebDriver session from chromedriver at {}: {e}",
                driver.url
            ),
        }
    }
}

#[test]
fn swagger_ui_tries_a_lookup_of_90210_and_shows_beverly_hills() {
    let Some((chromium, chromedriver)) = browser() else {
        return;
    };
    let app = spawn_app();
    let key = app.api_key();
    let dir = testkit::tempdir();
    let dir = dir.path();
    let driver = Driver::start(&chromedriver, &dir.join("chromedriver.log"));
    let profile = dir.join("profile");
    // Kept after the run (cargo's scratch directory, not /tmp), to be looked at.
    let screenshot = testkit::scratch().join("swagger-ui-lookup.png");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (tags, status, body) = runtime.block_on(async {
        let client = connect(&driver, &chromium, &profile).await;
        let result = try_lookup(&client, &app.address, &key, &screenshot).await;
        let _ = client.close().await;
        result.expect("driving Swagger UI")
    });
    println!("screenshot: {}", screenshot.display());

    // Swagger UI shows the sections in the document's order (alphabetical).
    assert_eq!(
        tags,
        [
            "Account dashboard",
            "Cities",
            "Geography",
            "Postal codes",
            "Service",
            "Validation"
        ]
    );
    assert_eq!(status, "200");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("a JSON body");
    assert_eq!(answer["city"], "Beverly Hills");
    assert_eq!(answer["ST"], "CA");
    assert_eq!(answer["balance"], json!(0.027972));
}

/// Opens /docs, expands POST /api/lookup, "Try it out", the body, "Execute"; returns the
/// section titles, the rendered status and the rendered response body.
async fn try_lookup(
    client: &Client,
    address: &str,
    key: &str,
    screenshot: &Path,
) -> Result<(Vec<String>, String, String), fantoccini::error::CmdError> {
    let wait = Duration::from_secs(20);
    client.goto(&format!("{address}/docs")).await?;
    let lookup = "//div[contains(@class,'opblock ')][.//*[@data-path='/api/lookup']]";
    client
        .wait()
        .at_most(wait)
        .for_element(Locator::XPath(&format!(
            "{lookup}//*[contains(@class,'opblock-summary-path')]"
        )))
        .await?
        .click()
        .await?;
    let mut tags = Vec::new();
    for tag in client.find_all(Locator::Css("h3.opblock-tag")).await? {
        let name = tag.attr("data-tag").await?.unwrap_or_default();
        tags.push(name);
    }
    client
        .wait()
        .at_most(wait)
        .for_element(Locator::XPath(&format!(
            "{lookup}//button[contains(@class,'try-out__btn')]"
        )))
        .await?
        .click()
        .await?;
    let body = client
        .wait()
        .at_most(wait)
        .for_element(Locator::XPath(&format!(
            "{lookup}//textarea[contains(@class,'body-param__text')]"
        )))
        .await?;
    body.clear().await?;
    body.send_keys(&json!({"zipcode": "90210", "apiKey": key}).to_string())
        .await?;
    client
        .find(Locator::XPath(&format!(
            "{lookup}//button[contains(@class,'execute')]"
        )))
        .await?
        .click()
        .await?;
    let status = client
        .wait()
        .at_most(wait)
        .for_element(Locator::XPath(&format!(
            "{lookup}//table[contains(@class,'live-responses-table')]//tbody//td[contains(@class,'response-col_status')]"
        )))
        .await?
        .text()
        .await?;
    let rendered = client
        .find(Locator::XPath(&format!(
            "{lookup}//table[contains(@class,'live-responses-table')]//td[contains(@class,'response-col_description')]//pre"
        )))
        .await?;
    // textContent: the whole body, also the part scrolled out of its box.
    let body = rendered.prop("textContent").await?.unwrap_or_default();
    rendered.click().await.ok(); // scrolls the answer into view for the screenshot
    let png = client.screenshot().await?;
    std::fs::write(screenshot, png).expect("writing the screenshot");
    Ok((tags, status.trim().to_owned(), body))
}
