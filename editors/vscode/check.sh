#!/usr/bin/env bash
# Checks the VS Code extension: installs its npm dependencies (once per
# package-lock.json), runs the grammar tests, the grammar's cross-check
# against the compiler and the client's test, and packages the .vsix into a
# temporary folder. Exits non-zero on any failure. Run from anywhere; the
# Rust test tests/editors.rs runs it under `cargo test`.
#
# Without node or npm it prints a note and succeeds, so machines without a
# JavaScript toolchain can still run the Rust tests.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "editors/vscode/check.sh: node or npm not found; skipping the VS Code extension checks"
    exit 0
fi

# One check at a time: two runs must not install into node_modules together.
if command -v flock >/dev/null 2>&1; then
    exec 9<check.sh
    flock 9
fi

# npm ci only when node_modules does not match package-lock.json (and this
# node version): the stamp holds the hash of both from the last install.
stamp=node_modules/.check-stamp
want="$(node -e '
    const crypto = require("crypto");
    const fs = require("fs");
    const hash = crypto.createHash("sha256");
    hash.update(fs.readFileSync("package-lock.json"));
    hash.update(process.version);
    console.log(hash.digest("hex"));
')"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "npm dependencies up to date"
else
    echo "installing npm dependencies (npm ci)"
    # No install scripts: nothing used here needs one, and the optional ones
    # (keytar, vsce-sign) would fetch binaries from outside the registry.
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
    echo "$want" >"$stamp"
fi

bin=node_modules/.bin

assertions="$(cat test/grammar/*.tsr | grep -cE '^// +(\^|<[~-])' || true)"
echo "grammar tests: $(ls test/grammar/*.tsr | wc -l | tr -d ' ') files, $assertions assertions"
"$bin/vscode-tmgrammar-test" --compact "test/grammar/*.tsr"

node test/corpus.js
node test/client.js

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$bin/vsce" package --allow-missing-repository --out "$out/tessera.vsix" </dev/null
if [[ ! -s "$out/tessera.vsix" ]]; then
    echo "vsce did not write $out/tessera.vsix" >&2
    exit 1
fi
echo "packaged tessera.vsix: $(wc -c <"$out/tessera.vsix" | tr -d ' ') bytes"
