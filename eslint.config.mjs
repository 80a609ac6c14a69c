// Lint: TypeScript in src/ and webview/ (type-aware rules off to keep `npm run lint` fast; `npm run
// typecheck` is the type gate), plain JS/MJS tooling and tests.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

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
      // src/core must stay free of the `vscode` API (DESIGN.md §2): the core is shared with the CLI and webviews.
      'no-restricted-imports': 'off',
    },
  },
  {
    files: ['src/core/**/*.ts', 'webview/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: [{ name: 'vscode', message: 'src/core and webview/ must not depend on the VS Code API (see DESIGN.md §2).' }] }],
    },
  },
  {
    files: ['**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
