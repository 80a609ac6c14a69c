// Entry point of the snapshot feature: the Open Snapshot… command and the two custom editors
// (*.gpumem captures, *.pickle PyTorch snapshots). The composition root (src/extension.ts) calls
// registerSnapshotFeatures once from activate(); everything created here is pushed on context.subscriptions.
import * as vscode from 'vscode';

export function registerSnapshotFeatures(context: vscode.ExtensionContext): void {
  context.subscriptions.push(
    vscode.commands.registerCommand('gpuMemoryLens.openSnapshot', async (uri?: vscode.Uri) => {
      const target =
        uri instanceof vscode.Uri
          ? uri
          : (
              await vscode.window.showOpenDialog({
                canSelectMany: false,
                openLabel: 'Open Snapshot',
                filters: { 'Memory snapshots': ['pickle', 'gpumem'] },
              })
            )?.[0];
      if (!target) return;
      await vscode.commands.executeCommand('vscode.openWith', target, viewTypeFor(target));
    }),
  );
}

function viewTypeFor(uri: vscode.Uri): string {
  return uri.path.endsWith('.gpumem') ? 'gpuMemoryLens.captureEditor' : 'gpuMemoryLens.snapshotEditor';
}
