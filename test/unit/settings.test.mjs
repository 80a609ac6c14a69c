// The settings table (src/core/base/settings/table.ts, Note [Settings table]) against every place that reads a
// setting: the generated files are what the table says, and the TS parser, the bootstrap's (Python) and the
// allocator's (C++) give the same answer and the same message for the same value; both CLIs take the same options.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { outputs } from '../../.dev/gen-settings.mjs';
import { SETTINGS, USER_ENV_SWITCHES } from '../../src/core/base/settings/table.ts';
import { checkValue, cliHelp, parseText, toEnv } from '../../src/core/base/settings/parse.ts';
import { readSize, SIZE_PROBLEMS } from '../../src/core/base/units/parseBytes.ts';
import { buildWorkloadEnv } from '../../src/core/base/launch/env.ts';
import { parseArgs } from '../../src/cli/commands/args.ts';
import { runOptions, settingsFromOptions } from '../../src/cli/commands/run.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PY_DIR = path.join(root, 'native/python');
const SO = path.join(root, 'dist/native/libgpumem_allocator.so');

/** Runs one Python snippet with the bootstrap's package importable; `input` goes to stdin as JSON; returns its JSON. */
function python(code, input) {
  const r = spawnSync('python3', ['-c', code], {
    input: JSON.stringify(input),
    encoding: 'utf8',
    env: { ...process.env, PYTHONPATH: PY_DIR },
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** TS's answer for a text: the value, or the message it refuses it with. */
function tsAnswer(d, text, name) {
  try {
    return { value: parseText(d, text, name) };
  } catch (e) {
    return { error: e.message };
  }
}

// Texts each kind of setting is given: good ones and wrong ones, the edges of each rule.
const TEXTS = {
  choice: (d) => [...d.choices, ` ${d.choices[0]} `, 'huge', d.choices[0].toUpperCase(), '1'],
  flag: () => ['1', '0', 'yes', 'true', 'off', '2', ' 1'],
  count: () => ['0', '200', '007', '-1', 'often', '1.5', '1e3', '99999999999999999999'],
  size: () => ['0', 'none', 'NONE', '1048576', '1048575', '1MiB', '1 MiB', '256MiB', '1GiB', '1.5g', '1GB', '2kb', '4096', '1.5', 'x', '-1', '8EiB', '99999999999TiB'],
};

test('the files generated from the settings table are up to date (node .dev/gen-settings.mjs rewrites them)', async () => {
  for (const [file, [now, want]] of Object.entries(await outputs(root))) {
    assert.ok(now === want, `${file} is stale: run \`node .dev/gen-settings.mjs\` and commit the result`);
  }
});

test("package.json's settings are the table's: name, type, default, choices, bounds", () => {
  const props = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).contributes.configuration.properties;
  for (const d of SETTINGS.filter((x) => x.vscode)) {
    const p = props[d.vscode];
    assert.ok(p, `${d.vscode} is not in package.json`);
    assert.equal(p.type, { choice: 'string', flag: 'boolean', count: 'integer', size: 'string' }[d.kind], d.vscode);
    // what VS Code stores is read back by the table's rule as the default
    assert.deepEqual(tsAnswer(d, typeof p.default === 'string' ? p.default : toEnv(d, p.default), d.vscode), { value: d.default }, d.vscode);
    if (d.choices) assert.deepEqual(p.enum, d.choices);
    // the pattern (VS Code's check as the user types) lets through what readSize reads as a size, and only that
    const sizeLike = (t) => t.toLowerCase() === 'none' || typeof readSize(t) === 'number' || readSize(t) === SIZE_PROBLEMS.notWhole || readSize(t) === SIZE_PROBLEMS.tooLarge;
    if (d.kind === 'size') for (const t of TEXTS.size(d)) assert.equal(new RegExp(p.pattern).test(t), sizeLike(t), `${d.vscode} pattern on ${t}`);
    if (d.kind === 'count') {
      // VS Code's bound as the user types agrees with the table's rule on every text it reads as a count: a value
      // the runtime takes (0 where 0 means "every step" or "off") is never marked invalid in the settings UI
      // (recordSteps had minimum 1 against its default 0), and one it refuses below the bound is
      for (const t of TEXTS.count(d)) {
        const n = Number(t);
        if (!Number.isInteger(n) || !Number.isSafeInteger(n)) continue;
        const runtime = !('error' in tsAnswer(d, t, d.vscode));
        assert.equal(n >= p.minimum, runtime || n > (d.min ?? 0), `${d.vscode}: minimum ${p.minimum} on ${t} (runtime takes it: ${runtime})`);
      }
      assert.ok(p.default >= p.minimum, `${d.vscode}: default ${p.default} below minimum ${p.minimum}`);
    }
  }
});

test('TS and the bootstrap read every setting from the same texts alike, and refuse the same ones with the same message', () => {
  const cases = [];
  for (const d of SETTINGS) for (const text of TEXTS[d.kind](d)) cases.push({ key: d.key, env: d.env, text });
  const py = python(
    `import json, sys
from gpumem import _settings
out = []
for c in json.load(sys.stdin):
    env = {"GPUMEM_SESSION_DIR": "/s", "GPUMEM_ALLOCATOR_SO": "/a.so", c["env"]: c["text"]}
    try:
        s = _settings.Settings(env)
        decl = next(d for d in _settings.TABLE if d["key"] == c["key"])
        out.append({"value": getattr(s, decl["py"])})
    except _settings.SettingsError as exc:
        out.append({"error": str(exc)})
print(json.dumps(out))`,
    cases,
  );
  let refused = 0;
  cases.forEach((c, i) => {
    const d = SETTINGS.find((x) => x.key === c.key);
    const ts = tsAnswer(d, c.text, c.env);
    assert.deepEqual(py[i], ts, `${c.env}=${JSON.stringify(c.text)}`);
    if (ts.error) refused++;
  });
  assert.ok(refused > 20, `the cases include wrong values (${refused})`);
  // the messages are the table's sentence: the name as written, the rule, the value
  assert.deepEqual(tsAnswer(SETTINGS.find((d) => d.key === 'budgetBytes'), '4096', 'GPUMEM_BUDGET'), {
    error: "GPUMEM_BUDGET must be 0 (unbounded) or at least 1048576 bytes (1 MiB), got '4096'",
  });
  assert.deepEqual(tsAnswer(SETTINGS.find((d) => d.key === 'budgetBytes'), '1GB', '--budget'), {
    error: "--budget must be 0 (unbounded) or at least 1048576 bytes (1 MiB), got '1GB' (GB is decimal; write GiB)",
  });
});

test('a size is read alike by TS and Python (Note [Size input])', () => {
  const texts = ['0', '1', '1024', '1k', '1K', '1KiB', '1 kib', '1.5g', '1.5 GiB', '0.5b', '1.25k', '80GB', '80 gb', '12tb', 'GiB', '', '1 2', '9007199254740991', '9007199254740993', '8192TiB', '1e3', ' 7 '];
  const py = python('import json, sys\nfrom gpumem import _settings\nprint(json.dumps([_settings.read_size(t) for t in json.load(sys.stdin)]))', texts);
  assert.deepEqual(py, texts.map(readSize));
});

test('the allocator refuses a wrong value of each setting it reads with the message TS gives for it', (t) => {
  if (!fs.existsSync(SO)) {
    assert.fail(`the allocator's check needs ${SO}: run \`npm run build\` first`);
  }
  const wrong = { choice: ['huge', 1, true], flag: ['yes', 1, null], count: [-1, 'often', 1.5], size: [4096, -1, '1GiB', 0.5] };
  const cases = [];
  for (const d of SETTINGS.filter((x) => x.json)) {
    for (const v of wrong[d.kind]) {
      if (d.kind === 'size' && v === 4096 && (d.min ?? 1) <= 4096) continue; // 4096 is a fine simulator capacity
      cases.push({ json: d.json, value: v, want: (() => {
        try {
          checkValue(d, v, `"${d.json}"`);
          return null;
        } catch (e) {
          return e.message;
        }
      })() });
    }
  }
  t.diagnostic(`${cases.length} wrong values`);
  const got = python(
    `import ctypes, json, sys
so = ctypes.CDLL(${JSON.stringify(SO)})
so.gpumem_configure.argtypes = [ctypes.c_char_p]
so.gpumem_last_error.restype = ctypes.c_char_p
out = []
for c in json.load(sys.stdin):
    rc = so.gpumem_configure(json.dumps({c["json"]: c["value"]}).encode())
    out.append(None if rc == 0 else so.gpumem_last_error().decode().replace("gpumem_configure: ", "", 1))
print(json.dumps(out))`,
    cases,
  );
  cases.forEach((c, i) => {
    assert.ok(c.want, `TS refuses ${c.json}=${JSON.stringify(c.value)}`);
    assert.equal(got[i], c.want, `${c.json}=${JSON.stringify(c.value)}`);
  });
});

test('the launchers write the environment the bootstrap reads back: every setting, the same variables, the same switches', () => {
  const given = { segments: 'fixed', trimOnGrowth: false, stacks: false, backwardLinks: false, events: false, recordSteps: 7, sampleMs: 0, budgetBytes: 256 * 2 ** 20, allocator: 'lens', backend: 'sim', simCapacity: 2 ** 30 };
  const ts = buildWorkloadEnv({ sessionDir: '/s', allocatorSo: '/a.so', pythonPathPrefix: PY_DIR, baseEnv: { GPUMEM_BUDGET: '1', GPUMEM_STRICT_COMPILE: '1' }, settings: given });
  const py = python(
    `import json, sys
from gpumem import _launch, _settings
g = json.load(sys.stdin)
env = _launch.workload_env("/s", "/a.so", segments=g["segments"], trim=g["trimOnGrowth"], stacks=g["stacks"], backward_links=g["backwardLinks"], events=g["events"], record_steps=g["recordSteps"], sample_ms=g["sampleMs"],
                           budget=g["budgetBytes"], allocator_mode=g["allocator"], backend=g["backend"], sim_capacity=g["simCapacity"],
                           base={"GPUMEM_BUDGET": "1", "GPUMEM_STRICT_COMPILE": "1"})
s = _settings.Settings(env)
print(json.dumps({"env": {k: v for k, v in env.items() if k.startswith("GPUMEM_")},
                  "read": {d["key"]: getattr(s, d["py"]) for d in _settings.TABLE},
                  "switches": list(_settings.USER_ENV_SWITCHES)}))`,
    given,
  );
  const gpumem = (env) => Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith('GPUMEM_')));
  assert.deepEqual(py.env, gpumem(ts));
  assert.deepEqual(py.read, given, 'the bootstrap reads back what was given');
  assert.deepEqual(py.switches, USER_ENV_SWITCHES);
  assert.equal(ts.GPUMEM_BUDGET, String(256 * 2 ** 20), "a stale GPUMEM_BUDGET of the launcher's own environment does not leak in");
});

test('gpumem run and python3 -m gpumem run take the same options, with the same help, and refuse the same values alike', () => {
  const py = python(
    `import json, sys
from gpumem import __main__ as m
p = m._run_parser()
print(json.dumps({a.option_strings[0]: a.help for a in p._actions if a.option_strings and a.option_strings[0] != "-h"}))`,
    null,
  );
  assert.deepEqual(Object.keys(py).sort(), runOptions().sort());
  for (const d of SETTINGS.filter((x) => x.cli)) assert.equal(py[d.cli], cliHelp(d), d.cli);
  for (const argv of [['--budget', '1GB'], ['--budget', '4KiB'], ['--sample-ms', 'often'], ['--segments', 'huge'], ['--allocator', '/x/libgpumem_allocator.so']]) {
    let ts;
    try {
      settingsFromOptions(parseArgs('run', [...argv, 'x.py'], Object.fromEntries(runOptions().map((o) => [o.slice(2), { value: !['--no-trim', '--no-stacks', '--figures-only'].includes(o) }])), true));
    } catch (e) {
      ts = e.message;
    }
    const r = spawnSync('python3', ['-m', 'gpumem', 'run', ...argv, 'x.py'], { encoding: 'utf8', env: { ...process.env, PYTHONPATH: PY_DIR } });
    assert.equal(r.status, 2, argv.join(' '));
    assert.ok(ts, `gpumem run refuses ${argv.join(' ')}`);
    assert.equal(r.stderr.trim().split('\n').at(-1), `python3 -m gpumem run: error: ${ts}`);
  }
});

test('python3 -m gpumem run --budget reaches the workload (it used to have no --budget and dropped GPUMEM_BUDGET)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-settings-'));
  try {
    const script = path.join(dir, 'show_env.py');
    fs.writeFileSync(script, "import json, os\nprint(json.dumps({k: v for k, v in os.environ.items() if k.startswith('GPUMEM_')}))\n");
    const run = (...opts) => {
      const r = spawnSync('python3', ['-m', 'gpumem', 'run', '--out', dir, '--allocator-so', SO, ...opts, '--', script], {
        encoding: 'utf8',
        env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GPUMEM_'))), PYTHONPATH: PY_DIR, GPUMEM_BUDGET: '5' },
      });
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(r.stdout.trim().split('\n').at(-1));
    };
    assert.equal(run('--budget', '256MiB').GPUMEM_BUDGET, String(256 * 2 ** 20));
    assert.equal(run('--budget', 'none', '--no-trim').GPUMEM_BUDGET, '0');
    const dflt = run();
    assert.equal(dflt.GPUMEM_BUDGET, String(2 ** 30), 'the default, not the stale variable');
    assert.equal(dflt.GPUMEM_ALLOCATOR, 'auto');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("native/python/README.md's environment table names every setting's variable with the table's default", () => {
  const readme = fs.readFileSync(path.join(root, 'native/python/README.md'), 'utf8');
  for (const d of SETTINGS) {
    const row = readme.split('\n').find((l) => l.startsWith(`| \`${d.env}\` |`));
    assert.ok(row, `${d.env} has no row in native/python/README.md`);
    const dflt = row.split('|').at(-2).trim();
    if (d.default === 0 && d.zero) continue; // "allocator's default": what 0 means
    assert.equal(dflt, `\`${toEnv(d, d.default)}\``, d.env);
  }
});
