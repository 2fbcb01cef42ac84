//! `postal serve --max-new-accounts-per-ip-day`: first sign-ins from one client address
//! make at most N accounts per UTC day, counted in the store; beyond, the sign-in that
//! would make one is refused (429) and known identities still sign in.

use crate::account::{Browser, providers};
use crate::helpers::spawn_app_with;

#[test]
fn a_client_address_makes_at_most_its_new_accounts_a_day_and_known_ones_still_sign_in() {
    let mut settings = postal::api::Settings::default();
    settings.dashboard.max_new_accounts_per_ip_day = Some(2);
    let app = spawn_app_with(settings);
    let Some(_providers) = providers(&app) else {
        return;
    };
    // The operator's account (made by the CLI) counts for no address.
    app.cli(&["account", "create", "--name", "operator's"]);
    let accounts = || {
        app.cli(&["account", "list"])["accounts"]
            .as_array()
            .unwrap()
            .len()
    };
    let before = accounts();
    for user in ["first", "second"] {
        Browser::new().sign_in(&app, "p1", user);
    }
    assert_eq!(accounts(), before + 2);
    let mut third = Browser::new();
    let page = third.follow(&format!("{}/account/signin/p1", app.address), "third");
    assert_eq!(page.status, 429, "{}", page.body);
    assert!(
        page.body.contains(
            "Too many new accounts from your address today; try again tomorrow or sign in \
             to an existing account."
        ),
        "{}",
        page.body
    );
    assert_eq!(third.api(&app, "GET", "/me", None).0, 401);
    assert_eq!(accounts(), before + 2);
    // Known identities still sign in; the count is the store's (what a restart or another
    // node reads).
    Browser::new().sign_in(&app, "p1", "first");
    let counted: Vec<(Option<String>, i64)> = {
        let conn = rusqlite::Connection::open(&app.db).unwrap();
        let mut stmt = conn
            .prepare("SELECT created_from, count(*) FROM accounts GROUP BY 1 ORDER BY 1")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(
        counted,
        [(None, before as i64), (Some("127.0.0.1".to_owned()), 2)]
    );
    // A new day (the accounts made a day earlier): the address may make accounts again.
    rusqlite::Connection::open(&app.db)
        .unwrap()
        .execute(
            "UPDATE accounts SET created_at = created_at - 86400 WHERE created_from IS NOT NULL",
            [],
        )
        .unwrap();
    Browser::new().sign_in(&app, "p1", "third");
    assert_eq!(accounts(), before + 3);
}

/// Cluster mode, `postal serve --max-new-accounts-per-ip-day 1` on both nodes: the
/// address's account made on one node is counted on the other.
#[test]
fn over_a_cluster_ledger_an_address_new_accounts_are_counted_on_every_node() {
    let Some(cluster) = crate::account::two_nodes_with(&["--max-new-accounts-per-ip-day", "1"])
    else {
        return;
    };
    Browser::new().sign_in_at(&cluster.a, "p1", "node-a");
    let page = Browser::new().follow(&format!("{}/account/signin/p1", cluster.b), "node-b");
    assert_eq!(page.status, 429, "{}", page.body);
    assert!(
        page.body
            .contains("Too many new accounts from your address today"),
        "{}",
        page.body
    );
    Browser::new().sign_in_at(&cluster.b, "p1", "node-a");
}
