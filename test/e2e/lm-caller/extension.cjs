// Test-only caller of language-model tools (installed beside GPU Memory Lens by test/e2e/assistant.test.mjs): what a
// chat participant does, through the public API. "GPU Memory E2E: Call Language Model Tools" reads
// `.e2e/lm-request.json` in the workspace ({ id, calls: [{ name, input }] }), lists vscode.lm.tools, invokes each
// call with vscode.lm.invokeTool outside any chat (no toolInvocationToken), and writes `.e2e/lm-answers.json`:
// { id, tools: [{ name, description, inputSchema, tags }], results: [{ name, text } | { name, error }] }.
const vscode = require('vscode');
const fs = require('fs');
const path = require('path');

function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand('gpumemE2e.callTools', async () => {
      const dir = path.join(vscode.workspace.workspaceFolders[0].uri.fsPath, '.e2e');
      const request = JSON.parse(fs.readFileSync(path.join(dir, 'lm-request.json'), 'utf8'));
      const tools = vscode.lm.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema, tags: t.tags }));
      const results = [];
      for (const call of request.calls) {
        try {
          const r = await vscode.lm.invokeTool(call.name, { input: call.input, toolInvocationToken: undefined });
          results.push({ name: call.name, text: r.content.map((p) => (p instanceof vscode.LanguageModelTextPart ? p.value : '')).join('') });
        } catch (e) {
          results.push({ name: call.name, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
        }
      }
      const out = path.join(dir, 'lm-answers.json');
      fs.writeFileSync(out + '.tmp', JSON.stringify({ id: request.id, tools, results }));
      fs.renameSync(out + '.tmp', out); // whole or absent: the test polls for it
    }),
  );
}

module.exports = { activate, deactivate() {} };
