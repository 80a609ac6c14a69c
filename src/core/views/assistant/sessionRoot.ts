// The run a host without the extension follows (the MCP server): the newest session folder under the session root
// (`.gpumem/` of the working directory, as `gpumem run` writes it) with a running process, like `gpumem ping`.
import path from 'node:path';
import { listSessionFolders, liveProcesses, scanSessionFolder } from '../../base/sessionFolder';
import type { LiveLookup } from './recordings';

const RECENT_SHOWN = 3;

export function liveOfSessionRoot(root: string): LiveLookup {
  const folders = listSessionFolders(root);
  for (const dir of folders) {
    const live = liveProcesses(dir);
    if (!live.length) continue;
    const sockets = new Map(live.map((p) => [p.pid, p.socket ?? undefined]));
    return {
      name: path.basename(dir),
      running: true,
      processes: scanSessionFolder(dir).map((e) => ({
        pid: e.pid,
        ...(e.rank !== undefined ? { rank: e.rank } : {}),
        capture: e.capture,
        ...(sockets.get(e.pid) ? { socket: sockets.get(e.pid) } : {}),
      })),
    };
  }
  const recent = folders
    .flatMap((d) => scanSessionFolder(d).map((e) => e.capture))
    .slice(0, RECENT_SHOWN);
  return {
    none:
      `no workload is running under ${root} (the session folders \`gpumem run\` writes): pass path, a capture or a snapshot pickle` +
      (recent.length ? `; the latest captures there: ${recent.join(', ')}` : ''),
  };
}
