// Renders media/icon.png (128×128, the Marketplace size) from the SVG below with Debian's Chromium, so
// the icon can be regenerated without an image editor: `node .dev/make-icon.mjs`.
// The drawing: a GPU memory bar chart (stacked allocated/reserved) under a lens.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="128" height="128" viewBox="0 0 128 128">
  <rect x="4" y="4" width="120" height="120" rx="22" fill="#1f2937"/>
  <g transform="translate(18 26)">
    <rect x="0"  y="52" width="12" height="34" rx="2" fill="#4b5563"/><rect x="0"  y="62" width="12" height="24" rx="2" fill="#22c55e"/>
    <rect x="17" y="36" width="12" height="50" rx="2" fill="#4b5563"/><rect x="17" y="50" width="12" height="36" rx="2" fill="#22c55e"/>
    <rect x="34" y="16" width="12" height="70" rx="2" fill="#4b5563"/><rect x="34" y="26" width="12" height="60" rx="2" fill="#f97316"/>
    <rect x="51" y="40" width="12" height="46" rx="2" fill="#4b5563"/><rect x="51" y="54" width="12" height="32" rx="2" fill="#22c55e"/>
  </g>
  <circle cx="74" cy="50" r="26" fill="rgba(125,211,252,0.18)" stroke="#7dd3fc" stroke-width="7"/>
  <line x1="93" y1="69" x2="112" y2="88" stroke="#7dd3fc" stroke-width="10" stroke-linecap="round"/>
</svg>`;

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', args: ['--headless', '--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 128, height: 128 } });
await page.setContent(`<html><body style="margin:0;background:transparent">${SVG}</body></html>`);
await page.locator('svg').screenshot({ path: path.join(ROOT, 'media/icon.png'), omitBackground: true });
await browser.close();
console.log('wrote media/icon.png');
