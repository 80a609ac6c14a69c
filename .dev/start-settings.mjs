// The sample workspace's settings for `npm start` (and its E2E check, test/e2e/start.test.mjs).
//
// Note [Replay hook]: on a machine with no GPU, "Run Python File with Memory Tracking" has nothing to
// track, so `npm start` points gpuMemoryLens.launchCommand at the replay workload (test/e2e/replay/), which
// streams a capture recorded on an H200 of the walkthrough's sample (media/walkthrough/gpumem_sample.py) as
// if it ran (a stand-in of test/e2e/workspace/live_sample.py when the recorded fixture is absent). The
// replay's owner can override this with test/e2e/replay/start-settings.json; ${replayDir} and ${repoRoot}
// in it become absolute paths here (tracked files must not hold them); other ${…} variables are left for
// the extension to expand. The Testing view's budget tests (the walkthrough's last step) cannot be
// replayed: they run for real, on the stand-in torch (test/python/fake_torch) with the lens allocator on
// its simulated device, through the interpreter .dev/sim-python (gpuMemoryLens.pythonPath), as
// test/e2e/testing.test.mjs runs them. The replay runs under that interpreter too; it needs no torch.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPLAY_DIR = path.join(ROOT, 'test/e2e/replay');
export const REPLAY_SETTINGS = path.join(REPLAY_DIR, 'start-settings.json');

const DEFAULT_REPLAY_SETTINGS = {
  'gpuMemoryLens.launchCommand': '${python} ${replayDir}/replay.py ${repoRoot}/test/fixtures/h200-e2e-train.capture --standin-if-missing --hold 600',
};

export function hasGpu() {
  if (fs.existsSync('/dev/nvidia0')) return true;
  return spawnSync('nvidia-smi', ['-L'], { stdio: 'ignore' }).status === 0;
}

/**
 * Settings to merge into the sample workspace, or undefined to leave it as is.
 * @param {{ replay?: boolean }} [o]  replay: force the hook on/off (default: on when there is no GPU)
 * @returns {{ settings?: object, reason: string }}
 */
export function startSettings({ replay = !hasGpu() } = {}) {
  if (!replay) return { reason: 'GPU present: workloads run for real' };
  if (!fs.existsSync(path.join(REPLAY_DIR, 'replay.py'))) return { reason: 'no replay workload (test/e2e/replay/replay.py) yet' };
  let template = JSON.stringify(DEFAULT_REPLAY_SETTINGS);
  let from = 'the built-in replay hook';
  if (fs.existsSync(REPLAY_SETTINGS)) {
    template = fs.readFileSync(REPLAY_SETTINGS, 'utf8');
    from = path.relative(ROOT, REPLAY_SETTINGS);
  }
  // JSON-escape the substituted paths so a quote or backslash in them cannot break the document.
  const esc = (p) => JSON.stringify(p).slice(1, -1);
  const text = template.replaceAll('${replayDir}', esc(REPLAY_DIR)).replaceAll('${repoRoot}', esc(ROOT));
  try {
    const settings = { 'gpuMemoryLens.pythonPath': path.join(ROOT, '.dev/sim-python'), 'gpuMemoryLens.allocator': 'lens', ...JSON.parse(text) };
    return { settings, reason: `no GPU: Run Python File replays the recorded sample (${from}); tests run on the simulated device` };
  } catch (err) {
    throw new Error(`${from} is not valid JSON: ${err.message}`);
  }
}
