//! The language server driven in-process over an in-memory connection, as an
//! editor drives it: handshake, document sync, every request it answers, and
//! shutdown. Positions are found by searching the document's text.

mod support;

use serde_json::{json, Value};
use support::{pos, Client};

const URI: &str = "file:///work/gemm.tsr";

const SRC: &str = r#"numerics standard;

import std.nn;

/// C = A @ B, accumulated in fp32.
op gemm(a: tensor<M, K, bf16>, b: tensor<K, N, bf16>) -> tensor<M, N, bf16> {
    let c = a @ b;
    return gelu(c);
}

schedule gemm on sm_90 {
    tile(bm = 128, bn = 128, bk = 64);
    warps(8);
    pipeline_stages(3);
    async_copy;
}

fn main() {
    let a = randn<bf16>([256, 192], seed = 1);
    let b = randn<bf16>([192, 128], seed = 2);
    print(gemm(a, b)[0, 0:8]);
}
"#;

fn hover_text(v: &Value) -> String {
    v["contents"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn labels(v: &Value) -> Vec<String> {
    let items = v
        .as_array()
        .or_else(|| v["items"].as_array())
        .cloned()
        .unwrap_or_default();
    items
        .iter()
        .map(|i| i["label"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn initialize_announces_the_features() {
    let client = Client::start();
    let caps = &client.init["capabilities"];
    for feature in [
        "hoverProvider",
        "definitionProvider",
        "referencesProvider",
        "completionProvider",
        "documentSymbolProvider",
        "documentFormattingProvider",
        "semanticTokensProvider",
        "signatureHelpProvider",
    ] {
        assert!(!caps[feature].is_null(), "missing {feature}: {caps}");
    }
    assert_eq!(caps["textDocumentSync"], json!(2));
    client.shutdown();
}

#[test]
fn diagnostics_follow_every_change() {
    let mut client = Client::start();
    assert_eq!(client.open(URI, SRC), Vec::<String>::new());

    // A shape error: the checker's code arrives, with the related location.
    let bad = SRC.replace("let c = a @ b;", "let c = a @ a;");
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": URI, "version": 2 }, "contentChanges": [{ "text": bad }] }),
    );
    let d = client.diagnostics();
    assert_eq!(d["version"], json!(2));
    let first = &d["diagnostics"][0];
    assert_eq!(first["code"], json!("E0201"), "{d}");
    assert_eq!(first["severity"], json!(1));
    assert_eq!(first["range"]["start"]["line"], json!(6));

    // An incremental edit that breaks the syntax: a parse error, server up.
    let at = pos(&bad, "return", 0, 0);
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": URI, "version": 3 },
                "contentChanges": [{ "range": { "start": at, "end": at }, "text": "let = = (" }] }),
    );
    let codes = client.codes();
    assert!(codes.iter().any(|c| c.starts_with("E00")), "{codes:?}");
    let h = client.at("textDocument/hover", URI, pos(SRC, "gelu", 0, 1));
    let _ = h; // Any answer will do: the point is that the server answers.

    // Back to the original text: no diagnostics.
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": URI, "version": 4 }, "contentChanges": [{ "text": SRC }] }),
    );
    assert_eq!(client.codes(), Vec::<String>::new());
    client.shutdown();
}

#[test]
fn warnings_carry_their_codes() {
    let mut client = Client::start();
    let src = SRC.replace("pipeline_stages(3)", "pipeline_stages(4)");
    let codes = client.open(URI, &src);
    assert_eq!(codes, vec!["W0301".to_owned()]);
    client.shutdown();
}

#[test]
fn hover_shows_types_docs_and_schedules() {
    let mut client = Client::start();
    client.open(URI, SRC);
    // The type of an expression.
    let h = hover_text(&client.at("textDocument/hover", URI, pos(SRC, "a @ b", 0, 2)));
    assert!(h.contains("tensor<M, N,"), "{h}");
    // A local's use: its checked type.
    let h = hover_text(&client.at("textDocument/hover", URI, pos(SRC, "gelu(c)", 0, 5)));
    assert!(
        h.contains("let c") && h.contains("type: `tensor<M, N,"),
        "{h}"
    );
    // A stdlib op: signature and docs.
    let h = hover_text(&client.at("textDocument/hover", URI, pos(SRC, "gelu", 0, 1)));
    assert!(h.contains("op gelu<T: float>"), "{h}");
    assert!(h.contains("Gaussian error linear unit"), "{h}");
    assert!(h.contains("std.nn"), "{h}");
    // A user op: its doc comment.
    let h = hover_text(&client.at("textDocument/hover", URI, pos(SRC, "gemm(a, b)", 0, 1)));
    assert!(h.contains("C = A @ B"), "{h}");
    // Host code: a concrete shape.
    let h = hover_text(&client.at("textDocument/hover", URI, pos(SRC, "gemm(a, b)", 0, 5)));
    assert!(h.contains("tensor<256, 192, bf16>"), "{h}");
    // A schedule knob: the resolved configuration.
    let h = hover_text(&client.at("textDocument/hover", URI, pos(SRC, "warps(8)", 0, 1)));
    assert!(h.contains("Warps per thread block"), "{h}");
    assert!(h.contains("bm = 128, bn = 128, bk = 64"), "{h}");
    assert!(h.contains("pipeline stages: 3"), "{h}");
    // The schedule itself: the Schedule IR's occupancy estimate.
    let h = hover_text(&client.at("textDocument/hover", URI, pos(SRC, "schedule gemm", 0, 1)));
    assert!(h.contains("occupancy estimate on `sm_90`"), "{h}");
    assert!(h.contains("8 warps") && h.contains("blocks/SM ("), "{h}");
    client.shutdown();
}

#[test]
fn definition_and_references() {
    let mut client = Client::start();
    client.open(URI, SRC);
    // A local `let`.
    let d = client.at("textDocument/definition", URI, pos(SRC, "gelu(c)", 0, 5));
    assert_eq!(d["uri"], json!(URI));
    assert_eq!(d["range"]["start"], pos(SRC, "c = a", 0, 0));
    // A parameter.
    let d = client.at("textDocument/definition", URI, pos(SRC, "a @ b", 0, 0));
    assert_eq!(d["range"]["start"], pos(SRC, "a: tensor", 0, 0));
    // An op called from host code, and the schedule's target.
    let d = client.at("textDocument/definition", URI, pos(SRC, "gemm(a, b)", 0, 0));
    assert_eq!(d["range"]["start"], pos(SRC, "gemm(a: ", 0, 0));
    let d = client.at("textDocument/definition", URI, pos(SRC, "gemm on", 0, 0));
    assert_eq!(d["range"]["start"], pos(SRC, "gemm(a: ", 0, 0));
    // A stdlib op: its definition in the stdlib document.
    let d = client.at("textDocument/definition", URI, pos(SRC, "gelu", 0, 0));
    assert_eq!(d["uri"], json!("tessera-std:///nn.tsr"));
    let std_text = client.request(
        "tessera/stdSource",
        json!({ "uri": "tessera-std:///nn.tsr" }),
    );
    let std_text = std_text.as_str().unwrap();
    assert_eq!(d["range"]["start"], pos(std_text, "gelu<", 0, 0));
    // References of the op: definition, schedule, call.
    let r = client.at("textDocument/references", URI, pos(SRC, "gemm(a: ", 0, 0));
    assert_eq!(r.as_array().unwrap().len(), 3, "{r}");
    // References of a dimension symbol: every mention in the signature.
    let r = client.at("textDocument/references", URI, pos(SRC, "K, bf16", 0, 0));
    assert_eq!(r.as_array().unwrap().len(), 2, "{r}");
    client.shutdown();
}

#[test]
fn mesh_axes_resolve() {
    let src = include_str!("../../../examples/sharded_mlp.tsr");
    let mut client = Client::start();
    assert_eq!(client.open(URI, src), Vec::<String>::new());
    let d = client.at("textDocument/definition", URI, pos(src, "tp) + b2", 0, 0));
    assert_eq!(d["range"]["start"], pos(src, "tp = 4", 0, 0));
    let r = client.at("textDocument/references", URI, pos(src, "tp = 4", 0, 0));
    assert_eq!(r.as_array().unwrap().len(), 5, "{r}");
    let h = hover_text(&client.at("textDocument/hover", URI, pos(src, "h @ w2", 1, 2)));
    assert!(h.contains("partial"), "{h}");
    client.shutdown();
}

#[test]
fn completion_knows_the_context() {
    let mut client = Client::start();
    // Inside a schedule block, half-written: knobs.
    let src = SRC.replace("    async_copy;\n", "    async_copy;\n    pi\n");
    client.open(URI, &src);
    let c = labels(&client.at("textDocument/completion", URI, pos(&src, "    pi\n", 0, 6)));
    for knob in ["tile", "warps", "pipeline_stages", "vectorize", "autotune"] {
        assert!(c.contains(&knob.to_owned()), "{c:?}");
    }
    assert!(!c.contains(&"let".to_owned()), "{c:?}");
    // Inside a knob's parentheses: its argument names.
    let c = labels(&client.at("textDocument/completion", URI, pos(&src, "bm = 128", 0, 0)));
    assert_eq!(c, vec!["bm", "bn", "bk"]);
    // After `on`: architectures.
    let c = labels(&client.at("textDocument/completion", URI, pos(&src, "sm_90", 0, 0)));
    assert!(c.contains(&"sm_80".to_owned()), "{c:?}");
    // In a body: keywords, dtypes, stdlib ops, locals in scope.
    let c = labels(&client.at(
        "textDocument/completion",
        URI,
        pos(&src, "return gelu", 0, 7),
    ));
    for want in ["let", "fp32", "softmax", "exp", "c", "a", "gemm", "M"] {
        assert!(c.contains(&want.to_owned()), "{want} missing from {c:?}");
    }
    assert!(
        !c.contains(&"randn".to_owned()),
        "host builtins are not in scope in ops"
    );
    client.shutdown();
}

#[test]
fn signature_help_marks_the_argument() {
    let mut client = Client::start();
    let src = SRC.replace("return gelu(c);", "return softmax(c, axis = -1);");
    client.open(URI, &src);
    let s = client.request(
        "textDocument/signatureHelp",
        json!({ "textDocument": { "uri": URI }, "position": pos(&src, "axis =", 0, 2) }),
    );
    let sig = &s["signatures"][0];
    assert!(
        sig["label"]
            .as_str()
            .unwrap()
            .starts_with("op softmax<T: float>(x: "),
        "{s}"
    );
    assert_eq!(s["activeParameter"], json!(1));
    client.shutdown();
}

#[test]
fn formatting_symbols_and_tokens() {
    let mut client = Client::start();
    let messy = SRC.replace("let c = a @ b;", "let   c=a@b ;");
    client.open(URI, &messy);
    let edits = client.request(
        "textDocument/formatting",
        json!({ "textDocument": { "uri": URI }, "options": { "tabSize": 4, "insertSpaces": true } }),
    );
    assert_eq!(edits.as_array().unwrap().len(), 1, "{edits}");
    assert_eq!(edits[0]["newText"], json!(SRC));

    let s = client.request(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": URI } }),
    );
    let names: Vec<&str> = s
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["gemm", "schedule gemm on sm_90", "main"]);
    assert_eq!(s[0]["children"].as_array().unwrap().len(), 2);

    let t = client.request(
        "textDocument/semanticTokens/full",
        json!({ "textDocument": { "uri": URI } }),
    );
    let data = t["data"].as_array().unwrap();
    assert_eq!(data.len() % 5, 0);
    // The first token is the keyword `numerics` at 0:0; the doc comment is
    // a comment token.
    assert_eq!(
        &data[..5],
        &[json!(0), json!(0), json!(8), json!(0), json!(0)]
    );
    assert!(data.chunks(5).any(|t| t[3] == json!(7)), "no comment token");
    client.shutdown();
}

#[test]
fn broken_input_never_kills_the_server() {
    let mut client = Client::start();
    client.open(URI, SRC);
    // Every prefix of the file, as if typed, with requests in between.
    for (version, cut) in (0..SRC.len()).step_by(7).enumerate() {
        let text = &SRC[..cut];
        client.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": URI, "version": version + 2 }, "contentChanges": [{ "text": text }] }),
        );
        client.diagnostics();
        let end = pos(&format!("{text}$"), "$", 0, 0);
        for method in [
            "textDocument/hover",
            "textDocument/completion",
            "textDocument/definition",
        ] {
            client.at(method, URI, end.clone());
        }
        client.request(
            "textDocument/semanticTokens/full",
            json!({ "textDocument": { "uri": URI } }),
        );
        client.request(
            "textDocument/documentSymbol",
            json!({ "textDocument": { "uri": URI } }),
        );
    }
    // Unknown methods and bad params are errors, not crashes.
    assert!(client.try_request("tessera/nope", Value::Null).is_err());
    assert!(client
        .try_request("textDocument/hover", json!({ "bogus": 1 }))
        .is_err());
    client.shutdown();
}

#[test]
fn rechecks_a_large_file() {
    // About 5,000 lines: many copies of an op, each with a few statements.
    let mut src = String::from("numerics standard;\nimport std.nn;\n");
    let mut n = 0;
    while src.lines().count() < 5000 {
        src.push_str(&format!(
            "/// Block {n}.\nop block{n}(x: tensor<T, D, fp32>, w: tensor<D, D, fp32>, b: tensor<D, fp32>) -> tensor<T, D, fp32> {{\n    let h = x @ w + b;\n    let g = gelu(h);\n    let s = softmax(g, axis = -1);\n    return s * 0.5 + h;\n}}\n\n"
        ));
        n += 1;
    }
    let mut client = Client::start();
    assert_eq!(client.open(URI, &src), Vec::<String>::new());
    let start = std::time::Instant::now();
    let rounds = 5;
    for v in 0..rounds {
        let at = pos(&src, "return s", n / 2, 0);
        client.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": URI, "version": v + 2 },
                    "contentChanges": [{ "range": { "start": at, "end": at }, "text": " " }] }),
        );
        assert_eq!(client.codes(), Vec::<String>::new());
    }
    let per = start.elapsed() / rounds as u32;
    eprintln!(
        "re-check of {} lines ({} ops): {:.1} ms per change",
        src.lines().count(),
        n,
        per.as_secs_f64() * 1e3
    );
    let h = hover_text(&client.at("textDocument/hover", URI, pos(&src, "x @ w", n - 1, 2)));
    assert!(h.contains("tensor<T, D, fp32>"), "{h}");
    client.shutdown();
}
