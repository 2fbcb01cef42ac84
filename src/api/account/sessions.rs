//! `/account/api/sessions`: the signed-in account's live dashboard sessions, and ending
//! one of them.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::answers::{EndSession, Failed, Read};
use super::extract::{Changing, Signed};
use super::shared::rfc3339;
use super::{Dashboard, now_unix};
use crate::api::{ApiError, ApiTags};
use crate::domain::ids::SessionId;

#[derive(Debug, Object)]
pub struct SessionBody {
    #[oai(rename = "sessionId")]
    pub session_id: String,
    #[oai(rename = "signedInAt")]
    pub signed_in_at: String,
    #[oai(rename = "lastSeenAt")]
    pub last_seen_at: String,
    /// The browser's User-Agent.
    pub client: Option<String>,
    /// The session of this request.
    pub current: bool,
}

#[derive(Debug, Object)]
pub struct SessionsBody {
    pub sessions: Vec<SessionBody>,
}

#[derive(Debug, Object)]
pub struct EndedBody {
    #[oai(rename = "sessionId")]
    pub session_id: String,
    pub ended: bool,
}

/// `/account/api/sessions`.
pub struct SessionsApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl SessionsApi {
    /// The account's live sessions, newest first.
    #[oai(path = "/sessions", method = "get", operation_id = "listSessions")]
    async fn sessions(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
    ) -> Result<Json<SessionsBody>, Failed<Read>> {
        let (account, current) = (signed.0.account(), signed.0.row.public_id.clone());
        let now = now_unix();
        let list = dash
            .admin(move |mut admin| async move { admin.sessions(&account, now).await })
            .await?;
        Ok(Json(SessionsBody {
            sessions: list
                .into_iter()
                .map(|s| SessionBody {
                    current: s.session_id == current,
                    session_id: s.session_id.into(),
                    signed_in_at: rfc3339(s.created_at),
                    last_seen_at: rfc3339(s.seen_at),
                    client: s.client,
                })
                .collect(),
        }))
    }

    /// Ends one of the account's sessions.
    #[oai(
        path = "/sessions/:session_id",
        method = "delete",
        operation_id = "endSession"
    )]
    async fn end_session(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
        session_id: Path<String>,
    ) -> Result<Json<EndedBody>, Failed<EndSession>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let shown = session_id.0;
        let session_id = SessionId::new(shown.clone());
        let now = now_unix();
        let ended = dash
            .admin_as(actor, move |mut admin| async move {
                admin.end_session(&account, &session_id, now).await
            })
            .await?;
        match ended {
            true => Ok(Json(EndedBody {
                session_id: shown,
                ended: true,
            })),
            false => Err(ApiError::not_found(&format!("no session {shown:?}")).into()),
        }
    }
}
