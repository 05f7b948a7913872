//! `version`: what is running, as `kubectl version` says it — this client's version, the rules it
//! carries (how many are bundled, the rule schema and the document versions it reads and writes),
//! and the API server's version when it can be reached with the usual connection flags.
//!
//! An API server that cannot be reached, or no kubeconfig at all, is not an error here: `version`
//! is what people run to find out what they have, so it says what it could not learn and exits 0.
//! A kubeconfig or flag file that cannot be read is still an input error (exit 2), as everywhere.

use std::io::Write;

use clap::Args;
use serde::Serialize;

use super::EXIT_OK;
use super::kube_flags::KubeFlags;
use crate::collect::{ConnectError, Fetcher, connect};

/// Output of `version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VersionFormat {
    /// `Client Version: …` lines.
    Text,
    /// JSON (`clientVersion`, `rules`, `serverVersion`).
    Json,
    /// The same as YAML.
    Yaml,
}

/// Arguments of `version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Only this client and its rules: do not contact the API server.
    #[arg(long)]
    client: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: VersionFormat,
    #[command(flatten)]
    kube: KubeFlags,
}

/// The `version` document.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Versions {
    client_version: ClientVersion,
    rules: RulesVersion,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_version: Option<serde_json::Value>,
    /// Why there is no server version (unreachable, no kubeconfig); absent with --client.
    #[serde(skip_serializing_if = "Option::is_none")]
    server_error: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ClientVersion {
    git_version: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RulesVersion {
    /// Rules built into this binary.
    bundled: usize,
    /// The `schema:` every rule file declares.
    schema: &'static str,
    /// `apiVersion` of evidence bundles read and written.
    bundle_api_version: &'static str,
    /// `apiVersion` of Diagnosis documents (`-o json`) and waivers files.
    diagnosis_api_version: &'static str,
}

/// The API server's `/version`, or why it is not known.
async fn server_version(kube: &KubeFlags) -> anyhow::Result<Result<serde_json::Value, String>> {
    let conn = match connect(&kube.connect_options()).await {
        Ok(c) => c,
        Err(ConnectError::NoConfig) => return Ok(Err(ConnectError::NoConfig.to_string())),
        Err(e) => return Err(super::input_error(e)),
    };
    let fetcher = Fetcher::new(conn.client.clone(), kube.request_timeout);
    Ok(match fetcher.get_json("/version").await {
        Ok(v) => Ok(v),
        Err(e) if e.is_unreachable() => Err(crate::collect::tls_words::unreachable_message(
            &conn.server,
            &e.to_string(),
        )),
        Err(e) => Err(format!("{}: GET /version: {e}", conn.server)),
    })
}

pub fn run(args: VersionArgs) -> anyhow::Result<u8> {
    let rules = crate::engine::rules::bundled_sources().len();
    let mut doc = Versions {
        client_version: ClientVersion {
            git_version: format!("v{}", crate::VERSION),
        },
        rules: RulesVersion {
            bundled: rules,
            schema: crate::engine::facts::SCHEMA,
            bundle_api_version: crate::bundle::API_VERSION,
            diagnosis_api_version: crate::engine::DIAGNOSIS_API_VERSION,
        },
        server_version: None,
        server_error: None,
    };
    if !args.client {
        let rt = tokio::runtime::Runtime::new()?;
        match rt.block_on(server_version(&args.kube))? {
            Ok(v) => doc.server_version = Some(v),
            Err(why) => doc.server_error = Some(why),
        }
    }
    let mut out = std::io::stdout().lock();
    match args.output {
        VersionFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?,
        VersionFormat::Yaml => write!(out, "{}", serde_saphyr::to_string(&doc)?)?,
        VersionFormat::Text => {
            writeln!(out, "Client Version: {}", doc.client_version.git_version)?;
            writeln!(
                out,
                "Rules: {} bundled (schema {}); bundles {}, diagnoses {}",
                doc.rules.bundled,
                doc.rules.schema,
                doc.rules.bundle_api_version,
                doc.rules.diagnosis_api_version
            )?;
            if let Some(v) = &doc.server_version {
                let git = v
                    .get("gitVersion")
                    .and_then(|g| g.as_str())
                    .unwrap_or("unknown");
                writeln!(out, "Server Version: {git}")?;
            }
            if let Some(why) = &doc.server_error {
                writeln!(out, "Server Version: not available: {why}")?;
            }
        }
    }
    Ok(EXIT_OK)
}
