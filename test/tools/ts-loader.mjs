// Lets unit tests import TypeScript sources directly: `node --import ./test/tools/ts-loader.mjs --test …`,
// then `import { formatBytes } from '../../src/core/base/units/bytes.ts'` inside a *.test.mjs.
//
// Note [Unit tests run the sources]: unit tests compile src/ on the fly (esbuild transform, per file)
// instead of importing dist/, so a failing test points at a source line and needs no build first. The
// extension bundle itself is exercised by the E2E layer. Imports without an extension (`./types`) resolve
// to `./types.ts` or `./types/index.ts`, as esbuild and tsc resolve them. `vscode` is not available here:
// keep tested code in src/core (which must not import it) or inject a stub through the test.
import { register } from 'node:module';

register('./ts-loader-hooks.mjs', import.meta.url);
