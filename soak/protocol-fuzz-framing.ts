/**
 * The protocol fuzz's request-line, header and timing categories (soak/protocol-fuzz.ts): odd
 * methods, paths and versions; huge and many headers, and framing a parser must refuse; requests
 * sent slowly, or never finished.
 */
import {
  type FuzzCase,
  type Generator,
  hex,
  type Rng,
  serialize,
  setHeader,
  validDraft,
  whole,
  word,
} from './fuzz-requests.js';

const METHODS = [
  'PROPFIND',
  'TRACE',
  'PUT',
  'PATCH',
  'DELETE',
  'HEAD',
  'OPTIONS',
  'QUERY',
  'MKCOL',
  'SEARCH',
  'LINK',
  'get',
  'Post',
  'BREW',
  'G E T',
  'GET\x00',
];

/** Turns a path odd in one way: separators, NULs, dot segments, length, bytes, its query. */
const PATH_MUTATIONS: Array<(rng: Rng, path: string) => string | Buffer> = [
  (_rng, p) => p.replace(/\//g, '//'),
  (rng, p) => `${p.slice(0, rng.int(p.length) + 1)}//${p.slice(rng.int(p.length) + 1)}`,
  (_rng, p) => `/${p}`,
  (_rng, p) => `${p}%00`,
  (_rng, p) => p.replace(/\/([^/]+)$/, '/$1%00.json'),
  (_rng, p) => `${p}/../../../etc/passwd`,
  (_rng, p) => p.replace(/^\/([^/]+)/, '/$1/../$1'),
  (_rng, p) => `${p}/./.`,
  (_rng, p) => `${p}/%2e%2e%2f%2e%2e`,
  (rng, p) => `${p}/${'a'.repeat(rng.size(1000, 40_000))}`,
  (rng, p) => `${p.replace(/\/[^/]*$/, '')}/${hex(rng, rng.size(101, 3000))}`,
  (rng, p) => `${p}?${'q'.repeat(rng.size(1000, 30_000))}=1`,
  (_rng, p) => Buffer.concat([Buffer.from(p), Buffer.from('/é✓😀')]),
  (_rng, p) => Buffer.concat([Buffer.from(p), Buffer.from([0xff, 0xfe, 0x80])]),
  (_rng, p) => `${p}/%C3%A9%E2%9C%93%F0%9F%98%80`,
  (rng, p) => `${p}${rng.pick(['%FF', '%', '%zz', '%C0%AF', '%2F', '%u002e', '%%32%65'])}`,
  (rng, p) => `${p}?${queryJunk(rng)}`,
  (rng, p) => `${p}?${queryJunk(rng)}&${queryJunk(rng)}`,
  (_rng, p) => `${p}#fragment`,
  (_rng, p) => p.toUpperCase(),
  (_rng, p) => `${p};jsessionid=1`,
  (_rng, p) => p.replaceAll('/', '\\'),
  (_rng, p) => `http://assay.test${p}`,
  (_rng, p) => `https://other.example:99999${p}`,
  () => '*',
  () => '',
  (_rng, p) => `${p}\t`,
  (_rng, p) => `${p} extra`,
];

function queryJunk(rng: Rng): string {
  return rng.pick([
    'format=xml',
    'format=yaml&suppress_response_codes',
    'format=XML',
    'format=%20yaml%20',
    'format=bogus',
    'format=xml&format=json',
    'suppress_response_codes=0',
    '__proto__[polluted]=1',
    'constructor[prototype][polluted]=1',
    'a[0]=1&a[1]=2&a[]=3',
    '&&&==&=',
    'a=%&b=%ZZ&c=%FF',
    `x=${word(rng, rng.size(1, 5000))}`,
    'timeout=-1&id=../../x',
    'a=\u00e9\u2603',
    '?=?&??',
  ]);
}

export const methodPath: Generator = (rng, ctx) => {
  const draft = validDraft(rng, ctx);
  const path = Buffer.from(draft.target).toString('latin1');
  const kind = rng.pick([
    'method',
    'path',
    'path',
    'two path changes',
    'method and path',
    'version',
    'long method',
  ]);
  let mayClose = false;
  if (kind === 'method' || kind === 'method and path') {
    draft.method = rng.pick(METHODS);
  }
  if (kind === 'long method') draft.method = 'X'.repeat(rng.size(20, 20_000));
  if (kind === 'path' || kind === 'method and path') {
    draft.target = rng.pick(PATH_MUTATIONS)(rng, path);
  }
  if (kind === 'two path changes') {
    const once = Buffer.from(rng.pick(PATH_MUTATIONS)(rng, path)).toString('latin1');
    const twice = rng.pick(PATH_MUTATIONS)(rng, once);
    draft.target = typeof twice === 'string' ? Buffer.from(twice, 'latin1') : twice;
  }
  if (kind === 'version') {
    draft.version = rng.pick([
      'HTTP/1.0',
      'HTTP/2.0',
      'HTTP/0.9',
      'HTTP/1.2',
      'http/1.1',
      'HTTP/1.1 x',
      'HTTP/11',
      '',
    ]);
    // Without a version the line is not HTTP/1.x: the parser may wait for more, then the header
    // timeout closes the connection.
    mayClose = draft.version === '';
  }
  // CONNECT asks for a tunnel, which the service does not offer: Node closes the connection.
  if (rng.chance(0.02)) {
    draft.method = 'CONNECT';
    mayClose = true;
  }
  return { kind, ...whole(draft, { mayClose }) };
};

const HEADER_NAMES = [
  'X-Fuzz',
  'User-Agent',
  'Cookie',
  'Referer',
  'Accept',
  'Accept-Language',
  'X-Forwarded-For',
  'Forwarded',
  'Origin',
  'If-None-Match',
];

export const headers: Generator = (rng, ctx) => {
  const draft = validDraft(rng, ctx);
  const kind = rng.pick([
    'huge value',
    'huge value',
    'many headers',
    'many headers',
    'many duplicates',
    'huge name',
    'bad name',
    'obs-fold',
    'control in value',
    'bare LF',
    'two content lengths',
    'content length and chunked',
    'chunked',
    'bad chunks',
    'odd transfer encoding',
    'odd content length',
    'expect',
    'upgrade',
    'no host',
    'two hosts',
    'pipelined',
  ]);
  const name = rng.pick(HEADER_NAMES);
  let mayClose = false;
  const body = draft.body;
  switch (kind) {
    case 'huge value':
      // Node's limit for a whole head is 16 KiB: below, at and beyond it.
      draft.headers.push([name, word(rng, rng.size(1000, 48_000))]);
      break;
    case 'many headers':
      for (let i = rng.size(100, 3000); i > 0; i--) draft.headers.push([`X-H${i}`, word(rng, 4)]);
      break;
    case 'many duplicates':
      for (let i = rng.size(100, 1500); i > 0; i--) draft.headers.push([name, word(rng, 6)]);
      break;
    case 'huge name':
      draft.headers.push([`X-${'n'.repeat(rng.size(1000, 30_000))}`, '1']);
      break;
    case 'bad name':
      draft.headers.push([
        rng.pick(['X Fuzz', 'X(Fuzz)', 'X\x01', '', ':', 'Ünïcode', 'X"y']),
        'v',
      ]);
      break;
    case 'obs-fold':
      draft.headers.push([name, `first\r\n  folded ${word(rng, 8)}`]);
      break;
    case 'control in value':
      draft.headers.push([name, `a${rng.pick(['\x00', '\x01', '\x7f', '\r', '\x1b[31m'])}b`]);
      break;
    case 'bare LF': {
      const { head } = serialize(draft);
      return {
        kind,
        ...whole(draft),
        writes: [
          {
            data: Buffer.concat([
              Buffer.from(head.toString('latin1').replaceAll('\r\n', '\n'), 'latin1'),
              body,
            ]),
            delayMs: 0,
          },
        ],
      };
    }
    case 'two content lengths':
      draft.headers.push([
        'Content-Length',
        rng.pick([String(body.length), String(body.length + 1), '0']),
      ]);
      break;
    case 'content length and chunked':
      setHeader(draft, 'Transfer-Encoding', 'chunked');
      draft.body = chunked(rng, body);
      break;
    case 'chunked':
      setHeader(draft, 'Content-Length', null);
      setHeader(draft, 'Transfer-Encoding', 'chunked');
      draft.body = chunked(rng, body);
      break;
    case 'bad chunks':
      setHeader(draft, 'Content-Length', null);
      setHeader(draft, 'Transfer-Encoding', 'chunked');
      draft.body = Buffer.concat([
        Buffer.from(
          rng.pick([
            'zz\r\n',
            '-1\r\n',
            'ffffffffffffffffff\r\n',
            '5;ext="\r\n',
            '3\r\nabcdef\r\n',
          ]),
        ),
        body,
        Buffer.from(rng.pick(['\r\n0\r\n\r\n', '', '0\r\n'])),
      ]);
      // The parser may still be waiting for the chunk it was promised when the client stops.
      mayClose = true;
      break;
    case 'odd transfer encoding':
      setHeader(
        draft,
        'Transfer-Encoding',
        rng.pick(['gzip', 'chunked, gzip', 'identity', 'chunked\x00', 'xchunked', 'chunked;q=1']),
      );
      mayClose = true;
      break;
    case 'odd content length':
      setHeader(
        draft,
        'Content-Length',
        rng.pick(['-1', '+5', '0x10', '1e3', ' ', '5 5', '99999999999999999999', '4294967296']),
      );
      mayClose = true;
      break;
    case 'expect':
      draft.headers.push([
        'Expect',
        rng.pick(['100-continue', '100-Continue', 'continue', '200-ok', '']),
      ]);
      break;
    case 'upgrade':
      draft.headers.push(['Upgrade', rng.pick(['websocket', 'h2c', 'TLS/1.2'])]);
      setHeader(draft, 'Connection', 'Upgrade');
      break;
    case 'no host':
      setHeader(draft, 'Host', null);
      break;
    case 'two hosts':
      draft.headers.push(['Host', rng.pick(['evil.example', 'assay.test', '127.0.0.1:1'])]);
      break;
    case 'pipelined': {
      setHeader(draft, 'Connection', null);
      const { head } = serialize(draft);
      const second = rng.pick([
        'GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
        'GET /health/live HTTP/1.1\r\n\r\n',
        'garbage\r\n\r\n',
        `GET /v2.2/ping HTTP/1.1\r\nHost: x\r\nAuthorization: ${ctx.auth}\r\nContent-Length: 5\r\n\r\n`,
      ]);
      return {
        kind,
        ...whole(draft),
        writes: [{ data: Buffer.concat([head, draft.body, Buffer.from(second)]), delayMs: 0 }],
        // The first is answered; the second may be unfinished (its body never comes) or not HTTP.
        maxAnswers: 2,
      };
    }
  }
  return { kind, ...whole(draft, { mayClose }) };
};

function chunked(rng: Rng, body: Buffer): Buffer {
  const pieces: Buffer[] = [];
  for (let at = 0; at < body.length; ) {
    const size = 1 + rng.int(Math.max(1, body.length - at));
    pieces.push(
      Buffer.from(`${size.toString(16)}\r\n`),
      body.subarray(at, at + size),
      Buffer.from('\r\n'),
    );
    at += size;
  }
  pieces.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(pieces);
}

/** A request split into pieces sent a few hundred ms apart, within the service's timeouts. */
export const slow: Generator = (rng, ctx) => {
  const draft = validDraft(rng, ctx);
  const { head, body } = serialize(draft);
  const every = 100 + rng.int(Math.min(300, ctx.idleTimeoutMs / 4));
  const kind = rng.pick(['trickle-body', 'trickle-head', 'stall-body', 'stall-head']);
  const writes: FuzzCase['writes'] = [];
  const trickle = (bytes: Buffer, budgetMs: number) => {
    const size = Math.max(1, Math.ceil(bytes.length / Math.max(1, budgetMs / every)));
    for (let at = 0; at < bytes.length; at += size) {
      writes.push({
        data: bytes.subarray(at, at + size),
        delayMs: writes.length === 0 ? 0 : every,
      });
    }
  };
  const base = { method: draft.method, target: Buffer.from(draft.target).toString('latin1') };
  const common = { ...base, halfClose: false, maxAnswers: 1 };
  if (kind === 'trickle-body') {
    writes.push({ data: head, delayMs: 0 });
    trickle(body.length > 0 ? body : Buffer.from('x'), 1000 + rng.int(2000));
    return { kind, ...common, writes, mayClose: false, waitMs: 15_000 };
  }
  if (kind === 'trickle-head') {
    trickle(Buffer.concat([head, body]), Math.min(3000, ctx.headerTimeoutMs / 2));
    return { kind, ...common, writes, mayClose: false, waitMs: 15_000 };
  }
  const all = Buffer.concat([head, body]);
  if (kind === 'stall-body' && body.length > 1) {
    // Then nothing: the service answers 408 once ASSAY_REQUEST_IDLE_TIMEOUT has passed.
    writes.push({ data: all.subarray(0, head.length + rng.int(body.length - 1)), delayMs: 0 });
    return { kind, ...common, writes, mayClose: false, waitMs: ctx.idleTimeoutMs + 5000 };
  }
  // A head never finished: closed without an answer after ASSAY_HEADER_TIMEOUT.
  writes.push({ data: all.subarray(0, 1 + rng.int(head.length - 3)), delayMs: 0 });
  return {
    kind: 'stall-head',
    ...common,
    writes,
    mayClose: true,
    waitMs: ctx.headerTimeoutMs + 5000,
  };
};
