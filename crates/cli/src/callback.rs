//! The loopback redirect listener of a native app (RFC 8252 §7.3): binds `127.0.0.1:0` and
//! waits for the browser to be sent to `http://127.0.0.1:<port>/callback?code=…&state=…`.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::error::{Error, Result};

/// The only path the listener answers (besides 404s).
pub const CALLBACK_PATH: &str = "/callback";

/// What the authorization server sent back, once `state` matched.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Code(String),
    Refused {
        error: String,
        description: Option<String>,
    },
}

/// A bound loopback listener. Dropping it closes the port.
pub struct CallbackListener {
    listener: TcpListener,
    port: u16,
}

impl CallbackListener {
    /// Binds `127.0.0.1:0` (an ephemeral port chosen by the OS; the literal IP, not
    /// `localhost`, per RFC 8252 §8.3).
    ///
    /// # Errors
    /// [`Error::Io`] if binding fails.
    pub async fn bind() -> Result<Self> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| Error::io("127.0.0.1:0", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::io("127.0.0.1:0", e))?
            .port();
        Ok(CallbackListener { listener, port })
    }

    /// `http://127.0.0.1:<port>/callback`.
    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}{CALLBACK_PATH}", self.port)
    }

    /// Serves HTTP/1.1 until a `GET /callback` arrives whose `state` equals `expected_state`,
    /// and returns its `code`.
    ///
    /// Requests for other paths get 404, other methods 405, and a callback with a missing or
    /// wrong `state` gets 400 and is otherwise ignored (it may be forged by another local
    /// process or page; RFC 6749 §10.12), so the wait goes on. The caller bounds the wait.
    ///
    /// # Errors
    /// [`Error::Authorization`] when the matching callback carries `error` (RFC 6749
    /// §4.1.2.1); [`Error::Protocol`] when it carries neither `code` nor `error`;
    /// [`Error::Io`] if accepting fails.
    pub async fn wait(self, expected_state: &str) -> Result<String> {
        let expected = Arc::new(expected_state.to_string());
        let (tx, mut rx) = mpsc::channel::<std::result::Result<Outcome, String>>(4);
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (stream, _) = accepted.map_err(|e| Error::io("callback listener", e))?;
                    let expected = expected.clone();
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |req| {
                            let expected = expected.clone();
                            let tx = tx.clone();
                            async move { Ok::<_, Infallible>(handle(req, &expected, &tx).await) }
                        });
                        // A browser may open a connection and never use it: errors here only
                        // end that connection.
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Some(outcome) = rx.recv() => {
                    return match outcome {
                        Ok(Outcome::Code(code)) => Ok(code),
                        Ok(Outcome::Refused { error, description }) => {
                            Err(Error::Authorization { error, description })
                        }
                        Err(detail) => Err(Error::Protocol { what: "callback", detail }),
                    };
                }
            }
        }
    }
}

async fn handle(
    req: Request<Incoming>,
    expected_state: &str,
    tx: &mpsc::Sender<std::result::Result<Outcome, String>>,
) -> Response<Full<Bytes>> {
    if req.uri().path() != CALLBACK_PATH {
        return text(StatusCode::NOT_FOUND, "Not found.");
    }
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed.");
    }
    let mut code = None;
    let mut state = None;
    let mut error = None;
    let mut description = None;
    for (k, v) in url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
        match &*k {
            "code" => code = Some(v.into_owned()),
            "state" => state = Some(v.into_owned()),
            "error" => error = Some(v.into_owned()),
            "error_description" => description = Some(v.into_owned()),
            _ => {}
        }
    }
    if state.as_deref() != Some(expected_state) {
        return text(
            StatusCode::BAD_REQUEST,
            "This sign-in response does not belong to the waiting banlieue command (state mismatch). It was ignored.",
        );
    }
    let (outcome, response) = match (code, error) {
        (_, Some(error)) => {
            let page = text(
                StatusCode::OK,
                &format!("Sign-in failed: {error}. You can close this tab."),
            );
            (Ok(Outcome::Refused { error, description }), page)
        }
        (Some(code), None) => (
            Ok(Outcome::Code(code)),
            text(
                StatusCode::OK,
                "Signed in. You can close this tab and return to the terminal.",
            ),
        ),
        (None, None) => (
            Err("the callback carried neither code nor error".to_string()),
            text(StatusCode::BAD_REQUEST, "Missing code."),
        ),
    };
    let _ = tx.send(outcome).await;
    response
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain; charset=utf-8")
        .header("cache-control", "no-store")
        .header("connection", "close")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("static response parts are valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap()
    }

    async fn start(state: &str) -> (String, tokio::task::JoinHandle<Result<String>>) {
        let l = CallbackListener::bind().await.unwrap();
        let uri = l.redirect_uri();
        let state = state.to_string();
        (uri, tokio::spawn(async move { l.wait(&state).await }))
    }

    #[tokio::test]
    async fn redirect_uri_is_the_literal_loopback_ip() {
        let l = CallbackListener::bind().await.unwrap();
        let uri = l.redirect_uri();
        assert!(uri.starts_with("http://127.0.0.1:"), "{uri}");
        assert!(uri.ends_with("/callback"));
        assert_ne!(l.port, 0);
    }

    #[tokio::test]
    async fn matching_state_yields_the_code_after_refusing_wrong_ones() {
        let (uri, waiter) = start("s-123").await;
        let base = uri.trim_end_matches(CALLBACK_PATH);
        let c = client();
        // Another path, another method, a wrong state, no state: all refused, wait goes on.
        let r = c
            .get(format!("{base}/other?code=x&state=s-123"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        let r = c
            .post(format!("{uri}?code=x&state=s-123"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405);
        let r = c
            .get(format!("{uri}?code=evil&state=wrong"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        assert!(r.text().await.unwrap().contains("state mismatch"));
        let r = c
            .get(format!("{uri}?error=access_denied"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        assert!(!waiter.is_finished());
        let r = c
            .get(format!("{uri}?code=the%20code&state=s-123"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.text().await.unwrap().contains("Signed in"));
        let code = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(code, "the code");
    }

    #[tokio::test]
    async fn error_parameter_is_surfaced() {
        let (uri, waiter) = start("st").await;
        let r = client()
            .get(format!(
                "{uri}?error=access_denied&error_description=The+person+said+no&state=st"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let err = waiter.await.unwrap().unwrap_err();
        match &err {
            Error::Authorization { error, description } => {
                assert_eq!(error, "access_denied");
                assert_eq!(description.as_deref(), Some("The person said no"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("access_denied"));
    }

    #[tokio::test]
    async fn neither_code_nor_error_fails() {
        let (uri, waiter) = start("st").await;
        let r = client()
            .get(format!("{uri}?state=st"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        assert!(matches!(waiter.await.unwrap(), Err(Error::Protocol { .. })));
    }

    #[tokio::test]
    async fn an_idle_connection_does_not_block_the_callback() {
        let (uri, waiter) = start("st").await;
        let addr = uri
            .trim_start_matches("http://")
            .trim_end_matches(CALLBACK_PATH)
            .to_string();
        // A browser's speculative pre-connection that never sends anything.
        let _idle = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let r = client()
            .get(format!("{uri}?code=c&state=st"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(waiter.await.unwrap().unwrap(), "c");
    }
}
