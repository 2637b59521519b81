//! ConsoleTenant documents: a YAML or JSON stream of `ConsoleTenant` objects, or of lists
//! of them (`kubectl get consoletenants -o yaml`), each checked into a [`Tenant`].
//!
//! Every refusal names its document (where it was read, its position and
//! `metadata.name`) and the field, as `spec.oidc.jwksURL`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use banlieue_domain::RoleName;
use banlieue_domain::object_names::{is_dns_label, is_dns_subdomain};
use cluster::crd::{ConsoleTenantSpec, MAX_TENANT_NAMESPACES, MAX_TENANT_ROLES, TenantOidc};
use serde::Deserialize;
use serde_json::Value;
use url::{Host, Url};

/// The `apiVersion` of a ConsoleTenant.
pub const API_VERSION: &str = "console.banlieue.io/v1alpha1";
/// The `kind` of a ConsoleTenant.
pub const KIND: &str = "ConsoleTenant";

/// One thing wrong with one document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{document}: {field}: {reason}")]
pub struct DocumentError {
    /// Which document: where it was read, its position and name, as
    /// `/etc/tenants.yaml, document 2 (acme)` or `ConsoleTenant banlieue-system/acme`.
    pub document: String,
    /// The field, as a path from the document's root (`spec.defaultRole`), or `document`
    /// for the document as a whole.
    pub field: String,
    /// What is wrong, and where it helps, what is expected.
    pub reason: String,
}

impl DocumentError {
    fn new(document: &str, field: &str, reason: impl Into<String>) -> Self {
        Self {
            document: document.to_owned(),
            field: field.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Something a document may say but an operator should know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Which document (as [`DocumentError::document`]).
    pub document: String,
    /// What to look at.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.document, self.message)
    }
}

/// Where a tenant's JWK Set is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JwksLocation {
    /// `oidc.jwksURL`, as given.
    Url(Url),
    /// None given: the `jwks_uri` of the discovery document at this URL
    /// (`<issuer>/.well-known/openid-configuration`).
    Discovery(Url),
}

/// A tenant, every field checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// `spec.tenantId`: an RFC 1123 label.
    pub id: String,
    /// `spec.displayName`, or the id.
    pub display_name: String,
    /// `spec.enabled`: false suspends the tenant.
    pub enabled: bool,
    /// `spec.oidc.issuer`, exactly as tokens' `iss` must spell it.
    pub issuer: String,
    /// Where its keys are.
    pub jwks: JwksLocation,
    /// `spec.oidc.audience`: the `aud` required, if any.
    pub audience: Option<String>,
    /// The claim that must equal [`Tenant::id`].
    pub tenant_claim: String,
    /// The claim naming the person.
    pub username_claim: String,
    /// The claim listing the person's roles.
    pub roles_claim: String,
    /// The role given when a token names none of [`Tenant::allowed_roles`].
    pub default_role: RoleName,
    /// The roles a token may give.
    pub allowed_roles: Vec<RoleName>,
    /// Where its people may claim.
    pub namespaces: Arc<[String]>,
    /// The document it was read from (as [`DocumentError::document`]).
    pub origin: String,
}

/// The outcome of checking one read of a source: the valid tenants by id, the documents
/// refused and why, and the warnings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantSet {
    /// The valid tenants, by [`Tenant::id`].
    pub tenants: BTreeMap<String, Tenant>,
    /// Each refused document's first fault.
    pub refused: Vec<DocumentError>,
    /// What the valid tenants say that deserves a look.
    pub warnings: Vec<Warning>,
}

/// One document of a stream, before it is checked: its label (see
/// [`DocumentError::document`]) and its content.
#[derive(Debug, Clone, PartialEq)]
pub struct RawDocument {
    /// Where it was read, its position and name.
    pub label: String,
    /// The document as parsed.
    pub content: Value,
}

/// Splits `text`, a YAML stream (JSON is YAML) read from `origin`, into its documents;
/// a `List` (or `ConsoleTenantList`) stands for its `items`. Empty documents are skipped.
///
/// Errors: a document that is not YAML, or a list whose `items` is not a list.
pub fn parse_stream(origin: &str, text: &str) -> Result<Vec<RawDocument>, DocumentError> {
    let mut documents = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let position = format!("{origin}, document {}", index + 1);
        let content = Value::deserialize(document)
            .map_err(|e| DocumentError::new(&position, "document", format!("not YAML: {e}")))?;
        match content.get("kind").and_then(Value::as_str) {
            _ if content.is_null() => {}
            Some("List" | "ConsoleTenantList") => {
                let Some(items) = content.get("items").and_then(Value::as_array) else {
                    return Err(DocumentError::new(
                        &position,
                        "items",
                        "a list must have items",
                    ));
                };
                for (item_index, item) in items.iter().enumerate() {
                    let label = labelled(&format!("{position}, item {}", item_index + 1), item);
                    documents.push(RawDocument {
                        label,
                        content: item.clone(),
                    });
                }
            }
            _ => documents.push(RawDocument {
                label: labelled(&position, &content),
                content,
            }),
        }
    }
    Ok(documents)
}

/// `position`, with the document's `metadata.name` when it has one.
fn labelled(position: &str, content: &Value) -> String {
    match content.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => format!("{position} ({name})"),
        None => position.to_owned(),
    }
}

/// Checks each document, then that no two name the same tenant: a tenant id given twice
/// is refused in both documents (neither can be trusted to be the intended one).
pub fn check_all(documents: Vec<RawDocument>) -> TenantSet {
    let mut set = TenantSet::default();
    let mut by_id: BTreeMap<String, Vec<Tenant>> = BTreeMap::new();
    for document in documents {
        match check(&document) {
            Ok((tenant, warnings)) => {
                set.warnings.extend(warnings);
                by_id.entry(tenant.id.clone()).or_default().push(tenant);
            }
            Err(error) => set.refused.push(error),
        }
    }
    for (id, mut tenants) in by_id {
        if tenants.len() == 1 {
            set.tenants.insert(id, tenants.pop().expect("one"));
            continue;
        }
        let origins: Vec<&str> = tenants.iter().map(|t| t.origin.as_str()).collect();
        for tenant in &tenants {
            let others: Vec<&str> = origins
                .iter()
                .copied()
                .filter(|o| *o != tenant.origin)
                .collect();
            set.refused.push(DocumentError::new(
                &tenant.origin,
                "spec.tenantId",
                format!("{id} is also the tenantId of {}", others.join(", ")),
            ));
            set.warnings.retain(|w| w.document != tenant.origin);
        }
    }
    set
}

/// The keys a ConsoleTenant may have at its root.
const ROOT_KEYS: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];

/// Checks one document into a tenant, with its warnings.
///
/// Errors: the first fault found, naming its field.
pub fn check(document: &RawDocument) -> Result<(Tenant, Vec<Warning>), DocumentError> {
    let label = document.label.as_str();
    let refuse = |field: &str, reason: String| DocumentError::new(label, field, reason);
    let Some(root) = document.content.as_object() else {
        return Err(refuse("document", "not an object".into()));
    };
    if let Some(key) = root.keys().find(|k| !ROOT_KEYS.contains(&k.as_str())) {
        return Err(refuse(key, "unknown field".into()));
    }
    let api_version = root.get("apiVersion").and_then(Value::as_str);
    if api_version != Some(API_VERSION) {
        return Err(refuse(
            "apiVersion",
            format!("is {}, not {API_VERSION}", shown(api_version)),
        ));
    }
    let kind = root.get("kind").and_then(Value::as_str);
    if kind != Some(KIND) {
        return Err(refuse("kind", format!("is {}, not {KIND}", shown(kind))));
    }
    let name = document
        .content
        .pointer("/metadata/name")
        .and_then(Value::as_str);
    match name {
        Some(name) if is_dns_subdomain(name) => {}
        Some(name) => {
            return Err(refuse(
                "metadata.name",
                format!(
                    "{name:?} is not a Kubernetes object name (lower-case letters, digits, '-' and '.')"
                ),
            ));
        }
        None => return Err(refuse("metadata.name", "missing".into())),
    }
    let spec = root
        .get("spec")
        .ok_or_else(|| refuse("spec", "missing".into()))?;
    let spec: ConsoleTenantSpec = serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "spec".to_owned()
        } else {
            format!("spec.{path}")
        };
        refuse(&field, e.into_inner().to_string())
    })?;
    checked(label, spec)
}

fn shown(value: Option<&str>) -> String {
    value.map_or_else(|| "missing".to_owned(), |v| format!("{v:?}"))
}

/// The checks of `spec`'s values (its shape is serde's).
fn checked(label: &str, spec: ConsoleTenantSpec) -> Result<(Tenant, Vec<Warning>), DocumentError> {
    let refuse = |field: &str, reason: String| DocumentError::new(label, field, reason);
    if !is_dns_label(&spec.tenant_id) {
        return Err(refuse(
            "spec.tenantId",
            format!(
                "{:?} is not an RFC 1123 label (1-63 lower-case letters, digits and '-', starting and ending with a letter or digit)",
                spec.tenant_id
            ),
        ));
    }
    let display_name = match spec.display_name {
        Some(name) => {
            let trimmed = name.trim();
            if trimmed.is_empty() || trimmed.chars().count() > 64 {
                return Err(refuse("spec.displayName", "must be 1-64 characters".into()));
            }
            if let Some(c) = trimmed
                .chars()
                .find(|c| banlieue_domain::text::is_hidden(*c))
            {
                return Err(refuse(
                    "spec.displayName",
                    format!("holds the invisible character U+{:04X}", u32::from(c)),
                ));
            }
            trimmed.to_owned()
        }
        None => spec.tenant_id.clone(),
    };
    let TenantOidc {
        issuer,
        jwks_url,
        audience,
        tenant_claim,
        username_claim,
        roles_claim,
    } = spec.oidc;
    let issuer_url = provider_url(&issuer).map_err(|r| refuse("spec.oidc.issuer", r))?;
    let jwks = match jwks_url {
        Some(jwks) => {
            JwksLocation::Url(provider_url(&jwks).map_err(|r| refuse("spec.oidc.jwksURL", r))?)
        }
        None => {
            let base = issuer_url.as_str().trim_end_matches('/');
            let discovery = format!("{base}/.well-known/openid-configuration");
            JwksLocation::Discovery(
                Url::parse(&discovery).map_err(|e| refuse("spec.oidc.issuer", e.to_string()))?,
            )
        }
    };
    let mut warnings = Vec::new();
    let audience = match audience {
        Some(audience) if audience.trim().is_empty() => {
            return Err(refuse(
                "spec.oidc.audience",
                "is empty: give the console's client id at the provider, or leave it out".into(),
            ));
        }
        Some(audience) => Some(audience),
        None => {
            warnings.push(Warning {
                document: label.to_owned(),
                message: format!(
                    "tenant {} has no oidc.audience: its provider's tokens for any application are accepted (their tenant claim must still name {})",
                    spec.tenant_id, spec.tenant_id
                ),
            });
            None
        }
    };
    for (field, claim) in [
        ("spec.oidc.tenantClaim", &tenant_claim),
        ("spec.oidc.usernameClaim", &username_claim),
        ("spec.oidc.rolesClaim", &roles_claim),
    ] {
        if claim.is_empty() || claim.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(refuse(
                field,
                format!("{claim:?} is not a claim name (no spaces or control characters)"),
            ));
        }
    }
    if spec.allowed_roles.is_empty() || spec.allowed_roles.len() > MAX_TENANT_ROLES {
        return Err(refuse(
            "spec.allowedRoles",
            format!("must list 1 to {MAX_TENANT_ROLES} roles"),
        ));
    }
    let mut allowed_roles: Vec<RoleName> = Vec::new();
    for (index, role) in spec.allowed_roles.iter().enumerate() {
        let field = format!("spec.allowedRoles[{index}]");
        let parsed = RoleName::parse(role).map_err(|e| refuse(&field, format!("{role:?}: {e}")))?;
        if allowed_roles.contains(&parsed) {
            return Err(refuse(&field, format!("{role} is listed twice")));
        }
        allowed_roles.push(parsed);
    }
    let default_role = RoleName::parse(&spec.default_role)
        .map_err(|e| refuse("spec.defaultRole", format!("{:?}: {e}", spec.default_role)))?;
    if !allowed_roles.contains(&default_role) {
        let allowed: Vec<&str> = allowed_roles.iter().map(RoleName::as_str).collect();
        return Err(refuse(
            "spec.defaultRole",
            format!(
                "{} is not in allowedRoles ({})",
                default_role.as_str(),
                allowed.join(", ")
            ),
        ));
    }
    if spec.namespaces.is_empty() || spec.namespaces.len() > MAX_TENANT_NAMESPACES {
        return Err(refuse(
            "spec.namespaces",
            format!("must list 1 to {MAX_TENANT_NAMESPACES} namespaces"),
        ));
    }
    for (index, namespace) in spec.namespaces.iter().enumerate() {
        let field = format!("spec.namespaces[{index}]");
        if !is_dns_label(namespace) {
            return Err(refuse(
                &field,
                format!("{namespace:?} is not a namespace name (an RFC 1123 label)"),
            ));
        }
        if spec.namespaces[..index].contains(namespace) {
            return Err(refuse(&field, format!("{namespace} is listed twice")));
        }
    }
    let tenant = Tenant {
        id: spec.tenant_id,
        display_name,
        enabled: spec.enabled,
        issuer,
        jwks,
        audience,
        tenant_claim,
        username_claim,
        roles_claim,
        default_role,
        allowed_roles,
        namespaces: spec.namespaces.into(),
        origin: label.to_owned(),
    };
    Ok((tenant, warnings))
}

/// `raw` as a provider URL: https, or plain http to a loopback address only (a provider
/// in the same host, as in tests), with no user, query or fragment.
pub(crate) fn provider_url(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("{raw:?} is not a URL: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("{raw:?} holds a user name or password"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("{raw:?} has a query or fragment"));
    }
    let loopback = match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(domain)) => domain == "localhost",
        None => return Err(format!("{raw:?} has no host")),
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        "http" => Err(format!(
            "{raw:?} is plain http to a host that is not loopback: keys fetched so could be anyone's; use https"
        )),
        other => Err(format!("{raw:?}: the scheme {other} is not https")),
    }
}
