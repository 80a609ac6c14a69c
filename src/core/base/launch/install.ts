// Where the shipped pieces live, relative to the extension (or npm package) root: the same layout
// for dist/extension.js and dist/cli.js, whose __dirname is <root>/dist.
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface InstallPaths {
  root: string;
  allocatorSo: string;
  /** Folder holding sitecustomize.py + gpumem/ (goes first on the workload's PYTHONPATH). */
  pythonDir: string;
}

export function installPaths(root: string): InstallPaths {
  return {
    root,
    allocatorSo: path.join(root, 'dist', 'native', 'libgpumem_allocator.so'),
    pythonDir: path.join(root, 'native', 'python'),
  };
}

/** Resolves the install from a bundle's folder (`__dirname` of dist/*.js) and checks that the pieces exist. */
export function locateInstall(bundleDir: string): InstallPaths {
  const paths = installPaths(path.resolve(bundleDir, '..'));
  if (!fs.existsSync(paths.allocatorSo)) {
    throw new Error(`The lens allocator is not built: ${paths.allocatorSo} is missing. Run \`npm run build\` (or \`make -C native/allocator\`).`);
  }
  if (!fs.existsSync(path.join(paths.pythonDir, 'sitecustomize.py'))) {
    throw new Error(`The Python bootstrap is missing: ${path.join(paths.pythonDir, 'sitecustomize.py')}. Reinstall the extension.`);
  }
  return paths;
}
