//! The program an executable carries: its source (the runtime re-checks it
//! at start-up to rebuild the sites and the graphs its op calls run), a
//! hash of the Host IR its machine code was compiled from, and compiled
//! kernels (PTX) keyed like the compile cache.
//!
//! Layout: `TSRPROG2`, the total length (u64, little-endian), then fields
//! as a u64 length and bytes: file name, source, Host IR digest,
//! kernel count, then key and PTX per kernel, tuned-configuration count,
//! then key and database entry (JSON) per configuration, and last the BLAKE3 digest of
//! every field before it. The executable also holds the total length in a
//! symbol of its own ([`LEN_SYMBOL`]): a damaged length field cannot make
//! the runtime read past the bundle, and a damaged byte anywhere fails the
//! digest instead of changing what the program computes.

/// The executable's data symbol holding the bundle.
pub const SYMBOL: &str = "tessera_program";

/// The executable's data symbol holding the bundle's length (u64,
/// little-endian).
pub const LEN_SYMBOL: &str = "tessera_program_len";

/// The largest bundle the runtime reads.
pub const MAX_LEN: usize = 1 << 32;

const MAGIC: &[u8; 8] = b"TSRPROG2";

/// An embedded program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    /// The source file's name, for diagnostics.
    pub name: String,
    /// The source text.
    pub source: String,
    /// [`host_hash`] of the Host IR the machine code came from.
    pub host_hash: String,
    /// Compiled kernels: cache key and PTX text.
    pub kernels: Vec<(String, String)>,
    /// The tuned configurations its kernels were compiled with: tuning
    /// key and database entry (JSON), for kernels compiled at run time.
    pub tuned: Vec<(String, String)>,
}

/// The digest of a Host IR module's text form.
pub fn host_hash(m: &tessera_host::HostModule) -> String {
    tessera_launch::cache::digest(tessera_host::print_module(m).as_bytes())
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

impl Bundle {
    /// The bytes of the data symbol.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[0; 8]);
        put(&mut out, self.name.as_bytes());
        put(&mut out, self.source.as_bytes());
        put(&mut out, self.host_hash.as_bytes());
        put(&mut out, &(self.kernels.len() as u64).to_le_bytes());
        for (k, ptx) in &self.kernels {
            put(&mut out, k.as_bytes());
            put(&mut out, ptx.as_bytes());
        }
        put(&mut out, &(self.tuned.len() as u64).to_le_bytes());
        for (k, entry) in &self.tuned {
            put(&mut out, k.as_bytes());
            put(&mut out, entry.as_bytes());
        }
        let sum = tessera_launch::cache::digest(&out[16..]);
        put(&mut out, sum.as_bytes());
        let len = out.len() as u64;
        out[8..16].copy_from_slice(&len.to_le_bytes());
        out
    }

    /// The total length a bundle starting with `header` (at least 16
    /// bytes) claims, if the magic is right.
    pub fn length(header: &[u8]) -> Option<usize> {
        if header.len() < 16 || &header[..8] != MAGIC {
            return None;
        }
        usize::try_from(u64::from_le_bytes(header[8..16].try_into().ok()?)).ok()
    }

    /// Reads a bundle back; an error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Bundle, String> {
        let len = Bundle::length(bytes).ok_or("not a Tessera program bundle")?;
        if len != bytes.len() {
            return Err(format!("bundle of {} bytes claims {len}", bytes.len()));
        }
        let mut at = 16;
        let mut field = || -> Result<&[u8], String> {
            let n = bytes
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or("truncated bundle")?;
            let n = usize::try_from(n).map_err(|_| "bad field length")?;
            let f = bytes.get(at + 8..at + 8 + n).ok_or("truncated bundle")?;
            at += 8 + n;
            Ok(f)
        };
        let text =
            |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| "a field is not UTF-8".to_owned());
        let name = text(field()?)?;
        let source = text(field()?)?;
        let word = |b: &[u8]| -> Result<u64, String> {
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| "bad word")?))
        };
        let host_hash = text(field()?)?;
        let count = word(field()?)?;
        let mut kernels = Vec::new();
        for _ in 0..count {
            let k = text(field()?)?;
            let p = text(field()?)?;
            kernels.push((k, p));
        }
        let count = word(field()?)?;
        let mut tuned = Vec::new();
        for _ in 0..count {
            let k = text(field()?)?;
            let e = text(field()?)?;
            tuned.push((k, e));
        }
        let sum = text(field()?)?;
        drop(field);
        let fields_end = bytes.len() - 8 - sum.len();
        if at != bytes.len() || tessera_launch::cache::digest(&bytes[16..fields_end]) != sum {
            return Err("the bundle's checksum does not match its contents".into());
        }
        Ok(Bundle {
            name,
            source,
            host_hash,
            kernels,
            tuned,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let b = Bundle {
            name: "a.tsr".into(),
            source: "fn main() {}".into(),
            host_hash: "0123abcd".into(),
            kernels: vec![("k".into(), "ptx".into())],
            tuned: vec![("t".into(), "{}".into())],
        };
        let bytes = b.encode();
        assert_eq!(Bundle::decode(&bytes).unwrap(), b);
        for cut in [0, 8, 16, 20, bytes.len() - 1] {
            assert!(Bundle::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // Any one byte changed after the header fails the checksum (or the
        // framing), never decodes to another program.
        for i in 16..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x20;
            assert!(Bundle::decode(&bad).is_err(), "byte {i} changed");
        }
    }
}
