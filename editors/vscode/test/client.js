// Checks extension.js outside VS Code: the `vscode` module and the language
// client are replaced by stand-ins that record what the extension does.
//
// It checks how `tessera.server.path` and `tessera.server.args` become the
// command that starts the server, that activation starts one client, that a
// change of those settings and the `tessera.restartServer` command each stop
// the client and start a fresh one with the new command, and that the real
// `vscode-languageclient/node` exports what extension.js uses.
//
// Run from editors/vscode: `node test/client.js`. Exits 1 on any failure.

"use strict";

const assert = require("assert");
const Module = require("module");
const os = require("os");
const path = require("path");

// The stand-in of VS Code.
const settings = { path: "tsrc", args: ["lsp"] };
const commands = new Map();
const configListeners = [];
const workspaceRoot = path.join(os.tmpdir(), "tessera-workspace");
const vscodeApi = {
  workspace: {
    workspaceFolders: [{ uri: { fsPath: workspaceRoot } }],
    getConfiguration: (section) => {
      assert.strictEqual(section, "tessera.server");
      return { get: (key) => settings[key] };
    },
    onDidChangeConfiguration: (listener) => {
      configListeners.push(listener);
      return { dispose() {} };
    },
  },
  window: {
    createOutputChannel: () => ({ appendLine() {}, show() {}, dispose() {} }),
    showErrorMessage: async () => undefined,
  },
  commands: {
    registerCommand: (name, handler) => {
      commands.set(name, handler);
      return { dispose() {} };
    },
    executeCommand: async () => undefined,
  },
};
// Loading the real client module touches more of the API (classes it
// extends); any name the stand-in lacks is an empty class.
const vscode = new Proxy(vscodeApi, {
  get: (target, name) => (name in target ? target[name] : class {}),
});

// The stand-in of the language client: records starts and stops.
const clients = [];
class FakeLanguageClient {
  constructor(id, name, serverOptions, clientOptions) {
    this.id = id;
    this.serverOptions = serverOptions;
    this.clientOptions = clientOptions;
    this.state = "created";
    clients.push(this);
  }
  async start() {
    this.state = "running";
  }
  async dispose() {
    this.state = "disposed";
  }
}

// `vscode` resolves to the stand-in everywhere; the client module only while
// extension.js loads, after the real one has been checked.
let fakeClientModule;
const originalLoad = Module._load;
Module._load = function load(request, parent, isMain) {
  if (request === "vscode") return vscode;
  if (request === "vscode-languageclient/node" && fakeClientModule) return fakeClientModule;
  return originalLoad.call(this, request, parent, isMain);
};
const real = require("vscode-languageclient/node");
assert.strictEqual(typeof real.LanguageClient, "function", "vscode-languageclient/node exports LanguageClient");
assert.strictEqual(real.TransportKind.stdio, 0, "vscode-languageclient/node exports TransportKind.stdio");
fakeClientModule = { LanguageClient: FakeLanguageClient, TransportKind: real.TransportKind };
const extension = require("../extension.js");
fakeClientModule = undefined;

async function main() {
  // How the settings become a command.
  const cases = [
    [{ path: "tsrc", args: ["lsp"] }, "tsrc", ["lsp"]],
    [{ path: "  ", args: undefined }, "tsrc", ["lsp"]],
    [{ path: "/opt/tessera/bin/tsrc", args: ["lsp", "--verbose"] }, "/opt/tessera/bin/tsrc", ["lsp", "--verbose"]],
    [{ path: "~/bin/tsrc", args: ["lsp"] }, path.join(os.homedir(), "bin", "tsrc"), ["lsp"]],
    [{ path: "target/release/tsrc", args: ["lsp"] }, path.join(workspaceRoot, "target", "release", "tsrc"), ["lsp"]],
    [{ path: "${workspaceFolder}/target/debug/tsrc", args: ["lsp"] }, path.join(workspaceRoot, "target", "debug", "tsrc"), ["lsp"]],
  ];
  for (const [given, command, args] of cases) {
    Object.assign(settings, given);
    assert.deepStrictEqual(extension.serverCommand(), { command, args }, JSON.stringify(given));
  }
  let checks = cases.length;

  // Activation starts one client for Tessera documents over stdio.
  Object.assign(settings, { path: "tsrc", args: ["lsp"] });
  const subscriptions = [];
  await extension.activate({ subscriptions });
  assert.strictEqual(clients.length, 1);
  const first = clients[0];
  assert.strictEqual(first.id, "tessera", "the client id is what tessera.trace.server is read through");
  assert.strictEqual(first.state, "running");
  assert.deepStrictEqual(first.serverOptions.run, { command: "tsrc", args: ["lsp"], transport: real.TransportKind.stdio });
  assert.ok(first.clientOptions.documentSelector.some((s) => s.language === "tessera" && s.scheme === "file"));
  assert.ok(commands.has("tessera.restartServer"));
  assert.strictEqual(configListeners.length, 1);
  checks += 7;

  // Other settings leave the server alone; tessera.server.* restarts it with the new command.
  await configListeners[0]({ affectsConfiguration: (s) => s === "editor" });
  assert.strictEqual(clients.length, 1);
  settings.path = "/usr/local/bin/tsrc";
  await configListeners[0]({ affectsConfiguration: (s) => s === "tessera.server" || s === "tessera" });
  assert.strictEqual(clients.length, 2);
  assert.strictEqual(first.state, "disposed");
  assert.strictEqual(clients[1].state, "running");
  assert.strictEqual(clients[1].serverOptions.run.command, "/usr/local/bin/tsrc");
  checks += 5;

  // The command restarts too.
  await commands.get("tessera.restartServer")();
  assert.strictEqual(clients.length, 3);
  assert.strictEqual(clients[1].state, "disposed");
  assert.strictEqual(clients[2].state, "running");
  checks += 3;

  await extension.deactivate();
  assert.strictEqual(clients[2].state, "disposed");
  checks += 1;

  console.log(`client: ${checks} checks of extension.js passed`);
}

main().catch((err) => {
  console.error(`client: ${err.stack || err}`);
  process.exit(1);
});
