//! `/account/api/limits`: the signed-in account's query limits per UTC minute, hour and
//! day, as `postal account limits` sets them.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::Dashboard;
use super::answers::{Failed, SetLimits};
use super::extract::{Body, DashboardBody, Recent};
use super::shared::refused;
use crate::api::{ApiError, ApiTags};
use crate::domain::admin::{LimitsChange, Refused};
use crate::domain::rate_limit::Limits;

/// The limits of an account: queries per UTC minute, hour and day; `null` = none.
#[derive(Debug, Object)]
pub struct LimitsBody {
    #[oai(rename = "perMinute")]
    pub per_minute: Option<u64>,
    #[oai(rename = "perHour")]
    pub per_hour: Option<u64>,
    #[oai(rename = "perDay")]
    pub per_day: Option<u64>,
}

impl From<Limits> for LimitsBody {
    fn from(limits: Limits) -> Self {
        // Taken apart whole: a window added to `Limits` must be added here too.
        let Limits {
            per_minute,
            per_hour,
            per_day,
        } = limits;
        LimitsBody {
            per_minute,
            per_hour,
            per_day,
        }
    }
}

/// Queries per UTC minute, hour and day; `null` or absent = no limit on that window.
#[derive(Debug, Object)]
pub struct LimitsRequest {
    #[oai(rename = "perMinute", validator(minimum(value = "1")))]
    pub per_minute: Option<u64>,
    #[oai(rename = "perHour", validator(minimum(value = "1")))]
    pub per_hour: Option<u64>,
    #[oai(rename = "perDay", validator(minimum(value = "1")))]
    pub per_day: Option<u64>,
}

impl DashboardBody for LimitsRequest {
    /// A limit of 0: the CLI's text.
    fn out_of_bounds(_field: &str) -> ApiError {
        refused(Refused::ZeroLimit)
    }
}

#[derive(Debug, Object)]
pub struct LimitsAnswer {
    pub limits: LimitsBody,
}

/// `/account/api/limits`.
pub struct LimitsApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl LimitsApi {
    /// Sets the limits, all three at once (`null` = none); in force from the next request.
    #[oai(path = "/limits", method = "put", operation_id = "setLimits")]
    async fn set_limits(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Recent,
        body: Body<LimitsRequest>,
    ) -> Result<Json<LimitsAnswer>, Failed<SetLimits>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let request = body.0;
        let limits = Limits {
            per_minute: request.per_minute,
            per_hour: request.per_hour,
            per_day: request.per_day,
        };
        let change = LimitsChange::exactly(limits).map_err(refused)?;
        let limits = dash
            .admin_as(actor, move |mut admin| async move {
                Ok(admin.set_limits(&account, change).await?)
            })
            .await?;
        Ok(Json(LimitsAnswer {
            limits: limits.into(),
        }))
    }
}
