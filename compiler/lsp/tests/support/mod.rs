//! A minimal LSP client for the tests: drives `tessera_lsp::run` over an
//! in-memory connection, as an editor would over stdio.

use lsp_server::{Connection, Message, Notification, Request, RequestId};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long to wait for any one message before failing the test.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The client end of a running server.
pub struct Client {
    conn: Connection,
    server: Option<JoinHandle<Result<(), String>>>,
    next_id: i32,
    /// Notifications received while waiting for responses.
    pending: VecDeque<Notification>,
    /// The `initialize` result.
    pub init: Value,
}

/// The zero-based LSP position of the `nth` occurrence of `needle` in
/// `text`, moved `delta` characters into it (ASCII texts).
pub fn pos(text: &str, needle: &str, nth: usize, delta: usize) -> Value {
    let at = text
        .match_indices(needle)
        .nth(nth)
        .unwrap_or_else(|| panic!("`{needle}` #{nth} not in text"))
        .0
        + delta;
    let line = text[..at].matches('\n').count();
    let col = at - text[..at].rfind('\n').map_or(0, |i| i + 1);
    json!({ "line": line, "character": col })
}

impl Client {
    /// Starts a server thread and performs the `initialize` handshake.
    pub fn start() -> Client {
        let (server, conn) = Connection::memory();
        let handle = std::thread::spawn(move || tessera_lsp::run(server));
        let mut client = Client {
            conn,
            server: Some(handle),
            next_id: 0,
            pending: VecDeque::new(),
            init: Value::Null,
        };
        client.init = client.request("initialize", json!({ "capabilities": {} }));
        client.notify("initialized", json!({}));
        client
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        self.conn
            .sender
            .send(Message::Notification(Notification::new(
                method.into(),
                params,
            )))
            .expect("server is gone");
    }

    /// Sends a request and waits for its result (panics on an error
    /// response).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        match self.try_request(method, params) {
            Ok(v) => v,
            Err(e) => panic!("{method} failed: {e}"),
        }
    }

    /// Sends a request and returns its result or error message.
    pub fn try_request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = RequestId::from(self.next_id);
        self.conn
            .sender
            .send(Message::Request(Request::new(
                id.clone(),
                method.into(),
                params,
            )))
            .expect("server is gone");
        loop {
            match self
                .conn
                .receiver
                .recv_timeout(TIMEOUT)
                .expect("no response")
            {
                Message::Response(r) if r.id == id => {
                    return match r.error {
                        Some(e) => Err(e.message),
                        None => Ok(r.result.unwrap_or(Value::Null)),
                    };
                }
                Message::Notification(n) => self.pending.push_back(n),
                _ => {}
            }
        }
    }

    /// Waits for the next `textDocument/publishDiagnostics` and returns its
    /// params.
    pub fn diagnostics(&mut self) -> Value {
        loop {
            let n = match self.pending.pop_front() {
                Some(n) => n,
                None => match self
                    .conn
                    .receiver
                    .recv_timeout(TIMEOUT)
                    .expect("no diagnostics")
                {
                    Message::Notification(n) => n,
                    _ => continue,
                },
            };
            if n.method == "textDocument/publishDiagnostics" {
                return n.params;
            }
        }
    }

    /// The diagnostic codes of the next publication.
    pub fn codes(&mut self) -> Vec<String> {
        let d = self.diagnostics();
        d["diagnostics"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|d| d["code"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// Opens `text` as document `uri` and returns its diagnostics' codes.
    pub fn open(&mut self, uri: &str, text: &str) -> Vec<String> {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "tessera", "version": 1, "text": text } }),
        );
        self.codes()
    }

    /// A position request (`hover`, `definition`, ...) at `position`.
    pub fn at(&mut self, method: &str, uri: &str, position: Value) -> Value {
        let mut params = json!({ "textDocument": { "uri": uri }, "position": position });
        if method == "textDocument/references" {
            params["context"] = json!({ "includeDeclaration": true });
        }
        self.request(method, params)
    }

    /// Sends `shutdown` and `exit` and checks that the server ends cleanly.
    pub fn shutdown(mut self) {
        assert_eq!(self.request("shutdown", Value::Null), Value::Null);
        self.notify("exit", Value::Null);
        let result = self.server.take().unwrap().join().expect("server panicked");
        assert_eq!(result, Ok(()));
    }
}
