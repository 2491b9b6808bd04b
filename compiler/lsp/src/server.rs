//! The server loop: document state, text synchronisation, and dispatch of
//! requests and notifications to the feature modules.
//!
//! Every document is re-analysed on open and on each change, and its
//! diagnostics are published. Handlers run under `catch_unwind` as a last
//! resort: a bug answers one request with an error instead of ending the
//! session.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, Notification as _,
    PublishDiagnostics,
};
use lsp_types::request::{
    Completion, DocumentSymbolRequest, Formatting, GotoDefinition, HoverRequest, References,
    Request as _, SemanticTokensFullRequest, SignatureHelpRequest,
};
use lsp_types::{
    CompletionResponse, DocumentSymbolResponse, GotoDefinitionResponse, Position,
    PublishDiagnosticsParams, SemanticTokensResult, TextDocumentPositionParams, TextEdit, Uri,
};
use serde::de::DeserializeOwned;

use crate::analysis::Analysis;
use crate::lines::{std_source, LineIndex, STD_SCHEME};
use crate::{completion, diagnostics, help, hover, navigation, tokens};

/// The custom request that returns the text of a `tessera-std:///` document,
/// for editors that want to show stdlib definitions.
pub const STD_SOURCE: &str = "tessera/stdSource";

/// One open document.
struct Document {
    text: String,
    version: i32,
    /// `None` only if analysing the text panicked.
    analysis: Option<Analysis>,
}

/// The server's state.
pub struct Server {
    conn: Connection,
    docs: HashMap<Uri, Document>,
}

fn analyse(uri: &Uri, text: &str) -> Option<Analysis> {
    let name = uri
        .path()
        .as_str()
        .rsplit('/')
        .next()
        .unwrap_or("document.tsr")
        .to_owned();
    catch_unwind(AssertUnwindSafe(|| Analysis::new(&name, text))).ok()
}

impl Server {
    /// A server answering on `conn` (already initialised).
    pub fn new(conn: Connection) -> Server {
        Server {
            conn,
            docs: HashMap::new(),
        }
    }

    /// Serves until `shutdown` and `exit` (or until the client goes away).
    pub fn serve(mut self) -> Result<(), String> {
        while let Ok(msg) = self.conn.receiver.recv() {
            match msg {
                Message::Request(req) => {
                    match self.conn.handle_shutdown(&req) {
                        Ok(true) => return Ok(()),
                        Ok(false) => {}
                        Err(e) => return Err(e.to_string()),
                    }
                    self.request(req);
                }
                Message::Notification(n) if n.method == "exit" => return Ok(()),
                Message::Notification(n) => self.notification(n),
                Message::Response(_) => {}
            }
        }
        Ok(())
    }

    fn send(&self, msg: impl Into<Message>) {
        // A closed channel means the client is gone; the loop ends on the
        // next receive.
        let _ = self.conn.sender.send(msg.into());
    }

    fn publish(&self, uri: &Uri) {
        let Some(doc) = self.docs.get(uri) else {
            return;
        };
        if uri.as_str().starts_with(STD_SCHEME) {
            return;
        }
        let diagnostics = doc
            .analysis
            .as_ref()
            .map(|a| diagnostics::to_lsp(a, uri))
            .unwrap_or_default();
        let params = PublishDiagnosticsParams {
            uri: uri.clone(),
            diagnostics,
            version: Some(doc.version),
        };
        self.send(Notification::new(
            PublishDiagnostics::METHOD.to_owned(),
            params,
        ));
    }

    fn notification(&mut self, n: Notification) {
        match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let Ok(p) =
                    serde_json::from_value::<lsp_types::DidOpenTextDocumentParams>(n.params)
                else {
                    return;
                };
                let doc = p.text_document;
                let analysis = analyse(&doc.uri, &doc.text);
                self.docs.insert(
                    doc.uri.clone(),
                    Document {
                        text: doc.text,
                        version: doc.version,
                        analysis,
                    },
                );
                self.publish(&doc.uri);
            }
            DidChangeTextDocument::METHOD => {
                let Ok(p) =
                    serde_json::from_value::<lsp_types::DidChangeTextDocumentParams>(n.params)
                else {
                    return;
                };
                let uri = p.text_document.uri;
                let Some(doc) = self.docs.get_mut(&uri) else {
                    return;
                };
                for change in p.content_changes {
                    match change.range {
                        Some(range) => {
                            let lines = LineIndex::new(&doc.text);
                            let lo = lines.offset(&doc.text, range.start) as usize;
                            let hi = (lines.offset(&doc.text, range.end) as usize).max(lo);
                            doc.text.replace_range(lo..hi, &change.text);
                        }
                        None => doc.text = change.text,
                    }
                }
                doc.version = p.text_document.version;
                doc.analysis = analyse(&uri, &doc.text);
                self.publish(&uri);
            }
            DidCloseTextDocument::METHOD => {
                let Ok(p) =
                    serde_json::from_value::<lsp_types::DidCloseTextDocumentParams>(n.params)
                else {
                    return;
                };
                let uri = p.text_document.uri;
                if self.docs.remove(&uri).is_some() && !uri.as_str().starts_with(STD_SCHEME) {
                    let params = PublishDiagnosticsParams {
                        uri,
                        diagnostics: Vec::new(),
                        version: None,
                    };
                    self.send(Notification::new(
                        PublishDiagnostics::METHOD.to_owned(),
                        params,
                    ));
                }
            }
            _ => {}
        }
    }

    /// The analysis of a document and the byte offset of a position in it.
    fn at(&self, p: &TextDocumentPositionParams) -> Option<(&Analysis, u32)> {
        let a = self.docs.get(&p.text_document.uri)?.analysis.as_ref()?;
        Some((a, a.lines.offset(a.text(), p.position)))
    }

    fn request(&mut self, req: Request) {
        let id = req.id.clone();
        let method = req.method.clone();
        let result = catch_unwind(AssertUnwindSafe(|| self.dispatch(req)));
        let response = match result {
            Ok(Ok(value)) => Response::new_ok(id, value),
            Ok(Err((code, message))) => Response::new_err(id, code as i32, message),
            Err(_) => Response::new_err(
                id,
                ErrorCode::InternalError as i32,
                format!("internal error while handling {method}"),
            ),
        };
        self.send(response);
    }

    fn dispatch(&self, req: Request) -> Result<serde_json::Value, (ErrorCode, String)> {
        fn params<P: DeserializeOwned>(req: Request) -> Result<P, (ErrorCode, String)> {
            serde_json::from_value(req.params)
                .map_err(|e| (ErrorCode::InvalidParams, e.to_string()))
        }
        let json = |v: serde_json::Result<serde_json::Value>| {
            v.map_err(|e| (ErrorCode::InternalError, e.to_string()))
        };
        match req.method.as_str() {
            HoverRequest::METHOD => {
                let p: lsp_types::HoverParams = params(req)?;
                let h = self
                    .at(&p.text_document_position_params)
                    .and_then(|(a, o)| hover::hover(a, o));
                json(serde_json::to_value(h))
            }
            GotoDefinition::METHOD => {
                let p: lsp_types::GotoDefinitionParams = params(req)?;
                let tdp = &p.text_document_position_params;
                let loc = self
                    .at(tdp)
                    .and_then(|(a, o)| navigation::definition(a, &tdp.text_document.uri, o));
                json(serde_json::to_value(
                    loc.map(GotoDefinitionResponse::Scalar),
                ))
            }
            References::METHOD => {
                let p: lsp_types::ReferenceParams = params(req)?;
                let tdp = &p.text_document_position;
                let locs = self.at(tdp).map(|(a, o)| {
                    navigation::references(
                        a,
                        &tdp.text_document.uri,
                        o,
                        p.context.include_declaration,
                    )
                });
                json(serde_json::to_value(locs))
            }
            Completion::METHOD => {
                let p: lsp_types::CompletionParams = params(req)?;
                let items = self
                    .at(&p.text_document_position)
                    .map(|(a, o)| CompletionResponse::Array(completion::completions(a, o)));
                json(serde_json::to_value(items))
            }
            SignatureHelpRequest::METHOD => {
                let p: lsp_types::SignatureHelpParams = params(req)?;
                let help = self
                    .at(&p.text_document_position_params)
                    .and_then(|(a, o)| help::signature_help(a, o));
                json(serde_json::to_value(help))
            }
            DocumentSymbolRequest::METHOD => {
                let p: lsp_types::DocumentSymbolParams = params(req)?;
                let symbols = self
                    .analysis(&p.text_document.uri)
                    .map(|a| DocumentSymbolResponse::Nested(navigation::document_symbols(a)));
                json(serde_json::to_value(symbols))
            }
            SemanticTokensFullRequest::METHOD => {
                let p: lsp_types::SemanticTokensParams = params(req)?;
                let tokens = self
                    .analysis(&p.text_document.uri)
                    .map(|a| SemanticTokensResult::Tokens(tokens::semantic_tokens(a)));
                json(serde_json::to_value(tokens))
            }
            Formatting::METHOD => {
                let p: lsp_types::DocumentFormattingParams = params(req)?;
                let edits = self
                    .docs
                    .get(&p.text_document.uri)
                    .and_then(|d| format_edits(&d.text));
                json(serde_json::to_value(edits))
            }
            STD_SOURCE => {
                let p: lsp_types::TextDocumentIdentifier = params(req)?;
                json(serde_json::to_value(std_source(p.uri.as_str())))
            }
            other => Err((
                ErrorCode::MethodNotFound,
                format!("unsupported request {other}"),
            )),
        }
    }

    fn analysis(&self, uri: &Uri) -> Option<&Analysis> {
        self.docs.get(uri)?.analysis.as_ref()
    }
}

/// The edit that formats `text` with `tessera-fmt`: one replacement of the
/// whole document, none if it is already formatted, `None` if it has syntax
/// errors (a broken file is left alone).
pub fn format_edits(text: &str) -> Option<Vec<TextEdit>> {
    let formatted = tessera_fmt::format(text).ok()?;
    if formatted == text {
        return Some(Vec::new());
    }
    let lines = LineIndex::new(text);
    let end = lines.position(text, text.len() as u32);
    Some(vec![TextEdit {
        range: lsp_types::Range::new(Position::new(0, 0), end),
        new_text: formatted,
    }])
}
