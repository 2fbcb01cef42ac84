//! `postal ledger migrate --from FILE`: a single-file installation's customers moved into an
//! empty PostgreSQL ledger, driven by one list of the file's tables ([`FILE_TABLES`]), each
//! moved whole or left with the reason why.
//!
//! A moved table is copied by one generic loop: the file's columns as `PRAGMA table_info`
//! names them, each value bound as the ledger's column type says
//! (`information_schema.columns`), so a column added to both schemas moves without a line
//! here, and a column the ledger lacks stops the move rather than being dropped. The test
//! `ledger_migrate_leaves_no_table_or_column_of_the_file_behind` (tests/cluster) fails when a
//! table of a new file is in neither list or a moved column has no place in the ledger.

use rusqlite::Connection;
use rusqlite::types::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Transaction};

use crate::db::admin::AccountError;

use super::changes::bump;

/// What becomes of one table of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Every row moves with every column, ids kept, except these columns (name, why not).
    Moved {
        except: &'static [(&'static str, &'static str)],
    },
    /// The table stays in the file, for this reason.
    NotMoved(&'static str),
}

const POSTAL_DATA: &str = "the postal data is each node's own file (docs/cluster.md)";

/// Every table of the file (`schema.sql`), the moved ones in the order their rows can be
/// inserted (a row after the rows it refers to).
pub const FILE_TABLES: &[(&str, Fate)] = &[
    (
        "accounts",
        Fate::Moved {
            except: &[
                ("minute_start", WINDOW_COUNTERS),
                ("minute_count", WINDOW_COUNTERS),
                ("hour_start", WINDOW_COUNTERS),
                ("hour_count", WINDOW_COUNTERS),
                ("day_start", WINDOW_COUNTERS),
                ("day_count", WINDOW_COUNTERS),
            ],
        },
    ),
    ("api_keys", Fate::Moved { except: &[] }),
    ("ledger", Fate::Moved { except: &[] }),
    ("usage_days", Fate::Moved { except: &[] }),
    ("oidc_providers", Fate::Moved { except: &[] }),
    ("identities", Fate::Moved { except: &[] }),
    ("audit_log", Fate::Moved { except: &[] }),
    ("payment_settings", Fate::Moved { except: &[] }),
    ("topups", Fate::Moved { except: &[] }),
    ("disputes", Fate::Moved { except: &[] }),
    ("mail_settings", Fate::Moved { except: &[] }),
    ("alert_settings", Fate::Moved { except: &[] }),
    ("alert_events", Fate::Moved { except: &[] }),
    ("alert_deliveries", Fate::Moved { except: &[] }),
    (
        "sessions",
        Fate::NotMoved("dashboard sessions end with the move: customers sign in again"),
    ),
    (
        "signins",
        Fate::NotMoved("sign-ins under way end with the move: customers sign in again"),
    ),
    (
        "idempotent_answers",
        Fate::NotMoved(
            "stored bulk answers stay behind: a retry after the move runs (and is charged) again",
        ),
    ),
    (
        "books_version",
        Fate::NotMoved(
            "the file's count of changes to what its server holds; the ledger has its own \
             (changes)",
        ),
    ),
    ("dataset", Fate::NotMoved(POSTAL_DATA)),
    ("countries", Fate::NotMoved(POSTAL_DATA)),
    ("postal_codes", Fate::NotMoved(POSTAL_DATA)),
    ("gazetteer", Fate::NotMoved(POSTAL_DATA)),
    ("retired_codes", Fate::NotMoved(POSTAL_DATA)),
    ("imports", Fate::NotMoved(POSTAL_DATA)),
    ("import_sources", Fate::NotMoved(POSTAL_DATA)),
    ("import_countries", Fate::NotMoved(POSTAL_DATA)),
    ("code_changes", Fate::NotMoved(POSTAL_DATA)),
    ("overrides", Fate::NotMoved(POSTAL_DATA)),
];

const WINDOW_COUNTERS: &str =
    "rate-limit windows start again: the nodes count them in window_counts from the move on";

/// The moved tables, in insertion order.
pub fn moved_tables()
-> impl Iterator<Item = (&'static str, &'static [(&'static str, &'static str)])> {
    FILE_TABLES.iter().filter_map(|(table, fate)| match fate {
        Fate::Moved { except } => Some((*table, *except)),
        Fate::NotMoved(_) => None,
    })
}

/// What `migrate_from_file` moved: rows per moved table, in insertion order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    pub tables: Vec<(&'static str, u64)>,
}

impl Migrated {
    /// The rows moved of `table` (0 for a table not moved).
    pub fn rows(&self, table: &str) -> u64 {
        self.tables
            .iter()
            .find(|(name, _)| *name == table)
            .map_or(0, |(_, rows)| *rows)
    }
}

/// Copies every moved table of the SQLite file `file` ([`FILE_TABLES`]) into an empty
/// PostgreSQL ledger, ids kept, in one transaction, then moves every identity sequence past
/// the ids moved; refused when any moved table already holds rows in the ledger.
pub async fn migrate_from_file(
    client: &mut Client,
    file: &Connection,
) -> Result<Migrated, AccountError> {
    let tx = client.transaction().await?;
    let names: Vec<&str> = moved_tables().map(|(table, _)| table).collect();
    tx.batch_execute(&format!(
        "LOCK TABLE {} IN EXCLUSIVE MODE",
        names
            .iter()
            .map(|t| quoted(t))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .await?;
    for table in &names {
        let existing: i64 = tx
            .query_one(&format!("SELECT count(*) FROM {}", quoted(table)), &[])
            .await?
            .get(0);
        if existing > 0 {
            let what = match *table {
                "accounts" => format!("{existing} accounts"),
                _ => format!("{existing} rows of {table}"),
            };
            return Err(AccountError::Invalid(format!(
                "the ledger already holds {what}: migrate into an empty one"
            )));
        }
    }
    // The alerts' triggers decide nothing of rows moved (a key or top-up of the file is
    // no new event): they skip while `postal.moving` is on, in this transaction only.
    tx.batch_execute("SET LOCAL postal.moving = 'on'").await?;
    let mut moved = Migrated { tables: Vec::new() };
    for (table, except) in moved_tables() {
        let rows = copy_table(&tx, file, table, except).await?;
        moved.tables.push((table, rows));
        restart_identities(&tx, table).await?;
    }
    bump(&tx).await?;
    tx.commit().await?;
    Ok(moved)
}

/// `"name"`: an identifier of the schemas (no quote in any).
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Copies every row of `table`, every column of the file but `except`; the rows copied.
async fn copy_table(
    tx: &Transaction<'_>,
    file: &Connection,
    table: &str,
    except: &[(&str, &str)],
) -> Result<u64, AccountError> {
    let columns: Vec<String> = file
        .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?
        .query_map([table], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?
        .into_iter()
        .filter(|c| !except.iter().any(|(name, _)| name == c))
        .collect();
    let types = ledger_types(tx, table).await?;
    let targets: Vec<&str> = columns
        .iter()
        .map(|column| {
            types
                .iter()
                .find(|(name, _)| name == column)
                .map(|(_, ty)| ty.as_str())
                .ok_or_else(|| {
                    AccountError::Invalid(format!(
                        "the ledger's {table} has no column {column}: this program cannot \
                         move this file"
                    ))
                })
        })
        .collect::<Result<_, _>>()?;
    let list = columns
        .iter()
        .map(|c| quoted(c))
        .collect::<Vec<_>>()
        .join(", ");
    let placeholders = (1..=columns.len())
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let insert = tx
        .prepare(&format!(
            "INSERT INTO {} ({list}) VALUES ({placeholders})",
            quoted(table)
        ))
        .await?;
    let mut select = file.prepare(&format!("SELECT {list} FROM {}", quoted(table)))?;
    let mut rows = select.query([])?;
    let mut copied = 0;
    while let Some(row) = rows.next()? {
        let mut values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::with_capacity(columns.len());
        for (i, (column, target)) in columns.iter().zip(&targets).enumerate() {
            let value: Value = row.get(i)?;
            values.push(bind(value, target).map_err(|found| {
                AccountError::Invalid(format!(
                    "{table}.{column}: the file holds {found}, the ledger's column is {target}"
                ))
            })?);
        }
        let params: Vec<&(dyn ToSql + Sync)> = values
            .iter()
            .map(|v| v.as_ref() as &(dyn ToSql + Sync))
            .collect();
        tx.execute(&insert, &params).await?;
        copied += 1;
    }
    Ok(copied)
}

/// The ledger's columns of `table` and their types (`information_schema`'s `data_type`).
async fn ledger_types(
    tx: &Transaction<'_>,
    table: &str,
) -> Result<Vec<(String, String)>, AccountError> {
    Ok(tx
        .query(
            "SELECT column_name::text, data_type::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1",
            &[&table],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

/// A value of the file as the ledger's column of type `target` takes it (a NULL typed as
/// the column); `Err` names what the file holds when it does not fit.
fn bind(value: Value, target: &str) -> Result<Box<dyn ToSql + Sync + Send>, String> {
    let unfit = |value: &Value| match value {
        Value::Null => "NULL".to_owned(),
        Value::Integer(i) => format!("the integer {i}"),
        Value::Real(r) => format!("the real {r}"),
        Value::Text(_) => "text".to_owned(),
        Value::Blob(_) => "a blob".to_owned(),
    };
    Ok(match (target, value) {
        ("bigint", Value::Integer(i)) => Box::new(i),
        ("bigint", Value::Null) => Box::new(None::<i64>),
        ("integer", Value::Integer(i)) => {
            Box::new(i32::try_from(i).map_err(|_| unfit(&Value::Integer(i)))?)
        }
        ("integer", Value::Null) => Box::new(None::<i32>),
        ("smallint", Value::Integer(i)) => {
            Box::new(i16::try_from(i).map_err(|_| unfit(&Value::Integer(i)))?)
        }
        ("smallint", Value::Null) => Box::new(None::<i16>),
        ("boolean", Value::Integer(i @ (0 | 1))) => Box::new(i == 1),
        ("boolean", Value::Null) => Box::new(None::<bool>),
        ("double precision", Value::Real(r)) => Box::new(r),
        ("double precision", Value::Integer(i)) => Box::new(i as f64),
        ("double precision", Value::Null) => Box::new(None::<f64>),
        ("text", Value::Text(s)) => Box::new(s),
        ("text", Value::Null) => Box::new(None::<String>),
        ("bytea", Value::Blob(b)) => Box::new(b),
        ("bytea", Value::Null) => Box::new(None::<Vec<u8>>),
        (_, value) => return Err(unfit(&value)),
    })
}

/// Moves the sequence of every identity or serial column of `table` past its largest id,
/// so that rows made after the move get new ids.
async fn restart_identities(tx: &Transaction<'_>, table: &str) -> Result<(), AccountError> {
    let columns: Vec<String> = tx
        .query(
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1
               AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')",
            &[&table],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for column in columns {
        tx.query_one(
            &format!(
                "SELECT setval(pg_get_serial_sequence($1, $2), coalesce(max({c}), 0) + 1, false)
                 FROM {t}",
                c = quoted(&column),
                t = quoted(table)
            ),
            &[&quoted(table), &column],
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_is_listed_once() {
        let mut names: Vec<&str> = FILE_TABLES.iter().map(|(t, _)| *t).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before);
    }

    #[test]
    fn a_value_goes_into_a_column_of_its_type_or_is_refused_by_name() {
        assert!(bind(Value::Integer(7), "bigint").is_ok());
        assert!(bind(Value::Null, "text").is_ok());
        assert_eq!(
            bind(Value::Integer(1 << 40), "integer").err(),
            Some("the integer 1099511627776".to_owned())
        );
        assert_eq!(
            bind(Value::Text("x".into()), "bigint").err(),
            Some("text".to_owned())
        );
        assert_eq!(
            bind(Value::Integer(2), "boolean").err(),
            Some("the integer 2".to_owned())
        );
    }
}
