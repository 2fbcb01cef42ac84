//! The reference for `bench/api.sh`: a bare poem handler answering a constant JSON body
//! of the size of a lookup response, on the same runtime settings as `postal serve`.

use poem::listener::TcpListener;
use poem::web::Json;
use poem::{Route, Server, handler, post};
use serde_json::{Value, json};

#[handler]
fn bare() -> Json<Value> {
    Json(json!({
        "city": "Beverly Hills", "state": "California", "ST": "CA",
        "latitude": 34.0901, "longitude": -118.4065, "balance": 4.999972,
        "performance": {"authTime": "0.004ms", "rateLimitCheckTime": "0.003ms",
            "balanceTime": "0.050ms", "processingTime": "0.006ms", "totalTime": "0.070ms"},
        "rateLimit": {"enabled": false,
            "perMinute": {"limit": null, "current": null, "approachingLimit": false},
            "perHour": {"limit": null, "current": null, "approachingLimit": false},
            "perDay": {"limit": null, "current": null, "approachingLimit": false}}
    }))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18081".to_string());
    Server::new(TcpListener::bind(listen))
        .run(Route::new().at("/api/lookup", post(bare)))
        .await
}
