// Regenerates media/screenshot.png (the README's first screen) from a real VS Code session, as a user
// sees the product: the sample run with memory tracking, its lines annotated, the live panel beside it.
// Build first (`npm run build`), then `node .dev/screenshot.mjs`.
// With no GPU the run is the replay workload (Note [Replay hook] in start-settings.mjs).
import fs from 'node:fs';
import path from 'node:path';
import { startVsCode } from '../test/e2e/harness/index.mjs';
import { ROOT } from '../test/e2e/harness/paths.mjs';
import { startSettings } from './start-settings.mjs';

const vsc = await startVsCode({ workspaceSettings: startSettings().settings });
try {
  await vsc.openFile('live_sample.py');
  await vsc.runCommand('GPU Memory: Run Python File with Memory Tracking');
  const panel = await vsc.webviewFrame('GPU Memory — Live');
  await panel.locator('.track').first().waitFor({ timeout: 30_000 });
  await vsc.page.waitForTimeout(10_000); // let most of the sample's steps stream into the chart
  const shot = await vsc.screenshot('readme-screenshot');
  fs.copyFileSync(shot, path.join(ROOT, 'media/screenshot.png'));
  console.log('wrote media/screenshot.png');
} finally {
  await vsc.close();
}
