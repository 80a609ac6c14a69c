// Note [Taking over *.pickle]: `.pickle` is a generic Python format, so the snapshot editor is registered
// with priority "option" and never opens a pickle unasked. The first time a user opens a pickle through
// Open Snapshot…, we ask once whether to make it the default for *.pickle (a user-level
// workbench.editorAssociations entry, which they can remove in settings); the answer is remembered either
// way so the question never comes back. Non-snapshot pickles then fail with a message pointing to
// "Reopen Editor With…".
import * as vscode from 'vscode';

const ASKED_KEY = 'gpuMemoryLens.askedPickleDefault';

export async function maybeAskPickleDefault(context: vscode.ExtensionContext): Promise<void> {
  if (context.globalState.get<boolean>(ASKED_KEY)) return;
  const associations = vscode.workspace.getConfiguration('workbench').get<Record<string, string>>('editorAssociations') ?? {};
  if (associations['*.pickle']) return;
  await context.globalState.update(ASKED_KEY, true);
  const always = 'Always for *.pickle';
  const answer = await vscode.window.showInformationMessage(
    'Open .pickle files with the GPU Memory Lens snapshot viewer by default? Other pickles would then need "Reopen Editor With…".',
    always,
    'Not now',
  );
  if (answer !== always) return;
  await vscode.workspace
    .getConfiguration('workbench')
    .update('editorAssociations', { ...associations, '*.pickle': 'gpuMemoryLens.snapshotEditor' }, vscode.ConfigurationTarget.Global);
}
