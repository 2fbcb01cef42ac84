//! The HTTP layer under the contract: errors hyper or the router raise are the contract's
//! JSON too, 405 names the allowed method, an oversized body is refused before it is sent.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{RawReply, error, raw_request, spawn_app};

fn assert_json_error(reply: &RawReply, status: u16, text: &str) {
    assert_eq!(
        (reply.status, &reply.body),
        (status, &error(text)),
        "{reply:?}"
    );
    assert!(
        reply
            .head
            .contains("\r\ncontent-type: application/json; charset=utf-8"),
        "{reply:?}"
    );
}

fn host(address: &str) -> &str {
    address.trim_start_matches("http://")
}

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn a_declared_body_over_one_mebibyte_is_refused_at_once_without_waiting_for_it() {
    let app = spawn_app();
    for _ in 0..3 {
        let started = Instant::now();
        let reply = raw_request(
            host(&app.address),
            b"POST /api/lookup HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2147483648\r\n\r\n",
            Duration::from_secs(15),
        );
        let took = started.elapsed();
        eprintln!("413 after {took:?}");
        assert_json_error(&reply, 413, "Request body too large");
        assert!(reply.head.contains("\r\nconnection: close"), "{reply:?}");
        // Well before the 10 s body timeout: the body was not waited for.
        assert!(took < Duration::from_secs(8), "{took:?}");
    }
}

#[test]
fn a_request_hyper_cannot_parse_is_answered_with_a_json_400() {
    let app = spawn_app();
    let address = host(&app.address);
    for request in [
        &b"GARBAGE\r\n\r\n"[..],
        b"POST /api/lookup HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        b"POST /api/lookup HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        b"POST /api/lookup HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"POST /api/lookup HTTP/9.9\r\nHost: x\r\n\r\n",
    ] {
        let reply = raw_request(address, request, WAIT);
        assert_json_error(&reply, 400, "Bad request");
    }
}

#[test]
fn a_path_over_64_kib_is_a_json_414() {
    let app = spawn_app();
    let request = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    let reply = raw_request(host(&app.address), request.as_bytes(), WAIT);
    assert_json_error(&reply, 414, "URI too long");
}

#[test]
fn too_many_headers_is_a_json_431() {
    let app = spawn_app();
    let headers: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    let request = format!("POST /api/lookup HTTP/1.1\r\nHost: x\r\n{headers}\r\n");
    let reply = raw_request(host(&app.address), request.as_bytes(), WAIT);
    assert_json_error(&reply, 431, "Request header fields too large");
}

#[test]
fn another_method_on_an_api_path_is_a_405_that_allows_post() {
    let app = spawn_app();
    for method in ["GET", "PUT", "DELETE", "OPTIONS", "PATCH"] {
        let request =
            format!("{method} /api/validate HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let reply = raw_request(host(&app.address), request.as_bytes(), WAIT);
        assert_json_error(&reply, 405, "Method not allowed");
        assert!(
            reply.head.contains("\r\nallow: post"),
            "{method}: {reply:?}"
        );
    }
}

#[test]
fn a_keep_alive_connection_still_works_after_the_json_error_changes() {
    let app = spawn_app();
    let key = app.api_key();
    // Through the ordinary client, which reuses its connection.
    for _ in 0..3 {
        let reply = app.lookup(json!({"apiKey": key, "zipcode": "90210"}));
        assert_eq!(reply.status, 200, "{reply:?}");
        let reply = app.get("/api/validate");
        assert_eq!(
            (reply.status, reply.body),
            (405, error("Method not allowed"))
        );
    }
}

#[test]
fn head_on_an_api_path_is_a_405_and_charges_nothing() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let before = app.balance_micros(&account);
    for path in [
        format!("/api/lookup?zipcode=90210&key={key}"),
        format!("/api/city?city=Beverly+Hills&ST=CA&key={key}"),
        "/api/validate".to_string(),
    ] {
        let request = format!("HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        // A HEAD answer has no body: read the head until the server closes.
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(host(&app.address)).expect("connecting");
        stream.set_read_timeout(Some(WAIT)).expect("read timeout");
        stream.write_all(request.as_bytes()).expect("sending");
        let mut head = String::new();
        let _ = stream.read_to_string(&mut head);
        assert!(head.starts_with("HTTP/1.1 405 "), "{path}: {head}");
        assert!(
            head.contains("\r\nallow: GET, POST\r\n") || head.contains("\r\nallow: POST\r\n"),
            "{path}: {head}"
        );
    }
    assert_eq!(app.balance_micros(&account), before);
}

/// Swagger UI's page is never framed and carries the pages' security headers; its CSP
/// leaves scripts alone (the page's bundle is inline) but not frames, plugins, forms or the
/// base URL.
#[test]
fn the_docs_page_carries_the_security_headers_of_every_page() {
    let app = crate::helpers::spawn_app();
    let docs = app.get_with("/docs", &[]);
    assert_eq!(docs.status, 200);
    assert!(docs.text.contains("swagger"), "{}", docs.text);
    assert_eq!(
        docs.header("content-security-policy"),
        Some("frame-ancestors 'none'; base-uri 'none'; object-src 'none'; form-action 'self'")
    );
    assert_eq!(docs.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(docs.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(docs.header("x-frame-options"), Some("DENY"));
    // The API's answers are not pages: none of it.
    let api = app.get_with("/api/lookup?zipcode=90210", &[]);
    assert_eq!(api.header("content-security-policy"), None);
}
