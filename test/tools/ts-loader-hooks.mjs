// Module hooks behind ts-loader.mjs (they run on Node's loader thread).
import { transform } from 'esbuild';
import fs from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const TS = /\.(c|m)?tsx?$/;

export async function resolve(specifier, context, nextResolve) {
  const fromTs = context.parentURL && TS.test(new URL(context.parentURL).pathname);
  if (fromTs && (specifier.startsWith('./') || specifier.startsWith('../')) && !/\.[cm]?[jt]sx?$|\.json$/.test(specifier)) {
    for (const suffix of ['.ts', '.tsx', '/index.ts']) {
      const url = new URL(specifier + suffix, context.parentURL);
      if (fs.existsSync(fileURLToPath(url))) return { url: url.href, shortCircuit: true };
    }
  }
  // `import './x.js'` written for Node16-style resolution may name a .ts source.
  if (fromTs && /^\.\.?\//.test(specifier) && specifier.endsWith('.js')) {
    const url = new URL(specifier.replace(/\.js$/, '.ts'), context.parentURL);
    if (fs.existsSync(fileURLToPath(url))) return { url: url.href, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !TS.test(new URL(url).pathname)) return nextLoad(url, context);
  const file = fileURLToPath(url);
  const source = await fs.promises.readFile(file, 'utf8');
  const out = await transform(source, {
    loader: file.endsWith('x') ? 'tsx' : 'ts',
    format: 'esm',
    target: 'node20',
    sourcemap: 'inline',
    sourcefile: pathToFileURL(file).href,
  });
  return { format: 'module', source: out.code, shortCircuit: true };
}
