//! The signature against the specification's vector, and the URL rule range by range.

use super::*;

/// The Standard Webhooks reference vector: the official libraries' `test_sign_function`
/// (standard-webhooks/standard-webhooks, libraries/python/tests/test_webhooks.py).
const VECTOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const VECTOR_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const VECTOR_TIMESTAMP: i64 = 1614265330;
const VECTOR_BODY: &[u8] = br#"{"test": 2432232314}"#;
const VECTOR_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

#[test]
fn the_signature_matches_the_standard_webhooks_reference_vector() {
    assert_eq!(
        sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY).unwrap(),
        VECTOR_SIGNATURE
    );
}

#[test]
fn the_signature_covers_the_id_the_timestamp_and_the_body() {
    for (id, timestamp, body) in [
        ("msg_other", VECTOR_TIMESTAMP, VECTOR_BODY),
        (VECTOR_ID, VECTOR_TIMESTAMP + 1, VECTOR_BODY),
        (VECTOR_ID, VECTOR_TIMESTAMP, &br#"{"test": 2432232315}"#[..]),
    ] {
        assert_ne!(
            sign(VECTOR_SECRET, id, timestamp, body).unwrap(),
            VECTOR_SIGNATURE
        );
    }
}

#[test]
fn a_new_secret_is_whsec_and_32_random_bytes_in_standard_base64() {
    let secret = new_secret();
    let encoded = secret.strip_prefix("whsec_").unwrap();
    assert_eq!(STANDARD.decode(encoded).unwrap().len(), 32);
    assert_ne!(secret, new_secret());
    assert!(sign(&secret, "msg_1", 1, b"{}").unwrap().starts_with("v1,"));
}

#[test]
fn a_malformed_secret_cannot_sign() {
    for secret in [
        "",
        "whsec_",
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_not base64!",
        "wh_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    ] {
        assert!(
            sign(secret, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY).is_err(),
            "{secret:?}"
        );
    }
}

#[test]
fn a_key_without_its_padding_signs_as_with_it() {
    let padded = new_secret();
    let unpadded = padded.trim_end_matches('=');
    assert_ne!(padded, unpadded);
    assert_eq!(sign(&padded, "m", 1, b"x"), sign(unpadded, "m", 1, b"x"));
}

fn refusal(url: &str) -> String {
    check_url(url, false).expect_err(url)
}

#[test]
fn a_public_ip_literal_is_accepted_without_any_lookup() {
    for url in [
        "https://93.184.215.14/hook",
        "https://93.184.215.14:8443/hook?account=1",
        "https://[2606:4700:4700::1111]/hook",
        "https://8.8.8.8",
    ] {
        assert_eq!(check_url(url, false), Ok(()), "{url}");
    }
}

#[test]
fn each_non_public_range_is_refused_by_name() {
    for (host, ip, kind) in [
        ("127.0.0.1", "127.0.0.1", "a loopback address"),
        ("127.8.9.10", "127.8.9.10", "a loopback address"),
        ("0.0.0.0", "0.0.0.0", "an unspecified address"),
        ("10.0.0.5", "10.0.0.5", "a private address"),
        ("172.16.0.1", "172.16.0.1", "a private address"),
        ("172.31.255.254", "172.31.255.254", "a private address"),
        ("192.168.1.1", "192.168.1.1", "a private address"),
        (
            "100.64.0.1",
            "100.64.0.1",
            "a private address (carrier-grade NAT)",
        ),
        (
            "100.127.255.254",
            "100.127.255.254",
            "a private address (carrier-grade NAT)",
        ),
        (
            "169.254.169.254",
            "169.254.169.254",
            "a link-local address (cloud metadata)",
        ),
        ("169.254.1.1", "169.254.1.1", "a link-local address"),
        ("224.0.0.1", "224.0.0.1", "a multicast address"),
        ("239.255.255.250", "239.255.255.250", "a multicast address"),
        (
            "255.255.255.255",
            "255.255.255.255",
            "the broadcast address",
        ),
        ("192.0.2.1", "192.0.2.1", "a documentation address"),
        ("198.51.100.7", "198.51.100.7", "a documentation address"),
        ("203.0.113.9", "203.0.113.9", "a documentation address"),
        ("198.18.0.1", "198.18.0.1", "a benchmarking address"),
        ("192.0.0.8", "192.0.0.8", "a reserved address"),
        ("240.0.0.1", "240.0.0.1", "a reserved address"),
        ("[::1]", "::1", "a loopback address"),
        ("[::]", "::", "an unspecified address"),
        ("[fe80::1]", "fe80::1", "a link-local address"),
        ("[febf::1]", "febf::1", "a link-local address"),
        ("[fc00::1]", "fc00::1", "a unique-local address"),
        ("[fd12:3456::1]", "fd12:3456::1", "a unique-local address"),
        ("[ff02::1]", "ff02::1", "a multicast address"),
        ("[2001:db8::1]", "2001:db8::1", "a documentation address"),
        ("[3fff::1]", "3fff::1", "a documentation address"),
        ("[100::1]", "100::1", "a reserved address"),
        ("[::127.0.0.1]", "::7f00:1", "a reserved address"),
    ] {
        let url = format!("https://{host}/hook");
        assert_eq!(
            refusal(&url),
            format!("webhookUrl resolves to {ip}, {kind}: alerts go only to public addresses"),
            "{url}"
        );
    }
}

#[test]
fn ipv4_inside_ipv6_is_judged_by_its_ipv4_address() {
    for (host, kind) in [
        ("[::ffff:127.0.0.1]", "a loopback address"),
        ("[::ffff:10.0.0.5]", "a private address"),
        (
            "[::ffff:169.254.169.254]",
            "a link-local address (cloud metadata)",
        ),
        (
            "[::ffff:100.64.1.1]",
            "a private address (carrier-grade NAT)",
        ),
        ("[64:ff9b::10.0.0.5]", "a private address"),
        ("[2002:c0a8:101::1]", "a private address"),
    ] {
        let refused = refusal(&format!("https://{host}/x"));
        assert!(refused.contains(kind), "{host}: {refused}");
    }
    assert_eq!(check_url("https://[::ffff:93.184.215.14]/x", false), Ok(()));
    assert_eq!(check_url("https://[64:ff9b::5db8:d70e]/x", false), Ok(()));
}

#[test]
fn ipv4_written_otherwise_is_read_as_browsers_read_it() {
    // WHATWG reads these as 127.0.0.1, as the resolver would.
    for url in [
        "https://0x7f.1/x",
        "https://2130706433/x",
        "https://0177.0.0.1/x",
    ] {
        assert!(
            refusal(url).contains("127.0.0.1, a loopback address"),
            "{url}"
        );
    }
}

#[test]
fn a_name_of_a_non_public_address_is_refused_after_its_lookup() {
    assert_eq!(
        refusal("https://localhost/hook"),
        "webhookUrl resolves to 127.0.0.1, a loopback address: alerts go only to public \
         addresses"
    );
}

#[test]
fn the_metadata_host_name_is_refused_before_any_lookup() {
    for url in [
        "https://metadata.google.internal/computeMetadata/v1/",
        "https://METADATA.google.internal./x",
    ] {
        assert!(refusal(url).contains("a cloud metadata service"), "{url}");
    }
}

#[test]
fn a_name_that_does_not_resolve_is_refused() {
    assert_eq!(
        refusal("https://no-such-host.invalid/hook"),
        "webhookUrl's host does not resolve"
    );
}

#[test]
fn only_https_without_allow_private() {
    for url in [
        "http://93.184.215.14/hook",
        "http://127.0.0.1/x",
        "ftp://93.184.215.14/",
        "93.184.215.14/hook",
        "/hook",
        "",
        "not a url",
    ] {
        assert_eq!(refusal(url), "webhookUrl must be an https URL", "{url:?}");
    }
}

#[test]
fn user_info_and_fragments_are_refused() {
    assert_eq!(
        refusal("https://user:pw@93.184.215.14/hook"),
        "webhookUrl must not contain a user name or password"
    );
    assert_eq!(
        refusal("https://user@93.184.215.14/hook"),
        "webhookUrl must not contain a user name or password"
    );
    assert_eq!(
        refusal("https://93.184.215.14/hook#part"),
        "webhookUrl must not contain a fragment (#...)"
    );
}

#[test]
fn a_url_longer_than_2000_characters_is_refused() {
    let base = "https://93.184.215.14/";
    let fits = format!("{base}{}", "a".repeat(MAX_URL_CHARS - base.len()));
    assert_eq!(check_url(&fits, false), Ok(()));
    assert_eq!(
        refusal(&format!("{fits}a")),
        "webhookUrl must be at most 2000 characters"
    );
}

#[test]
fn allow_private_lifts_the_address_rule_and_allows_http() {
    for url in [
        "http://127.0.0.1:8080/hook",
        "https://169.254.169.254/latest",
        "http://[::1]/x",
        "http://localhost:8080/x",
    ] {
        assert_eq!(check_url(url, true), Ok(()), "{url}");
    }
    assert_eq!(
        check_url("ftp://127.0.0.1/", true),
        Err("webhookUrl must be an http or https URL".to_owned())
    );
    assert!(check_url("http://u:p@127.0.0.1/", true).is_err());
    assert_eq!(
        check_url("https://no-such-host.invalid/", true),
        Err("webhookUrl's host does not resolve".to_owned())
    );
}

#[test]
fn allow_private_lifts_the_metadata_name_rule() {
    assert_eq!(
        parse("https://metadata.google.internal/x", true).map(|u| u.to_string()),
        Ok("https://metadata.google.internal/x".to_owned())
    );
}

#[test]
fn a_refused_url_is_refused_by_deliver_without_a_request() {
    let attempt = Attempt {
        url: "http://127.0.0.1:9/hook",
        secret: VECTOR_SECRET,
        id: VECTOR_ID,
        timestamp: VECTOR_TIMESTAMP,
        body: VECTOR_BODY,
    };
    assert_eq!(
        deliver(&attempt, false),
        Outcome {
            delivered: false,
            result: "refused: webhookUrl must be an https URL".to_owned()
        }
    );
    let metadata = Attempt {
        url: "https://metadata.google.internal/x",
        ..attempt
    };
    assert!(
        deliver(&metadata, false)
            .result
            .contains("a cloud metadata service")
    );
}

#[test]
fn deliver_refuses_at_connect_time_what_resolves_to_a_private_address() {
    // https passes the URL's rule; the resolver refuses the address before any socket.
    for (url, refused) in [
        (
            "https://10.0.0.5/hook",
            "refused: webhookUrl resolves to 10.0.0.5, a private address",
        ),
        (
            "https://localhost:9/hook",
            "refused: webhookUrl resolves to",
        ),
        (
            "https://[::ffff:169.254.169.254]/x",
            "a link-local address (cloud metadata)",
        ),
    ] {
        let outcome = deliver(
            &Attempt {
                url,
                secret: VECTOR_SECRET,
                id: VECTOR_ID,
                timestamp: VECTOR_TIMESTAMP,
                body: VECTOR_BODY,
            },
            false,
        );
        assert!(!outcome.delivered);
        assert!(
            outcome.result.contains(refused),
            "{url}: {}",
            outcome.result
        );
    }
}
