//! The loopback redirect listener of a native app (RFC 8252 §7.3): binds `127.0.0.1:0` and
//! waits for the browser to be sent to `http://127.0.0.1:<port>/callback?code=…&state=…&iss=…`.
//! The browser's request is answered only once the code has been redeemed, so that its page
//! says the truth.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result, sanitize};

/// The only path the listener answers (besides 404s).
pub const CALLBACK_PATH: &str = "/callback";

/// How long a piece of text from the callback may be when it is shown, in characters.
const MAX_CALLBACK_TEXT: usize = 300;

/// How long [`Reply::finish`] waits for the browser's connection to take the final page,
/// in seconds (the page is small; this only bounds a browser that stopped reading).
const FINISH_SECS: u64 = 5;

/// What the callback must carry to be accepted.
#[derive(Clone, Debug)]
pub struct Expected {
    /// The `state` of the authorization request (RFC 6749 §4.1.1).
    pub state: String,
    /// The issuer identifier; a callback's `iss`, when present, must equal it byte-for-byte
    /// (RFC 9207 §2.4).
    pub issuer: String,
    /// Whether `iss` must be present: the issuer advertised
    /// `authorization_response_iss_parameter_supported` (RFC 9207 §3).
    pub iss_required: bool,
}

/// What the authorization server sent back, once `state` and `iss` matched.
#[derive(Debug)]
enum Outcome {
    Code(String, Reply),
    Refused {
        error: String,
        description: Option<String>,
    },
}

/// The final page of the browser tab, chosen once the code has been redeemed.
#[derive(Debug)]
enum Page {
    SignedIn,
    Failed(String),
}

/// The browser's callback request, still waiting for its page: the sign-in is only complete
/// once the code has been exchanged, so the page is answered after that ([`Reply::finish`]).
/// Dropped without `finish`, the page tells the person to look at the terminal.
#[derive(Debug)]
pub struct Reply {
    page: oneshot::Sender<Page>,
    /// Closed when the connection that carried the callback has ended (its page was sent).
    served: Option<oneshot::Receiver<()>>,
}

impl Reply {
    /// Answers the browser tab: "Signed in" for `Ok`, or "Sign-in failed: <reason>" (sanitised),
    /// then waits (at most a few seconds) until the page has been sent, so that a process
    /// exiting right after does not cut it off.
    pub async fn finish(mut self, outcome: std::result::Result<(), String>) {
        let page = match outcome {
            Ok(()) => Page::SignedIn,
            Err(reason) => Page::Failed(sanitize(&reason, MAX_CALLBACK_TEXT)),
        };
        let served = self.served.take();
        let _ = self.page.send(page);
        if let Some(served) = served {
            let _ = tokio::time::timeout(Duration::from_secs(FINISH_SECS), served).await;
        }
    }
}

/// A callback that carried an authorization code.
#[derive(Debug)]
pub struct Callback {
    /// The authorization code, to be redeemed at the token endpoint.
    pub code: String,
    /// The browser's request, answered by [`Reply::finish`] after the exchange.
    pub reply: Reply,
}

/// A bound loopback listener. Dropping it closes the port.
pub struct CallbackListener {
    listener: TcpListener,
    port: u16,
}

type Sender = mpsc::Sender<std::result::Result<Outcome, String>>;
/// The signal "this connection has ended", taken by the request that carries the code.
type ServedSlot = Arc<Mutex<Option<oneshot::Receiver<()>>>>;

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

    /// Serves HTTP/1.1 until a `GET /callback` arrives whose `state` equals `expected.state`
    /// and whose `iss` is acceptable, and returns its `code` with the pending browser request.
    ///
    /// Requests for other paths get 404, other methods 405, and a callback with a missing or
    /// wrong `state` gets 400 and is otherwise ignored (it may be forged by another local
    /// process or page; RFC 6749 §10.12), so the wait goes on. Likewise a callback whose `iss`
    /// differs from `expected.issuer`, or lacks `iss` when `expected.iss_required` (RFC 9207
    /// §2.4: a mix-up attack). The caller bounds the wait.
    ///
    /// # Errors
    /// [`Error::Authorization`] when the matching callback carries `error` (RFC 6749
    /// §4.1.2.1); [`Error::Protocol`] when it carries neither `code` nor `error`;
    /// [`Error::Io`] if accepting fails.
    pub async fn wait(self, expected: &Expected) -> Result<Callback> {
        let expected = Arc::new(expected.clone());
        let (tx, mut rx) = mpsc::channel::<std::result::Result<Outcome, String>>(4);
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (stream, _) = accepted.map_err(|e| Error::io("callback listener", e))?;
                    let expected = expected.clone();
                    let tx = tx.clone();
                    let (served_tx, served_rx) = oneshot::channel::<()>();
                    let served: ServedSlot = Arc::new(Mutex::new(Some(served_rx)));
                    tokio::spawn(async move {
                        let service = service_fn(move |req| {
                            let expected = expected.clone();
                            let tx = tx.clone();
                            let served = served.clone();
                            async move {
                                Ok::<_, Infallible>(handle(req, &expected, &tx, &served).await)
                            }
                        });
                        // A browser may open a connection and never use it: errors here only
                        // end that connection.
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        drop(served_tx);
                    });
                }
                Some(outcome) = rx.recv() => {
                    return match outcome {
                        Ok(Outcome::Code(code, reply)) => Ok(Callback { code, reply }),
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

/// What a request to the loopback listener amounts to ([`Expected::judge`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Another path than [`CALLBACK_PATH`]: 404.
    NotFound,
    /// Another method than `GET`: 405.
    MethodNotAllowed,
    /// `state` missing or not the one expected: 400, and the wait goes on.
    StateMismatch,
    /// `iss` present and not the expected issuer: 400, and the wait goes on.
    IssuerMismatch,
    /// `iss` missing although the issuer always sends it: 400, and the wait goes on.
    IssuerMissing,
    /// The authorization code of a callback that matched.
    Code(String),
    /// A matching callback carrying `error` (RFC 6749 §4.1.2.1): the error and its
    /// description, sanitised and bounded for a terminal; it ends the wait.
    Refused {
        /// `error`, sanitised.
        error: String,
        /// `error_description`, sanitised; `None` when absent or empty once sanitised.
        description: Option<String>,
    },
    /// A matching callback with neither `code` nor `error`: 400, and it ends the wait.
    Empty,
}

impl Expected {
    /// Judges a request to the listener by its method, path and query, the only parts it
    /// reads: the query's `state` must equal [`Expected::state`] and its `iss`, when present
    /// (or always when [`Expected::iss_required`]), [`Expected::issuer`], byte for byte,
    /// before its `code` or `error` counts. A repeated parameter counts by its last value.
    pub fn judge(&self, method: &Method, uri: &Uri) -> Verdict {
        if uri.path() != CALLBACK_PATH {
            return Verdict::NotFound;
        }
        if method != Method::GET {
            return Verdict::MethodNotAllowed;
        }
        let mut code = None;
        let mut state = None;
        let mut iss = None;
        let mut error = None;
        let mut description = None;
        for (k, v) in url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
            match &*k {
                "code" => code = Some(v.into_owned()),
                "state" => state = Some(v.into_owned()),
                "iss" => iss = Some(v.into_owned()),
                "error" => error = Some(v.into_owned()),
                "error_description" => description = Some(v.into_owned()),
                _ => {}
            }
        }
        if state.as_deref() != Some(self.state.as_str()) {
            return Verdict::StateMismatch;
        }
        match iss.as_deref() {
            Some(iss) if iss != self.issuer => return Verdict::IssuerMismatch,
            None if self.iss_required => return Verdict::IssuerMissing,
            _ => {}
        }
        match (code, error) {
            (_, Some(error)) => Verdict::Refused {
                error: sanitize(&error, MAX_CALLBACK_TEXT),
                description: description
                    .map(|d| sanitize(&d, MAX_CALLBACK_TEXT))
                    .filter(|d| !d.is_empty()),
            },
            (Some(code), None) => Verdict::Code(code),
            (None, None) => Verdict::Empty,
        }
    }
}

async fn handle(
    req: Request<Incoming>,
    expected: &Expected,
    tx: &Sender,
    served: &ServedSlot,
) -> Response<Full<Bytes>> {
    match expected.judge(req.method(), req.uri()) {
        Verdict::NotFound => text(StatusCode::NOT_FOUND, "Not found."),
        Verdict::MethodNotAllowed => text(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed."),
        Verdict::StateMismatch => text(
            StatusCode::BAD_REQUEST,
            "This sign-in response does not belong to the waiting banlieue command (state mismatch). It was ignored.",
        ),
        Verdict::IssuerMismatch => text(
            StatusCode::BAD_REQUEST,
            "This sign-in response comes from another issuer than the one banlieue is waiting for (iss mismatch). It was ignored.",
        ),
        Verdict::IssuerMissing => text(
            StatusCode::BAD_REQUEST,
            "This sign-in response does not name its issuer (missing iss), although the issuer always does. It was ignored.",
        ),
        Verdict::Refused { error, description } => {
            let page = text(
                StatusCode::OK,
                &format!(
                    "Sign-in failed: {error}. You can close this tab and return to your terminal."
                ),
            );
            let _ = tx.send(Ok(Outcome::Refused { error, description })).await;
            page
        }
        Verdict::Code(code) => {
            let (page_tx, page_rx) = oneshot::channel();
            let reply = Reply {
                page: page_tx,
                served: served.lock().expect("served slot").take(),
            };
            if tx.send(Ok(Outcome::Code(code, reply))).await.is_err() {
                return text(
                    StatusCode::BAD_REQUEST,
                    "The waiting banlieue command has already received a sign-in response. This one was ignored.",
                );
            }
            match page_rx.await {
                Ok(Page::SignedIn) => text(
                    StatusCode::OK,
                    "Signed in. You can close this tab and return to your terminal.",
                ),
                Ok(Page::Failed(reason)) => text(
                    StatusCode::OK,
                    &format!("Sign-in failed: {reason}. Return to your terminal for details."),
                ),
                Err(_) => text(
                    StatusCode::OK,
                    "Sign-in response received. Return to your terminal to see whether it succeeded.",
                ),
            }
        }
        Verdict::Empty => {
            let _ = tx
                .send(Err(
                    "the callback carried neither code nor error".to_string()
                ))
                .await;
            text(StatusCode::BAD_REQUEST, "Missing code.")
        }
    }
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

    const ISSUER: &str = "http://127.0.0.1:5210";

    fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap()
    }

    fn expected(state: &str, iss_required: bool) -> Expected {
        Expected {
            state: state.into(),
            issuer: ISSUER.into(),
            iss_required,
        }
    }

    async fn start_with(expected: Expected) -> (String, tokio::task::JoinHandle<Result<Callback>>) {
        let l = CallbackListener::bind().await.unwrap();
        let uri = l.redirect_uri();
        (uri, tokio::spawn(async move { l.wait(&expected).await }))
    }

    async fn start(state: &str) -> (String, tokio::task::JoinHandle<Result<Callback>>) {
        start_with(expected(state, false)).await
    }

    /// Sends the browser's GET in the background: its answer only comes after `finish`.
    fn browse(url: String) -> tokio::task::JoinHandle<(u16, String)> {
        tokio::spawn(async move {
            let r = client().get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        })
    }

    fn iss() -> String {
        url::form_urlencoded::byte_serialize(ISSUER.as_bytes()).collect()
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
        let page = browse(format!("{uri}?code=the%20code&state=s-123"));
        let callback = waiter.await.unwrap().unwrap();
        assert_eq!(callback.code, "the code");
        callback.reply.finish(Ok(())).await;
        let (status, text) = page.await.unwrap();
        assert_eq!(status, 200);
        assert!(text.starts_with("Signed in"), "{text}");
    }

    #[tokio::test]
    async fn the_page_is_answered_only_after_the_exchange() {
        let (uri, waiter) = start("st").await;
        let page = browse(format!("{uri}?code=c&state=st"));
        let callback = waiter.await.unwrap().unwrap();
        // The code is in hand but not redeemed: the browser has no answer yet.
        tokio::task::yield_now().await;
        assert!(!page.is_finished());
        callback
            .reply
            .finish(Err(
                "token endpoint: invalid_grant \u{1b}[31m(code used)".into()
            ))
            .await;
        let (status, text) = page.await.unwrap();
        assert_eq!(status, 200);
        assert!(
            text.starts_with("Sign-in failed: token endpoint: invalid_grant (code used)"),
            "{text}"
        );
        assert!(
            !text.contains("Signed in") && !text.contains('\u{1b}'),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_dropped_reply_sends_the_person_to_the_terminal() {
        let (uri, waiter) = start("st").await;
        let page = browse(format!("{uri}?code=c&state=st"));
        drop(waiter.await.unwrap().unwrap());
        let (status, text) = page.await.unwrap();
        assert_eq!(status, 200);
        assert!(text.contains("Return to your terminal"), "{text}");
        assert!(!text.contains("Signed in"), "{text}");
    }

    #[tokio::test]
    async fn iss_must_match_and_be_present_when_advertised() {
        let (uri, waiter) = start_with(expected("st", true)).await;
        let c = client();
        for bad in [
            String::new(),
            "&iss=http%3A%2F%2F127.0.0.1%3A5210%2F".to_string(),
            "&iss=https%3A%2F%2Fevil.example".to_string(),
        ] {
            let r = c
                .get(format!("{uri}?code=evil&state=st{bad}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 400, "{bad}");
            assert!(r.text().await.unwrap().contains("iss"), "{bad}");
            // An error response is checked the same way.
            let r = c
                .get(format!("{uri}?error=access_denied&state=st{bad}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 400, "{bad}");
        }
        assert!(!waiter.is_finished());
        let page = browse(format!("{uri}?code=good&state=st&iss={}", iss()));
        let callback = waiter.await.unwrap().unwrap();
        assert_eq!(callback.code, "good");
        callback.reply.finish(Ok(())).await;
        assert_eq!(page.await.unwrap().0, 200);
    }

    #[tokio::test]
    async fn iss_is_checked_when_present_even_if_not_advertised() {
        let (uri, waiter) = start_with(expected("st", false)).await;
        let r = client()
            .get(format!(
                "{uri}?code=evil&state=st&iss=https%3A%2F%2Fevil.example"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        assert!(!waiter.is_finished());
        let page = browse(format!("{uri}?code=good&state=st"));
        let callback = waiter.await.unwrap().unwrap();
        assert_eq!(callback.code, "good");
        drop(callback);
        page.await.unwrap();
    }

    #[tokio::test]
    async fn error_parameter_is_surfaced_without_control_characters() {
        let (uri, waiter) = start("st").await;
        let r = client()
            .get(format!(
                "{uri}?error=access_denied%1B%5B2J&error_description=The+person%0D%0Asaid+%1B%5D0%3Bpwned%07no&state=st"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let page = r.text().await.unwrap();
        assert!(!page.chars().any(char::is_control), "{page:?}");
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
        let page = browse(format!("{uri}?code=c&state=st"));
        let callback = waiter.await.unwrap().unwrap();
        assert_eq!(callback.code, "c");
        callback.reply.finish(Ok(())).await;
        assert_eq!(page.await.unwrap().0, 200);
    }
}
