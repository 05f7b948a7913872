//! Certificates: decode PEM/DER, verify a served chain the way Go's crypto/x509 would report it, and
//! generate test PKI with fixed clocks.
//!
//! Three users share this module: raw import and live collection (what does this caBundle hold, does
//! the served chain verify for `<svc>.<ns>.svc`?), and the reference server, whose aggregator and
//! admission clients must fail with the same words kube-apiserver prints. Keeping the Go wording in one
//! place is what lets rules match on `x509: certificate signed by unknown authority` whether the text
//! came from a real cluster, the reference server, or extpath's own handshake.
//!
//! It knows nothing of bundles or rules.

mod decode;
pub mod generate;
mod verify;

pub use decode::{CertInfo, PemError, decode_der, decode_pem, der_to_pem, pem_certificates};
pub(crate) use verify::hostname_text;
pub use verify::{VerifyError, verify_server_chain};
