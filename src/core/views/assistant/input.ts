// Checks a tool's input against its declared schema (./tools.ts) before anything is opened: a model can send
// anything, and a wrong field must come back as a sentence it can act on, not as an exception from deep inside.
// Only the schema features the declarations use (object, string, integer, number, array of integers, enum, bounds).
import type { JsonSchema, ToolDeclaration } from './tools';
import { ToolError } from './answers/toolError';

export type ToolInput = Record<string, unknown>;

function describe(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'string' ? `"${v.slice(0, 80)}"` : `${typeof v} ${JSON.stringify(v)?.slice(0, 80)}`;
}

function check(name: string, s: JsonSchema, v: unknown): void {
  switch (s.type) {
    case 'string':
      if (typeof v !== 'string') throw new ToolError(`${name} must be a string, not ${describe(v)}`);
      if (s.enum && !s.enum.includes(v)) throw new ToolError(`${name} must be one of ${s.enum.join(', ')}, not ${describe(v)}`);
      return;
    case 'integer':
    case 'number':
      if (typeof v !== 'number' || !Number.isFinite(v) || (s.type === 'integer' && !Number.isInteger(v))) {
        throw new ToolError(`${name} must be ${s.type === 'integer' ? 'a whole number' : 'a number'}, not ${describe(v)}`);
      }
      if (s.minimum !== undefined && v < s.minimum) throw new ToolError(`${name} must be at least ${s.minimum} (got ${v})`);
      if (s.maximum !== undefined && v > s.maximum) throw new ToolError(`${name} must be at most ${s.maximum} (got ${v})`);
      return;
    case 'boolean':
      if (typeof v !== 'boolean') throw new ToolError(`${name} must be true or false, not ${describe(v)}`);
      return;
    case 'array':
      if (!Array.isArray(v)) throw new ToolError(`${name} must be an array, not ${describe(v)}`);
      if (s.minItems !== undefined && v.length < s.minItems) throw new ToolError(`${name} needs at least ${s.minItems} items (got ${v.length})`);
      if (s.maxItems !== undefined && v.length > s.maxItems) throw new ToolError(`${name} takes at most ${s.maxItems} items (got ${v.length})`);
      if (s.items) v.forEach((x, i) => check(`${name}[${i}]`, s.items as JsonSchema, x));
      return;
    case 'object':
      checkObject(name, s, v);
  }
}

function checkObject(name: string, s: JsonSchema, v: unknown): void {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ToolError(`${name} must be an object, not ${describe(v)}`);
  const o = v as Record<string, unknown>;
  const props = s.properties ?? {};
  for (const k of s.required ?? []) if (o[k] === undefined) throw new ToolError(`${name === 'input' ? '' : name + '.'}${k} is required`);
  for (const [k, x] of Object.entries(o)) {
    const p = props[k];
    if (!p) {
      if (s.additionalProperties === false) {
        const known = Object.keys(props);
        throw new ToolError(`unknown input "${k}"; ${known.length ? `this tool takes ${known.join(', ')}` : 'this tool takes no input'}`);
      }
      continue;
    }
    if (x !== undefined && x !== null) check(k, p, x);
  }
}

/** The input as the tool declares it (null and undefined fields dropped); throws a ToolError naming the wrong field. */
export function checkInput(tool: ToolDeclaration, input: unknown): ToolInput {
  const v = input === undefined || input === null ? {} : input;
  checkObject('input', tool.inputSchema, v);
  const out: ToolInput = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) if (x !== undefined && x !== null) out[k] = x;
  return out;
}
