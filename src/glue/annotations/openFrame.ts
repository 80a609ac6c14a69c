// The command behind the hover's frame links: open file:line. A frame's path is the workload's; when it
// does not exist here (capture copied from elsewhere), look for the file in the workspace by name and
// take the candidate sharing the longest path suffix.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { matchDocument, OPEN_FRAME_COMMAND } from '../../core/views/annotations';

export async function resolveFrameFile(file: string): Promise<vscode.Uri | undefined> {
  if (path.isAbsolute(file) && fs.existsSync(file)) return vscode.Uri.file(file);
  for (const folder of vscode.workspace.workspaceFolders ?? []) {
    const candidate = path.join(folder.uri.fsPath, file);
    if (fs.existsSync(candidate)) return vscode.Uri.file(candidate);
  }
  const base = path.basename(file);
  const found = await vscode.workspace.findFiles(`**/${base}`, '**/node_modules/**', 50);
  const byPath = new Map(found.map((u) => [u.fsPath, u]));
  // matchDocument answers "which of these paths is this one"; here the roles are swapped but the rule
  // (longest common suffix, ties are ambiguous) is the same.
  const best = matchDocument(file, byPath.keys());
  return best ? byPath.get(best) : found[0];
}

/**
 * @param openCellFile  opens a frame whose file is a notebook cell's (Note [Cell files]) at that cell; false when
 *   the file is not a cell's
 */
export function registerOpenFrame(openCellFile: (file: string, line: number) => Promise<boolean> = async () => false): vscode.Disposable {
  return vscode.commands.registerCommand(OPEN_FRAME_COMMAND, async (file: unknown, line: unknown) => {
    if (typeof file !== 'string' || typeof line !== 'number') return;
    if (await openCellFile(file, line)) return;
    const uri = await resolveFrameFile(file);
    if (!uri) {
      void vscode.window.showWarningMessage(`GPU Memory Lens: ${file} is not in this workspace.`);
      return;
    }
    const pos = new vscode.Position(Math.max(0, line - 1), 0);
    await vscode.window.showTextDocument(uri, { selection: new vscode.Range(pos, pos), preview: true });
  });
}
