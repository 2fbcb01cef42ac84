//! A blocking HTTP client for tests: every answer as `(status, body)`, a failed
//! connection as status 0 (a server being killed is part of several tests).

use std::time::Duration;

use serde_json::{Value, json};

/// A client of one server; cheap to clone into load threads.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    /// `http://host:port`.
    pub address: String,
}

impl Client {
    /// A client of `address` (`http://host:port`) whose calls give up after `timeout`.
    pub fn new(address: &str, timeout: Option<Duration>) -> Client {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(timeout)
            .build()
            .into();
        Client {
            agent,
            address: address.to_string(),
        }
    }

    /// POSTs `body` as JSON: (status, JSON body or Null); a failed connection is 0.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let (status, _, text) = self.post_with(path, body, &[]);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// POSTs `body` as JSON with `headers`: (status, the `Idempotent-Replayed` header,
    /// the body as sent); a failed connection is status 0.
    pub fn post_with(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> (u16, Option<String>, String) {
        let mut request = self
            .agent
            .post(format!("{}{path}", self.address))
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        match request.send(body.to_string().as_bytes()) {
            Ok(mut response) => {
                let replayed = response
                    .headers()
                    .get("idempotent-replayed")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let text = response.body_mut().read_to_string().unwrap_or_default();
                (response.status().as_u16(), replayed, text)
            }
            Err(_) => (0, None, String::new()),
        }
    }

    /// POSTs `body` with an `Idempotency-Key`: (status, `Idempotent-Replayed`, body text).
    pub fn post_keyed(&self, path: &str, body: &Value, key: &str) -> (u16, Option<String>, String) {
        self.post_with(path, body, &[("idempotency-key", key)])
    }

    /// GETs `path`: (status, body text); a failed connection is 0.
    pub fn get(&self, path: &str) -> (u16, String) {
        match self.agent.get(format!("{}{path}", self.address)).call() {
            Ok(mut response) => {
                let text = response.body_mut().read_to_string().unwrap_or_default();
                (response.status().as_u16(), text)
            }
            Err(_) => (0, String::new()),
        }
    }

    /// A billed lookup of 90210 with `key`.
    pub fn lookup(&self, key: &str) -> (u16, Value) {
        self.post("/api/lookup", &json!({"apiKey": key, "zipcode": "90210"}))
    }

    /// The free operation (`/api/countries`): its status.
    pub fn countries(&self, key: &str) -> u16 {
        self.post("/api/countries", &json!({"apiKey": key})).0
    }
}
