// Checks the TextMate grammar against the compiler's own sources.
//
// 1. Every keyword and dtype the lexer (compiler/syntax/src/lexer.rs) knows,
//    every schedule knob the checker (compiler/sema/src/check/schedule.rs) accepts
//    and every architecture the compiler knows (compiler/core/src/arch.rs)
//    gets its grammar scope, so the grammar cannot fall behind the language.
// 2. Every .tsr file of examples/, stdlib/ and tests/ tokenizes with no
//    `invalid` token and leaves no region open at its end (a region that
//    never closes would colour the rest of a file wrongly).
//
// Run from editors/vscode: `node test/corpus.js`. Exits 1 on any failure.

"use strict";

const fs = require("fs");
const path = require("path");
const oniguruma = require("vscode-oniguruma");
const textmate = require("vscode-textmate");

const EXT = path.resolve(__dirname, "..");
const ROOT = path.resolve(EXT, "..", "..");
const GRAMMAR = path.join(EXT, "syntaxes", "tessera.tmLanguage.json");

const failures = [];
function fail(message) {
  failures.push(message);
}

async function loadGrammar() {
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve("vscode-oniguruma")), "onig.wasm"));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new textmate.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (text) => new oniguruma.OnigString(text),
    }),
    loadGrammar: async (scopeName) =>
      scopeName === "source.tessera"
        ? textmate.parseRawGrammar(fs.readFileSync(GRAMMAR, "utf8"), GRAMMAR)
        : null,
  });
  return registry.loadGrammar("source.tessera");
}

/** Tokenizes `text`; returns its tokens as { text, scopes, line } and the final rule stack. */
function tokenize(grammar, text) {
  let stack = textmate.INITIAL;
  const tokens = [];
  text.split(/\r?\n/).forEach((line, lineIdx) => {
    const result = grammar.tokenizeLine(line, stack);
    for (const token of result.tokens) {
      tokens.push({
        text: line.slice(token.startIndex, token.endIndex),
        scopes: token.scopes,
        line: lineIdx + 1,
      });
    }
    stack = result.ruleStack;
  });
  return { tokens, stack };
}

/** The scopes of the token holding `word` when tokenized in `context`. */
function scopesOf(grammar, context, word) {
  const { tokens } = tokenize(grammar, context);
  const token = tokens.find((t) => t.text.trim() === word);
  return token ? token.scopes : [];
}

/** The string literals of the `#[token("...")]` attributes of the lexer. */
function lexerWords() {
  const source = fs.readFileSync(path.join(ROOT, "compiler", "syntax", "src", "lexer.rs"), "utf8");
  const keywords = [];
  const dtypes = [];
  for (const m of source.matchAll(/#\[token\("([A-Za-z_][A-Za-z0-9_]*)"(, \|_\| Dtype::)?/g)) {
    if (m[1] === "_") continue;
    (m[2] ? dtypes : keywords).push(m[1]);
  }
  return { keywords, dtypes };
}

function scheduleWords() {
  const source = fs.readFileSync(path.join(ROOT, "compiler", "sema", "src", "check", "schedule.rs"), "utf8");
  const knobList = /const KNOBS: &\[&str\] = &\[([^\]]*)\]/.exec(source);
  const knobs = knobList ? [...knobList[1].matchAll(/"([a-z_]+)"/g)].map((m) => m[1]) : [];
  const arch = fs.readFileSync(path.join(ROOT, "compiler", "core", "src", "arch.rs"), "utf8");
  const archs = [...arch.matchAll(/name: "(sm_[0-9a-z]+)"/g)].map((m) => m[1]);
  return { knobs, archs };
}

function checkWordLists(grammar) {
  const { keywords, dtypes } = lexerWords();
  const { knobs, archs } = scheduleWords();
  if (keywords.length < 20 || dtypes.length < 10 || knobs.length < 8 || archs.length < 5) {
    fail(`could not read the word lists (keywords ${keywords.length}, dtypes ${dtypes.length}, ` +
      `knobs ${knobs.length}, architectures ${archs.length}): did lexer.rs, schedule.rs or arch.rs change shape?`);
  }
  for (const word of keywords) {
    // Each keyword alone on a line, inside a body.
    const scopes = scopesOf(grammar, `fn f() {\n    ${word}\n}`, word);
    const ok = scopes.some((s) => /^(keyword|storage|support\.type|constant\.language)\./.test(s));
    if (!ok) fail(`keyword \`${word}\` (lexer.rs) has no keyword scope: ${scopes.join(" ")}`);
  }
  for (const word of dtypes) {
    const scopes = scopesOf(grammar, `let x = y as ${word};`, word);
    if (!scopes.includes("support.type.dtype.tessera")) {
      fail(`dtype \`${word}\` (lexer.rs) is not support.type.dtype.tessera: ${scopes.join(" ")}`);
    }
  }
  for (const word of knobs) {
    const scopes = scopesOf(grammar, `schedule f {\n    ${word}(1);\n}`, word);
    if (!scopes.includes("support.function.knob.tessera")) {
      fail(`schedule knob \`${word}\` (schedule.rs) is not support.function.knob.tessera: ${scopes.join(" ")}`);
    }
  }
  for (const word of archs) {
    const scopes = scopesOf(grammar, `schedule f on ${word} {\n}`, word);
    if (!scopes.includes("support.constant.architecture.tessera")) {
      fail(`architecture \`${word}\` (arch.rs) is not support.constant.architecture.tessera: ${scopes.join(" ")}`);
    }
  }
  return keywords.length + dtypes.length + knobs.length + archs.length;
}

function tsrFiles(dir) {
  const out = [];
  if (!fs.existsSync(dir)) return out;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...tsrFiles(full));
    else if (entry.name.endsWith(".tsr")) out.push(full);
  }
  return out.sort();
}

/** Files with syntax errors on purpose: the parser's error tests. */
function expectsSyntaxErrors(file) {
  return /[\\/]parse[\\/]err[\\/]/.test(file);
}

function checkCorpus(grammar) {
  const files = ["examples", "stdlib", "tests"].flatMap((d) => tsrFiles(path.join(ROOT, d)));
  if (files.length === 0) fail("found no .tsr files under examples/, stdlib/ or tests/");
  let checked = 0;
  for (const file of files) {
    if (expectsSyntaxErrors(file)) continue;
    const text = fs.readFileSync(file, "utf8");
    checked += 1;
    const rel = path.relative(ROOT, file);
    const { tokens, stack } = tokenize(grammar, text);
    const bad = tokens.find((t) => t.scopes.some((s) => s.startsWith("invalid.")));
    if (bad) fail(`${rel}:${bad.line}: invalid token \`${bad.text}\` (${bad.scopes.join(" ")})`);
    if (stack.depth !== 1) {
      const last = tokens[tokens.length - 1];
      fail(`${rel}: a region is still open at the end of the file (scopes ${last ? last.scopes.join(" ") : "?"})`);
    }
  }
  return checked;
}

async function main() {
  const grammar = await loadGrammar();
  const words = checkWordLists(grammar);
  const files = checkCorpus(grammar);
  if (failures.length > 0) {
    for (const message of failures) console.error(`corpus: ${message}`);
    console.error(`corpus: ${failures.length} failure(s)`);
    process.exit(1);
  }
  console.log(`corpus: ${words} words of lexer.rs and schedule.rs scoped; ${files} .tsr files tokenized cleanly`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
