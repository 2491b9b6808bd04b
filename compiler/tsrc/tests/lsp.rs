//! `tsrc lsp` over real stdio: one editor session through the binary,
//! framed by hand (initialize, didOpen, diagnostics, hover, shutdown, exit).
//! The features themselves are tested in-process in `compiler/lsp/tests`.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

fn send(stdin: &mut impl Write, body: &str) {
    write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    stdin.flush().unwrap();
}

/// Reads one framed message body.
fn recv(stdout: &mut BufReader<ChildStdout>) -> String {
    let mut len = 0;
    loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "server closed stdout"
        );
        let line = line.trim();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            len = v.parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    stdout.read_exact(&mut body).unwrap();
    String::from_utf8(body).unwrap()
}

/// Reads messages until one contains `needle`.
fn recv_until(stdout: &mut BufReader<ChildStdout>, needle: &str) -> String {
    loop {
        let msg = recv(stdout);
        if msg.contains(needle) {
            return msg;
        }
    }
}

/// A `tsrc lsp` process past the `initialize` handshake, and the reply
/// to `initialize`.
fn start() -> (Child, ChildStdin, BufReader<ChildStdout>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("tsrc lsp starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}"#,
    );
    let init = recv_until(&mut stdout, r#""id":1"#);
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#,
    );
    (child, stdin, stdout, init)
}

#[test]
fn a_session_over_stdio() {
    let (mut child, mut stdin, mut stdout, init) = start();
    assert!(init.contains("hoverProvider"), "{init}");

    // `x @ x` of a vector is its dot product, a scalar: not the declared
    // vector (E0204).
    let text = r#"op f(x: tensor<N, fp32>) -> tensor<N, fp32> {\n    return exp(x @ x);\n}\n"#;
    send(
        &mut stdin,
        &format!(
            r#"{{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{{"textDocument":{{"uri":"file:///t.tsr","languageId":"tessera","version":1,"text":"{text}"}}}}}}"#
        ),
    );
    let diags = recv_until(&mut stdout, "publishDiagnostics");
    assert!(diags.contains(r#""code":"E0204""#), "{diags}");

    // Hover on `exp`: its stdlib docs.
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":2,"method":"textDocument/hover","params":{"textDocument":{"uri":"file:///t.tsr"},"position":{"line":1,"character":12}}}"#,
    );
    let hover = recv_until(&mut stdout, r#""id":2"#);
    assert!(hover.contains("e^x, elementwise"), "{hover}");

    // A broken edit: diagnostics change, the server stays up.
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","method":"textDocument/didChange","params":{"textDocument":{"uri":"file:///t.tsr","version":2},"contentChanges":[{"text":"op f(x: tensor<N, fp32>) -> tensor<N, fp32> {\n    return exp(x +;\n}\n"}]}}"#,
    );
    let broken = recv_until(&mut stdout, "publishDiagnostics");
    assert!(broken.contains(r#""code":"E0"#), "{broken}");
    assert!(!broken.contains("E0204"), "{broken}");

    // Fixed again: `y` is used twice; definition and completion.
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","method":"textDocument/didChange","params":{"textDocument":{"uri":"file:///t.tsr","version":3},"contentChanges":[{"text":"op f(x: tensor<N, fp32>) -> tensor<N, fp32> {\n    let y = exp(x);\n    return y  *  y;\n}\n"}]}}"#,
    );
    recv_until(&mut stdout, "publishDiagnostics");
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":4,"method":"textDocument/definition","params":{"textDocument":{"uri":"file:///t.tsr"},"position":{"line":2,"character":11}}}"#,
    );
    let def = recv_until(&mut stdout, r#""id":4"#);
    assert!(def.contains(r#""line":1"#), "{def}");
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":5,"method":"textDocument/completion","params":{"textDocument":{"uri":"file:///t.tsr"},"position":{"line":2,"character":11}}}"#,
    );
    let completion = recv_until(&mut stdout, r#""id":5"#);
    assert!(
        completion.contains(r#""label":"softmax""#) || completion.contains(r#""label":"exp""#),
        "{completion}"
    );
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":6,"method":"textDocument/formatting","params":{"textDocument":{"uri":"file:///t.tsr"},"options":{"tabSize":4,"insertSpaces":true}}}"#,
    );
    let formatting = recv_until(&mut stdout, r#""id":6"#);
    assert!(formatting.contains("return y * y;"), "{formatting}");

    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":3,"method":"shutdown"}"#,
    );
    recv_until(&mut stdout, r#""id":3"#);
    send(&mut stdin, r#"{"jsonrpc":"2.0","method":"exit"}"#);
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// A client that sends garbage does not end the session: a body that is not
/// JSON gets a parse error, an absurd Content-Length is neither allocated
/// nor fatal, and the server still answers afterwards.
#[test]
fn hostile_frames_do_not_end_the_session() {
    let (mut child, mut stdin, mut stdout, _) = start();
    send(&mut stdin, "{this is not json");
    let err = recv(&mut stdout);
    assert!(err.contains("-32700"), "{err}");
    // Over the limit: 65 MiB announced and sent, read past.
    let big = 65usize << 20;
    write!(stdin, "Content-Length: {big}\r\n\r\n").unwrap();
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..65 {
        stdin.write_all(&chunk).unwrap();
    }
    stdin.flush().unwrap();
    let err = recv(&mut stdout);
    assert!(err.contains("over the"), "{err}");
    // Still serving.
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":2,"method":"shutdown"}"#,
    );
    let shut = recv_until(&mut stdout, r#""id":2"#);
    assert!(shut.contains("result"), "{shut}");
    send(&mut stdin, r#"{"jsonrpc":"2.0","method":"exit"}"#);
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");

    // An absurd length and then the end of the input: the server ends
    // without aborting.
    let mut child = Command::new(env!("CARGO_BIN_EXE_tsrc"))
        .arg("lsp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tsrc lsp starts");
    let mut stdin = child.stdin.take().unwrap();
    write!(stdin, "Content-Length: 9223372036854775807\r\n\r\nabc").unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("internal compiler error"), "{err}");
    assert_ne!(o.status.code(), Some(101), "{err}");
    assert_ne!(o.status.code(), None, "killed by a signal: {err}");
}
