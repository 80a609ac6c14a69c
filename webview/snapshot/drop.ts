// Drag-and-drop of a snapshot onto the panel.
//
// Note [Dropping into a webview]: VS Code delivers drops to a webview only while Shift is held (without it
// the editor area takes the drop and opens the file as a tab, which for *.gpumem is our editor anyway).
// A drop from VS Code's explorer carries the file's URI (application/vnd.code.uri-list or text/uri-list);
// a drop from the OS file manager may carry only File objects, whose bytes we read and hand to the host.
import { send } from './api';

const MAX_DROPPED_BYTES = 512 * 1024 * 1024;

export function attachDrop(target: HTMLElement, notice: (message: string) => void): void {
  target.addEventListener('dragover', (e) => {
    e.preventDefault();
    target.classList.add('drop-target');
  });
  target.addEventListener('dragleave', () => target.classList.remove('drop-target'));
  target.addEventListener('drop', (e) => {
    e.preventDefault();
    target.classList.remove('drop-target');
    const dt = e.dataTransfer;
    if (!dt) return;
    const uris = (dt.getData('application/vnd.code.uri-list') || dt.getData('text/uri-list'))
      .split(/\r?\n/)
      .map((s) => s.trim())
      .filter((s) => s && !s.startsWith('#'));
    if (uris.length) {
      for (const uri of uris) send({ type: 'openDroppedUri', uri });
      return;
    }
    const file = dt.files[0];
    if (!file) {
      notice('Nothing to open in that drop: drop a .pickle snapshot or a .gpumem capture (hold Shift while dropping).');
      return;
    }
    if (file.size > MAX_DROPPED_BYTES) {
      notice(`${file.name} is too large to drop (${Math.round(file.size / 2 ** 20)} MiB); use Open Snapshot… instead.`);
      return;
    }
    void file.arrayBuffer().then((buf) => send({ type: 'openDroppedBytes', name: file.name, bytes: new Uint8Array(buf) }));
  });
}
