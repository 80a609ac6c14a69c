// A tiny schema language for the host ⇄ webview messages: each panel declares its messages once, as a
// table `type → fields`, and both the TypeScript type (MessageOf) and the runtime validator (Protocol.check)
// are derived from that table. Imported by src/ (extension host) and webview/ (browser bundles): plain
// functions, no Node and no DOM.
//
// Note [Message schemas]: every message that crosses postMessage is validated by its receiver, both ways.
// - webview → host: the page is untrusted input (a compromised or buggy page must not make the host do
//   anything outside the contract), so every field is checked, numbers must be finite, strings are bounded,
//   and the host acts on a fresh object holding only the declared fields (extra keys are dropped).
// - host → webview: the sender is the extension itself, so the receiver checks the envelope (a known
//   `type`) and the fields the page branches on (ids, device, flags, names); bulk payloads (series, spans,
//   rows) are declared with `view<T>(fields)`, which checks the listed top-level fields and passes the
//   object through as T. A per-element check of a 3 000-band timeline would cost more than drawing it.
// - A rejected message is dropped, never half-handled, and the reason is logged (host: the extension
//   host's log via console.warn; webview: the webview's developer tools console), so a contract drift
//   between a new host and an old page shows up as one line naming the type and the field.
// Why not zod or JSON Schema: ~150 lines cover what the two panels need, the bundle stays small, and the
// derived types are exact (optional fields stay optional, literals stay literal).

/** A failed check, with a reason that names the field ("requestTimeline.t0Us must be a finite number"). */
export class Invalid {
  constructor(readonly reason: string) {}
}

/** Checks `v` (found at `at`) and returns the value to use, or Invalid. */
export type Schema<T> = (v: unknown, at: string) => T | Invalid;
export type Infer<S> = S extends Schema<infer T> ? T : never;

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : `${v}`;
  if (typeof v === 'string') return v.length > 40 ? `a string of ${v.length} characters` : JSON.stringify(v);
  return typeof v;
}

const fail = (at: string, what: string, v: unknown) => new Invalid(`${at} must be ${what}, got ${describe(v)}`);

/** A finite number (JSON cannot carry NaN or Infinity: Note [JSON-safe numbers]). */
export const num: Schema<number> = (v, at) => (typeof v === 'number' && Number.isFinite(v) ? v : fail(at, 'a finite number', v));
export const int: Schema<number> = (v, at) => (typeof v === 'number' && Number.isInteger(v) ? v : fail(at, 'an integer', v));
export const bool: Schema<boolean> = (v, at) => (typeof v === 'boolean' ? v : fail(at, 'true or false', v));

/** A string of at most `max` characters. */
export function str(max = 4096): Schema<string> {
  return (v, at) => (typeof v !== 'string' ? fail(at, 'a string', v) : v.length > max ? new Invalid(`${at} is longer than ${max} characters (${v.length})`) : v);
}

/** One of a fixed set of strings (or other primitives). */
export function oneOf<const T extends readonly (string | number | boolean)[]>(values: T): Schema<T[number]> {
  return (v, at) => ((values as readonly unknown[]).includes(v) ? (v as T[number]) : fail(at, `one of ${values.map((x) => JSON.stringify(x)).join(', ')}`, v));
}

/** An extra condition on a checked value (e.g. a range, or one field against another). */
export function refine<T>(s: Schema<T>, ok: (v: T) => boolean, what: string): Schema<T> {
  return (v, at) => {
    const r = s(v, at);
    if (r instanceof Invalid) return r;
    return ok(r) ? r : new Invalid(`${at} ${what}`);
  };
}

/** A checked value, transformed (e.g. clamped) before the receiver sees it. */
export function map<T, U>(s: Schema<T>, f: (v: T) => U): Schema<U> {
  return (v, at) => {
    const r = s(v, at);
    return r instanceof Invalid ? r : f(r);
  };
}

/** Absent (undefined) or `s`. */
export function optional<T>(s: Schema<T>): Schema<T | undefined> {
  return (v, at) => (v === undefined ? undefined : s(v, at));
}

/** An array whose every element is checked (use for short arrays from the untrusted side). */
export function arrayOf<T>(item: Schema<T>, maxLength = 100_000): Schema<T[]> {
  return (v, at) => {
    if (!Array.isArray(v)) return fail(at, 'an array', v);
    if (v.length > maxLength) return new Invalid(`${at} has more than ${maxLength} elements (${v.length})`);
    const out: T[] = [];
    for (let i = 0; i < v.length; i++) {
      const r = item(v[i], `${at}[${i}]`);
      if (r instanceof Invalid) return r;
      out.push(r);
    }
    return out;
  };
}

/** An array passed through as T[] without looking at its elements (host → webview bulk data only). */
export function list<T>(): Schema<T[]> {
  return (v, at) => (Array.isArray(v) ? (v as T[]) : fail(at, 'an array', v));
}

/** Bytes: a Uint8Array, or the plain array JSON turns one into (elements are clamped by Uint8Array.from). */
export const bytes: Schema<Uint8Array | number[]> = (v, at) =>
  v instanceof Uint8Array || Array.isArray(v) ? (v as Uint8Array | number[]) : fail(at, 'bytes (a Uint8Array or an array of numbers)', v);

type Fields = Record<string, Schema<unknown>>;
type Simplify<T> = { [K in keyof T]: T[K] } & {};
/** Fields whose schema admits undefined become optional properties. */
type FieldsOut<F extends Fields> = Simplify<
  { [K in keyof F as undefined extends Infer<F[K]> ? never : K]: Infer<F[K]> } & {
    [K in keyof F as undefined extends Infer<F[K]> ? K : never]?: Exclude<Infer<F[K]>, undefined>;
  }
>;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An object with exactly these fields: the result is a fresh object without any undeclared key. */
export function obj<F extends Fields>(fields: F): Schema<FieldsOut<F>> {
  return (v, at) => {
    if (!isRecord(v)) return fail(at, 'an object', v);
    const out: Record<string, unknown> = {};
    for (const [k, s] of Object.entries(fields)) {
      const r = s(v[k], `${at}.${k}`);
      if (r instanceof Invalid) return r;
      if (r !== undefined) out[k] = r;
    }
    return out as FieldsOut<F>;
  };
}

/**
 * An object of interface T checked on the listed fields only and passed through whole (host → webview
 * payloads: Note [Message schemas]). The listed fields must exist on T with the schema's type.
 */
export function view<T extends object>(fields: { [K in keyof T]?: Schema<T[K]> } = {}): Schema<T> {
  return (v, at) => {
    if (!isRecord(v)) return fail(at, 'an object', v);
    for (const [k, s] of Object.entries(fields) as [string, Schema<unknown>][]) {
      const r = s(v[k], `${at}.${k}`);
      if (r instanceof Invalid) return r;
    }
    return v as T;
  };
}

/** A message table: message type → the schema of the rest of the message (usually obj or refine(obj)). */
export type MessageTable = Record<string, Schema<object>>;
/** The union of the table's messages, each with its `type`. */
export type MessageOf<T extends MessageTable> = { [K in keyof T & string]: Simplify<{ type: K } & Infer<T[K]>> }[keyof T & string];

export type Checked<M> = { ok: true; message: M } | { ok: false; reason: string };

export interface Protocol<M extends { type: string }> {
  /** "live panel → host": used in logged reasons */
  readonly name: string;
  readonly types: readonly M['type'][];
  /** The message to act on (only declared fields), or why it was rejected. */
  check(raw: unknown): Checked<M>;
  /** check() without the reason: the message, or undefined. */
  parse(raw: unknown): M | undefined;
}

export function protocol<T extends MessageTable>(name: string, table: T): Protocol<MessageOf<T>> {
  type M = MessageOf<T>;
  const types = Object.keys(table) as M['type'][];
  const check = (raw: unknown): Checked<M> => {
    if (!isRecord(raw)) return { ok: false, reason: `${name}: a message must be an object, got ${describe(raw)}` };
    const type = raw.type;
    // Own keys only: "toString" or "__proto__" are not message types.
    if (typeof type !== 'string' || !Object.prototype.hasOwnProperty.call(table, type)) {
      return { ok: false, reason: `${name}: unknown message type ${describe(type)} (expected one of ${types.join(', ')})` };
    }
    const r = table[type](raw, type);
    if (r instanceof Invalid) return { ok: false, reason: `${name}: ${r.reason}` };
    return { ok: true, message: { ...r, type } as M };
  };
  return {
    name,
    types,
    check,
    parse: (raw) => {
      const c = check(raw);
      return c.ok ? c.message : undefined;
    },
  };
}

/** The message type a protocol validates: `type LiveHostMessage = MessageIn<typeof liveHostMessages>`. */
export type MessageIn<P> = P extends Protocol<infer M> ? M : never;
