//! Source files and byte spans: the coordinates every diagnostic points at.

use std::fmt;

/// Index of a file in a [`SourceMap`]. Displayed as `file3`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct FileId(pub u32);

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file{}", self.0)
    }
}

/// A half-open byte range `lo..hi` in one source file.
///
/// Invariant: `lo <= hi`, and both lie on UTF-8 character boundaries of the
/// file's text.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct Span {
    /// The file the range lies in.
    pub file: FileId,
    /// First byte.
    pub lo: u32,
    /// One past the last byte.
    pub hi: u32,
}

impl Span {
    /// A span from byte `lo` to byte `hi` of `file`.
    pub fn new(file: FileId, lo: u32, hi: u32) -> Span {
        debug_assert!(lo <= hi);
        Span { file, lo, hi }
    }

    /// The smallest span covering both `self` and `other` (same file).
    pub fn to(self, other: Span) -> Span {
        Span {
            file: self.file,
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }

    /// Length in bytes.
    pub fn len(self) -> u32 {
        self.hi - self.lo
    }

    /// Whether the span covers no bytes.
    pub fn is_empty(self) -> bool {
        self.lo == self.hi
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.lo, self.hi)
    }
}

/// One source file: its display name and its text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Name shown in diagnostics (a path, or `<std>/nn.tsr` for the stdlib).
    pub name: String,
    /// The text. Files that were not valid UTF-8 are stored lossily converted.
    pub text: String,
    /// Byte offset of the start of every line, for line/column lookups.
    line_starts: Vec<u32>,
}

impl SourceFile {
    /// A file named `name` holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        SourceFile {
            name: name.into(),
            text,
            line_starts,
        }
    }

    /// Zero-based (line, column-in-characters) of byte `offset`.
    pub fn line_col(&self, offset: u32) -> (u32, u32) {
        let line = match self.line_starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next - 1,
        };
        let start = self.line_starts[line] as usize;
        let end = (offset as usize).min(self.text.len());
        let col = self
            .text
            .get(start..end)
            .map_or(end - start, |s| s.chars().count());
        (line as u32, col as u32)
    }

    /// Byte offset of zero-based `line` and UTF-16-free character `col`,
    /// clamped to the file.
    pub fn offset(&self, line: u32, col: u32) -> u32 {
        let Some(&start) = self.line_starts.get(line as usize) else {
            return self.text.len() as u32;
        };
        let rest = &self.text[start as usize..];
        let bytes: usize = rest
            .chars()
            .take_while(|&c| c != '\n')
            .take(col as usize)
            .map(char::len_utf8)
            .sum();
        start + bytes as u32
    }

    /// The text covered by `span`.
    pub fn slice(&self, span: Span) -> &str {
        self.text
            .get(span.lo as usize..span.hi as usize)
            .unwrap_or("")
    }
}

/// All files of one compilation, addressed by [`FileId`].
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile::new(name, text));
        id
    }

    /// The file with id `id`. Panics on an id from another map (a bug).
    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    /// All files with their ids.
    pub fn iter(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }
}
