//! PEM certificate files (served chains, caBundles, CA files) and the openssl output around them.
//!
//! Every `CERTIFICATE` block becomes a bundle certificate with origin `file`; a certificate that
//! several files hold (a served chain saved twice) is kept once. Other PEM blocks — private keys
//! above all — are never decoded and never copied: a file of keys only is recorded as skipped,
//! with no part of its content. The DER of each file is kept aside so that a served leaf can be
//! verified against the caBundle of the object it belongs to once everything is read
//! (`cert_check.rs`).
//!
//! `openssl x509 -text|-subject|-dates` and `openssl s_client`/`verify` output is a known kind:
//! its facts are the certificate's own, read from the PEM, so it is consumed without adding to the
//! bundle.

use crate::bundle::certs::CertSource;
use crate::bundle::{CertOrigin, Certificate};

use super::state::{CertChainFile, FileCtx, FileError, Importer, Yield};

/// Read a file with PEM blocks.
pub(crate) fn read(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    check_blocks(text)?;
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Ok(Yield::Nothing(
            "PEM without certificates (private keys are ignored and never imported)".into(),
        ));
    }
    let decoded = crate::pki::decode_pem(text.as_bytes())
        .map_err(|e| FileError::whole(format!("malformed PEM: {e}")))?;
    // `openssl s_client -showcerts` prints what the server presented: served evidence. Any other
    // PEM file only says that someone kept a certificate.
    let source = if is_s_client_output(text) {
        CertSource::ServedChain
    } else {
        CertSource::File
    };
    let mut chain = CertChainFile {
        cert_indexes: Vec::new(),
        ders: Vec::new(),
    };
    for (i, (info, der)) in decoded.into_iter().enumerate() {
        let existing = imp
            .bundle
            .certificates
            .iter()
            .position(|c| c.sha256 == info.sha256 && c.origin.source == source);
        let index = match existing {
            Some(index) => index,
            None => {
                imp.bundle.certificates.push(Certificate::from_info(
                    info,
                    CertOrigin {
                        source,
                        owner: None,
                        file: Some(file.shown.clone()),
                        endpoint: None,
                        chain_index: i,
                    },
                ));
                imp.bundle.certificates.len() - 1
            }
        };
        chain.cert_indexes.push(index);
        chain.ders.push(der);
    }
    imp.cert_files.push(chain);
    Ok(Yield::Used)
}

/// Every `BEGIN` has its `END` of the same label, in order: a truncated copy-paste is an error
/// naming the line where the unterminated block starts.
fn check_blocks(text: &str) -> Result<(), FileError> {
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(label) = t
            .strip_prefix("-----BEGIN ")
            .and_then(|r| r.strip_suffix("-----"))
        {
            if let Some((at, l)) = &open {
                return Err(FileError::at(
                    *at,
                    format!("truncated PEM: the {l} block has no END line"),
                ));
            }
            open = Some((i + 1, label.to_string()));
        } else if let Some(label) = t
            .strip_prefix("-----END ")
            .and_then(|r| r.strip_suffix("-----"))
        {
            match &open {
                Some((_, l)) if l == label => open = None,
                _ => {
                    return Err(FileError::at(
                        i + 1,
                        format!("malformed PEM: END {label} without a matching BEGIN"),
                    ));
                }
            }
        } else if t.starts_with("-----BEGIN") {
            return Err(FileError::at(i + 1, "malformed PEM: broken BEGIN line"));
        }
    }
    match open {
        Some((at, l)) => Err(FileError::at(
            at,
            format!("truncated PEM: the {l} block has no END line"),
        )),
        None => Ok(()),
    }
}

/// `openssl s_client` output: the connection and the chain the server presented.
fn is_s_client_output(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("CONNECTED(") || l == "Certificate chain" || l == "Server certificate"
    })
}

/// Lines only openssl prints (`x509 -text|-subject|-dates`, `s_client`, `verify`).
pub(crate) fn is_openssl_output(lines: &[&str]) -> bool {
    const STRONG: &[&str] = &[
        "Verify return code:",
        "verify error:num=",
        "verify return:",
        "CONNECTED(",
        "Certificate chain",
        "Signature Algorithm:",
        "X509v3 Subject Alternative Name",
    ];
    const FIELD: &[&str] = &["subject=", "issuer=", "notBefore=", "notAfter=", "serial="];
    if lines
        .iter()
        .any(|l| STRONG.iter().any(|s| l.trim_start().starts_with(s)))
    {
        return true;
    }
    let fields = lines
        .iter()
        .filter(|l| FIELD.iter().any(|f| l.starts_with(f)))
        .count();
    let verify_ok = lines
        .iter()
        .any(|l| l.ends_with(": OK") || l.contains(" depth lookup:"));
    fields >= 2 || verify_ok
}
