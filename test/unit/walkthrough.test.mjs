// The walkthrough in package.json against what the extension does for it (src/core/views/walkthrough/steps.ts):
// the same step ids in the same order, each step completing on the context key the extension sets, buttons that
// run commands which exist, and media and samples that exist and ship. The walkthrough run in a real VS Code is
// test/e2e/walkthrough.test.mjs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { contextKey, SAMPLE_FILES, stepId, WALKTHROUGH_ID, WALKTHROUGH_STEPS } from '../../src/core/views/walkthrough/steps.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const [walkthrough, ...others] = manifest.contributes.walkthroughs;
const ours = new Set(manifest.contributes.commands.map((c) => c.command));
// VS Code's own commands a step may link to
const VS_CODE_COMMANDS = new Set(['testing.runAll']);

test('one walkthrough, named as the extension names it', () => {
  assert.equal(others.length, 0);
  assert.equal(WALKTHROUGH_ID, `${manifest.publisher}.${manifest.name}#${walkthrough.id}`);
  assert.equal(stepId('budgetRun'), `${manifest.publisher}.${manifest.name}#${walkthrough.id}#budgetRun`);
});

test('its steps are the extension\'s, in order, each done on the context key the extension sets', () => {
  assert.deepEqual(walkthrough.steps.map((s) => s.id), [...WALKTHROUGH_STEPS]);
  for (const s of walkthrough.steps) assert.deepEqual(s.completionEvents, [`onContext:${contextKey(s.id)}`], s.id);
});

test('every step has a title, a description with a button, and media that exists', () => {
  for (const s of walkthrough.steps) {
    assert.ok(s.title && s.description, s.id);
    const links = [...s.description.matchAll(/\[([^\]]+)\]\(command:([\w.]+)(\?[^)]*)?\)/g)];
    assert.ok(links.length > 0, `${s.id} has a button`);
    for (const [, label, command, args] of links) {
      assert.ok(ours.has(command) || VS_CODE_COMMANDS.has(command), `${s.id}: "${label}" runs ${command}, which is neither the extension's nor listed here`);
      if (args) assert.ok(Array.isArray(JSON.parse(decodeURIComponent(args.slice(1)))), `${s.id}: ${command}'s arguments are a JSON array`);
    }
    // walkthrough descriptions render links and bold, not code spans: a backtick would show as is
    assert.doesNotMatch(s.description, /`/, `${s.id}'s description has no backticks`);
    const media = s.media.image ?? s.media.markdown ?? s.media.svg;
    assert.equal(typeof media, 'string', s.id);
    assert.ok(fs.existsSync(path.join(ROOT, media)), `${s.id}: ${media} exists`);
    if (s.media.image) assert.ok(s.media.altText, `${s.id}'s image has alt text`);
  }
});

test('Open Sample\'s files exist, and its "test" argument names the budget test the last step runs', () => {
  for (const f of Object.values(SAMPLE_FILES)) assert.ok(fs.existsSync(path.join(ROOT, 'media/walkthrough', f)), f);
  const last = walkthrough.steps.at(-1).description;
  const arg = /command:gpuMemoryLens\.openSample\?([^)]*)\)/.exec(last);
  assert.ok(arg, 'the last step adds the sample test');
  const [kind] = JSON.parse(decodeURIComponent(arg[1]));
  assert.equal(SAMPLE_FILES[kind], 'test_gpumem_sample.py');
  const text = fs.readFileSync(path.join(ROOT, 'media/walkthrough', SAMPLE_FILES[kind]), 'utf8');
  assert.match(text, /@pytest\.mark\.gpu_memory\(peak=/, 'the sample test carries a budget');
});
