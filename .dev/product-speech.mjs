#!/usr/bin/env node
// Note [Product speech]: the tree speaks of the product, not of how it was worked on. No tracker numbers (the word
// issue with a number after it, also in a file name), no work periods (an ordinal, this, last, next or previous
// before the word session, or a session of a year) and no lettered benchmark runs (run or runs before a single
// capital letter): a reader of the code or of a README has none of those to look up. Say what the product does and
// why; a measured figure carries its command, date and machine. A session folder, its directory and
// `SessionFolder` are the product's own words (the folder a launch creates) and stay.
//
//   node .dev/product-speech.mjs     every tracked file (its name and its text) but test/fixtures/ (recorded data)
//                                    and package-lock.json; prints FILE:LINE: what, for each finding; exits 1 on one
//
// The lint layer of `npm test` runs it; test/unit/product-speech.test.mjs feeds it lines that must fail and lines
// that must pass. Neither file spells out a line it forbids, so both pass it too.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const ORDINAL = String.raw`(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|[a-z]+teenth|twentieth|twenty-[a-z]+|thirtieth|\d+(?:st|nd|rd|th))`;
// The product's own sessions: a launch's folder and what is named after it.
const PRODUCT_SESSION = String.raw`(?!'?s?[ _-]?(?:folder|dir|directory|slug|id|path|root|json)\b)`;

/** What each rule catches; a line fails on the first that matches. */
export const RULES = [
  { what: 'an issue number', re: /\bissues?[ _-]?#?\d+/i },
  { what: 'a work session', re: new RegExp(String.raw`\b(?:this|last|next|earlier|previous|prior|${ORDINAL})(?:[ -]to[ -]${ORDINAL})? sessions?\b${PRODUCT_SESSION}`, 'i') },
  { what: 'a work session', re: /\bsessions? of (?:19|20)\d\d\b/i },
  { what: 'a work session', re: /\bthe session (?:after|before)\b/i },
  // Case matters: run before a lone capital is a lettered run; before a lowercase article it is English, and a
  // command's title (Run Python File) goes on with lowercase letters. A/A (a native process against another) is a
  // configuration, not a run's letter.
  { what: 'a lettered run', re: /\b[Rr]uns? (?!A\/A\b)[A-Z]\b/ },
];

/** The rule a line breaks, or null. */
export function verdict(line) {
  for (const r of RULES) {
    const m = r.re.exec(line);
    if (m) return { what: r.what, words: m[0] };
  }
  return null;
}

/** Findings in one file's text (and its path): [{ line, what, words }]. */
export function findings(file, text) {
  const out = [];
  const named = verdict(file);
  if (named) out.push({ line: 0, ...named });
  text.split('\n').forEach((l, i) => {
    const v = verdict(l);
    if (v) out.push({ line: i + 1, ...v });
  });
  return out;
}

const EXEMPT = new Set(['package-lock.json']);

/** Tracked files this lint reads: all but fixture data and the lock file. */
export function trackedFiles(root = ROOT) {
  return execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((f) => f && !f.startsWith('test/fixtures/') && !EXEMPT.has(f));
}

/** Every finding under root as "FILE:LINE: what (words)" lines; LINE 0 is the file's name. */
export function check(root = ROOT) {
  const lines = [];
  for (const f of trackedFiles(root)) {
    const abs = path.join(root, f);
    if (!fs.existsSync(abs) || !fs.statSync(abs).isFile()) continue;
    const buf = fs.readFileSync(abs);
    if (buf.includes(0)) continue; // binary
    for (const x of findings(f, buf.toString('utf8'))) lines.push(`${f}:${x.line}: ${x.what} ("${x.words}"): say it in words about the product (Note [Product speech])`);
  }
  return lines;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const lines = check();
  for (const l of lines) console.log(l);
  if (lines.length) {
    console.log(`product-speech: ${lines.length} line(s) speak of issues, sessions or lettered runs`);
    process.exit(1);
  }
  console.log('product-speech: clean');
}
