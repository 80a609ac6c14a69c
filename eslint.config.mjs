// Lint: TypeScript in src/ and webview/ (type-aware rules off to keep `npm run lint` fast; `npm run
// typecheck` is the type gate), plain JS/MJS tooling and tests.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';
import { LAYERS } from './.dev/layers.mjs';

const NO_VSCODE = { name: 'vscode', message: 'src/core and webview/ must not depend on the VS Code API (see DESIGN.md §2).' };

/** One no-restricted-imports block per layer: the layers it may not import, matched on the import's path. */
function layerLintRules() {
  const folderName = (l) => (l.path.endsWith('/') ? l.path.slice(0, -1).split('/').pop() : l.path.replace(/^src\//, '').replace(/\.ts$/, ''));
  return LAYERS.filter((l) => !l.part).map((l) => {
    const files = l.path.endsWith('/') ? [`${l.path}**/*.ts`] : [l.path];
    const patterns =
      l.name === 'webview'
        ? [{ regex: `(^|/)src/(?!(${LAYERS.filter((x) => l.may.includes(x.name)).map((x) => x.path.replace(/^src\//, '').replace(/\/$/, '')).join('|')})(/|$))`, message: 'webview/ imports only the protocol and the units of src/core/base (Note [Layers] in .dev/layers.mjs).' }]
        : LAYERS.filter((x) => !x.part && x.name !== l.name && x.name !== 'webview' && !l.may.includes(x.name)).map((x) => ({
            regex: `(^|/)${folderName(x)}(/|$)`,
            message: `${l.name} may not import ${x.name}: imports only go down (Note [Layers] in .dev/layers.mjs).`,
          }));
    const paths = l.path.startsWith('src/core/') || l.name === 'webview' ? [NO_VSCODE] : [];
    return { files, rules: { 'no-restricted-imports': ['error', { paths, patterns }] } };
  });
}

export default tseslint.config(
  {
    ignores: ['dist/**', 'build/**', 'out/**', 'node_modules/**', '.tools/**', '.test-output/**', 'native/**/build/**', '**/*.d.ts'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts'],
    languageOptions: { globals: { ...globals.node } },
  },
  {
    files: ['webview/**/*.ts'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ['**/*.mjs', '**/*.js', '**/*.cjs'],
    languageOptions: { globals: { ...globals.node } },
  },
  {
    // Test code evaluates functions inside the browser page (page.evaluate), so DOM globals are legal there.
    files: ['test/**/*.mjs', 'test/**/*.js'],
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      'no-restricted-imports': 'off',
    },
  },
  // The layers (Note [Layers] in .dev/layers.mjs): a file imports only its own layer and the ones below it, and
  // src/core and webview/ never import `vscode` (DESIGN.md §2: the core is shared with the CLI and webviews).
  // Lint tells at once; .dev/import-graph.mjs (test/unit/import-graph.test.mjs) proves it on the resolved graph.
  ...layerLintRules(),
  {
    files: ['**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
