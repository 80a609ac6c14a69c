// Where the E2E harness finds the project, its tools and its output folder.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const TOOLS = process.env.GPUMEM_TOOLS_DIR || path.join(ROOT, '.tools');
export const CODE_SERVER = path.join(TOOLS, 'code-server/node_modules/.bin/code-server');
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const OUTPUT = path.join(ROOT, '.test-output/e2e');
export const SAMPLE_WORKSPACE = path.join(ROOT, 'test/e2e/workspace');
