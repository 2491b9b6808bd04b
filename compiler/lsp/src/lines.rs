//! Positions: byte offsets of our spans to and from LSP line/UTF-16 positions,
//! and the URIs of the files a compilation holds.

use lsp_types::{Position, Range, Uri};
use std::str::FromStr;
use tessera_driver::diagnostics::{FileId, Span};
use tessera_driver::Compilation;

/// The scheme of the read-only standard-library documents
/// (`tessera-std:///nn.tsr`) that go-to-definition points into.
pub const STD_SCHEME: &str = "tessera-std";

/// The start of every line of one text, for offset/position conversion.
///
/// LSP columns count UTF-16 code units; ours are byte offsets. Tessera
/// identifiers are ASCII, but comments and strings may hold any character,
/// so the conversion walks the line's characters.
#[derive(Clone, Debug)]
pub struct LineIndex {
    starts: Vec<u32>,
}

impl LineIndex {
    /// Indexes `text`.
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        LineIndex { starts }
    }

    /// The LSP position of byte `offset` of `text` (clamped to the text).
    pub fn position(&self, text: &str, offset: u32) -> Position {
        let offset = (offset as usize).min(text.len());
        let line = self.starts.partition_point(|&s| s as usize <= offset) - 1;
        let start = self.starts[line] as usize;
        let character = text
            .get(start..offset)
            .map_or(offset - start, |s| s.encode_utf16().count());
        Position::new(line as u32, character as u32)
    }

    /// The byte offset of LSP position `pos` in `text`, clamped to its line
    /// and to the text.
    pub fn offset(&self, text: &str, pos: Position) -> u32 {
        let Some(&start) = self.starts.get(pos.line as usize) else {
            return text.len() as u32;
        };
        let mut units = 0u32;
        let mut bytes = start as usize;
        for c in text.get(start as usize..).unwrap_or("").chars() {
            if c == '\n' || units >= pos.character {
                break;
            }
            units += c.len_utf16() as u32;
            bytes += c.len_utf8();
        }
        bytes as u32
    }

    /// The LSP range of the byte range `lo..hi` of `text`.
    pub fn range(&self, text: &str, lo: u32, hi: u32) -> Range {
        Range::new(self.position(text, lo), self.position(text, hi))
    }
}

/// The URI of the stdlib module file `<std>/nn.tsr`.
pub fn std_uri(module: &str) -> Option<Uri> {
    Uri::from_str(&format!("{STD_SCHEME}:///{module}.tsr")).ok()
}

/// The source text of a stdlib URI (`tessera-std:///nn.tsr`), if it names one.
pub fn std_source(uri: &str) -> Option<&'static str> {
    let module = uri
        .strip_prefix(STD_SCHEME)?
        .strip_prefix(":///")?
        .strip_suffix(".tsr")?;
    tessera_driver::STDLIB
        .iter()
        .find(|(m, _)| m.name() == module)
        .map(|(_, text)| *text)
}

/// The URI and range of `span` in a compilation whose input file 0 is the
/// document `doc`; stdlib spans get `tessera-std` URIs.
pub fn location(comp: &Compilation, doc: &Uri, span: Span) -> Option<lsp_types::Location> {
    let file = comp.sources.iter().find(|(id, _)| *id == span.file)?.1;
    let uri = if span.file == FileId(0) {
        doc.clone()
    } else {
        let (_, module, _) = comp.stdlib.iter().find(|(id, _, _)| *id == span.file)?;
        std_uri(module.name())?
    };
    let lines = LineIndex::new(&file.text);
    Some(lsp_types::Location::new(
        uri,
        lines.range(&file.text, span.lo, span.hi),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_round_trip() {
        let text = "ab\n// é𝄞x\nlast";
        let lines = LineIndex::new(text);
        let x = text.find('x').unwrap() as u32;
        let pos = lines.position(text, x);
        assert_eq!(pos, Position::new(1, 6));
        assert_eq!(lines.offset(text, pos), x);
        assert_eq!(lines.offset(text, Position::new(9, 0)), text.len() as u32);
        assert_eq!(lines.offset(text, Position::new(0, 99)), 2);
    }

    #[test]
    fn std_uris_resolve() {
        let uri = std_uri("nn").unwrap();
        assert!(std_source(uri.as_str()).unwrap().contains("softmax"));
    }
}
