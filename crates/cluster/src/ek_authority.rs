//! The simulated hypervisor's EK certificate authority: what a real provider's vTPM
//! manufacturer or hypervisor does, so the simulated provider's VMs carry EK certificates
//! a broker can check (claim design seed, section 6).
//!
//! The CA is an ECDSA P-256 key and self-signed certificate, made once and kept in the
//! `kubernetes.io/tls` Secret [`EK_CA_SECRET`] of the console's namespace; every replica
//! and restart signs with the same CA. Each VM gets an EK certificate as the TCG EK
//! Credential Profile shapes one: a P-256 key (TCG's ECC EK), key usage
//! `keyAgreement`, extended key usage `tcg-kp-EKCertificate`, not a CA, and the VM's
//! identity as a URI subject alternative name. The EK private key would live in the vTPM
//! and never leave it; here it is dropped at once.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
    SerialNumber,
};
use time::{Duration, OffsetDateTime};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::error::{Error, is_status};

/// Name of the Secret (in the console's namespace) holding the simulated EK CA.
pub const EK_CA_SECRET: &str = "banlieue-simulated-ek-ca";
/// The CA certificate's subject.
const CA_COMMON_NAME: &str = "banlieue simulated hypervisor EK CA";
const CA_ORGANIZATION: &str = "banlieue";
/// The EK certificates' subject (the VM's identity is in the subject alternative name).
const EK_COMMON_NAME: &str = "banlieue simulated vTPM";
/// How long the CA is valid; every EK certificate ends with it.
const CA_LIFETIME: Duration = Duration::days(30 * 365);
/// Validity starts this long before issue, for clocks a little behind.
const CLOCK_SKEW: Duration = Duration::minutes(5);
/// `tcg-kp-EKCertificate`, 2.23.133.8.1.
const TCG_KP_EK_CERTIFICATE_ARCS: [u64; 5] = [2, 23, 133, 8, 1];

/// A loaded EK CA: signs EK certificates.
pub struct EkAuthority {
    issuer: Certificate,
    key: KeyPair,
    certificate_pem: String,
    /// When the CA certificate expires.
    not_after: OffsetDateTime,
}

impl std::fmt::Debug for EkAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EkAuthority").finish_non_exhaustive()
    }
}

impl EkAuthority {
    /// A new CA valid from `now` for 30 years.
    ///
    /// Errors: [`Error::Attestation`] (key generation or signing).
    pub fn generate(now: OffsetDateTime) -> Result<Self, Error> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(attestation)?;
        let mut params = ca_params();
        params.not_before = now - CLOCK_SKEW;
        params.not_after = now + CA_LIFETIME;
        params.serial_number = Some(random_serial()?);
        let certificate_pem = params.self_signed(&key).map_err(attestation)?.pem();
        Self::from_pem(&certificate_pem, &key.serialize_pem())
    }

    /// The CA kept as PEM: `certificate_pem` as published, `key_pem` its PKCS#8 key.
    ///
    /// Errors: [`Error::Attestation`] when either is unreadable, or the certificate is
    /// not this authority's (another subject, or not the key's).
    pub fn from_pem(certificate_pem: &str, key_pem: &str) -> Result<Self, Error> {
        let key = KeyPair::from_pem(key_pem).map_err(attestation)?;
        let der = rustls_pki_types::pem::PemObject::from_pem_slice(certificate_pem.as_bytes())
            .map(|der: rustls_pki_types::CertificateDer<'_>| der.to_vec())
            .map_err(|e| Error::Attestation(format!("the EK CA certificate: {e}")))?;
        let (_, parsed) = X509Certificate::from_der(&der)
            .map_err(|e| Error::Attestation(format!("the EK CA certificate: {e}")))?;
        let expected_subject = format!("CN={CA_COMMON_NAME}, O={CA_ORGANIZATION}");
        if parsed.subject().to_string() != expected_subject
            || parsed.public_key().raw != key.public_key_der().as_slice()
        {
            return Err(Error::Attestation(
                "the EK CA certificate is not the one of its key".into(),
            ));
        }
        // Signing needs the issuer's name and key only: a fresh self-signature of the
        // same parameters is an equivalent issuer for the published certificate.
        let issuer = ca_params().self_signed(&key).map_err(attestation)?;
        Ok(Self {
            issuer,
            key,
            certificate_pem: certificate_pem.to_owned(),
            not_after: parsed.validity().not_after.to_datetime(),
        })
    }

    /// The CA certificate (PEM), for the provider's `ekTrustBundle`.
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// A new EK certificate (PEM) for the VM named by `identity` (a URI), valid from
    /// `now` until the CA expires. Its private key is dropped.
    ///
    /// Errors: [`Error::Attestation`] (an identity that is not an IA5 string, signing).
    pub fn issue(&self, identity: &str, now: OffsetDateTime) -> Result<String, Error> {
        let ek = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(attestation)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, EK_COMMON_NAME);
        params.subject_alt_names = vec![SanType::URI(
            identity.to_owned().try_into().map_err(attestation)?,
        )];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::KeyAgreement];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::Other(
            TCG_KP_EK_CERTIFICATE_ARCS.to_vec(),
        )];
        params.use_authority_key_identifier_extension = true;
        params.not_before = now - CLOCK_SKEW;
        params.not_after = self.not_after;
        params.serial_number = Some(random_serial()?);
        let certificate = params
            .signed_by(&ek, &self.issuer, &self.key)
            .map_err(attestation)?;
        Ok(certificate.pem())
    }

    /// The CA of the Secret [`EK_CA_SECRET`] in `namespace`, made and stored first when
    /// there is none (a concurrent maker's CA wins: the loser reads it).
    ///
    /// Errors: API failures; [`Error::Attestation`] for a Secret that holds no usable CA.
    pub async fn load_or_create(client: &Client, namespace: &str) -> Result<Self, Error> {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        if let Some(secret) = secrets.get_opt(EK_CA_SECRET).await? {
            return Self::from_secret(&secret);
        }
        let made = Self::generate(OffsetDateTime::now_utc())?;
        let data = BTreeMap::from([
            (
                "tls.crt".to_owned(),
                ByteString(made.certificate_pem.clone().into_bytes()),
            ),
            (
                "tls.key".to_owned(),
                ByteString(made.key.serialize_pem().into_bytes()),
            ),
        ]);
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(EK_CA_SECRET.to_owned()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: Some(data),
            ..Secret::default()
        };
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => {
                tracing::info!(%namespace, secret = EK_CA_SECRET, "made the simulated EK CA");
                Ok(made)
            }
            Err(e) if is_status(&e, 409) => Self::from_secret(&secrets.get(EK_CA_SECRET).await?),
            Err(e) => Err(e.into()),
        }
    }

    fn from_secret(secret: &Secret) -> Result<Self, Error> {
        let field = |name: &str| {
            secret
                .data
                .as_ref()
                .and_then(|data| data.get(name))
                .and_then(|value| std::str::from_utf8(&value.0).ok())
                .ok_or_else(|| {
                    Error::Attestation(format!("Secret {EK_CA_SECRET} has no UTF-8 {name}"))
                })
        };
        Self::from_pem(field("tls.crt")?, field("tls.key")?)
    }
}

/// The CA's parameters but validity and serial.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, CA_COMMON_NAME);
    params
        .distinguished_name
        .push(DnType::OrganizationName, CA_ORGANIZATION);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

/// A positive 128-bit serial number from the system's random source.
fn random_serial() -> Result<SerialNumber, Error> {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::fill(&mut bytes)
        .map_err(|_| Error::Attestation("no random bytes for a serial number".into()))?;
    bytes[0] &= 0x7f;
    Ok(SerialNumber::from_slice(&bytes))
}

fn attestation(error: impl std::fmt::Display) -> Error {
    Error::Attestation(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attestation::{EndorsementCertificate, TrustBundle};

    #[test]
    fn an_issued_certificate_chains_to_the_ca_and_names_the_vm() {
        let now = OffsetDateTime::now_utc();
        let ca = EkAuthority::generate(now).unwrap();
        let pem = ca.issue("urn:banlieue:vm:default:p-0:uid-1", now).unwrap();
        let certificate = EndorsementCertificate::from_pem(&pem).unwrap();
        assert_eq!(
            certificate.identities,
            ["urn:banlieue:vm:default:p-0:uid-1"]
        );
        assert_eq!(
            certificate.issuer,
            format!("CN={CA_COMMON_NAME}, O={CA_ORGANIZATION}")
        );
        let bundle = TrustBundle::from_pem(ca.certificate_pem()).unwrap();
        bundle.verify(&certificate, now).unwrap();
        // x509-parser agrees on the signature, independently of webpki.
        let der = rustls_pki_types::pem::PemObject::from_pem_slice(pem.as_bytes())
            .map(|d: rustls_pki_types::CertificateDer<'_>| d.to_vec())
            .unwrap();
        let (_, parsed) = X509Certificate::from_der(&der).unwrap();
        assert!(!parsed.is_ca());
        assert_eq!(
            parsed
                .extended_key_usage()
                .unwrap()
                .unwrap()
                .value
                .other
                .iter()
                .map(|oid| oid.to_id_string())
                .collect::<Vec<_>>(),
            ["2.23.133.8.1"]
        );
    }

    #[test]
    fn a_reloaded_ca_signs_certificates_that_chain_to_the_published_one() {
        let now = OffsetDateTime::now_utc();
        let made = EkAuthority::generate(now).unwrap();
        let reloaded =
            EkAuthority::from_pem(made.certificate_pem(), &made.key.serialize_pem()).unwrap();
        let pem = reloaded.issue("urn:x", now).unwrap();
        TrustBundle::from_pem(made.certificate_pem())
            .unwrap()
            .verify(&EndorsementCertificate::from_pem(&pem).unwrap(), now)
            .unwrap();
    }

    #[test]
    fn another_ca_or_a_mismatched_key_is_refused() {
        let now = OffsetDateTime::now_utc();
        let ours = EkAuthority::generate(now).unwrap();
        let theirs = EkAuthority::generate(now).unwrap();
        let forged = theirs.issue("urn:x", now).unwrap();
        let error = TrustBundle::from_pem(ours.certificate_pem())
            .unwrap()
            .verify(&EndorsementCertificate::from_pem(&forged).unwrap(), now)
            .unwrap_err();
        // Same subject, another key: webpki finds the issuer by name, the signature fails.
        assert!(
            error.to_string().contains("InvalidSignatureForPublicKey"),
            "{error}"
        );
        let mismatched = EkAuthority::from_pem(ours.certificate_pem(), &theirs.key.serialize_pem());
        assert!(mismatched.is_err());
    }

    #[test]
    fn a_certificate_is_not_trusted_before_or_after_its_validity() {
        let now = OffsetDateTime::now_utc();
        let ca = EkAuthority::generate(now).unwrap();
        let certificate =
            EndorsementCertificate::from_pem(&ca.issue("urn:x", now).unwrap()).unwrap();
        let bundle = TrustBundle::from_pem(ca.certificate_pem()).unwrap();
        for when in [
            now - Duration::hours(1),
            now + CA_LIFETIME + Duration::days(1),
        ] {
            assert!(bundle.verify(&certificate, when).is_err(), "{when}");
        }
    }
}
