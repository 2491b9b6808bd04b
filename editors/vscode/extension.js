// The Tessera extension's client: starts `tsrc lsp` over stdio for .tsr files.
//
// The server does all the language work (diagnostics, hover, definition,
// references, completion, signature help, symbols, semantic tokens,
// formatting); this file only finds the executable, starts it, and starts it
// again when its settings change or on the `tessera.restartServer` command.
// Plain JavaScript on purpose: there is no build step.

"use strict";

const os = require("os");
const path = require("path");
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

/** The id of the client; VS Code reads `tessera.trace.server` through it. */
const CLIENT_ID = "tessera";
const CLIENT_NAME = "Tessera Language Server";

/** The running client, or undefined while none runs. */
let client;
/** One output channel for every client, so restarts do not open new ones. */
let outputChannel;
/** Starts and stops run one after another, never interleaved. */
let pending = Promise.resolve();

/**
 * The command that starts the server: `tessera.server.path` with `~` and
 * `${workspaceFolder}` expanded, and a relative path with a slash resolved
 * against the first workspace folder (a bare name is looked up on PATH).
 */
function serverCommand() {
  const config = vscode.workspace.getConfiguration("tessera.server");
  const folders = vscode.workspace.workspaceFolders;
  const root = folders && folders.length > 0 ? folders[0].uri.fsPath : undefined;

  let command = (config.get("path") || "tsrc").trim() || "tsrc";
  if (root !== undefined) {
    command = command.replace(/\$\{workspaceFolder\}/g, root);
  }
  if (command === "~" || command.startsWith("~/")) {
    command = path.join(os.homedir(), command.slice(1));
  }
  const hasSeparator = command.includes("/") || command.includes("\\");
  if (hasSeparator && !path.isAbsolute(command) && root !== undefined) {
    command = path.resolve(root, command);
  }

  const args = config.get("args");
  return { command, args: Array.isArray(args) ? args.map(String) : ["lsp"] };
}

function createClient() {
  const { command, args } = serverCommand();
  const executable = { command, args, transport: TransportKind.stdio };
  const serverOptions = { run: executable, debug: executable };
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "tessera" },
      { scheme: "untitled", language: "tessera" },
    ],
    outputChannel,
  };
  return new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
}

async function stopClient() {
  const old = client;
  client = undefined;
  if (old === undefined) {
    return;
  }
  try {
    // dispose() stops the server and releases the client's registrations.
    await old.dispose(2000);
  } catch (err) {
    outputChannel.appendLine(`Stopping the server failed: ${err}`);
  }
}

async function startClient() {
  const next = createClient();
  client = next;
  try {
    await next.start();
  } catch (err) {
    const { command } = serverCommand();
    outputChannel.appendLine(`Could not start \`${command}\`: ${err}`);
    const choice = await vscode.window.showErrorMessage(
      `Tessera: could not start the language server \`${command}\`. ` +
        "Build tsrc (`cargo build --release`) and put it on PATH, or set `tessera.server.path`.",
      "Open Settings",
      "Show Output",
    );
    if (choice === "Open Settings") {
      vscode.commands.executeCommand("workbench.action.openSettings", "tessera.server");
    } else if (choice === "Show Output") {
      outputChannel.show(true);
    }
  }
}

/** Stops the running server, if any, and starts a fresh one. */
function restart() {
  pending = pending.then(async () => {
    await stopClient();
    await startClient();
  });
  return pending;
}

/** Called by VS Code when the first Tessera file opens. */
function activate(context) {
  outputChannel = vscode.window.createOutputChannel(CLIENT_NAME);
  context.subscriptions.push(outputChannel);

  context.subscriptions.push(
    vscode.commands.registerCommand("tessera.restartServer", () => restart()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("tessera.server")) {
        return restart();
      }
      return undefined;
    }),
  );

  return restart();
}

/** Called by VS Code on shutdown; stops the server. */
function deactivate() {
  pending = pending.then(stopClient);
  return pending;
}

module.exports = { activate, deactivate, serverCommand };
