//! Command line and configuration: flags, each with a `BANLIEUE_*` environment variable,
//! validated once at start-up into a [`Config`] that is passed down explicitly.

use std::net::SocketAddr;

use std::time::Duration;

use banlieue_identity::oidc::{ClusterAccess, IssuerConfig, KeyPolicy};
use clap::{Args, Parser, Subcommand, ValueEnum};
use url::Url;

/// banlieue-console: the web console and identity front door of banlieue sandboxes.
#[derive(Debug, Parser)]
#[command(name = "banlieue-console", version)]
pub struct Cli {
    #[command(flatten)]
    pub settings: Settings,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the console (the default).
    Serve,
    /// Validate the configuration and reach the database, then exit.
    CheckConfig,
    /// Run the claim and pool controllers alone (leader-elected), until SIGINT/SIGTERM.
    Controllers(ControllersArgs),
    /// Administration from the server's shell.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

/// Options of `banlieue-console controllers`.
#[derive(Debug, Clone, Args)]
pub struct ControllersArgs {
    /// Namespace to watch [default: all namespaces].
    #[arg(long, env = "BANLIEUE_WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,
    /// This replica's identity in the Lease [default: HOSTNAME and process id].
    #[arg(long, env = "BANLIEUE_CONTROLLER_IDENTITY")]
    pub identity: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create the first admin (`admin`, must change password) and print its password
    /// once to stderr. Refused when an enabled admin exists.
    Bootstrap,
    /// Publish a new OIDC signing key now; it signs after the activation delay and the
    /// old one leaves the JWKS once its tokens have expired.
    RotateSigningKey,
    /// Seal every signing key again under the current key-encryption key (the last step
    /// of rotating it: README, "Secrets at rest"); prints how many were sealed again.
    ResealSigningKeys,
    /// Manage users with the same rules and audit events as the console.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// List users (name, roles, state), optionally matching a search.
    List {
        #[arg(long, default_value = "")]
        search: String,
    },
    /// Create a user who must change the printed password at first sign-in.
    Create {
        name: String,
        #[arg(long, default_value = "")]
        display_name: String,
        #[arg(long, default_value = "")]
        email: String,
        /// Comma-separated role names.
        #[arg(long, value_delimiter = ',')]
        roles: Vec<String>,
    },
    /// Generate a new password (printed once), require a change at next sign-in and end
    /// the user's sessions.
    SetPassword {
        name: String,
    },
    /// Disable the user; their sessions end.
    Disable {
        name: String,
    },
    Enable {
        name: String,
    },
    /// End every session of the user.
    RevokeSessions {
        name: String,
    },
}

/// Settings as given on the command line or in the environment, before validation.
#[derive(Debug, Clone, Args)]
pub struct Settings {
    /// Address and port to listen on.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_LISTEN",
        default_value = "127.0.0.1:3000"
    )]
    pub listen: String,
    /// Address and port of the metrics listener (plain HTTP, `GET /metrics` only) [default:
    /// none, metrics are not served]. A port of its own, so that a NetworkPolicy can keep
    /// it to the cluster network.
    #[arg(long, global = true, env = "BANLIEUE_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// sqlite://<file> (embedded) or postgres://user:password@host/db.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_DATABASE_URL",
        default_value = "sqlite://data/console.db",
        hide_env_values = true
    )]
    pub database_url: String,
    /// The URL people and tokens use to reach the console [default: http://<listen>, or
    /// https://<listen> with --tls-cert-file].
    #[arg(long, global = true, env = "BANLIEUE_EXTERNAL_URL")]
    pub external_url: Option<String>,
    /// Log format on stdout.
    #[arg(long, global = true, env = "BANLIEUE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Lifetime of issued ID tokens, in minutes (1–15).
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_ID_TOKEN_TTL_MINUTES",
        default_value_t = 5
    )]
    pub id_token_ttl_minutes: u64,
    /// Absolute lifetime of a refresh-token family, in hours (1–720).
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_REFRESH_TOKEN_LIFETIME_HOURS",
        default_value_t = 12
    )]
    pub refresh_token_lifetime_hours: u64,
    /// File with the key-encryption key that seals the OIDC signing keys in the database:
    /// 32 random bytes in base64, readable by the console alone. Default with SQLite:
    /// `key-encryption-key` beside the database file, made at first start; required with
    /// PostgreSQL.
    #[arg(long, global = true, env = "BANLIEUE_KEY_ENCRYPTION_KEY_FILE")]
    pub key_encryption_key_file: Option<std::path::PathBuf>,
    /// The previous key-encryption key while rotating it: it only opens keys, which are
    /// sealed again under the current one.
    #[arg(long, global = true, env = "BANLIEUE_PREVIOUS_KEY_ENCRYPTION_KEY_FILE")]
    pub previous_key_encryption_key_file: Option<std::path::PathBuf>,
    /// Absolute lifetime of a browser session from its sign-in, in hours (1–720); 12 h
    /// without a request end it sooner.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_SESSION_LIFETIME_HOURS",
        default_value_t = 12
    )]
    pub session_lifetime_hours: u64,
    /// Minutes between publishing a new signing key in the JWKS and signing with it.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_SIGNING_KEY_ACTIVATION_MINUTES",
        default_value_t = 10
    )]
    pub signing_key_activation_minutes: u64,
    /// The Kubernetes API server URL people's kubeconfigs point at.
    #[arg(long, global = true, env = "BANLIEUE_CLUSTER_SERVER")]
    pub cluster_server: Option<String>,
    /// PEM file of the CA of the cluster's API server certificate (when it is private).
    #[arg(long, global = true, env = "BANLIEUE_CLUSTER_CA_FILE")]
    pub cluster_ca_file: Option<std::path::PathBuf>,
    /// The console's kubeconfig: its own credentials in the cluster (the service account
    /// that impersonates people and runs the controllers) [default: KUBECONFIG, then the
    /// in-cluster account when running in a pod].
    #[arg(long, global = true, env = "BANLIEUE_KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The console's own namespace (the controllers' leader-election Lease lives there).
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_NAMESPACE",
        default_value = "banlieue-system"
    )]
    pub namespace: String,
    /// Run the claim and pool controllers inside `serve` (leader-elected, so replicas
    /// don't both reconcile).
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_RUN_CONTROLLERS",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub run_controllers: bool,
    /// Also run the simulated provider with the controllers (in `serve` or
    /// `banlieue-console controllers`): VMs Ready after 2 s on no hypervisor, for trying the
    /// console on a cluster without a real provider. Always on with the dev cluster.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_SIMULATED_PROVIDER",
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub simulated_provider: bool,
    /// Seconds between SIGTERM and closing the listener: `/readyz` answers 503 while the
    /// console goes on serving, so that load balancers and Service endpoints drop the
    /// replica before it refuses connections (0–60).
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_SHUTDOWN_DELAY_SECONDS",
        default_value_t = 0
    )]
    pub shutdown_delay_seconds: u64,
    /// Development: with no kubeconfig, start the Kubernetes emulator in this process with
    /// the chart applied and a demo pool (what `make run` does).
    #[arg(long, global = true, env = "BANLIEUE_DEV_CLUSTER")]
    pub dev_cluster: bool,
    /// Where the dev cluster listens.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_DEV_CLUSTER_LISTEN",
        default_value = "127.0.0.1:6443"
    )]
    pub dev_cluster_listen: String,
    /// Where the dev cluster keeps its state across restarts.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_DEV_CLUSTER_DIR",
        default_value = "data/dev-cluster"
    )]
    pub dev_cluster_dir: std::path::PathBuf,
    /// Lifetimes offered when claiming a sandbox, in seconds, comma-separated.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_CLAIM_TTL_CHOICES",
        value_delimiter = ',',
        default_value = "900,3600,14400"
    )]
    pub claim_ttl_choices: Vec<u32>,
    /// The cluster's name in downloaded kubeconfigs.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_CLUSTER_NAME",
        default_value = "banlieue"
    )]
    pub cluster_name: String,
    /// Reverse proxies whose `X-Forwarded-For` is believed: IP addresses or CIDR ranges,
    /// comma-separated. Empty: the peer's address is the client's.
    #[arg(
        long,
        global = true,
        env = "BANLIEUE_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<String>,
    /// Serve HTTPS with this PEM certificate (the server's first, then its intermediates);
    /// with --tls-key-file. Reloaded when the file changes.
    #[arg(long, global = true, env = "BANLIEUE_TLS_CERT_FILE")]
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert-file. Reloaded when the file changes.
    #[arg(long, global = true, env = "BANLIEUE_TLS_KEY_FILE")]
    pub tls_key_file: Option<std::path::PathBuf>,
    /// Where the tenants (ConsoleTenant documents, SPEC §7) come from: `none`,
    /// `kubernetes` (the ConsoleTenants of the console's namespace) or `file`
    /// (--tenants-file).
    #[arg(long, global = true, env = "BANLIEUE_TENANTS_SOURCE", value_enum, default_value_t = TenantsSourceKind::None)]
    pub tenants_source: TenantsSourceKind,
    /// With --tenants-source file: a YAML or JSON stream of ConsoleTenant documents, or a
    /// `kubectl get -o yaml` List of them.
    #[arg(long, global = true, env = "BANLIEUE_TENANTS_FILE")]
    pub tenants_file: Option<std::path::PathBuf>,
    /// How often the tenants are read again, in seconds (5–3600) [default: 30].
    #[arg(long, global = true, env = "BANLIEUE_TENANTS_REFRESH")]
    pub tenants_refresh: Option<u64>,
    /// PEM file of CA certificates trusted, beside the system's, for the tenants' identity
    /// providers (discovery and JWK Sets behind a private CA).
    #[arg(long, global = true, env = "BANLIEUE_TENANTS_CA_FILE")]
    pub tenants_ca_file: Option<std::path::PathBuf>,
}

/// The values of --tenants-source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TenantsSourceKind {
    /// No tenants: only the console's own users sign in.
    None,
    /// The ConsoleTenants of the console's namespace, through the API server.
    Kubernetes,
    /// --tenants-file.
    File,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Where `GET /metrics` is served, if anywhere (never on `listen`).
    pub metrics_listen: Option<SocketAddr>,
    /// May hold a password: never log it.
    pub database_url: String,
    /// The external URL without a trailing slash, e.g. `https://console.example.com`.
    pub external_url: String,
    /// `scheme://host[:port]` of the external URL: what a same-origin `Origin` header is.
    pub external_origin: String,
    /// Whether the external URL was configured (not derived from the listen address):
    /// then only it is a same origin, whatever `Host` says.
    pub external_url_configured: bool,
    /// Cookies get `Secure` (and the `__Host-` name prefix) when served over https.
    pub https: bool,
    pub log_format: LogFormat,
    /// The OIDC issuer: `issuer_url` is `external_url`.
    pub issuer: IssuerConfig,
    pub signing_keys: KeyPolicy,
    /// How long a browser session lasts from its sign-in, however active.
    pub session_lifetime: Duration,
    /// Where the key-encryption keys are.
    pub key_encryption: KeyEncryptionFiles,
    /// The cluster for kubeconfig downloads, when configured.
    pub cluster: Option<ClusterAccess>,
    /// Where the console's own cluster credentials come from.
    pub kube: KubeSource,
    /// The console's namespace.
    pub namespace: String,
    pub run_controllers: bool,
    /// Whether the controllers run the simulated provider too (set, or the dev cluster).
    pub simulated_provider: bool,
    /// How long `serve` stays up, unready, between SIGTERM and closing its listener.
    pub shutdown_delay: Duration,
    /// Lifetimes offered when claiming, in seconds, ascending, each ≥ 1.
    pub claim_ttl_choices: Vec<u32>,
    /// Proxies whose `X-Forwarded-For` names the client ([`crate::middleware::client_address`]).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// HTTPS on the listener with this certificate and key (checked to load at
    /// validation), else plain HTTP.
    pub tls: Option<crate::tls::TlsFiles>,
    /// The tenants, when a source is configured.
    pub tenants: Option<TenantsConfig>,
}

/// Where the tenants come from and how they are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantsConfig {
    /// The source.
    pub source: TenantsSource,
    /// How often they are read again.
    pub refresh: Duration,
    /// Extra CA certificates for the providers (PEM, read and checked at validation).
    pub ca_pem: Option<String>,
}

/// A validated --tenants-source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantsSource {
    /// The ConsoleTenants of the console's namespace.
    Kubernetes,
    /// This file.
    File(std::path::PathBuf),
}

/// The key-encryption key files (current, and previous while rotating).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEncryptionFiles {
    pub current: std::path::PathBuf,
    /// Made at first start when missing (the SQLite default beside the database).
    pub create_if_missing: bool,
    pub previous: Option<std::path::PathBuf>,
}

/// Where the console reaches Kubernetes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeSource {
    /// No cluster: the console serves accounts and tokens only.
    None,
    /// A kubeconfig file (`BANLIEUE_KUBECONFIG`), or `None` for kube-rs' inference
    /// (`KUBECONFIG`, then the in-cluster service account).
    Kubeconfig(Option<std::path::PathBuf>),
    /// The in-process emulator (`--dev-cluster`).
    Dev {
        listen: SocketAddr,
        dir: std::path::PathBuf,
    },
}

/// A setting that cannot work, with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "BANLIEUE_LISTEN / --listen: {value:?} is not an address and port such as 127.0.0.1:3000 or [::]:3000"
    )]
    Listen { value: String },
    #[error(
        "BANLIEUE_METRICS_LISTEN / --metrics-listen: {value:?} is not an address and port such as 0.0.0.0:9464, or it is the console's own listen address"
    )]
    MetricsListen { value: String },
    #[error(
        "BANLIEUE_EXTERNAL_URL / --external-url: {value:?} {problem}; example: https://console.example.com"
    )]
    ExternalUrl {
        value: String,
        problem: &'static str,
    },
    #[error("BANLIEUE_DATABASE_URL / --database-url must start with sqlite:// or postgres://")]
    DatabaseUrl,
    #[error("{variable}: {value} is outside {range}")]
    OutOfRange {
        variable: &'static str,
        value: u64,
        range: &'static str,
    },
    #[error(
        "BANLIEUE_CLUSTER_SERVER / --cluster-server: {value:?} is not an http(s) URL such as https://k8s.example.com:6443"
    )]
    ClusterServer { value: String },
    #[error("BANLIEUE_CLUSTER_CA_FILE / --cluster-ca-file: cannot read {path}: {problem}")]
    ClusterCaFile { path: String, problem: String },
    #[error(
        "BANLIEUE_CLAIM_TTL_CHOICES / --claim-ttl-choices: give one or more lifetimes in seconds, each from 1 to 2592000 (30 days, what a claim may ask for), e.g. 900,3600"
    )]
    ClaimTtlChoices,
    #[error("BANLIEUE_CLUSTER_NAME / --cluster-name must not be empty")]
    ClusterName,
    #[error(
        "BANLIEUE_DEV_CLUSTER_LISTEN / --dev-cluster-listen: {value:?} is not an address and port such as 127.0.0.1:6443"
    )]
    DevClusterListen { value: String },
    #[error(
        "BANLIEUE_DEV_CLUSTER / --dev-cluster: this build has no dev cluster (it was built without the `dev-cluster` feature); point BANLIEUE_KUBECONFIG at a cluster instead"
    )]
    DevClusterNotBuilt,
    #[error(
        "BANLIEUE_TRUSTED_PROXIES / --trusted-proxies: {value:?} is not an IP address or a CIDR range such as 10.0.0.0/8"
    )]
    TrustedProxies { value: String },
    #[error(
        "BANLIEUE_TRUSTED_PROXIES / --trusted-proxies: {value:?} has bits set past its prefix: write the range as {range}, or the one address as {address}"
    )]
    TrustedProxyHostBits {
        value: String,
        range: ipnet::IpNet,
        address: ipnet::IpNet,
    },
    #[error(
        "{given} is set but {missing} is not: give both the certificate and its key to serve HTTPS, or neither to serve HTTP"
    )]
    TlsPair {
        given: &'static str,
        missing: &'static str,
    },
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error(
        "{setting} is set but BANLIEUE_TENANTS_SOURCE / --tenants-source is {chosen}, which does not use it{hint}"
    )]
    TenantsSettingUnused {
        setting: &'static str,
        chosen: &'static str,
        hint: &'static str,
    },
    #[error(
        "BANLIEUE_TENANTS_SOURCE / --tenants-source is file but BANLIEUE_TENANTS_FILE / --tenants-file is not set: name the file of ConsoleTenant documents"
    )]
    TenantsFileMissing,
    #[error(
        "BANLIEUE_TENANTS_SOURCE / --tenants-source is kubernetes but the console has no cluster: set BANLIEUE_KUBECONFIG (or run in a pod), or use --tenants-source file"
    )]
    TenantsWithoutCluster,
    #[error("BANLIEUE_TENANTS_CA_FILE / --tenants-ca-file: cannot read {path}: {problem}")]
    TenantsCaFile { path: String, problem: String },
    #[error(
        "BANLIEUE_KEY_ENCRYPTION_KEY_FILE / --key-encryption-key-file is required with PostgreSQL: the file holds the key that seals the signing keys in the database (make one with `head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE`; in Kubernetes, a Secret mounted as a file)"
    )]
    KeyEncryptionKeyRequired,
    #[error(
        "BANLIEUE_SIMULATED_PROVIDER / --simulated-provider runs with the controllers, but BANLIEUE_RUN_CONTROLLERS / --run-controllers is false: turn the controllers on, or the simulated provider off"
    )]
    SimulatedProviderWithoutControllers,
}

impl Settings {
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let listen: SocketAddr = self.listen.parse().map_err(|_| ConfigError::Listen {
            value: self.listen.clone(),
        })?;
        let metrics_listen = self
            .metrics_listen
            .as_deref()
            .map(|value| match value.parse::<SocketAddr>() {
                Ok(address) if address != listen => Ok(address),
                _ => Err(ConfigError::MetricsListen {
                    value: value.into(),
                }),
            })
            .transpose()?;
        if !(self.database_url.starts_with("sqlite:")
            || self.database_url.starts_with("postgres://")
            || self.database_url.starts_with("postgresql://"))
        {
            return Err(ConfigError::DatabaseUrl);
        }
        let tls = self.tls()?;
        let raw = self.external_url.clone().unwrap_or_else(|| {
            let scheme = if tls.is_some() { "https" } else { "http" };
            format!("{scheme}://{listen}")
        });
        let bad = |problem| ConfigError::ExternalUrl {
            value: raw.clone(),
            problem,
        };
        let url = Url::parse(&raw).map_err(|_| bad("is not an absolute URL"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("must use http or https"));
        }
        if tls.is_some() && url.scheme() == "http" {
            return Err(bad(
                "must be https when the console serves TLS itself (BANLIEUE_TLS_CERT_FILE)",
            ));
        }
        if url.host().is_none() {
            return Err(bad("has no host"));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
            return Err(bad("must not carry a query, fragment or user info"));
        }
        if url.path() != "/" {
            return Err(bad(
                "must not have a path: the console and its issuer are served at the root",
            ));
        }
        if self.cluster_name.trim().is_empty() {
            return Err(ConfigError::ClusterName);
        }
        let external_url = raw.trim_end_matches('/').to_owned();
        let in_range = |variable, value: u64, range: std::ops::RangeInclusive<u64>, text| {
            if range.contains(&value) {
                Ok(value)
            } else {
                Err(ConfigError::OutOfRange {
                    variable,
                    value,
                    range: text,
                })
            }
        };
        let mut issuer = IssuerConfig::new(external_url.clone());
        issuer.id_token_ttl = Duration::from_secs(
            60 * in_range(
                "BANLIEUE_ID_TOKEN_TTL_MINUTES",
                self.id_token_ttl_minutes,
                1..=15,
                "1–15 minutes",
            )?,
        );
        issuer.refresh_lifetime = Duration::from_secs(
            3600 * in_range(
                "BANLIEUE_REFRESH_TOKEN_LIFETIME_HOURS",
                self.refresh_token_lifetime_hours,
                1..=720,
                "1–720 hours",
            )?,
        );
        let session_lifetime = Duration::from_secs(
            3600 * in_range(
                "BANLIEUE_SESSION_LIFETIME_HOURS",
                self.session_lifetime_hours,
                1..=720,
                "1–720 hours",
            )?,
        );
        let signing_keys = KeyPolicy {
            activation_delay: Duration::from_secs(
                60 * in_range(
                    "BANLIEUE_SIGNING_KEY_ACTIVATION_MINUTES",
                    self.signing_key_activation_minutes,
                    KeyPolicy::MIN_ACTIVATION_DELAY.as_secs().div_ceil(60)..=1440,
                    "1–1440 minutes (at least twice the 30 s for which every replica caches \
                     the signing keys, so each publishes a new key before any signs with it)",
                )?,
            ),
            ..KeyPolicy::default()
        };
        let kube = self.kube_source()?;
        if self.simulated_provider && !self.run_controllers {
            return Err(ConfigError::SimulatedProviderWithoutControllers);
        }
        let shutdown_delay = Duration::from_secs(in_range(
            "BANLIEUE_SHUTDOWN_DELAY_SECONDS",
            self.shutdown_delay_seconds,
            0..=60,
            "0–60 seconds",
        )?);
        Ok(Config {
            simulated_provider: self.simulated_provider || matches!(kube, KubeSource::Dev { .. }),
            shutdown_delay,
            kube: kube.clone(),
            namespace: self.namespace.clone(),
            run_controllers: self.run_controllers,
            claim_ttl_choices: self.claim_ttl_choices()?,
            trusted_proxies: self.trusted_proxies()?,
            issuer,
            signing_keys,
            session_lifetime,
            key_encryption: self.key_encryption()?,
            cluster: self.cluster()?,
            listen,
            metrics_listen,
            database_url: self.database_url.clone(),
            external_origin: url.origin().ascii_serialization(),
            external_url_configured: self.external_url.is_some(),
            https: url.scheme() == "https",
            external_url,
            log_format: self.log_format,
            tls,
            tenants: self.tenants(&kube)?,
        })
    }
}

impl Settings {
    /// The tenants' source, refresh and CA. A setting the source does not use is refused
    /// (a file named while the source is kubernetes would be silently ignored), and the
    /// CA file must hold certificates.
    fn tenants(&self, kube: &KubeSource) -> Result<Option<TenantsConfig>, ConfigError> {
        const FILE: &str = "BANLIEUE_TENANTS_FILE / --tenants-file";
        let unused = |setting, chosen, hint| ConfigError::TenantsSettingUnused {
            setting,
            chosen,
            hint,
        };
        let source = match self.tenants_source {
            TenantsSourceKind::None => {
                let given = [
                    (self.tenants_file.is_some(), FILE),
                    (
                        self.tenants_refresh.is_some(),
                        "BANLIEUE_TENANTS_REFRESH / --tenants-refresh",
                    ),
                    (
                        self.tenants_ca_file.is_some(),
                        "BANLIEUE_TENANTS_CA_FILE / --tenants-ca-file",
                    ),
                ];
                return match given.iter().find(|(set, _)| *set) {
                    Some((_, setting)) => Err(unused(
                        setting,
                        "none",
                        " (the default): set it to kubernetes or file",
                    )),
                    None => Ok(None),
                };
            }
            TenantsSourceKind::Kubernetes => {
                if self.tenants_file.is_some() {
                    return Err(unused(
                        FILE,
                        "kubernetes",
                        ": the ConsoleTenants of the console's namespace are read instead",
                    ));
                }
                if *kube == KubeSource::None {
                    return Err(ConfigError::TenantsWithoutCluster);
                }
                TenantsSource::Kubernetes
            }
            TenantsSourceKind::File => TenantsSource::File(
                self.tenants_file
                    .clone()
                    .ok_or(ConfigError::TenantsFileMissing)?,
            ),
        };
        let seconds = self
            .tenants_refresh
            .unwrap_or(tenants::registry::DEFAULT_REFRESH.as_secs());
        if !(5..=3600).contains(&seconds) {
            return Err(ConfigError::OutOfRange {
                variable: "BANLIEUE_TENANTS_REFRESH",
                value: seconds,
                range: "5–3600 seconds",
            });
        }
        let ca_pem = self
            .tenants_ca_file
            .as_ref()
            .map(|path| {
                let problem = |problem: String| ConfigError::TenantsCaFile {
                    path: path.display().to_string(),
                    problem,
                };
                let pem = std::fs::read_to_string(path).map_err(|e| problem(e.to_string()))?;
                check_certificates(&pem).map_err(problem)?;
                Ok::<_, ConfigError>(pem)
            })
            .transpose()?;
        Ok(Some(TenantsConfig {
            source,
            refresh: Duration::from_secs(seconds),
            ca_pem,
        }))
    }

    /// Both TLS files or neither; a given pair must load (PEM, the key matching the
    /// certificate), so that `check-config` and start-up refuse what `serve` could not use.
    fn tls(&self) -> Result<Option<crate::tls::TlsFiles>, ConfigError> {
        const CERT: &str = "BANLIEUE_TLS_CERT_FILE / --tls-cert-file";
        const KEY: &str = "BANLIEUE_TLS_KEY_FILE / --tls-key-file";
        let files = match (&self.tls_cert_file, &self.tls_key_file) {
            (None, None) => return Ok(None),
            (Some(_), None) => {
                return Err(ConfigError::TlsPair {
                    given: CERT,
                    missing: KEY,
                });
            }
            (None, Some(_)) => {
                return Err(ConfigError::TlsPair {
                    given: KEY,
                    missing: CERT,
                });
            }
            (Some(cert_file), Some(key_file)) => crate::tls::TlsFiles {
                cert_file: cert_file.clone(),
                key_file: key_file.clone(),
            },
        };
        files.load()?;
        Ok(Some(files))
    }

    /// Each entry an IP address (a one-address range) or a CIDR range such as
    /// `10.0.0.0/8` written with its first address (`10.0.0.1/8` is refused rather than
    /// read as either the range or the address); empty entries (an empty variable, a
    /// trailing comma) are skipped.
    fn trusted_proxies(&self) -> Result<Vec<ipnet::IpNet>, ConfigError> {
        self.trusted_proxies
            .iter()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                let net = entry
                    .parse::<ipnet::IpNet>()
                    .or_else(|_| entry.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| ConfigError::TrustedProxies {
                        value: entry.to_owned(),
                    })?;
                if net != net.trunc() {
                    return Err(ConfigError::TrustedProxyHostBits {
                        value: entry.to_owned(),
                        range: net.trunc(),
                        address: ipnet::IpNet::from(net.addr()),
                    });
                }
                Ok(net)
            })
            .collect()
    }

    fn claim_ttl_choices(&self) -> Result<Vec<u32>, ConfigError> {
        let mut choices = self.claim_ttl_choices.clone();
        let allowed = 1..=cluster::crd::MAX_CLAIM_TTL_SECONDS;
        if choices.is_empty() || !choices.iter().all(|ttl| allowed.contains(ttl)) {
            return Err(ConfigError::ClaimTtlChoices);
        }
        choices.sort_unstable();
        choices.dedup();
        Ok(choices)
    }

    /// `BANLIEUE_KUBECONFIG`, else `KUBECONFIG` or a pod's service account, else the dev
    /// cluster when asked for, else none.
    fn kube_source(&self) -> Result<KubeSource, ConfigError> {
        if let Some(path) = &self.kubeconfig {
            return Ok(KubeSource::Kubeconfig(Some(path.clone())));
        }
        let inferable = std::env::var_os("KUBECONFIG").is_some()
            || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
        if inferable {
            return Ok(KubeSource::Kubeconfig(None));
        }
        if self.dev_cluster {
            if !cfg!(feature = "dev-cluster") {
                return Err(ConfigError::DevClusterNotBuilt);
            }
            let listen =
                self.dev_cluster_listen
                    .parse()
                    .map_err(|_| ConfigError::DevClusterListen {
                        value: self.dev_cluster_listen.clone(),
                    })?;
            return Ok(KubeSource::Dev {
                listen,
                dir: self.dev_cluster_dir.clone(),
            });
        }
        Ok(KubeSource::None)
    }

    /// The configured key-encryption key file; with SQLite and none configured,
    /// `key-encryption-key` beside the database, made at first start.
    fn key_encryption(&self) -> Result<KeyEncryptionFiles, ConfigError> {
        let previous = self.previous_key_encryption_key_file.clone();
        if let Some(current) = &self.key_encryption_key_file {
            return Ok(KeyEncryptionFiles {
                current: current.clone(),
                create_if_missing: false,
                previous,
            });
        }
        let beside = banlieue_store::sqlite_file(&self.database_url)
            .ok_or(ConfigError::KeyEncryptionKeyRequired)?;
        Ok(KeyEncryptionFiles {
            current: beside.with_file_name("key-encryption-key"),
            create_if_missing: true,
            previous,
        })
    }

    fn cluster(&self) -> Result<Option<ClusterAccess>, ConfigError> {
        let Some(server) = &self.cluster_server else {
            return Ok(None);
        };
        let valid = Url::parse(server)
            .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some());
        if !valid {
            return Err(ConfigError::ClusterServer {
                value: server.clone(),
            });
        }
        let certificate_authority_pem = match &self.cluster_ca_file {
            None => None,
            Some(path) => {
                let problem = |problem: String| ConfigError::ClusterCaFile {
                    path: path.display().to_string(),
                    problem,
                };
                let pem = std::fs::read_to_string(path).map_err(|e| problem(e.to_string()))?;
                check_certificates(&pem).map_err(problem)?;
                Some(pem)
            }
        };
        Ok(Some(ClusterAccess {
            name: self.cluster_name.clone(),
            server: server.trim_end_matches('/').to_owned(),
            certificate_authority_pem,
        }))
    }
}

/// Checks that `pem` holds at least one certificate, each one a trust anchor rustls can
/// use (what kubectl will make of the kubeconfig's `certificate-authority-data`).
fn check_certificates(pem: &str) -> Result<(), String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let certificate = certificate.map_err(|e| format!("its PEM cannot be read: {e}"))?;
        roots
            .add(certificate)
            .map_err(|e| format!("it holds a certificate that cannot be parsed: {e}"))?;
    }
    if roots.is_empty() {
        return Err("it holds no PEM certificate".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(listen: &str, external: Option<&str>) -> Settings {
        Settings {
            listen: listen.into(),
            metrics_listen: None,
            database_url: "sqlite://data/console.db".into(),
            external_url: external.map(Into::into),
            log_format: LogFormat::Text,
            id_token_ttl_minutes: 5,
            refresh_token_lifetime_hours: 12,
            session_lifetime_hours: 12,
            key_encryption_key_file: None,
            previous_key_encryption_key_file: None,
            signing_key_activation_minutes: 10,
            cluster_server: None,
            cluster_ca_file: None,
            cluster_name: "banlieue".into(),
            kubeconfig: None,
            namespace: "banlieue-system".into(),
            run_controllers: true,
            simulated_provider: false,
            shutdown_delay_seconds: 0,
            dev_cluster: false,
            dev_cluster_listen: "127.0.0.1:6443".into(),
            dev_cluster_dir: "data/dev-cluster".into(),
            claim_ttl_choices: vec![900, 3600, 14400],
            trusted_proxies: Vec::new(),
            tls_cert_file: None,
            tls_key_file: None,
            tenants_source: TenantsSourceKind::None,
            tenants_file: None,
            tenants_refresh: None,
            tenants_ca_file: None,
        }
    }

    #[test]
    fn trusted_proxies_are_addresses_or_ranges_and_empty_entries_are_skipped() {
        let mut given = settings("127.0.0.1:3000", None);
        given.trusted_proxies = vec!["10.0.0.0/8".into(), " 192.0.2.1 ".into(), String::new()];
        let config = given.validate().unwrap();
        let shown: Vec<String> = config
            .trusted_proxies
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(shown, ["10.0.0.0/8", "192.0.2.1/32"]);
        given.trusted_proxies = vec![String::new()];
        assert!(given.validate().unwrap().trusted_proxies.is_empty());
        given.trusted_proxies = vec!["nope".into()];
        let error = given.validate().unwrap_err().to_string();
        assert!(error.starts_with("BANLIEUE_TRUSTED_PROXIES"), "{error}");
        given.trusted_proxies = vec!["10.0.0.1/8".into()];
        let error = given.validate().unwrap_err().to_string();
        assert!(
            error.ends_with("write the range as 10.0.0.0/8, or the one address as 10.0.0.1/32"),
            "{error}"
        );
        given.trusted_proxies = vec!["fd00::1/8".into()];
        let error = given.validate().unwrap_err().to_string();
        assert!(error.contains("fd00::/8"), "{error}");
    }

    #[test]
    fn claim_lifetimes_are_what_a_claim_may_ask_for() {
        let mut given = settings("127.0.0.1:3000", None);
        given.claim_ttl_choices = vec![3600, 900, 3600, 2_592_000];
        assert_eq!(
            given.validate().unwrap().claim_ttl_choices,
            [900, 3600, 2_592_000]
        );
        for refused in [vec![], vec![0, 900], vec![900, 2_592_001]] {
            given.claim_ttl_choices = refused;
            let error = given.validate().unwrap_err().to_string();
            assert!(error.contains("each from 1 to 2592000"), "{error}");
        }
    }

    #[test]
    fn the_metrics_listener_is_optional_and_never_the_console_port() {
        let mut given = settings("127.0.0.1:3000", None);
        assert_eq!(given.validate().unwrap().metrics_listen, None);
        given.metrics_listen = Some("0.0.0.0:9464".into());
        assert_eq!(
            given.validate().unwrap().metrics_listen,
            Some("0.0.0.0:9464".parse().unwrap())
        );
        for bad in ["9464", "localhost:9464", "127.0.0.1:3000"] {
            given.metrics_listen = Some(bad.into());
            let error = given.validate().unwrap_err().to_string();
            assert!(
                error.starts_with("BANLIEUE_METRICS_LISTEN"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn defaults_derive_the_external_url_from_the_listen_address() {
        let config = settings("127.0.0.1:3000", None).validate().unwrap();
        assert_eq!(config.external_url, "http://127.0.0.1:3000");
        assert_eq!(config.external_origin, "http://127.0.0.1:3000");
        assert!(!config.https);
    }

    #[test]
    fn external_url_is_kept_byte_for_byte_but_without_trailing_slash() {
        let config = settings("0.0.0.0:80", Some("https://console.example.com/"))
            .validate()
            .unwrap();
        assert_eq!(config.external_url, "https://console.example.com");
        assert_eq!(config.external_origin, "https://console.example.com");
        assert!(config.https);
    }

    #[test]
    fn bad_settings_name_the_variable() {
        let err = settings("localhost", None).validate().unwrap_err();
        assert!(err.to_string().contains("BANLIEUE_LISTEN"), "{err}");
        for bad in [
            "console.example.com",
            "ftp://x",
            "https://x/?a=b",
            "https://u:p@x",
            "https://console.example.com/banlieue/",
        ] {
            let err = settings("127.0.0.1:3000", Some(bad))
                .validate()
                .unwrap_err();
            assert!(err.to_string().contains("BANLIEUE_EXTERNAL_URL"), "{err}");
        }
        let mut s = settings("127.0.0.1:3000", None);
        s.database_url = "mysql://x".into();
        assert!(matches!(s.validate(), Err(ConfigError::DatabaseUrl)));
        let mut s = settings("127.0.0.1:3000", None);
        s.id_token_ttl_minutes = 16;
        let err = s.validate().unwrap_err();
        assert!(
            err.to_string().contains("BANLIEUE_ID_TOKEN_TTL_MINUTES"),
            "{err}"
        );
        let mut s = settings("127.0.0.1:3000", None);
        s.database_url = "postgres://console@db/console".into();
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("BANLIEUE_KEY_ENCRYPTION_KEY_FILE"), "{err}");
        s.key_encryption_key_file = Some("/run/secrets/kek".into());
        assert_eq!(
            s.validate().unwrap().key_encryption.current,
            std::path::PathBuf::from("/run/secrets/kek")
        );
        let sqlite = settings("127.0.0.1:3000", None).validate().unwrap();
        assert_eq!(
            sqlite.key_encryption.current,
            std::path::PathBuf::from("data/key-encryption-key"),
            "beside the SQLite database by default"
        );
        for hours in [0, 721] {
            let mut s = settings("127.0.0.1:3000", None);
            s.session_lifetime_hours = hours;
            let err = s.validate().unwrap_err().to_string();
            assert!(
                err.contains("BANLIEUE_SESSION_LIFETIME_HOURS") && err.contains("1–720 hours"),
                "{err}"
            );
        }
        let mut s = settings("127.0.0.1:3000", None);
        s.session_lifetime_hours = 720;
        assert_eq!(
            s.validate().unwrap().session_lifetime,
            Duration::from_secs(720 * 3600)
        );
        let mut s = settings("127.0.0.1:3000", None);
        s.signing_key_activation_minutes = 0;
        let err = s.validate().unwrap_err().to_string();
        assert!(
            err.contains("BANLIEUE_SIGNING_KEY_ACTIVATION_MINUTES") && err.contains("1–1440"),
            "{err}"
        );
        assert_eq!(
            KeyPolicy::MIN_ACTIVATION_DELAY,
            Duration::from_secs(60),
            "the bound in the message"
        );
        let mut s = settings("127.0.0.1:3000", None);
        s.cluster_server = Some("k8s:6443".into());
        assert!(matches!(
            s.validate(),
            Err(ConfigError::ClusterServer { .. })
        ));
        s.cluster_server = Some("https://k8s.example:6443".into());
        s.cluster_ca_file = Some("/nonexistent/ca.pem".into());
        let err = s.validate().unwrap_err();
        assert!(
            err.to_string().contains("BANLIEUE_CLUSTER_CA_FILE"),
            "{err}"
        );
    }

    #[test]
    fn the_cluster_ca_must_hold_certificates_that_parse() {
        let placeholder = "-----BEGIN CERTIFICATE-----\n\
            MIIBdzCCAR2gAwIBAgIUEXAMPLEEXAMPLEEXAMPLEEXAMPLEwCgYIKoZIzj0EAwIw\n\
            -----END CERTIFICATE-----\n";
        let problem = check_certificates(placeholder).unwrap_err();
        assert!(problem.starts_with("its PEM cannot be read"), "{problem}");
        let not_a_certificate = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let problem = check_certificates(not_a_certificate).unwrap_err();
        assert!(
            problem.starts_with("it holds a certificate that cannot be parsed"),
            "{problem}"
        );
        assert_eq!(
            check_certificates("no pem here").unwrap_err(),
            "it holds no PEM certificate"
        );
        let ca = rcgen::generate_simple_self_signed(vec!["k8s.example".into()]).unwrap();
        check_certificates(&ca.cert.pem()).unwrap();
    }

    #[test]
    fn the_simulated_provider_runs_with_the_controllers_or_the_dev_cluster() {
        for (args, on) in [
            (&["controllers", "--simulated-provider"][..], true),
            (&["--simulated-provider=true", "serve"], true),
            (&["--simulated-provider=false"], false),
            (&[], false),
        ] {
            let cli = Cli::try_parse_from(
                std::iter::once("banlieue-console").chain(args.iter().copied()),
            )
            .unwrap();
            assert_eq!(cli.settings.simulated_provider, on, "{args:?}");
        }
        let mut s = settings("127.0.0.1:3000", None);
        assert!(!s.validate().unwrap().simulated_provider, "off by default");
        s.simulated_provider = true;
        assert!(s.validate().unwrap().simulated_provider);
        s.run_controllers = false;
        let err = s.validate().unwrap_err().to_string();
        assert!(
            err.contains("BANLIEUE_SIMULATED_PROVIDER") && err.contains("BANLIEUE_RUN_CONTROLLERS"),
            "{err}"
        );
        let mut s = settings("127.0.0.1:3000", None);
        s.dev_cluster = true;
        if cfg!(feature = "dev-cluster") {
            assert!(s.validate().unwrap().simulated_provider, "the demo pool's");
        }
    }

    #[test]
    fn the_shutdown_delay_is_zero_to_sixty_seconds() {
        let mut s = settings("127.0.0.1:3000", None);
        assert_eq!(s.validate().unwrap().shutdown_delay, Duration::ZERO);
        s.shutdown_delay_seconds = 60;
        assert_eq!(
            s.validate().unwrap().shutdown_delay,
            Duration::from_secs(60)
        );
        s.shutdown_delay_seconds = 61;
        let err = s.validate().unwrap_err().to_string();
        assert!(
            err.contains("BANLIEUE_SHUTDOWN_DELAY_SECONDS") && err.contains("0–60"),
            "{err}"
        );
    }
}
