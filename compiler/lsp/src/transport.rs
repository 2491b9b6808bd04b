//! The language server's stdio transport: the LSP base protocol's framing
//! (`Content-Length` headers, then a JSON body), read with limits so that no
//! input can make the server abort or hold memory it was only promised.
//!
//! A body is read as it arrives (never allocated from its announced
//! length), a body over [`MAX_BODY`] is read past and answered with an
//! error, and a body that is not a JSON-RPC message is answered with a parse
//! error (`-32700`); the session goes on after each. Header lines are
//! bounded too. The server itself talks to an in-memory
//! [`lsp_server::Connection`]; this module moves frames between it and
//! standard input and output.

use std::io::{self, BufRead, Read, Write};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use lsp_server::{Connection, Message};

/// The largest message body accepted, in bytes.
pub const MAX_BODY: u64 = 64 << 20;

/// The longest header line accepted, in bytes.
const MAX_HEADER_LINE: u64 = 8 << 10;

/// JSON-RPC: the body is not valid JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the message is not a valid request.
const INVALID_REQUEST: i64 = -32600;

/// One frame of the input.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A body within the limit.
    Body(Vec<u8>),
    /// A body of this many bytes, over [`MAX_BODY`]: read past, not kept.
    TooLarge(u64),
    /// Headers that are not the protocol's (the reason).
    BadHeader(String),
    /// The end of the input.
    End,
}

/// Reads the next frame from `r`.
pub fn read_frame(r: &mut impl BufRead) -> io::Result<Frame> {
    let mut length: Option<u64> = None;
    let mut bad: Option<String> = None;
    let mut any = false;
    loop {
        let mut line = Vec::new();
        let n = r
            .by_ref()
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(if any {
                Frame::BadHeader("the input ends inside the headers".into())
            } else {
                Frame::End
            });
        }
        any = true;
        if !line.ends_with(b"\n") {
            // Skip the rest of the overlong line.
            let mut rest = Vec::new();
            r.read_until(b'\n', &mut rest)?;
            bad.get_or_insert_with(|| format!("a header line over {MAX_HEADER_LINE} bytes"));
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        match text.split_once(':') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("content-length") => {
                match value.trim().parse::<u64>() {
                    Ok(n) => length = Some(n),
                    Err(_) => {
                        bad.get_or_insert_with(|| {
                            format!("`Content-Length: {}` is not a length", value.trim())
                        });
                    }
                }
            }
            Some(_) => {}
            None => {
                bad.get_or_insert_with(|| format!("`{text}` is not a header"));
            }
        }
    }
    if let Some(why) = bad {
        return Ok(Frame::BadHeader(why));
    }
    let Some(len) = length else {
        return Ok(Frame::BadHeader("no Content-Length header".into()));
    };
    if len > MAX_BODY {
        io::copy(&mut r.by_ref().take(len), &mut io::sink())?;
        return Ok(Frame::TooLarge(len));
    }
    let mut body = Vec::new();
    r.by_ref().take(len).read_to_end(&mut body)?;
    if (body.len() as u64) < len {
        return Ok(Frame::End);
    }
    Ok(Frame::Body(body))
}

/// Writes one framed body.
fn write_frame(w: &mut impl Write, body: &str) -> io::Result<()> {
    write!(w, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    w.flush()
}

/// A JSON-RPC error reply to a message whose id could not be read.
fn error_reply(code: i64, message: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    })
    .to_string()
}

/// What the writer thread sends.
enum Outgoing {
    /// A message of the server.
    Message(Message),
    /// A reply the transport makes itself.
    Raw(String),
}

/// Reads frames from `input` until it ends: messages go to `to_server`,
/// replies to bad frames to `out`.
fn read_loop(mut input: impl BufRead, to_server: Sender<Message>, out: Sender<Outgoing>) {
    loop {
        let reply = match read_frame(&mut input) {
            Ok(Frame::End) | Err(_) => return,
            Ok(Frame::Body(body)) => match serde_json::from_slice::<Message>(&body) {
                Ok(m) => {
                    if to_server.send(m).is_err() {
                        return;
                    }
                    continue;
                }
                Err(e) => error_reply(PARSE_ERROR, &format!("malformed message: {e}")),
            },
            Ok(Frame::TooLarge(n)) => error_reply(
                INVALID_REQUEST,
                &format!("a message of {n} bytes is over the {MAX_BODY}-byte limit"),
            ),
            Ok(Frame::BadHeader(why)) => error_reply(INVALID_REQUEST, &why),
        };
        if out.send(Outgoing::Raw(reply)).is_err() {
            return;
        }
    }
}

/// Writes everything `out` carries to `output`, framed, until every sender
/// is gone.
fn write_loop(mut output: impl Write, out: Receiver<Outgoing>) -> io::Result<()> {
    for o in out {
        match o {
            Outgoing::Message(m) => m.write(&mut output)?,
            Outgoing::Raw(body) => write_frame(&mut output, &body)?,
        }
    }
    Ok(())
}

/// The server's end of a transport over `input` and `output`, and the
/// thread that writes (join it once the server is done, to flush).
pub fn connect(
    input: impl BufRead + Send + 'static,
    output: impl Write + Send + 'static,
) -> (Connection, JoinHandle<io::Result<()>>) {
    let (server, client) = Connection::memory();
    let (out_tx, out_rx) = crossbeam_channel::unbounded::<Outgoing>();
    let replies = out_tx.clone();
    let to_server = client.sender;
    // The reader blocks on the input; it ends with it (or with the process).
    std::thread::spawn(move || read_loop(input, to_server, replies));
    let from_server = client.receiver;
    std::thread::spawn(move || {
        for m in from_server {
            if out_tx.send(Outgoing::Message(m)).is_err() {
                return;
            }
        }
    });
    let writer = std::thread::spawn(move || write_loop(output, out_rx));
    (server, writer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<Frame> {
        let mut r = io::Cursor::new(input.to_vec());
        let mut out = Vec::new();
        loop {
            let f = read_frame(&mut r).expect("a cursor does not fail");
            let end = f == Frame::End;
            out.push(f);
            if end {
                return out;
            }
        }
    }

    #[test]
    fn frames_are_read_within_limits() {
        let huge = format!("Content-Length: {}\r\n\r\n{{}}", u64::MAX);
        assert_eq!(
            frames(b"Content-Length: 2\r\n\r\n{}Content-Length: 1\r\n\r\n["),
            vec![
                Frame::Body(b"{}".to_vec()),
                Frame::Body(b"[".to_vec()),
                Frame::End
            ]
        );
        // A promised length is not allocated: the body ends early.
        assert_eq!(
            frames(huge.as_bytes()),
            vec![Frame::TooLarge(u64::MAX), Frame::End]
        );
        assert_eq!(
            frames(b"Content-Length: 9223372036854775807\r\n\r\nabc"),
            vec![Frame::TooLarge(9223372036854775807), Frame::End]
        );
        assert!(matches!(
            frames(b"Content-Length: -1\r\n\r\n")[0],
            Frame::BadHeader(_)
        ));
        assert!(matches!(frames(b"\r\n{}")[0], Frame::BadHeader(_)));
        let long = format!(
            "X-{}: 1\r\nContent-Length: 2\r\n\r\n{{}}",
            "a".repeat(20_000)
        );
        assert!(matches!(frames(long.as_bytes())[0], Frame::BadHeader(_)));
    }

    #[test]
    fn bad_messages_get_error_replies_and_the_session_goes_on() {
        let mut input = Vec::new();
        for body in [
            "{not json",
            r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#,
        ] {
            input.extend(format!("Content-Length: {}\r\n\r\n{body}", body.len()).bytes());
        }
        let (to_server, from_reader) = crossbeam_channel::unbounded();
        let (out, replies) = crossbeam_channel::unbounded();
        read_loop(io::Cursor::new(input), to_server, out);
        let reply = match replies.try_recv() {
            Ok(Outgoing::Raw(r)) => r,
            _ => panic!("no reply to the malformed body"),
        };
        assert!(reply.contains("-32700"), "{reply}");
        // The message after it still reaches the server.
        assert!(matches!(
            from_reader.try_recv(),
            Ok(Message::Notification(_))
        ));
    }
}
