//! What a broker checks before it trusts a sandbox's vTPM (claim design seed, section 6):
//! that each EK certificate a bound member publishes chains to a CA of its provider's
//! `spec.attestation.ekTrustBundle`.
//!
//! Certificates are read with `x509-parser` (fingerprint, issuer, identities) and their
//! paths checked with `rustls-webpki` (RFC 5280 path building: signatures, validity at the
//! given instant, CA basic constraints, and TCG's EK certificate extended key usage when
//! the certificate lists any). The claim controller writes the verdict as the claim's
//! [`ENDORSEMENT_VERIFIED_CONDITION`](crate::crd::ENDORSEMENT_VERIFIED_CONDITION); the
//! console's claim page shows it per certificate.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, TrustAnchor, UnixTime};
use time::OffsetDateTime;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// How a banlieue VM is named in its EK certificate's subject alternative name:
/// `urn:banlieue:vm:<namespace>:<name>:<uid>`.
pub const VM_IDENTITY_PREFIX: &str = "urn:banlieue:vm:";

/// The URI naming the VM `namespace/name` with `uid` in its EK certificate.
pub fn vm_identity(namespace: &str, name: &str, uid: &str) -> String {
    format!("{VM_IDENTITY_PREFIX}{namespace}:{name}:{uid}")
}

/// DER value of TCG's `tcg-kp-EKCertificate` extended key usage, 2.23.133.8.1 (TCG EK
/// Credential Profile, section 3.2.16).
pub const TCG_KP_EK_CERTIFICATE: &[u8] = &[0x67, 0x81, 0x05, 0x08, 0x01];

/// The most refused entries a verdict's message names (then "and N more").
const MAX_REPORTED_FAILURES: usize = 3;

/// Claim condition reasons of `EndorsementVerified`.
pub mod reason {
    /// `True`: every EK certificate chains to the provider's trust bundle.
    pub const CHAINS_TO_TRUST_BUNDLE: &str = "ChainsToTrustBundle";
    /// The bound member publishes no EK certificate.
    pub const NO_CERTIFICATE: &str = "NoEndorsementCertificate";
    /// The member's `providerRef` names no `VirtualMachineProvider`.
    pub const PROVIDER_NOT_FOUND: &str = "ProviderNotFound";
    /// The provider has no (readable) `spec.attestation.ekTrustBundle`.
    pub const NO_TRUST_BUNDLE: &str = "NoTrustBundle";
    /// A certificate is unreadable, names another VM, or does not chain to the bundle.
    pub const UNTRUSTED: &str = "UntrustedCertificate";
}

/// Why a certificate or bundle cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttestationError {
    /// Not one PEM `CERTIFICATE` block holding an X.509 certificate.
    #[error("not a PEM X.509 certificate: {0}")]
    Unreadable(String),
    /// The trust bundle holds no usable CA certificate.
    #[error("the trust bundle holds no CA certificate: {0}")]
    NoTrustAnchor(String),
    /// The certificate does not chain to any CA of the bundle (the path-validation error).
    #[error("does not chain to the trust bundle: {0}")]
    Untrusted(String),
}

/// One EK certificate as a person or broker reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndorsementCertificate {
    der: CertificateDer<'static>,
    /// SHA-256 of the DER certificate, upper-case hex in colon-separated pairs (as
    /// `openssl x509 -fingerprint -sha256` prints it).
    pub fingerprint_sha256: String,
    /// The issuer's distinguished name as x509-parser prints it (`CN=…, O=…`, in the
    /// certificate's order).
    pub issuer: String,
    /// The subject alternative names that are URIs: the VM's identity.
    pub identities: Vec<String>,
}

impl EndorsementCertificate {
    /// Reads exactly one PEM `CERTIFICATE` block and nothing else: its BEGIN line, base64
    /// lines, its END line, and only whitespace around them (what is mirrored is
    /// [`EndorsementCertificate::to_pem`], so nothing else, such as a key, ever is).
    ///
    /// Errors: [`AttestationError::Unreadable`].
    pub fn from_pem(pem: &str) -> Result<Self, AttestationError> {
        let lines: Vec<&str> = pem.trim().lines().map(str::trim).collect();
        let base64 = |line: &&str| {
            !line.is_empty()
                && line
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        };
        let one_block = lines.len() >= 3
            && lines[0] == "-----BEGIN CERTIFICATE-----"
            && lines[lines.len() - 1] == "-----END CERTIFICATE-----"
            && lines[1..lines.len() - 1].iter().all(base64);
        if !one_block {
            return Err(AttestationError::Unreadable(
                "not exactly one PEM CERTIFICATE block".into(),
            ));
        }
        let der = CertificateDer::from_pem_slice(pem.as_bytes())
            .map_err(|e| AttestationError::Unreadable(e.to_string()))?;
        let (rest, parsed) = X509Certificate::from_der(&der)
            .map_err(|e| AttestationError::Unreadable(e.to_string()))?;
        if !rest.is_empty() {
            return Err(AttestationError::Unreadable(
                "bytes after the certificate".into(),
            ));
        }
        // An unreadable subject alternative name must not pass for naming no VM.
        let identities = parsed
            .subject_alternative_name()
            .map_err(|e| AttestationError::Unreadable(format!("subject alternative name: {e}")))?
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|name| match name {
                        GeneralName::URI(uri) => Some((*uri).to_owned()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let issuer = parsed.issuer().to_string();
        Ok(Self {
            fingerprint_sha256: fingerprint(&der),
            issuer,
            identities,
            der: der.into_owned(),
        })
    }
}

impl EndorsementCertificate {
    /// The certificate as PEM, encoded again from its DER (64 base64 characters a line).
    pub fn to_pem(&self) -> String {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(&self.der);
        let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
        for line in encoded.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap_or_default());
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        pem
    }

    /// Why this certificate is not `identity`'s (the member's [`vm_identity`]) or does not
    /// chain to `bundle` at `now`, if it is not: a certificate naming another banlieue VM
    /// was copied from elsewhere; one naming none (a real vendor's EK) is judged by its
    /// chain alone.
    pub fn refusal(
        &self,
        identity: &str,
        bundle: &TrustBundle,
        now: OffsetDateTime,
    ) -> Option<String> {
        // `urn:` and the namespace id compare without case (RFC 8141).
        let names_a_vm = |uri: &str| {
            uri.get(..VM_IDENTITY_PREFIX.len())
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case(VM_IDENTITY_PREFIX))
        };
        if let Some(other) = self
            .identities
            .iter()
            .find(|uri| names_a_vm(uri) && *uri != identity)
        {
            return Some(format!("names another VirtualMachine ({other})"));
        }
        bundle
            .verify(self, now)
            .err()
            .map(|error| error.to_string())
    }
}

/// The CA certificates of a provider's `ekTrustBundle`, as trust anchors.
#[derive(Debug)]
pub struct TrustBundle {
    anchors: Vec<TrustAnchor<'static>>,
}

impl TrustBundle {
    /// Reads every PEM `CERTIFICATE` block of `pem` (blocks of other kinds are skipped).
    /// A malformed certificate block makes the whole bundle unusable: a broken bundle
    /// fails closed, and the condition says why.
    ///
    /// Errors: [`AttestationError::NoTrustAnchor`] when a certificate block is malformed
    /// or there is none.
    pub fn from_pem(pem: &str) -> Result<Self, AttestationError> {
        let mut anchors = Vec::new();
        for der in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let der = der.map_err(|e| AttestationError::NoTrustAnchor(e.to_string()))?;
            let anchor = webpki::anchor_from_trusted_cert(&der)
                .map_err(|e| AttestationError::NoTrustAnchor(format!("{e:?}")))?;
            anchors.push(anchor.to_owned());
        }
        if anchors.is_empty() {
            return Err(AttestationError::NoTrustAnchor(
                "no PEM CERTIFICATE block".into(),
            ));
        }
        Ok(Self { anchors })
    }

    /// Whether `certificate` chains to one of the anchors at `now`.
    ///
    /// Errors: [`AttestationError::Untrusted`] with webpki's reason (unknown issuer, bad
    /// signature, expired, not yet valid, wrong extended key usage, …).
    pub fn verify(
        &self,
        certificate: &EndorsementCertificate,
        now: OffsetDateTime,
    ) -> Result<(), AttestationError> {
        let untrusted = |e: webpki::Error| AttestationError::Untrusted(format!("{e:?}"));
        let end_entity = webpki::EndEntityCert::try_from(&certificate.der).map_err(untrusted)?;
        let seconds = u64::try_from(now.unix_timestamp()).unwrap_or_default();
        end_entity
            .verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                &self.anchors,
                &[],
                UnixTime::since_unix_epoch(std::time::Duration::from_secs(seconds)),
                webpki::KeyUsage::required_if_present(TCG_KP_EK_CERTIFICATE),
                None,
                None,
            )
            .map(drop)
            .map_err(untrusted)
    }
}

/// The verdict on a bound member's EK certificates: `(trusted, reason, message)` for the
/// claim's `EndorsementVerified` condition. `identity` is the member's
/// [`vm_identity`]: a certificate naming another banlieue VM is not its own (one copied
/// from elsewhere), while certificates naming no banlieue VM (a real vendor's EK) are
/// judged by their chain alone. `bundle` is the provider's `spec.attestation.ekTrustBundle`,
/// `None` when the provider has none; `provider` is its name, `provider_found` whether it
/// exists.
pub fn verdict(
    certificates: &[String],
    identity: &str,
    provider: &str,
    provider_found: bool,
    bundle: Option<&str>,
    now: OffsetDateTime,
) -> (bool, &'static str, String) {
    if certificates.is_empty() {
        return (
            false,
            reason::NO_CERTIFICATE,
            "the VirtualMachine publishes no EK certificate".into(),
        );
    }
    if !provider_found {
        return (
            false,
            reason::PROVIDER_NOT_FOUND,
            format!("VirtualMachineProvider {provider} does not exist"),
        );
    }
    let bundle = match bundle.map(TrustBundle::from_pem) {
        None => {
            return (
                false,
                reason::NO_TRUST_BUNDLE,
                format!("VirtualMachineProvider {provider} has no spec.attestation.ekTrustBundle"),
            );
        }
        Some(Err(error)) => {
            return (
                false,
                reason::NO_TRUST_BUNDLE,
                format!("VirtualMachineProvider {provider}: {error}"),
            );
        }
        Some(Ok(bundle)) => bundle,
    };
    let failure = |pem: &String| -> Option<String> {
        let certificate = match EndorsementCertificate::from_pem(pem) {
            Ok(certificate) => certificate,
            Err(error) => return Some(error.to_string()),
        };
        let fingerprint = &certificate.fingerprint_sha256;
        certificate
            .refusal(identity, &bundle, now)
            .map(|why| format!("SHA-256 {fingerprint} {why}"))
    };
    let mut failures: Vec<String> = certificates
        .iter()
        .enumerate()
        .filter_map(|(n, pem)| {
            failure(pem).map(|why| format!("entry {} of tpmEndorsementCertificates: {why}", n + 1))
        })
        .collect();
    // However many entries a VM's status holds, the condition stays small.
    if failures.len() > MAX_REPORTED_FAILURES {
        let more = failures.len() - MAX_REPORTED_FAILURES;
        failures.truncate(MAX_REPORTED_FAILURES);
        failures.push(format!("and {more} more"));
    }
    if failures.is_empty() {
        (
            true,
            reason::CHAINS_TO_TRUST_BUNDLE,
            format!(
                "{} EK certificate(s) chain to the ekTrustBundle of VirtualMachineProvider \
                 {provider}",
                certificates.len()
            ),
        )
    } else {
        (
            false,
            reason::UNTRUSTED,
            format!(
                "{} (VirtualMachineProvider {provider})",
                failures.join("; ")
            ),
        )
    }
}

/// SHA-256 of `der` as `AB:CD:…`.
fn fingerprint(der: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
    digest
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ek_authority::EkAuthority;

    #[test]
    fn the_verdict_names_what_is_missing_or_wrong() {
        let now = OffsetDateTime::now_utc();
        let ca = EkAuthority::generate(now).unwrap();
        let other = EkAuthority::generate(now).unwrap();
        let good = ca.issue("urn:vm", now).unwrap();
        let forged = other.issue("urn:vm", now).unwrap();
        let bundle = Some(ca.certificate_pem());
        let case = |certs: &[String], found: bool, bundle: Option<&str>| {
            verdict(certs, "urn:vm", "sim", found, bundle, now)
        };
        let only_good = std::slice::from_ref(&good);
        assert_eq!(case(&[], true, bundle).1, reason::NO_CERTIFICATE);
        assert_eq!(case(only_good, false, bundle).1, reason::PROVIDER_NOT_FOUND);
        assert_eq!(case(only_good, true, None).1, reason::NO_TRUST_BUNDLE);
        assert_eq!(
            case(only_good, true, Some("junk")).1,
            reason::NO_TRUST_BUNDLE
        );
        let (trusted, reason, message) = case(only_good, true, bundle);
        assert!(trusted, "{message}");
        assert_eq!(reason, reason::CHAINS_TO_TRUST_BUNDLE);
        let (trusted, reason, message) = case(&[good.clone(), forged.clone()], true, bundle);
        assert!(!trusted);
        assert_eq!(reason, reason::UNTRUSTED);
        let forged_fingerprint = EndorsementCertificate::from_pem(&forged)
            .unwrap()
            .fingerprint_sha256;
        assert!(
            message.starts_with("entry 2 of tpmEndorsementCertificates: SHA-256 ")
                && message.contains(&forged_fingerprint),
            "{message}"
        );
        let (trusted, _, message) = case(&["not a certificate".into()], true, bundle);
        assert!(
            !trusted && message.contains("not a PEM X.509 certificate"),
            "{message}"
        );
        // Many bad entries: the message names three and counts the rest.
        let junk: Vec<String> = std::iter::repeat_n(String::new(), 500).collect();
        let (_, _, message) = case(&junk, true, bundle);
        assert!(
            message.len() < 1_000 && message.contains("and 497 more"),
            "{message}"
        );
        // A banlieue URI in another case names a VM all the same.
        let shouted = ca.issue("URN:BANLIEUE:VM:ns:other:u2", now).unwrap();
        assert_eq!(case(&[shouted], true, bundle).1, reason::UNTRUSTED);
        // A bundle with a rotated-out CA beside the current one still verifies.
        let both = format!("{}{}", other.certificate_pem(), ca.certificate_pem());
        assert!(case(only_good, true, Some(&both)).0);
        // Another banlieue VM's certificate, even of the right CA, is not this one's.
        let elsewhere = ca.issue(&vm_identity("ns", "other", "u2"), now).unwrap();
        let (trusted, reason, message) = case(&[elsewhere], true, bundle);
        assert!(!trusted && reason == reason::UNTRUSTED, "{message}");
        assert!(
            message.contains("names another VirtualMachine (urn:banlieue:vm:ns:other:u2)"),
            "{message}"
        );
        let mine = ca.issue(&vm_identity("ns", "mine", "u1"), now).unwrap();
        let (trusted, _, message) = verdict(
            &[mine],
            &vm_identity("ns", "mine", "u1"),
            "sim",
            true,
            bundle,
            now,
        );
        assert!(trusted, "{message}");
    }

    #[test]
    fn a_certificate_entry_is_one_certificate_block_and_nothing_else() {
        let now = OffsetDateTime::now_utc();
        let ca = EkAuthority::generate(now).unwrap();
        let good = ca.issue("urn:vm", now).unwrap();
        let key =
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n";
        for bad in [
            format!("{key}{good}"),
            format!("{good}{key}"),
            format!("{good}{good}"),
            key.to_owned(),
            String::new(),
        ] {
            assert!(EndorsementCertificate::from_pem(&bad).is_err(), "{bad}");
        }
        // A key hidden inside what looks like one block, or after its END line.
        let body: Vec<&str> = good.lines().collect();
        let hidden = format!(
            "{}\nPRIVATE KEY MC4CAQAwBQYDK2VwBCIEIA==\n{}\n",
            body[..body.len() - 1].join("\n"),
            body[body.len() - 1]
        );
        assert!(EndorsementCertificate::from_pem(&hidden).is_err());
        let lower = format!("{good}-----begin private key-----\nMC4=\n-----end private key-----\n");
        assert!(EndorsementCertificate::from_pem(&lower).is_err());
        // A subject alternative name x509-parser cannot read (a URI naming another VM, then
        // a UTF8String): unreadable, not "names no VM".
        let unreadable_san = "-----BEGIN CERTIFICATE-----\nMIIBsDCCAVagAwIBAgIUBevPMAdy0b2sn3hPeHoucJZOIiMwCgYIKoZIzj0EAwIw\nFzEVMBMGA1UEAwwMcmV2aWV3IEVLIENBMB4XDTI2MTIwMTIxMzIxNloXDTI2MTIw\nMTIyMzcxNlowFjEUMBIGA1UEAwwLcmV2aWV3IHZUUE0wWTATBgcqhkjOPQIBBggq\nhkjOPQMBBwNCAAROYkVO/DfWbJDrkSdAuo8ajAG5RzBgcZJ2h0y1nW3e3J4B95v3\nLKy4qZqkJp0QVzqeH90mfJydMWI0oEKX3Yyjo4GAMH4wDwYDVR0PAQH/BAUDAwcI\nADAQBgNVHSUECTAHBgVngQUIATAdBgNVHQ4EFgQUzB8gedCCbgxYnx/Mwz0y4MzN\n9wIwDwYDVR0TAQH/BAUwAwEBADApBgNVHREEIjAghht1cm46YmFubGlldWU6dm06\nbnM6b3RoZXI6dTIMAXgwCgYIKoZIzj0EAwIDSAAwRQIgdQ1XuirMcrnHKhc4iahz\nAuU9OXAhF3OxNrI3CPbpt68CIQCdzqkfBYKiLxop1fedxZgrEJUN7f0uryTZMLgy\nbxcfTA==\n-----END CERTIFICATE-----\n";
        assert!(EndorsementCertificate::from_pem(unreadable_san).is_err());
        let certificate = EndorsementCertificate::from_pem(&format!("\n{good}\n")).unwrap();
        assert_eq!(certificate.to_pem(), good, "PEM encoded again from the DER");
    }

    #[test]
    fn the_fingerprint_is_sha256_of_the_der_in_colon_pairs() {
        let now = OffsetDateTime::now_utc();
        let pem = EkAuthority::generate(now)
            .unwrap()
            .issue("urn:vm", now)
            .unwrap();
        let certificate = EndorsementCertificate::from_pem(&pem).unwrap();
        // RustCrypto's SHA-256, independent of the aws-lc-rs digest the code uses.
        use sha2::Digest;
        let expected = sha2::Sha256::digest(&certificate.der);
        let hex: String = certificate.fingerprint_sha256.split(':').collect();
        assert_eq!(certificate.fingerprint_sha256.len(), 32 * 3 - 1);
        assert_eq!(
            hex,
            expected
                .iter()
                .map(|b| format!("{b:02X}"))
                .collect::<String>()
        );
    }
}
