-- Private signing keys are sealed (AES-256-GCM under the key-encryption key, see
-- banlieue_identity::oidc::sealing); rows written before this migration hold plain
-- PKCS#8 and are sealed at the issuer's next key maintenance.
ALTER TABLE oidc_signing_keys RENAME COLUMN private_key_pkcs8 TO private_key_sealed;
