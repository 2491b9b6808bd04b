//! The Tessera language server (`tsrc lsp`): the only crate that knows LSP.
//!
//! It wraps the pure compiler (`tessera-driver`, `tessera-fmt`) for editors:
//! every open document is compiled up to the checker on each change, and
//! the results answer the requests.
//!
//! Code map:
//! - [`server`]: the loop, document sync, dispatch, panic containment;
//! - [`analysis`]: one compiled document and the index of its names;
//! - [`diagnostics`]: our `Diagnostic` values as LSP diagnostics;
//! - [`hover`], [`navigation`] (definition, references, outline),
//!   [`completion`], [`signature`] (one-line signatures), [`help`]
//!   (signature help), [`tokens`] (semantic tokens); formatting is
//!   [`server::format_edits`];
//! - [`lines`]: byte offsets to UTF-16 positions, stdlib URIs;
//! - [`transport`]: the stdio framing, with limits on what a client sends.
//!
//! Stdlib definitions live in read-only `tessera-std:///MODULE.tsr`
//! documents; the custom request `tessera/stdSource` (params: a
//! `TextDocumentIdentifier`) returns their text.

pub mod analysis;
pub mod completion;
pub mod diagnostics;
pub mod help;
pub mod hover;
pub mod lines;
pub mod navigation;
pub mod server;
pub mod signature;
pub mod tokens;
pub mod transport;

use std::io;

use lsp_server::Connection;
use lsp_types::{
    CompletionOptions, HoverProviderCapability, OneOf, PositionEncodingKind,
    SemanticTokensFullOptions, SemanticTokensOptions, ServerCapabilities, ServerInfo,
    SignatureHelpOptions, TextDocumentSyncCapability, TextDocumentSyncKind,
};

/// What the server can do, announced in the `initialize` response.
pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(PositionEncodingKind::UTF16),
        text_document_sync: Some(TextDocumentSyncCapability::Kind(
            TextDocumentSyncKind::INCREMENTAL,
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec![".".into(), "(".into()]),
            ..CompletionOptions::default()
        }),
        signature_help_provider: Some(SignatureHelpOptions {
            trigger_characters: Some(vec!["(".into(), ",".into()]),
            retrigger_characters: None,
            work_done_progress_options: Default::default(),
        }),
        document_symbol_provider: Some(OneOf::Left(true)),
        document_formatting_provider: Some(OneOf::Left(true)),
        semantic_tokens_provider: Some(
            SemanticTokensOptions {
                legend: tokens::legend(),
                full: Some(SemanticTokensFullOptions::Bool(true)),
                range: None,
                ..SemanticTokensOptions::default()
            }
            .into(),
        ),
        ..ServerCapabilities::default()
    }
}

/// Performs the `initialize` handshake on `conn`, then serves until `exit`.
pub fn run(conn: Connection) -> Result<(), String> {
    let caps = serde_json::to_value(capabilities()).map_err(|e| e.to_string())?;
    let info = serde_json::to_value(ServerInfo {
        name: "tsrc lsp".into(),
        version: Some(env!("CARGO_PKG_VERSION").into()),
    })
    .map_err(|e| e.to_string())?;
    let (id, _params) = conn.initialize_start().map_err(|e| e.to_string())?;
    let result = serde_json::json!({ "capabilities": caps, "serverInfo": info });
    conn.initialize_finish(id, result)
        .map_err(|e| e.to_string())?;
    server::Server::new(conn).serve()
}

/// Serves the language server protocol over standard input and output until
/// the client sends `exit`.
pub fn run_stdio() -> Result<(), String> {
    let (conn, writer) = transport::connect(io::BufReader::new(io::stdin()), io::stdout());
    let served = run(conn);
    // The server's end is gone: the writer flushes what is left and ends.
    let written = writer
        .join()
        .map_err(|_| "the language server's writer failed".to_owned())?;
    served?;
    written.map_err(|e| format!("cannot write to the client: {e}"))
}
