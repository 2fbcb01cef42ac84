//! The reference for `bench/api.sh` and `bench/counts.sh`: a bare poem handler answering a
//! constant JSON body of the size of a lookup response, served as `postal serve` serves
//! (`api::server::run`): one thread per core, each a single-threaded runtime accepting
//! from the one listening socket, so that a connection stays on the thread that accepted it.
use poem::listener::TcpAcceptor;
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

fn main() {
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18081".to_string());
    let listener = std::net::TcpListener::bind(listen).expect("binding the port");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let listener = listener.try_clone().expect("sharing the listener");
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                runtime.block_on(async move {
                    let acceptor =
                        TcpAcceptor::from_std(listener).expect("registering the listener");
                    Server::new_with_acceptor(acceptor)
                        .run(Route::new().at("/api/lookup", post(bare)))
                        .await
                })
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}
