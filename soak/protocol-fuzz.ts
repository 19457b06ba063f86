/**
 * Protocol fuzz: seeded generators of hostile HTTP requests, one per category of the issue's list,
 * written as raw bytes (soak/fuzz-requests.ts) so that framing can be broken. `npm run fuzz`
 * (soak/fuzz.ts) sends 10,000 of them to a deployment, test/scripts/protocol-fuzz.test.ts 1,000 to
 * the suite's service; what an answer must be is checked in soak/fuzz-client.ts. A case is a
 * function of its seed alone: `npm run fuzz -- --replay SEED` sends one again.
 */
import {
  CATEGORIES,
  type Category,
  cleanContent,
  type Draft,
  type FuzzCase,
  type FuzzContext,
  filePart,
  formBody,
  type Generator,
  multipartBody,
  mutateBytes,
  NOT_UTF8,
  NOWHERE,
  oddText,
  type Part,
  type Rng,
  request,
  seeded,
  serialize,
  setHeader,
  VERSIONS,
  validDraft,
  whole,
  withBadBytes,
  word,
} from './fuzz-requests.js';
import { headers, methodPath, slow } from './protocol-fuzz-framing.js';

export {
  CATEGORIES,
  type Category,
  caseSeed,
  type FuzzCase,
  type FuzzContext,
} from './fuzz-requests.js';

/** Slow cases take seconds each: two in a hundred keep a run of 10,000 to minutes. */
const WEIGHTS: Record<Category, number> = {
  multipart: 18,
  'basic-auth': 12,
  'method-path': 16,
  headers: 14,
  slow: 2,
  'half-closed': 9,
  'content-type': 12,
  metadata: 17,
};

const boundaryOf = (rng: Rng) => `fz${word(rng, 6 + rng.int(30))}`;

const multipart: Generator = (rng, ctx) => {
  const path = `/${rng.pick(VERSIONS)}/${rng.pick(['files', 'files', 'files/async'])}`;
  let boundary = boundaryOf(rng);
  const parts: Part[] = [{ name: 'metadata[fuzz]', body: word(rng, 5) }, filePart(rng)];
  if (rng.chance(0.5)) parts.reverse();
  let options: Parameters<typeof multipartBody>[2] = {};
  let declared = boundary;
  const kind = rng.pick([
    'mutated',
    'mutated',
    'mutated',
    'two-file-parts',
    'missing-boundary',
    'boundary-mismatch',
    'no-closing-delimiter',
    'lf-only',
    'no-file-part',
    'empty-file',
    'quoted-boundary',
    'long-boundary',
    'no-disposition',
    'huge-preamble',
    'many-fields',
    'truncated',
    'base64-part',
    'other-file-parts',
    'valid',
  ]);
  let type = `multipart/form-data; boundary=${boundary}`;
  switch (kind) {
    case 'two-file-parts':
      parts.push(filePart(rng));
      break;
    case 'missing-boundary':
      type = rng.pick(['multipart/form-data', 'multipart/form-data;', 'multipart/form-data; a=b']);
      break;
    case 'boundary-mismatch':
      declared = rng.pick([boundary.slice(0, 1 + rng.int(boundary.length - 1)), `${boundary}x`]);
      type = `multipart/form-data; boundary=${declared}`;
      break;
    case 'no-closing-delimiter':
      options = { close: false };
      break;
    case 'lf-only':
      options = { eol: '\n' };
      break;
    case 'no-file-part':
      parts.splice(
        parts.findIndex((p) => p.name === 'file'),
        1,
      );
      break;
    case 'empty-file':
      parts.splice(
        parts.findIndex((p) => p.name === 'file'),
        1,
        { ...filePart(rng), body: '' },
      );
      break;
    case 'quoted-boundary':
      type = `multipart/form-data; boundary="${boundary}"`;
      break;
    case 'long-boundary':
      boundary = word(rng, rng.size(71, 4000));
      type = `multipart/form-data; boundary=${boundary}`;
      break;
    case 'no-disposition':
      parts.push({ name: '', headers: 'X-Part: 1\r\n', body: 'x' });
      break;
    case 'huge-preamble':
      options = { preamble: `${'p'.repeat(rng.size(1024, 200_000))}\r\n` };
      break;
    case 'many-fields':
      for (let i = rng.size(90, 400); i > 0; i--)
        parts.push({ name: `metadata[k${i}]`, body: 'v' });
      break;
    case 'base64-part':
      parts.push({ ...filePart(rng), headers: 'Content-Transfer-Encoding: base64\r\n' });
      parts.splice(
        parts.findIndex((p) => p.name === 'file'),
        1,
      );
      break;
    case 'other-file-parts':
      parts.push({ ...filePart(rng), name: 'attachment' }, { ...filePart(rng), name: 'file[]' });
      break;
  }
  let body = multipartBody(boundary, parts, options);
  if (kind === 'mutated') {
    body = mutateBytes(rng, body, ['\r\n', '--', boundary, '"', ';', '=', 'name=', '\0']);
  }
  if (kind === 'truncated') body = body.subarray(0, rng.int(body.length));
  return { kind, ...whole(request(rng, ctx, 'POST', path, type, body)) };
};

const basicAuth: Generator = (rng, ctx) => {
  const draft = validDraft(rng, ctx);
  const [user, secret] = Buffer.from(ctx.auth.slice(6), 'base64').toString().split(':');
  const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');
  const kinds: Record<string, () => string | Buffer | null> = {
    'bad-base64': () => `Basic ${rng.pick(['!!!', '=abc', 'a', 'YWJj=ZGVm', 'YW Jj', '%%%%'])}`,
    'missing-colon': () => `Basic ${b64(`${user}${secret}`)}`,
    empty: () => rng.pick(['', 'Basic', 'Basic ', `Basic ${b64(':')}`, `Basic ${b64(`${user}:`)}`]),
    huge: () => `Basic ${b64(`${user}:${'s'.repeat(rng.size(1000, 40_000))}`)}`,
    'non-ascii-raw': () => Buffer.concat([Buffer.from('Basic '), Buffer.from(oddText(rng))]),
    'non-ascii-decoded': () => `Basic ${b64(withBadBytes(rng, `${oddText(rng)}:${oddText(rng)}`))}`,
    'wrong-scheme': () =>
      `${rng.pick(['Bearer', 'Digest', 'Negotiate', 'Basic\t', 'Basic:'])} ${b64(`${user}:${secret}`)}`,
    'scheme-case': () => `${rng.pick(['basic', 'BASIC', 'bAsIc'])} ${b64(`${user}:${secret}`)}`,
    'wrong-secret': () => `Basic ${b64(`${user}:${secret}x`)}`,
    'unknown-key': () => `Basic ${b64(`${word(rng, 32)}:${word(rng, 40)}`)}`,
    'token-shaped': () => `Basic ${b64(`${word(rng, 32)}:`)}`,
    absent: () => null,
    'control-chars': () => `Basic ${b64(`${user}:${secret}`)}${rng.pick(['\x01', '\x7f', '\0'])}`,
  };
  const kind = rng.pick(Object.keys(kinds));
  setHeader(draft, 'Authorization', (kinds[kind] as () => string | Buffer | null)());
  if (kind === 'absent' && rng.chance(0.5)) draft.headers.push(['Authorization', ctx.auth]);
  if (rng.chance(0.1)) draft.headers.push(['Authorization', ctx.auth]); // a second one
  return { kind, ...whole(draft) };
};

const halfClosed: Generator = (rng, ctx) => {
  const draft = validDraft(rng, ctx);
  if (draft.body.length === 0 && rng.chance(0.7)) {
    draft.method = 'POST';
    draft.body = cleanContent(rng);
    setHeader(draft, 'Content-Length', String(draft.body.length));
  }
  const { head, body } = serialize(draft);
  const all = Buffer.concat([head, body]);
  const kind = rng.pick([
    'end-after-complete',
    'end-after-complete',
    'end-mid-body',
    'end-after-head',
    'end-mid-head',
    'end-without-bytes',
  ]);
  const cut = {
    'end-after-complete': all.length,
    'end-mid-body': head.length + rng.int(Math.max(1, body.length)),
    'end-after-head': head.length,
    'end-mid-head': 1 + rng.int(head.length - 1),
    'end-without-bytes': 0,
  }[kind] as number;
  const sent = all.subarray(0, cut);
  return {
    kind,
    ...whole(draft),
    writes: sent.length === 0 ? [] : [{ data: sent, delayMs: 0 }],
    halfClose: true,
    // A complete request is answered even so (the service allows half-open sockets); a cut one
    // may be closed unanswered, as its framing cannot be finished.
    mayClose: cut < all.length || (kind === 'end-mid-body' && body.length === 0),
  };
};

const contentType: Generator = (rng, ctx) => {
  const v = rng.pick(VERSIONS);
  const path = rng.pick([
    `/${v}/files`,
    `/${v}/files/async`,
    `/${v}/files/fetch`,
    `/${v}/auth/tokens`,
    '/api/scan/',
    '/api/scan/async',
    '/api/scan/fetch',
  ]);
  const boundary = boundaryOf(rng);
  const bodies: Record<string, () => Buffer> = {
    multipart: () => multipartBody(boundary, [filePart(rng)]),
    form: () => formBody([path.startsWith('/api') ? ['url', NOWHERE] : ['location', NOWHERE]]),
    json: () => Buffer.from(JSON.stringify({ location: NOWHERE, file: 'eA==', timeout: 60 })),
    text: () => cleanContent(rng),
    empty: () => Buffer.alloc(0),
  };
  const bodyKind = rng.pick(Object.keys(bodies));
  const types = [
    null,
    'application/json',
    'text/plain; charset=utf-8',
    'application/x-www-form-urlencoded',
    `multipart/form-data; boundary=${boundary}`,
    `multipart/mixed; boundary=${boundary}`,
    `MULTIPART/FORM-DATA; BOUNDARY=${boundary}`,
    'multipart/form-data; boundary=',
    'multipart/form-data; boundary="unterminated',
    ';;;',
    '/',
    'application/x-www-form-urlencoded; charset=utf-16',
    `application/${'x'.repeat(rng.size(100, 12_000))}`,
    `text/plain; name=${oddText(rng).replace(/[\r\n]/g, '')}`,
    'image/png',
    '*/*',
  ];
  const type = rng.pick(types);
  const draft = request(rng, ctx, 'POST', path, type, (bodies[bodyKind] as () => Buffer)());
  return { kind: `${bodyKind} as ${type === null ? 'none' : type.slice(0, 40)}`, ...whole(draft) };
};

const metadata: Generator = (rng, ctx) => {
  const v = rng.pick(VERSIONS);
  const route = rng.pick(['sync', 'sync', 'async', 'fetch', 'legacy-fetch']);
  const entries: Array<[string | Buffer, string | Buffer]> = [];
  const count = rng.chance(0.05) ? rng.size(95, 130) : 1 + rng.int(6);
  for (let i = 0; i < count; i++) {
    const key = rng.chance(0.3) ? word(rng, 1 + rng.int(10)) : `${oddText(rng)}${i}`;
    const value = oddText(rng);
    const bad = rng.chance(0.1);
    entries.push(
      bad && rng.chance(0.5)
        ? [withBadBytes(rng, key), value]
        : [key, bad ? withBadBytes(rng, value) : value],
    );
  }
  // Now and then a callback, always refused (loopback, or not a URL): the fields are the point.
  const callback = rng.chance(0.75)
    ? null
    : rng.pick([
        `${NOWHERE}?${oddText(rng)}`,
        `http://[::1]:9/${encodeURIComponent(oddText(rng))}`,
        'javascript:alert(1)',
        `http://${oddText(rng)}`,
        'http://127.0.0.1:99999/',
      ]);
  let draft: Draft;
  if (route === 'fetch' || route === 'legacy-fetch') {
    const fields: Array<[string, string]> = entries.map(([k, value]) => [
      `metadata[${k}]`,
      String(value),
    ]);
    const location = rng.pick([
      NOWHERE,
      NOWHERE,
      `${NOWHERE}/${encodeURIComponent(oddText(rng))}`,
      `${NOWHERE}/${oddText(rng)}`,
      oddText(rng),
    ]);
    fields.push([route === 'legacy-fetch' ? 'url' : 'location', location]);
    if (callback !== null) {
      fields.push([
        route === 'legacy-fetch' ? rng.pick(['callback', 'post_callback']) : 'callback',
        callback,
      ]);
    }
    const path = route === 'fetch' ? `/${v}/files/fetch` : '/api/scan/fetch';
    draft = request(rng, ctx, 'POST', path, 'application/x-www-form-urlencoded', formBody(fields));
    // Bytes that are not UTF-8, percent-encoded or raw, where URLSearchParams would fix them.
    if (rng.chance(0.2))
      draft.body = Buffer.concat([
        draft.body,
        Buffer.from('&metadata[raw]=%FF%C0'),
        Buffer.from(rng.pick(NOT_UTF8)),
      ]);
    setHeader(draft, 'Content-Length', String(draft.body.length));
    return { kind: `${route} form`, ...whole(draft) };
  }
  const boundary = boundaryOf(rng);
  const file = filePart(rng);
  if (rng.chance(0.5))
    file.filename = rng.chance(0.2) ? withBadBytes(rng, oddText(rng)) : oddText(rng);
  if (rng.chance(0.2)) file.type = oddText(rng).replace(/[\r\n]/g, '');
  const parts: Part[] = entries.map(([k, value]) => ({
    name: Buffer.concat([Buffer.from('metadata['), Buffer.from(k), Buffer.from(']')]),
    body: value,
  }));
  parts.splice(rng.int(parts.length + 1), 0, file);
  if (callback !== null) parts.push({ name: 'callback', body: callback });
  if (v === 'v2.2' && rng.chance(0.1))
    parts.push({ name: 'location', body: `${NOWHERE}${oddText(rng)}` });
  const path = route === 'sync' ? `/${v}/files` : `/${v}/files/async`;
  draft = request(
    rng,
    ctx,
    'POST',
    path,
    `multipart/form-data; boundary=${boundary}`,
    multipartBody(boundary, parts),
  );
  // What a 201 must echo: keys and values as sent, when their bytes are text a quoted name holds.
  const plain = entries.every(
    ([k, value]) => typeof k === 'string' && typeof value === 'string' && !/["\\\r\n]/.test(k),
  );
  if (route === 'sync' && v !== 'v2.0' && plain) {
    const echoes: Record<string, string> = {};
    for (const [k, value] of entries) echoes[String(k).trim()] = String(value);
    draft.echoes = echoes;
  }
  return { kind: `${route} multipart`, ...whole(draft) };
};

const GENERATORS: Record<Category, Generator> = {
  multipart,
  'basic-auth': basicAuth,
  'method-path': methodPath,
  headers,
  slow,
  'half-closed': halfClosed,
  'content-type': contentType,
  metadata,
};

/** The case of `seed`: its category, then the category's own draw, all from the one seed. */
export function generateCase(seed: number, ctx: FuzzContext): FuzzCase {
  const rng = seeded(seed);
  const total = CATEGORIES.reduce((sum, c) => sum + WEIGHTS[c], 0);
  let draw = rng.next() * total;
  let category: Category = CATEGORIES[0];
  for (const c of CATEGORIES) {
    category = c;
    draw -= WEIGHTS[c];
    if (draw < 0) break;
  }
  return { category, seed, ...GENERATORS[category](rng, ctx) };
}
