// A node:test reporter that writes the results format (Note [Results format] in test/README.md): one JSON
// line per test, to its destination, which run-tests.mjs sets to the run's $GPUMEM_RESULTS file (node --test
// is that file's only writer). The spec reporter beside it prints for people.
//   node --test --test-reporter=./test/tools/results-reporter.mjs --test-reporter-destination="$GPUMEM_RESULTS" …
// Suites (describe) are not tests: only their tests are counted, as node's own TAP summary counts them.
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

export default async function* resultsReporter(source) {
  const layer = process.env.GPUMEM_RESULTS_LAYER || 'unknown';
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const d = event.data;
    if (d.details?.type === 'suite') continue;
    const where = d.file ? path.relative(ROOT, d.file) : '';
    const skipped = d.skip !== undefined || d.todo !== undefined;
    const status = event.type === 'test:fail' ? 'fail' : skipped ? 'skip' : 'pass';
    const line = { layer, name: where ? `${where}/${d.name}` : d.name, status, ms: Math.round((d.details?.duration_ms ?? 0) * 1000) / 1000 };
    if (status === 'fail') {
      const err = d.details?.error;
      const cause = err?.cause ?? err;
      line.message = String(cause?.message ?? cause ?? 'failed').slice(0, 2000);
    } else if (status === 'skip') {
      line.message = typeof d.skip === 'string' ? d.skip : typeof d.todo === 'string' ? `todo: ${d.todo}` : 'skipped';
    }
    yield `${JSON.stringify(line)}\n`;
  }
}
