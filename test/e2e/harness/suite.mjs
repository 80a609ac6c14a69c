// One VS Code per test file, and the step wrapper every E2E file uses.
import { after, before } from 'node:test';
import { startVsCode } from './index.mjs';

/**
 * Starts VS Code before the file's tests (passing it to `started`) and closes it after them, with the
 * server and extension-host logs printed when a step failed. Returns `step(name, fn)`: runs part of a
 * test; if it throws, saves the screenshot `<prefix>-<name>-FAILED.png` and rethrows.
 * @param {string} prefix  screenshot name prefix (the test file's subject)
 * @param {object | (() => object)} options  startVsCode options (a function: computed in `before`)
 * @param {(vsc: object) => void} started
 * @param {() => void} [cleanup]  after VS Code has closed
 */
export function vsCodeSuite(prefix, options, started, cleanup) {
  let vsc;
  let failed = false;
  before(async () => {
    vsc = await startVsCode(typeof options === 'function' ? options() : options);
    started(vsc);
  });
  after(async () => {
    await vsc?.close({ failed });
    cleanup?.();
  });
  return async function step(name, fn) {
    try {
      return await fn();
    } catch (err) {
      failed = true;
      await vsc?.screenshot(`${prefix}-${name}-FAILED`).catch(() => {});
      throw err;
    }
  };
}
