//! Helpers shared by the integration tests (included with `mod common;`).
#![allow(dead_code)]

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_emulator::{Emulator, EmulatorConfig};

/// Starts an emulator and an admin client.
pub async fn start(config: EmulatorConfig) -> (Emulator, Client) {
    let emu = Emulator::start(config).await.expect("emulator starts");
    let client = client_for(&emu, emu.admin_token()).await;
    (emu, client)
}

/// A kube client that presents `token`.
pub async fn client_for(emu: &Emulator, token: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(&emu.kubeconfig_for(token)).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}

/// A raw HTTPS client trusting the emulator's CA.
pub fn https(emu: &Emulator) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(emu.ca_pem().expect("TLS on").as_bytes()).expect("CA");
    reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client")
}

/// The `(code, reason, message)` of an API error.
pub fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.reason, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}
