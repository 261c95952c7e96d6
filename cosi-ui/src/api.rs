//! The HTTP routes: the page's assets, the JSON and YAML endpoints, and the
//! event stream. Errors are JSON objects `{"error": "..."}` with the status
//! that fits: 400 for a malformed name, 403 when the state refuses, 404 for
//! what does not exist, 421 for a request under a name that is not
//! loopback's, 500 for a resource that cannot be rendered, 502 when the
//! state cannot be reached. What a page needs and cannot read (the
//! controller statuses, say) is such an error too, never a page with less in it.
//!
//! Every route answers only requests for a loopback name (`localhost`,
//! `*.localhost`, a loopback address), whatever the port: a web page
//! elsewhere whose name its owner rebinds to 127.0.0.1 (DNS rebinding) is
//! requested under its own name, and the browser would let it read the
//! answers. The port is not checked: only a tunnel or a proxy the user set
//! up reaches the page under another port than its own.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State as Extract};
use axum::http::uri::Authority;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use cosi::resource::{Kind, Pointer, Readable};
use cosi::runtime::ControllerStatus;
use cosi::state::ListOptions;
use serde::{Deserialize, Serialize};

use crate::Ui;
use crate::columns;
use crate::layout::layout;
use crate::model::{self, ControllerView, Count, Definitions};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// The longest namespace, type or ID a request may name: a state's longest.
const MAX_NAME: usize = cosi::resource::MAX_NAME_LEN;

pub(crate) fn router(ui: Ui) -> axum::Router {
    axum::Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route("/app.js", get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }))
        .route("/app.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        .route("/api/graph", get(graph))
        .route("/api/summary", get(summary))
        .route("/api/types/{type}", get(list))
        .route("/api/resources/{namespace}/{type}", get(resource_by_query))
        .route("/api/resources/{namespace}/{type}/{id}", get(resource))
        .route("/api/events", get(events))
        .fallback(not_found)
        // The last layer runs first: the name, then where the request
        // comes from, then the token; the headers go on every answer.
        .layer(axum::middleware::from_fn_with_state(ui.clone(), with_token))
        .layer(axum::middleware::from_fn(same_origin_only))
        .layer(axum::middleware::from_fn(loopback_only))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(ui)
}

/// What the page may load and do: its own script, style and requests, no
/// inline code, no frames, no forms, nothing from elsewhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Headers on every answer: no content-type sniffing (a JSON error is never
/// read as a script or a page), the content security policy, and no
/// referrer (the page's URL carries its token).
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// Refuses a request a browser makes for another site or origin: one whose
/// `Sec-Fetch-Site` is `cross-site` or `same-site` (another port of this
/// machine is another origin, but the same site), or whose `Origin` is not
/// the page's own. The page's own requests are same-origin; opening its URL
/// is `none`; programs send neither header.
async fn same_origin_only(request: Request, next: Next) -> Response {
    let headers = request.headers();
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        let site = String::from_utf8_lossy(site.as_bytes());
        return Failure(
            StatusCode::FORBIDDEN,
            format!(
                "this page answers only itself and its user, not a request from another site (Sec-Fetch-Site: {site})"
            ),
        )
        .into_response();
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = request
            .uri()
            .authority()
            .map(Authority::as_str)
            .or_else(|| headers.get(header::HOST).and_then(|host| host.to_str().ok()));
        let own = host.map(|host| format!("http://{host}"));
        if !own.as_ref().is_some_and(|own| origin.as_bytes().eq_ignore_ascii_case(own.as_bytes())) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            let own = own.unwrap_or_else(|| "unknown: the request names no host".to_owned());
            return Failure(
                StatusCode::FORBIDDEN,
                format!("this page answers only its own origin ({own}), not a request from {origin}"),
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// Refuses a request without the page's token, in its URL (`?token=`) or
/// in the cookie that keeps it: another user of this machine can reach a
/// loopback port, but not read the token, which only the one who started
/// the page was shown. Opening the page with its token sets the cookie
/// (`HttpOnly`, `SameSite=Strict`: no script reads it, no other site's
/// request carries it) and sends the browser on to the page without the
/// token in its address.
async fn with_token(Extract(ui): Extract<Ui>, request: Request, next: Next) -> Response {
    let Some(token) = ui.token() else {
        return Failure(
            StatusCode::SERVICE_UNAVAILABLE,
            "this page has no token (the operating system gave no random bytes), so it answers nothing".to_owned(),
        )
        .into_response();
    };
    match query_token(request.uri()) {
        Some(given) if same_secret(given, token) => {
            let cookie = format!("{}={token}; HttpOnly; SameSite=Strict; Path=/", cookie_name(&request));
            let mut response = match request.uri().path() {
                "/" => Redirect::to("/").into_response(),
                _ => next.run(request).await,
            };
            if let Ok(cookie) = HeaderValue::from_str(&cookie) {
                response.headers_mut().append(header::SET_COOKIE, cookie);
            }
            response
        }
        Some(_) => Failure(
            StatusCode::FORBIDDEN,
            "the token in this URL is not the page's: open the URL its server printed".to_owned(),
        )
        .into_response(),
        None if cookies(request.headers()).any(|(_, value)| same_secret(value, token)) => next.run(request).await,
        None => Failure(
            StatusCode::UNAUTHORIZED,
            "this page answers only with its token: open the URL `cosictl ui` (or the program serving the page) \
             printed, which ends in ?token=...; the browser then keeps it in a cookie"
                .to_owned(),
        )
        .into_response(),
    }
}

/// The `token` of a request's query, if it has one.
fn query_token(uri: &Uri) -> Option<&str> {
    uri.query()?.split('&').find_map(|pair| pair.strip_prefix("token="))
}

/// Every cookie of a request, as (name, value).
fn cookies(headers: &axum::http::HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|cookie| cookie.trim().split_once('='))
}

/// The cookie's name for a request: one per port, since a browser sends a
/// host's cookies to each of its ports, and two pages open at once must not
/// replace each other's.
fn cookie_name(request: &Request) -> String {
    let host = request
        .uri()
        .authority()
        .cloned()
        .or_else(|| request.headers().get(header::HOST).and_then(|host| Authority::try_from(host.as_bytes()).ok()));
    match host.and_then(|host| host.port_u16()) {
        Some(port) => format!("cosi-ui-{port}"),
        None => "cosi-ui".to_owned(),
    }
}

/// Whether `given` is the token, in time that does not depend on where they differ.
fn same_secret(given: &str, token: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    bool::from(given.as_bytes().ct_eq(token.as_bytes()))
}

/// Refuses a request for a name that is not loopback's (in its `Host`, or
/// in an absolute request target); see the module's documentation.
async fn loopback_only(request: Request, next: Next) -> Response {
    let target = request.uri().authority().map(|authority| authority.as_str().as_bytes());
    let hosts = request.headers().get_all(header::HOST).iter().map(HeaderValue::as_bytes);
    for host in target.into_iter().chain(hosts) {
        let loopback = Authority::try_from(host).is_ok_and(|authority| is_loopback_name(authority.host()));
        if !loopback {
            let host = String::from_utf8_lossy(host);
            return Failure(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this page answers requests for localhost or a loopback address only, not for {host:?} \
                     (a web page elsewhere may have rebound its name to this machine)"
                ),
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// `localhost`, a name under `.localhost` (which browsers resolve to
/// loopback themselves), or a loopback address (IPv6 in brackets).
fn is_loopback_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    if let Some(address) = host.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
        return address.parse::<Ipv6Addr>().is_ok_and(|address| address.to_canonical().is_loopback());
    }
    if let Ok(address) = host.parse::<Ipv4Addr>() {
        return address.is_loopback();
    }
    let host = host.to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// An error response.
struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

/// A path segment that does not decode (`%FF`), or a query that does not
/// parse (a key twice): JSON as every other error, not axum's plain text.
impl From<PathRejection> for Failure {
    fn from(rejection: PathRejection) -> Self {
        Failure(rejection.status(), rejection.body_text())
    }
}

impl From<QueryRejection> for Failure {
    fn from(rejection: QueryRejection) -> Self {
        Failure(rejection.status(), rejection.body_text())
    }
}

impl From<cosi::Error> for Failure {
    fn from(error: cosi::Error) -> Self {
        let status = if error.is_not_found() {
            StatusCode::NOT_FOUND
        } else if error.is_access_denied() {
            StatusCode::FORBIDDEN
        } else if error.is_invalid_argument() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::BAD_GATEWAY
        };
        Failure(status, error.to_string())
    }
}

async fn not_found(uri: Uri) -> Failure {
    Failure(StatusCode::NOT_FOUND, format!("no such page: {}", uri.path()))
}

/// `what` as a name a request may use: not empty, not too long, no control characters.
fn checked<'a>(what: &str, name: &'a str) -> Result<&'a str, Failure> {
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(Failure(
            StatusCode::BAD_REQUEST,
            format!("invalid {what} {name:?}: a {what} is 1 to {MAX_NAME} characters, none a control character"),
        ));
    }
    Ok(name)
}

/// Refuses `type` when the page hides it ([`Config::show_sensitive`](crate::Config::show_sensitive)):
/// a sensitive type, or one no definition says is not sensitive, by the
/// rule the gRPC server applies to readers ([`cosi::resource::readable`]):
/// it fails closed, and a second definition of a type cannot make it shown.
fn check_shown(ui: &Ui, r#type: &str, definitions: &Definitions) -> cosi::Result<()> {
    if ui.config.show_sensitive {
        return Ok(());
    }
    match definitions.readable(r#type) {
        Readable::Yes => Ok(()),
        Readable::Sensitive => Err(cosi::Error::AccessDenied(format!(
            "resources of type {type} are sensitive: this page does not show them (`cosictl ui --show-sensitive` does)"
        ))),
        Readable::Unknown => Err(cosi::Error::AccessDenied(format!(
            "no definition of type {type} says it is not sensitive: this page does not show it"
        ))),
    }
}

async fn graph(Extract(ui): Extract<Ui>) -> Result<Response, Failure> {
    let definitions = model::definitions(&ui).await?;
    let statuses = statuses(&ui).await?;
    let controllers: Vec<_> = statuses.iter().map(|(name, status)| status.graph_controller(name)).collect();
    Ok(Json(layout(&controllers, &definitions.by_type)).into_response())
}

#[derive(Serialize)]
struct Summary {
    controllers: Vec<ControllerView>,
    counts: Vec<Count>,
}

async fn summary(Extract(ui): Extract<Ui>) -> Result<Json<Summary>, Failure> {
    let definitions = model::definitions(&ui).await?;
    let statuses = statuses(&ui).await?;
    let mut counts = Vec::new();
    for (namespace, r#type) in model::kinds(&definitions, &statuses) {
        // A type this connection may not read (sensitive, for a reader), or
        // the page does not show, counts as nothing.
        let listed = match check_shown(&ui, &r#type, &definitions) {
            Ok(()) => ui.state.list_dynamic(&Kind::new(&namespace, &r#type), &ListOptions::default()).await,
            Err(hidden) => Err(hidden),
        };
        let count = match listed {
            Ok(resources) => resources.len(),
            Err(error) if error.is_access_denied() => 0,
            Err(error) => return Err(error.into()),
        };
        counts.push(Count { namespace, r#type, count });
    }
    let controllers = statuses.iter().map(|(name, status)| ControllerView::new(name, status, 0.0)).collect();
    Ok(Json(Summary { controllers, counts }))
}

#[derive(Deserialize)]
struct ListQuery {
    namespace: Option<String>,
}

#[derive(Serialize)]
struct Listing {
    #[serde(rename = "type")]
    r#type: String,
    display_type: String,
    namespace: String,
    /// The namespaces the type is known in.
    namespaces: Vec<String>,
    sensitive: bool,
    columns: Vec<String>,
    rows: Vec<Row>,
}

#[derive(Serialize)]
struct Row {
    id: String,
    version: String,
    phase: String,
    cells: Vec<String>,
}

async fn list(
    Extract(ui): Extract<Ui>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Listing>, Failure> {
    let (Path(r#type), Query(query)) = (path?, query?);
    let r#type = checked("type", &r#type)?;
    let definitions = model::definitions(&ui).await?;
    let Some(definition) = definitions.get(r#type) else {
        return Err(Failure(StatusCode::NOT_FOUND, format!("no resource definition for the type {type:?}")));
    };
    check_shown(&ui, r#type, &definitions)?;
    let namespace = match &query.namespace {
        Some(namespace) => checked("namespace", namespace)?.to_owned(),
        None => definition.default_namespace.clone(),
    };
    let statuses = statuses(&ui).await?;
    let namespaces: Vec<String> = model::kinds(&definitions, &statuses)
        .into_iter()
        .filter(|(_, known)| known == r#type)
        .map(|(namespace, _)| namespace)
        .collect();
    let resources = ui.state.list_dynamic(&Kind::new(&namespace, r#type), &ListOptions::default()).await?;
    let rows = resources
        .iter()
        .map(|resource| {
            let spec = model::spec_value(resource);
            Row {
                id: resource.id().to_owned(),
                version: resource.metadata().version().to_string(),
                phase: resource.metadata().phase().to_string(),
                cells: definition
                    .print_columns
                    .iter()
                    .map(|column| columns::evaluate(&spec, &column.json_path))
                    .collect(),
            }
        })
        .collect();
    Ok(Json(Listing {
        r#type: definition.r#type.clone(),
        display_type: definition.display_type.clone(),
        namespace,
        namespaces,
        sensitive: definitions.readable(r#type) == Readable::Sensitive,
        columns: definition.print_columns.iter().map(|column| column.name.clone()).collect(),
        rows,
    }))
}

async fn resource(
    Extract(ui): Extract<Ui>,
    path: Result<Path<(String, String, String)>, PathRejection>,
) -> Result<Response, Failure> {
    let Path((namespace, r#type, id)) = path?;
    show_resource(&ui, &namespace, &r#type, &id).await
}

#[derive(Deserialize)]
struct IdQuery {
    id: String,
}

/// The resource whose ID is in the query (`?id=..`): the form the page
/// uses, since a browser resolves an ID of `.` or `..` in the path away.
async fn resource_by_query(
    Extract(ui): Extract<Ui>,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<Query<IdQuery>, QueryRejection>,
) -> Result<Response, Failure> {
    let (Path((namespace, r#type)), Query(query)) = (path?, query?);
    show_resource(&ui, &namespace, &r#type, &query.id).await
}

/// One resource as YAML, if the page shows its type.
async fn show_resource(ui: &Ui, namespace: &str, r#type: &str, id: &str) -> Result<Response, Failure> {
    let pointer = Pointer::new(checked("namespace", namespace)?, checked("type", r#type)?, checked("ID", id)?);
    check_shown(ui, r#type, &model::definitions(ui).await?)?;
    let resource = ui.state.get_dynamic(&pointer).await?;
    yaml_response(&pointer, model::yaml(&resource))
}

/// A resource rendered as YAML, or a 500 that says why it could not be
/// (and a warning for the operator): never an empty page.
fn yaml_response(pointer: &Pointer, rendered: Result<String, String>) -> Result<Response, Failure> {
    match rendered {
        Ok(text) => Ok(([(header::CONTENT_TYPE, "application/yaml; charset=utf-8")], text).into_response()),
        Err(error) => {
            tracing::warn!(%pointer, "the page cannot render a resource as YAML: {error}");
            Err(Failure(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render {pointer} as YAML: {error}")))
        }
    }
}

/// The controller statuses; or what went wrong reading them, with the
/// status the state's error has.
async fn statuses(ui: &Ui) -> Result<BTreeMap<String, ControllerStatus>, Failure> {
    let namespace = &ui.config.status_namespace;
    model::statuses(&*ui.state, namespace).await.map_err(|error| {
        let Failure(status, message) = Failure::from(error);
        Failure(status, format!("cannot read the controller statuses in the namespace {namespace:?}: {message}"))
    })
}

async fn events(Extract(ui): Extract<Ui>) -> Result<Response, Failure> {
    let definitions = model::definitions(&ui).await?;
    let statuses = statuses(&ui).await?;
    let kinds = model::kinds(&definitions, &statuses);
    let shown = kinds.into_iter().filter(|(_, r#type)| check_shown(&ui, r#type, &definitions).is_ok()).collect();
    let stream = crate::events::open(&ui, shown).await?;
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    /// What the YAML renderer refuses (it does so for bytes, nested enums
    /// and I/O errors, none of which a resource's JSON document holds) is a
    /// 500 that says why, not an empty page.
    #[tokio::test]
    async fn a_resource_that_cannot_be_rendered_is_a_500_that_says_why() {
        let pointer = Pointer::new("default", "Things.test.cosi.dev", "a");
        let refused = <serde_yaml_ng::Error as serde::ser::Error>::custom("the emitter refused");
        let response = yaml_response(&pointer, Err(refused.to_string())).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = response.into_body().collect().await.expect("a body").to_bytes();
        let error: serde_json::Value = serde_json::from_slice(&body).expect("a JSON error");
        let error = error["error"].as_str().unwrap_or_default();
        assert!(error.contains("Things.test.cosi.dev(default/a)") && error.contains("the emitter refused"), "{error}");
        let response = yaml_response(&pointer, Ok("metadata: {}\n".into())).into_response();
        assert_eq!(response.status(), StatusCode::OK);
    }
}
