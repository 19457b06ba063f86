/**
 * The parts of the protocol fuzz's requests (soak/protocol-fuzz.ts): a seeded generator, byte
 * mutations, raw requests and multipart bodies built by hand, so that anything can be broken.
 */

/** A small seeded generator (mulberry32): the same seed gives the same sequence. */
export function seeded(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return {
    next,
    int,
    /** An integer in [low, high], spread logarithmically: small sizes as often as large ones. */
    size: (low: number, high: number) => Math.round(low * (high / low) ** next()),
    pick: <T>(items: readonly T[]): T => items[int(items.length)] as T,
    chance: (p: number) => next() < p,
  };
}
export type Rng = ReturnType<typeof seeded>;

/** The seed of case `index` of a run seeded with `runSeed`. */
export function caseSeed(runSeed: number, index: number): number {
  return seeded((runSeed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0).int(2 ** 32);
}

/** What a multipart body is made of, for `mutateBytes` to insert where they do most harm. */
export function multipartTokens(boundary: string): string[] {
  return [
    '\r\n',
    '--',
    boundary,
    '"',
    ';',
    '=',
    'name=',
    'filename=',
    '\0',
    'Content-Disposition: ',
  ];
}

/** Flips, drops, truncates, duplicates and inserts bytes and `tokens` in `body`. */
export function mutateBytes(rng: Rng, seedBody: Buffer, tokens: readonly string[]): Buffer {
  let body = Buffer.from(seedBody);
  const rounds = 1 + rng.int(6);
  for (let i = 0; i < rounds; i++) {
    const at = rng.int(body.length + 1);
    switch (rng.int(5)) {
      case 0:
        body[Math.min(at, body.length - 1)] = rng.int(256);
        break;
      case 1:
        body = Buffer.concat([body.subarray(0, at), body.subarray(at + 1 + rng.int(20))]);
        break;
      case 2:
        body = body.subarray(0, at);
        break;
      case 3: {
        const token = tokens[rng.int(tokens.length)] ?? '';
        body = Buffer.concat([body.subarray(0, at), Buffer.from(token), body.subarray(at)]);
        break;
      }
      default: {
        const from = rng.int(body.length);
        const piece = body.subarray(from, from + rng.int(40));
        body = Buffer.concat([body.subarray(0, at), piece, body.subarray(at)]);
      }
    }
  }
  return body;
}

export const CATEGORIES = [
  'multipart',
  'basic-auth',
  'method-path',
  'headers',
  'slow',
  'half-closed',
  'content-type',
  'metadata',
] as const;
export type Category = (typeof CATEGORIES)[number];

export interface FuzzCase {
  category: Category;
  /** Which generator of the category, e.g. `two-file-parts`. */
  kind: string;
  seed: number;
  method: string;
  /** The request target as written (latin1), to tell v1.0's answers from v2.x's. */
  target: string;
  /** The bytes written, in order, each after its pause. */
  writes: Array<{ data: Buffer; delayMs: number }>;
  /** The client ends its side (socket.end()) after the writes. */
  halfClose: boolean;
  /** The request is incomplete or its framing unknowable: closing without an answer is fine. */
  mayClose: boolean;
  /** Answers expected at most (pipelined requests). */
  maxAnswers: number;
  /** How long an answer may take after the last write before the case counts as a hang. */
  waitMs: number;
  /** Metadata a 201 must echo (sync v2.1 and v2.2 uploads whose fields are well-formed). */
  echoes?: Record<string, string>;
}

export interface FuzzContext {
  /** A valid `Authorization` header. */
  auth: string;
  /** The service's ASSAY_REQUEST_IDLE_TIMEOUT and ASSAY_HEADER_TIMEOUT, in ms. */
  idleTimeoutMs: number;
  headerTimeoutMs: number;
}

export type Header = [string, string | Buffer];

/** A request in parts, for the categories to break one piece of. */
export interface Draft {
  method: string;
  target: string | Buffer;
  version: string;
  headers: Header[];
  body: Buffer;
  echoes?: Record<string, string>;
}

export function serialize(draft: Draft): { head: Buffer; body: Buffer } {
  const lines: Buffer[] = [
    Buffer.from(`${draft.method} `, 'latin1'),
    Buffer.from(draft.target),
    Buffer.from(` ${draft.version}\r\n`, 'latin1'),
  ];
  for (const [name, value] of draft.headers) {
    lines.push(Buffer.from(`${name}: `, 'latin1'), Buffer.from(value), Buffer.from('\r\n'));
  }
  lines.push(Buffer.from('\r\n'));
  return { head: Buffer.concat(lines), body: draft.body };
}

export const VERSIONS = ['v2.0', 'v2.1', 'v2.2'] as const;
/** Loopback on a port nothing listens on: refused by the address policy, never a real fetch. */
export const NOWHERE = 'http://127.0.0.1:9/fuzz';

export interface Part {
  name: string | Buffer;
  filename?: string | Buffer;
  type?: string;
  headers?: string;
  body: Buffer | string;
}

export function multipartBody(
  boundary: string,
  parts: Part[],
  options: { eol?: string; close?: boolean; preamble?: string } = {},
): Buffer {
  const eol = options.eol ?? '\r\n';
  const pieces: Buffer[] = [Buffer.from(options.preamble ?? '')];
  for (const part of parts) {
    pieces.push(Buffer.from(`--${boundary}${eol}Content-Disposition: form-data; name="`));
    pieces.push(Buffer.from(part.name), Buffer.from('"'));
    if (part.filename !== undefined) {
      pieces.push(Buffer.from('; filename="'), Buffer.from(part.filename), Buffer.from('"'));
    }
    pieces.push(Buffer.from(eol));
    if (part.type !== undefined) pieces.push(Buffer.from(`Content-Type: ${part.type}${eol}`));
    if (part.headers !== undefined) pieces.push(Buffer.from(part.headers));
    pieces.push(Buffer.from(eol), Buffer.from(part.body), Buffer.from(eol));
  }
  if (options.close !== false) pieces.push(Buffer.from(`--${boundary}--${eol}`));
  return Buffer.concat(pieces);
}

const ALNUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
export function word(rng: Rng, length: number): string {
  return Array.from({ length }, () => rng.pick([...ALNUM])).join('');
}

/** Harmless content: clamd and the engines find nothing in it. */
export function cleanContent(rng: Rng): Buffer {
  return Buffer.from(`fuzz content ${rng.int(1e9)} ${word(rng, rng.size(1, 400))}\n`);
}

export function filePart(rng: Rng): Part {
  return { name: 'file', filename: 'fuzz.txt', type: 'text/plain', body: cleanContent(rng) };
}

export function hex(rng: Rng, length: number): string {
  return Array.from({ length }, () => rng.int(16).toString(16)).join('');
}

function uuid(rng: Rng): string {
  const h = hex(rng, 32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function formBody(fields: Array<[string, string]>): Buffer {
  return Buffer.from(new URLSearchParams(fields).toString());
}

/** A well-formed request to one of the real routes, with a valid body where it takes one. */
export function validDraft(rng: Rng, ctx: FuzzContext): Draft {
  const v = rng.pick(VERSIONS);
  const boundary = `fz${word(rng, 8 + rng.int(24))}`;
  const multipart = `multipart/form-data; boundary=${boundary}`;
  const form = 'application/x-www-form-urlencoded';
  const routes: Array<() => [string, string, string | null, Buffer]> = [
    () => ['POST', `/${v}/files`, multipart, multipartBody(boundary, [filePart(rng)])],
    () => ['POST', `/${v}/files/async`, multipart, multipartBody(boundary, [filePart(rng)])],
    () => ['POST', `/${v}/files/fetch`, form, formBody([['location', NOWHERE]])],
    () => ['POST', `/${v}/auth/tokens`, form, formBody([['timeout', String(60 + rng.int(600))]])],
    () => ['GET', `/${v}/auth/tokens/${hex(rng, 32)}`, null, Buffer.alloc(0)],
    () => ['GET', `/${v}/files/${hex(rng, 32)}`, null, Buffer.alloc(0)],
    () => ['GET', `/${v}/ping`, null, Buffer.alloc(0)],
    () => ['POST', '/api/scan/', 'application/octet-stream', cleanContent(rng)],
    () => ['POST', '/api/scan/async', 'application/octet-stream', cleanContent(rng)],
    () => ['POST', '/api/scan/fetch', form, formBody([['url', NOWHERE]])],
    () => ['GET', `/api/scan/status/${uuid(rng)}`, null, Buffer.alloc(0)],
    () => ['GET', '/health/live', null, Buffer.alloc(0)],
  ];
  const [method, target, type, body] = rng.pick(routes)();
  return request(rng, ctx, method, target, type, body);
}

/** A draft with the usual headers: Host, credentials, type, length, sometimes `close`. */
export function request(
  rng: Rng,
  ctx: FuzzContext,
  method: string,
  target: string | Buffer,
  type: string | null,
  body: Buffer,
): Draft {
  const headers: Header[] = [
    ['Host', 'assay.test'],
    ['Authorization', ctx.auth],
  ];
  if (type !== null) headers.push(['Content-Type', type]);
  if (method === 'POST' || body.length > 0) headers.push(['Content-Length', String(body.length)]);
  // Most close at once; the rest keep the connection alive, as clients do.
  if (rng.chance(0.7)) headers.push(['Connection', 'close']);
  return { method, target, version: 'HTTP/1.1', headers, body };
}

export function setHeader(draft: Draft, name: string, value: string | Buffer | null): void {
  draft.headers = draft.headers.filter(([n]) => n.toLowerCase() !== name.toLowerCase());
  if (value !== null) draft.headers.push([name, value]);
}

/** A case sent whole at once, the usual shape. */
export function whole(
  draft: Draft,
  overrides: Partial<Pick<FuzzCase, 'mayClose' | 'maxAnswers' | 'waitMs' | 'halfClose'>> = {},
): Omit<FuzzCase, 'category' | 'kind' | 'seed'> {
  const { head, body } = serialize(draft);
  return {
    method: draft.method,
    target: Buffer.from(draft.target).toString('latin1'),
    writes: [{ data: Buffer.concat([head, body]), delayMs: 0 }],
    halfClose: false,
    mayClose: false,
    maxAnswers: 1,
    waitMs: 15_000,
    ...(draft.echoes === undefined ? {} : { echoes: draft.echoes }),
    ...overrides,
  };
}

export type Generator = (
  rng: Rng,
  ctx: FuzzContext,
) => { kind: string } & Omit<FuzzCase, 'category' | 'kind' | 'seed'>;

/** Text an attacker would try in a field: controls, separators, quotes, scripts, surrogates. */
const ODD: Array<(rng: Rng) => string> = [
  () => '\u0000',
  (rng) => String.fromCharCode(1 + rng.int(31)),
  () => '\u007f',
  (rng) => String.fromCharCode(0x80 + rng.int(32)),
  () => '\u2028\u2029',
  () => '\ufeff',
  () => '\u202e',
  () => '\ufffe\uffff',
  () => '😀',
  () => 'e\u0301',
  () => '漢字',
  () => 'Ωμέγα',
  () => 'عربي',
  () => '"',
  () => '\\',
  () => ';=,',
  () => '\r\n',
  () => '%00%ZZ',
  () => '../',
  () => '<x>&amp;',
  () => '{"a":[1]}',
  () => ' ',
  (rng) => word(rng, rng.size(1, 20)),
];

export function oddText(rng: Rng): string {
  const text = Array.from({ length: 1 + rng.int(6) }, () => rng.pick(ODD)(rng)).join('');
  // Now and then far longer than any limit (keys: 256 characters, values: 64 KiB).
  return rng.chance(0.05) ? text.repeat(Math.ceil(rng.size(300, 70_000) / text.length)) : text;
}

/** Bytes that are not UTF-8: a stray continuation, overlong, a surrogate, past U+10FFFF. */
export const NOT_UTF8 = [
  [0xff],
  [0x80],
  [0xc0, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
];

export function withBadBytes(rng: Rng, text: string): Buffer {
  const at = rng.int(text.length + 1);
  const bytes = Buffer.from(rng.pick(NOT_UTF8));
  return Buffer.concat([Buffer.from(text.slice(0, at)), bytes, Buffer.from(text.slice(at))]);
}
