//! `deploy/`: the systemd units pass `systemd-analyze verify` and keep their hardening,
//! the alert rules pass `promtool` and their own tests, the dashboard's queries are
//! PromQL, and every metric the alerts and the dashboard name is one a running `postal
//! serve` exports. The tools are Debian's (`systemd`, `prometheus`); `.ci/run` installs
//! them when missing, and a test without its tool fails saying which package to install.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::helpers::spawn_postal_serve;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy");
const UNITS: [&str; 3] = [
    "postal.service",
    "postal-import.service",
    "postal-import.timer",
];
/// Where the units (and README.md, "Deployment") install the binaries, and what this
/// test runs instead.
const INSTALLED: [(&str, &str); 2] = [
    ("/usr/local/bin/postal", env!("CARGO_BIN_EXE_postal")),
    (
        "/usr/local/bin/postal-import",
        env!("CARGO_BIN_EXE_postal-import"),
    ),
];

fn deploy(path: &str) -> PathBuf {
    Path::new(DEPLOY).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(deploy(path)).unwrap_or_else(|e| panic!("reading deploy/{path}: {e}"))
}

/// Runs a command of an external tool; a missing tool fails the test with the Debian
/// package that brings it.
fn run(command: &mut Command, package: &str) -> Output {
    let program = command.get_program().to_string_lossy().into_owned();
    match command.output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "`{program}` is not installed: install Debian's `{package}` package \
             (`apt-get install -y {package}`; .ci/run does when it is missing)"
        ),
        Err(e) => panic!("running {program}: {e}"),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The unit files in a temporary directory, each `ExecStart=` naming the binaries this
/// test run built: `verify` checks that the command exists and is executable, and the
/// installed paths do not exist on a build machine.
fn units_with_built_binaries() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for unit in UNITS {
        let lines: Vec<String> = read(&format!("systemd/{unit}"))
            .lines()
            .map(|line| {
                let Some(command) = line.strip_prefix("ExecStart=") else {
                    return line.to_string();
                };
                let (program, args) = command.split_once(' ').unwrap_or((command, ""));
                let built = INSTALLED
                    .iter()
                    .find(|(installed, _)| *installed == program)
                    .unwrap_or_else(|| {
                        panic!("{unit}: ExecStart runs {program}, not one of {INSTALLED:?}")
                    })
                    .1;
                format!("ExecStart={built} {args}")
            })
            .collect();
        std::fs::write(dir.path().join(unit), lines.join("\n") + "\n").unwrap();
    }
    dir
}

#[test]
fn the_systemd_units_pass_systemd_analyze_verify_with_the_built_binaries() {
    if !testkit::require("systemd-analyze", "apt-get install -y systemd") {
        return;
    }
    for (unit, binary) in [
        ("postal.service", "postal serve"),
        ("postal-import.service", "postal-import --db"),
    ] {
        let installed = format!("ExecStart=/usr/local/bin/{binary}");
        assert!(
            read(&format!("systemd/{unit}")).contains(&installed),
            "{unit} should run {installed} (the path README.md installs to)"
        );
    }
    let dir = units_with_built_binaries();
    let files: Vec<PathBuf> = UNITS.iter().map(|u| dir.path().join(u)).collect();
    let verify = run(
        Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .args(&files),
        "systemd",
    );
    let stderr = text(&verify.stderr);
    // Warnings about the host's own units are not ours; any line about ours is.
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|line| {
            UNITS.iter().any(|u| line.contains(u)) || line.contains(&*dir.path().to_string_lossy())
        })
        .collect();
    assert!(
        verify.status.success() && ours.is_empty(),
        "systemd-analyze verify {files:?}: {}\n{stderr}",
        verify.status
    );
    println!("systemd-analyze verify: ok\n{stderr}");
}

#[test]
fn the_services_keep_an_exposure_of_at_most_1_5() {
    if !testkit::require("systemd-analyze", "apt-get install -y systemd") {
        return;
    }
    let dir = units_with_built_binaries();
    for unit in ["postal.service", "postal-import.service"] {
        // --threshold is in tenths: 15 is an exposure of 1.5 (both are 1.1).
        let security = run(
            Command::new("systemd-analyze")
                .args(["security", "--offline=yes", "--threshold=15", "--no-pager"])
                .arg(dir.path().join(unit)),
            "systemd",
        );
        let report = text(&security.stdout);
        let overall = report
            .lines()
            .find(|l| l.contains("Overall exposure level"))
            .unwrap_or_default();
        assert!(
            security.status.success(),
            "{unit}: hardening lost: {overall}\n{report}{}",
            text(&security.stderr)
        );
        println!("{overall}");
    }
}

#[test]
fn the_alert_rules_pass_promtool_check_and_their_unit_tests() {
    if !testkit::require("promtool", "apt-get install -y prometheus") {
        return;
    }
    let check = run(
        Command::new("promtool")
            .args(["check", "rules"])
            .arg(deploy("prometheus/alerts.yml")),
        "prometheus",
    );
    assert!(
        check.status.success(),
        "promtool check rules deploy/prometheus/alerts.yml:\n{}{}",
        text(&check.stdout),
        text(&check.stderr)
    );
    // The test file names alerts.yml relative to its own directory.
    let test = run(
        Command::new("promtool")
            .args(["test", "rules", "alerts_test.yml"])
            .current_dir(deploy("prometheus")),
        "prometheus",
    );
    assert!(
        test.status.success(),
        "promtool test rules deploy/prometheus/alerts_test.yml:\n{}{}",
        text(&test.stdout),
        text(&test.stderr)
    );
    println!("{}", text(&test.stdout));
}

/// Every `expr` of the dashboard, with Grafana's variables replaced by what Prometheus
/// would receive.
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    fn walk(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(fields) => {
                for (name, field) in fields {
                    match (name.as_str(), field) {
                        ("expr", Value::String(expr)) => found.push(expr.clone()),
                        _ => walk(field, found),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(dashboard, &mut found);
    found
        .into_iter()
        .map(|expr| {
            expr.replace("$__rate_interval", "5m")
                .replace("$instance", ".*")
        })
        .collect()
}

#[test]
fn the_dashboard_reads_every_panel_from_the_datasource_variable_with_valid_promql() {
    let dashboard: Value =
        serde_json::from_str(&read("grafana/postal.json")).expect("postal.json is JSON");
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "no Prometheus datasource variable"
    );
    let selected = json!({"type": "prometheus", "uid": "${datasource}"});
    let panels = dashboard["panels"].as_array().unwrap();
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(panel["datasource"], selected, "panel {}", panel["title"]);
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
        for target in targets {
            assert_eq!(target["datasource"], selected, "panel {}", panel["title"]);
        }
    }

    // promtool parses PromQL only in rule files: one recording rule per query.
    if !testkit::require("promtool", "apt-get install -y prometheus") {
        return;
    }
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 20, "{queries:?}");
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in queries.iter().enumerate() {
        let quoted = expr.replace('\'', "''");
        rules.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: '{quoted}'\n"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dashboard-queries.yml");
    std::fs::write(&file, &rules).unwrap();
    let check = run(
        Command::new("promtool").args(["check", "rules"]).arg(&file),
        "prometheus",
    );
    assert!(
        check.status.success(),
        "a dashboard query is not PromQL:\n{}{}\n{rules}",
        text(&check.stdout),
        text(&check.stderr)
    );
}

/// The sample names a scrape holds, and those its families would hold once observed
/// (a family without a sample yet still has its `# TYPE` line).
fn exported_names(scrape: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in scrape.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut words = declared.split_whitespace();
            let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

#[test]
fn every_metric_the_alerts_and_the_dashboard_name_is_exported_by_postal_serve() {
    let server = spawn_postal_serve(&[]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let base = format!("http://{}", server.address);
    // A charge and a refusal, so that their families have samples too.
    for key in [server.api_key.as_str(), "sk_wrong"] {
        agent
            .post(format!("{base}/api/lookup"))
            .header("content-type", "application/json")
            .send(
                json!({"zipcode": "90210", "apiKey": key})
                    .to_string()
                    .as_bytes(),
            )
            .unwrap();
    }
    let mut scrape = agent.get(format!("{base}/metrics")).call().unwrap();
    assert_eq!(scrape.status().as_u16(), 200);
    let exported = exported_names(&scrape.body_mut().read_to_string().unwrap());
    assert!(
        exported.contains("postal_refusals_total") && exported.contains("postal_ready"),
        "{exported:?}"
    );

    let metric = regex::Regex::new(r"\bpostal_[a-z0-9_]+").unwrap();
    for file in ["prometheus/alerts.yml", "grafana/postal.json"] {
        let text = read(file);
        let named: BTreeSet<&str> = metric.find_iter(&text).map(|m| m.as_str()).collect();
        assert!(named.len() >= 8, "deploy/{file} names only {named:?}");
        let unknown: Vec<&str> = named
            .iter()
            .copied()
            .filter(|name| !exported.contains(*name))
            .collect();
        assert!(
            unknown.is_empty(),
            "deploy/{file} names metrics that postal serve does not export: {unknown:?}\n\
             exported: {exported:?}"
        );
    }
}
