// Regenerates media/screenshot.png (the README's first screen) from a real VS Code session:
// build + package first (`npm run build`), then `node test/tools/screenshot.mjs`.
// It opens the sample training script and the live panel, as a user would after "Run Python File".
import fs from 'node:fs';
import path from 'node:path';
import { startVsCode } from '../e2e/harness/index.mjs';
import { ROOT } from '../e2e/harness/paths.mjs';

const vsc = await startVsCode();
try {
  await vsc.openFile('train.py');
  await vsc.runCommand('GPU Memory: Show Live Panel');
  await vsc.page.waitForTimeout(2000); // let the panel render its first frame
  const shot = await vsc.screenshot('readme-screenshot');
  fs.copyFileSync(shot, path.join(ROOT, 'media/screenshot.png'));
  console.log('wrote media/screenshot.png');
} finally {
  await vsc.close();
}
