// "GPU Memory: Open Sample": the walkthrough's sample training script (and its budget test) written into the
// workspace folder and opened, so the first run has something to run with no project of one's own.
/**
 * Note [Sample files]: the samples ship in the VSIX (media/walkthrough/) and are copied into the first
 * workspace folder, because a run needs a folder (its session folders go to `.gpumem/` there) and the Testing
 * view finds only the workspace's tests. A file already there is opened as it is, never overwritten: it may
 * be the user's edit of it. The script is the one the E2E replay fixture recorded (test/gpu/workload_checks.py
 * check (d)), so on a machine without a GPU, where `npm start` replays that capture, its lines are annotated.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { SAMPLE_FILES, type SampleKind } from '../../core/views/walkthrough/steps';

/** Writes the sample into the first workspace folder unless it is there, then opens it. Returns its path. */
export async function openSample(extensionRoot: string, kind: SampleKind = 'script'): Promise<string | undefined> {
  const name = SAMPLE_FILES[kind];
  const folder = vscode.workspace.workspaceFolders?.[0];
  if (!folder || folder.uri.scheme !== 'file') {
    void vscode.window.showErrorMessage(`GPU Memory Lens: open a folder first; the sample (${name}) is written into it, and runs keep their captures there.`);
    return undefined;
  }
  const target = path.join(folder.uri.fsPath, name);
  if (!fs.existsSync(target)) fs.copyFileSync(path.join(extensionRoot, 'media', 'walkthrough', name), target);
  // From the walkthrough (or another page that is not a text editor) the sample opens beside it, so the steps
  // stay in view; otherwise where the user is.
  const tab = vscode.window.tabGroups.activeTabGroup.activeTab;
  const column = tab && !(tab.input instanceof vscode.TabInputText) ? vscode.ViewColumn.Beside : vscode.ViewColumn.Active;
  await vscode.window.showTextDocument(vscode.Uri.file(target), { viewColumn: column, preview: false });
  return target;
}
