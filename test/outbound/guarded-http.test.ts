import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { AddressPolicy } from '../../src/outbound/address-policy.js';
import {
  fetchContent,
  OutboundError,
  type OutboundOptions,
  OutboundRefusedError,
  postBody,
} from '../../src/outbound/guarded-http.js';
import { guardRefused } from '../helpers/loopback-only.js';
import { writeSelfSignedCertificate } from '../helpers/tls.js';

const BLOB = randomBytes(5 * 1024 * 1024);

interface Received {
  method: string;
  url: string;
  rawHeaders: string[];
  body: Buffer;
}

let server: http.Server;
let base = '';
let port = 0;
let connections = 0;
const received: Received[] = [];
/** Bytes the /endless route managed to hand to the kernel. */
let endlessWritten = 0;

function route(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): void {
  const url = new URL(req.url ?? '/', 'http://server.invalid');
  const path = url.pathname;
  const redirect = /^\/r\/(\d+)$/.exec(path);
  if (redirect !== null) {
    const left = Number(redirect[1]);
    if (left === 0) return void res.end('arrived');
    res.writeHead(302, { Location: `/r/${left - 1}` });
    return void res.end();
  }
  switch (path) {
    case '/blob':
      res.writeHead(200, { 'Content-Length': BLOB.length, 'Content-Type': 'application/zip' });
      return void res.end(BLOB);
    case '/small':
      return void res.end('small body');
    case '/auth':
      return void res.end(req.headers.authorization ?? 'none');
    case '/missing':
      res.writeHead(404);
      return void res.end('not here');
    case '/hang':
      return; // never answers
    case '/stall':
      res.writeHead(200, { 'Content-Length': 1000 });
      return void res.write(Buffer.alloc(100)); // and never the rest
    case '/declared-big':
      res.writeHead(200, { 'Content-Length': 10_000 });
      return void res.write(Buffer.alloc(10)); // the client must not wait for more
    case '/chunked-big': {
      res.writeHead(200);
      const chunk = Buffer.alloc(1000, 0x61);
      for (let i = 0; i < 10; i++) res.write(chunk);
      return void res.end();
    }
    case '/endless': {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024);
      const pump = () => {
        while (!res.destroyed) {
          endlessWritten += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
      };
      pump();
      return;
    }
    case '/to-private':
      res.writeHead(302, { Location: 'http://10.0.0.1/' });
      return void res.end();
    case '/to-metadata':
      res.writeHead(301, { Location: 'http://169.254.169.254/latest/meta-data' });
      return void res.end();
    case '/to-mapped':
      res.writeHead(307, { Location: 'http://[::ffff:192.168.0.1]:8080/admin?x=1' });
      return void res.end();
    case '/to-ftp':
      res.writeHead(302, { Location: 'ftp://files.invalid/x' });
      return void res.end();
    case '/no-location':
      res.writeHead(302);
      return void res.end();
    case '/hook':
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        rawHeaders: req.rawHeaders,
        body,
      });
      res.writeHead(Number(url.searchParams.get('status') ?? '200'));
      return void res.end('ok');
    case '/hook-redirect':
      res.writeHead(302, { Location: '/hook' });
      return void res.end();
    case '/hook-big-answer':
      res.writeHead(200);
      return void res.end(Buffer.alloc(1024 * 1024));
    default:
      res.writeHead(500);
      res.end('unknown route');
  }
}

before(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => route(req, res, Buffer.concat(chunks)));
  });
  server.on('connection', () => {
    connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  assert.deepEqual(guardRefused, [], 'the policy refused every address before the guard had to');
});

const nothingAllowed = AddressPolicy.fromSetting('');
const localAllowed = AddressPolicy.fromSetting('127.0.0.1/32');

function options(
  overrides: Partial<OutboundOptions & { maxBytes: number }> = {},
): OutboundOptions & { maxBytes: number } {
  return {
    policy: localAllowed,
    connectTimeoutMs: 1000,
    totalTimeoutMs: 3000,
    userAgent: 'assay-test/1.0',
    maxBytes: 10 * 1024 * 1024,
    ...overrides,
  };
}

async function collect(body: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return Buffer.concat(chunks);
}

async function fetchAll(url: string, overrides = {}): Promise<Buffer> {
  const result = await fetchContent(url, options(overrides));
  return collect(result.body);
}

/** The error's class is checked exactly: a refusal must not pass for a network failure. */
function outboundError(pattern: RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof OutboundError, `an OutboundError, got ${String(error)}`);
    assert.equal(error.constructor, OutboundError, `not a refusal: ${error.message}`);
    assert.match(error.message, pattern);
    return true;
  };
}

function refusedError(pattern: RegExp) {
  return (error: unknown) => {
    assert.ok(
      error instanceof OutboundRefusedError,
      `an OutboundRefusedError, got ${String(error)}`,
    );
    assert.match(error.message, pattern);
    // A client sees only the message: it names the setting that would allow the address.
    assert.match(error.message, /; the service allows it only if listed in ASSAY_FETCH_ALLOW$/);
    return true;
  };
}

async function closedPort(): Promise<number> {
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const free = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  return free;
}

describe('fetchContent', () => {
  test('streams a 5 MB body byte for byte and reports its length', async () => {
    const result = await fetchContent(`${base}/blob`, options());
    assert.equal(result.contentLength, BLOB.length);
    assert.equal(result.finalUrl, `${base}/blob`);
    const body = await collect(result.body);
    assert.equal(body.length, BLOB.length);
    assert.ok(body.equals(BLOB));
  });

  test('a 404 is an OutboundError naming the status and the URL, without credentials', async () => {
    await assert.rejects(
      fetchAll(`http://user:s3cret@127.0.0.1:${port}/missing?token=abc#frag`),
      (error: unknown) => {
        outboundError(/^HTTP 404 from http:\/\/127\.0\.0\.1:\d+\/missing$/)(error);
        assert.doesNotMatch(String(error), /s3cret|token|user/);
        return true;
      },
    );
  });

  test('userinfo is sent as Basic credentials and left out of finalUrl', async () => {
    const result = await fetchContent(
      `http://us%20er:p%40ss@127.0.0.1:${port}/auth?q=1`,
      options(),
    );
    assert.equal(result.finalUrl, `${base}/auth?q=1`);
    const body = await collect(result.body);
    assert.equal(body.toString(), `Basic ${Buffer.from('us er:p@ss').toString('base64')}`);
  });

  test('a closed port is an OutboundError', async () => {
    const free = await closedPort();
    await assert.rejects(
      fetchAll(`http://127.0.0.1:${free}/x`),
      outboundError(/^could not connect to http:\/\/127\.0\.0\.1:\d+\/x: connection refused$/),
    );
  });

  test('a server that never answers hits the total timeout', async () => {
    const started = Date.now();
    await assert.rejects(
      fetchAll(`${base}/hang`, { totalTimeoutMs: 300 }),
      outboundError(/^timed out after 300 ms fetching http:\/\/127\.0\.0\.1:\d+\/hang$/),
    );
    assert.ok(Date.now() - started < 2000);
  });

  test('a DNS answer that never comes hits the total timeout', async () => {
    await assert.rejects(
      fetchAll('http://slow-dns.test/x', {
        totalTimeoutMs: 300,
        resolve: () => new Promise(() => {}),
      }),
      outboundError(/^timed out after 300 ms fetching http:\/\/slow-dns\.test\/x$/),
    );
  });

  test('a server that stalls mid-body fails the body stream', async () => {
    const result = await fetchContent(`${base}/stall`, options({ totalTimeoutMs: 300 }));
    assert.equal(result.contentLength, 1000);
    await assert.rejects(collect(result.body), outboundError(/^timed out after 300 ms/));
  });

  test('a Content-Length over maxBytes is refused before reading the body', async () => {
    const started = Date.now();
    await assert.rejects(
      fetchContent(`${base}/declared-big`, options({ maxBytes: 5000 })),
      outboundError(/is 10000 bytes, over the limit of 5000 bytes$/),
    );
    // The server never sends the declared body: waiting for it would take the total timeout.
    assert.ok(Date.now() - started < 1000);
  });

  test('a chunked body over maxBytes fails while streaming', async () => {
    const result = await fetchContent(`${base}/chunked-big`, options({ maxBytes: 5000 }));
    assert.equal(result.contentLength, null);
    await assert.rejects(collect(result.body), outboundError(/more than the limit of 5000 bytes/));
  });

  test('the consumer pulls: an unread body holds the server back, abort() ends it', async () => {
    endlessWritten = 0;
    const result = await fetchContent(`${base}/endless`, options());
    const iterator = result.body[Symbol.asyncIterator]();
    const first = await iterator.next();
    assert.equal(first.done, false);
    await sleep(300);
    const paused = endlessWritten;
    await sleep(200);
    assert.equal(endlessWritten, paused, 'the server stopped writing while nobody read');
    assert.ok(paused < 64 * 1024 * 1024, `only socket buffers' worth was written (${paused})`);
    result.abort();
    await assert.rejects(
      async () => {
        for (;;) if ((await iterator.next()).done) break;
      },
      outboundError(/^download of http:\/\/127\.0\.0\.1:\d+\/endless aborted$/),
    );
  });

  test('a chain of 5 redirects is followed', async () => {
    const result = await fetchContent(`${base}/r/5`, options());
    assert.equal(result.finalUrl, `${base}/r/0`);
    assert.equal((await collect(result.body)).toString(), 'arrived');
  });

  test('6 redirects are too many', async () => {
    await assert.rejects(
      fetchAll(`${base}/r/6`),
      outboundError(
        /^too many redirects \(more than 5\) fetching http:\/\/127\.0\.0\.1:\d+\/r\/6$/,
      ),
    );
  });

  test('a redirect without Location, or to another scheme, fails', async () => {
    await assert.rejects(fetchAll(`${base}/no-location`), outboundError(/^HTTP 302 without/));
    await assert.rejects(fetchAll(`${base}/to-ftp`), outboundError(/unsupported URL scheme ftp:/));
  });

  test('a redirect to a refused address is refused without connecting', async () => {
    const before = connections;
    await assert.rejects(
      fetchAll(`${base}/to-private`),
      refusedError(
        /^refused http:\/\/10\.0\.0\.1\/ \(redirected from http:\/\/127\.0\.0\.1:\d+\/to-private\): 10\.0\.0\.1 is a private address;/,
      ),
    );
    await assert.rejects(
      fetchAll(`${base}/to-metadata`),
      refusedError(/169\.254\.169\.254 is a link-local address \(cloud metadata\);/),
    );
    await assert.rejects(
      fetchAll(`${base}/to-mapped`),
      refusedError(
        /^refused http:\/\/\[::ffff:c0a8:1\]:8080\/admin \(redirected .*private address;/,
      ),
    );
    // One connection per first hop, none for the refused second hops.
    assert.equal(connections - before, 3);
  });
});

describe('SSRF refusals with the default policy', () => {
  const refusedUrls: Array<[string, RegExp]> = [
    ['http://127.0.0.1/', /127\.0\.0\.1 is a loopback address/],
    ['http://10.0.0.1/', /10\.0\.0\.1 is a private address/],
    ['http://169.254.169.254/', /cloud metadata/],
    ['http://[::1]/', /::1 is a loopback address/],
    ['http://[::ffff:127.0.0.1]/', /IPv4-mapped form of 127\.0\.0\.1, a loopback address/],
    ['http://[::ffff:7f00:1]/', /IPv4-mapped form of 127\.0\.0\.1, a loopback address/],
    ['http://0.0.0.0/', /0\.0\.0\.0 is an unspecified address/],
    ['http://2130706433/', /127\.0\.0\.1 is a loopback address/],
    ['http://0x7f.1/', /127\.0\.0\.1 is a loopback address/],
    ['http://127.1/', /127\.0\.0\.1 is a loopback address/],
    ['http://100.64.0.1/', /100\.64\.0\.1 is a shared \(CGNAT\) address/],
    ['http://[fd00::1]/', /fd00::1 is a unique local \(private\) address/],
    ['http://[fe80::1]/', /fe80::1 is a link-local address/],
    ['http://224.0.0.1/', /224\.0\.0\.1 is a multicast address/],
    ['https://192.168.1.1:8443/admin', /192\.168\.1\.1 is a private address/],
    ['http://[64:ff9b::a9fe:a9fe]/', /NAT64 form of 169\.254\.169\.254/],
  ];
  for (const [url, reason] of refusedUrls) {
    test(url, async () => {
      await assert.rejects(fetchAll(url, { policy: nothingAllowed }), refusedError(reason));
      await assert.rejects(
        postBody(url, Buffer.from('{}'), {}, options({ policy: nothingAllowed })),
        refusedError(reason),
      );
    });
  }

  test('http://localhost:<port>/ (a name resolving to loopback)', async () => {
    const before = connections;
    await assert.rejects(
      fetchAll(`http://localhost:${port}/small`, { policy: nothingAllowed }),
      refusedError(
        /^refused http:\/\/localhost:\d+\/small: localhost has a refused address \(127\.0\.0\.1 is a loopback address\);/,
      ),
    );
    assert.equal(connections, before);
  });

  test('a name with any refused address is refused, even if another is allowed', async () => {
    await assert.rejects(
      fetchAll(`http://mixed.test:${port}/small`, {
        resolve: async () => [
          { address: '127.0.0.1', family: 4 },
          { address: '10.1.2.3', family: 4 },
        ],
      }),
      refusedError(/mixed\.test has a refused address \(10\.1\.2\.3 is a private address\);/),
    );
  });

  test('the connection goes to the vetted address: a second DNS answer cannot rebind it', async () => {
    const answers = ['127.0.0.1', '10.0.0.1'];
    let lookups = 0;
    const resolve = async () => [{ address: answers[lookups++] ?? '10.0.0.1', family: 4 }];
    const result = await fetchContent(`http://rebind.test:${port}/small`, options({ resolve }));
    assert.equal((await collect(result.body)).toString(), 'small body');
    assert.equal(lookups, 1);
  });
});

describe('allowlist', () => {
  test("'127.0.0.1/32' lets the local server through, also as an IPv4-mapped address", async () => {
    assert.equal((await fetchAll(`${base}/small`)).toString(), 'small body');
    assert.equal(
      (await fetchAll(`http://[::ffff:127.0.0.1]:${port}/small`)).toString(),
      'small body',
    );
  });

  test("the host name 'localhost' lets http://localhost:<port>/ through", async () => {
    const policy = AddressPolicy.fromSetting('localhost');
    const body = await fetchAll(`http://LocalHost:${port}/small`, { policy });
    assert.equal(body.toString(), 'small body');
    await assert.rejects(
      fetchAll(`${base}/small`, { policy }),
      refusedError(/127\.0\.0\.1 is a loopback address/),
    );
  });

  test('host names and wildcards match case-insensitively; the Host header keeps the name', async () => {
    const policy = AddressPolicy.fromSetting('*.files.test');
    const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
    const result = await fetchContent(
      `http://Cdn.FILES.test:${port}/small`,
      options({ policy, resolve }),
    );
    assert.equal((await collect(result.body)).toString(), 'small body');
    await assert.rejects(
      fetchAll(`http://files.test:${port}/small`, { policy, resolve }),
      refusedError(/files\.test has a refused address/),
    );
  });

  test('an allowed name that resolves to a cloud metadata address is refused before connecting', async () => {
    const policy = AddressPolicy.fromSetting('allowed.test');
    for (const address of ['169.254.169.254', 'fd00:ec2::254', '100.100.100.200']) {
      const resolve = async () => [
        { address: '127.0.0.1', family: 4 },
        { address, family: address.includes(':') ? 6 : 4 },
      ];
      await assert.rejects(
        fetchAll(`http://allowed.test:${port}/small`, { policy, resolve }),
        refusedError(/allowed\.test has a refused address \(.*cloud metadata\)/),
      );
    }
    const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
    const body = await fetchAll(`http://allowed.test:${port}/small`, { policy, resolve });
    assert.equal(body.toString(), 'small body');
    assert.deepEqual(guardRefused, []);
  });

  test('a bad entry throws from fromSetting, naming it', () => {
    for (const bad of ['10.0.0.0/33', 'not a cidr!', '::/129', '300.1.1.1', '10.0.0.0/8/1', '*.']) {
      assert.throws(
        () => AddressPolicy.fromSetting(`127.0.0.1/32, ${bad}`),
        (error: unknown) => error instanceof Error && error.message.includes(`"${bad}"`),
        bad,
      );
    }
  });
});

describe('URLs', () => {
  for (const url of [
    'ftp://files.invalid/x',
    'file:///etc/passwd',
    'data:text/plain,hello',
    'gopher://gopher.invalid/',
    'javascript:alert(1)',
  ]) {
    test(`${url.split(':')[0]}: is not fetched`, async () => {
      await assert.rejects(fetchAll(url), outboundError(/^unsupported URL scheme [a-z]+:;/));
      await assert.rejects(
        postBody(url, Buffer.alloc(0), {}, options()),
        outboundError(/^unsupported URL scheme/),
      );
    });
  }

  test('an invalid URL is an OutboundError that does not echo credentials', async () => {
    await assert.rejects(fetchAll('http://user:s3cret@[::1/x?token=t'), (error: unknown) => {
      outboundError(/^invalid URL /)(error);
      assert.doesNotMatch(String(error), /s3cret|token/);
      return true;
    });
  });
});

describe('postBody', () => {
  test('returns the status of 200 and 500 answers', async () => {
    const body = Buffer.from('{"ok":true}');
    assert.deepEqual(await postBody(`${base}/hook?status=200`, body, {}, options()), {
      status: 200,
    });
    assert.deepEqual(await postBody(`${base}/hook?status=500`, body, {}, options()), {
      status: 500,
    });
  });

  test('a 302 is returned, not followed', async () => {
    const before = received.length;
    const result = await postBody(`${base}/hook-redirect`, Buffer.from('x'), {}, options());
    assert.equal(result.status, 302);
    assert.equal(received.length, before);
  });

  test('headers and body arrive byte for byte', async () => {
    const body = randomBytes(100 * 1024);
    const headers = {
      'Content-Type': 'application/json; charset=utf-8',
      'X-Assay-Signature': 't=1700000000,v1=0123456789abcdef',
      'x-lower-case': 'Mixed Case Value',
    };
    const result = await postBody(`${base}/hook?status=204`, body, headers, options());
    assert.equal(result.status, 204);
    const last = received.at(-1);
    assert.ok(last !== undefined);
    assert.equal(last.method, 'POST');
    assert.equal(last.url, '/hook?status=204');
    assert.ok(last.body.equals(body));
    const pairs: Array<[string, string]> = [];
    for (let i = 0; i + 1 < last.rawHeaders.length; i += 2) {
      pairs.push([last.rawHeaders[i] ?? '', last.rawHeaders[i + 1] ?? '']);
    }
    for (const expected of [
      ...Object.entries(headers),
      ['User-Agent', 'assay-test/1.0'],
      ['Content-Length', String(body.length)],
      ['Host', `127.0.0.1:${port}`],
    ]) {
      assert.ok(
        pairs.some(([name, value]) => name === expected[0] && value === expected[1]),
        `${expected.join(': ')} in ${JSON.stringify(pairs)}`,
      );
    }
  });

  test("the caller's User-Agent replaces the default", async () => {
    await postBody(`${base}/hook`, Buffer.from('x'), { 'user-agent': 'custom/2' }, options());
    const headers = received.at(-1)?.rawHeaders ?? [];
    assert.equal(headers.filter((h) => h.toLowerCase() === 'user-agent').length, 1);
    assert.ok(headers.includes('custom/2'));
  });

  test('a large answer is cut at 64 KB and the status still returned', async () => {
    const result = await postBody(`${base}/hook-big-answer`, Buffer.from('x'), {}, options());
    assert.equal(result.status, 200);
  });

  test('a server that never answers is a timeout', async () => {
    await assert.rejects(
      postBody(`${base}/hang`, Buffer.from('x'), {}, options({ totalTimeoutMs: 300 })),
      outboundError(/^timed out after 300 ms posting to http:\/\/127\.0\.0\.1:\d+\/hang$/),
    );
  });

  test('a closed port is an OutboundError', async () => {
    const free = await closedPort();
    await assert.rejects(
      postBody(`http://127.0.0.1:${free}/hook`, Buffer.from('x'), {}, options()),
      outboundError(/connection refused/),
    );
  });

  test('a refused address is an OutboundRefusedError', async () => {
    await assert.rejects(
      postBody('http://10.0.0.1/hook', Buffer.from('x'), {}, options()),
      refusedError(/^refused http:\/\/10\.0\.0\.1\/hook: 10\.0\.0\.1 is a private address;/),
    );
  });

  test('an invalid header is an OutboundError', async () => {
    await assert.rejects(
      postBody(`${base}/hook`, Buffer.from('x'), { 'X-Bad': 'a\nb' }, options()),
      outboundError(/^could not send a request to/),
    );
  });
});

describe('https', () => {
  let dir = '';
  let tlsServer: https.Server | undefined;
  const servernames: string[] = [];
  let tlsConnections = 0;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'assay-outbound-tls-'));
    try {
      writeSelfSignedCertificate(dir);
    } catch {
      return; // no openssl: the tests below skip
    }
    tlsServer = https.createServer(
      {
        key: readFileSync(join(dir, 'key.pem')),
        cert: readFileSync(join(dir, 'cert.pem')),
        // Called only for a ClientHello that carries SNI; the default context answers.
        SNICallback: (servername, callback) => {
          servernames.push(servername);
          callback(null, undefined);
        },
      },
      (_req, res) => res.end('secret'),
    );
    tlsServer.on('connection', () => {
      tlsConnections++;
    });
  });

  after(async () => {
    if (tlsServer?.listening) {
      tlsServer.closeAllConnections();
      await new Promise((resolve) => tlsServer?.close(resolve));
    }
    rmSync(dir, { recursive: true, force: true });
  });

  test('the certificate is verified against the URL host name, which is sent as SNI', async (t) => {
    if (tlsServer === undefined) return t.skip('openssl is not installed');
    const listening = tlsServer;
    await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
    const tlsPort = (listening.address() as AddressInfo).port;
    const policy = AddressPolicy.fromSetting('localhost, 127.0.0.1/32');
    // Self-signed: the handshake must fail, which shows verification is on.
    await assert.rejects(
      fetchAll(`https://localhost:${tlsPort}/`, { policy }),
      outboundError(/^TLS handshake with https:\/\/localhost:\d+\/ failed: self[- ]signed/),
    );
    await assert.rejects(
      fetchAll(`https://127.0.0.1:${tlsPort}/`, { policy }),
      outboundError(/^TLS handshake with https:\/\/127\.0\.0\.1:\d+\/ failed/),
    );
    // The first hop connected to 127.0.0.1 but named localhost; an IP gets no SNI (RFC 6066).
    assert.equal(tlsConnections, 2);
    assert.deepEqual(servernames, ['localhost']);
  });
});

describe('AddressPolicy', () => {
  const cases: Array<[string, RegExp | null]> = [
    ['127.0.0.1', /loopback/],
    ['127.255.255.254', /loopback/],
    ['10.0.0.1', /^10\.0\.0\.1 is a private address$/],
    ['172.16.0.1', /private/],
    ['172.31.255.255', /private/],
    ['192.168.1.1', /private/],
    ['169.254.169.254', /^169\.254\.169\.254 is a link-local address \(cloud metadata\)$/],
    ['169.254.1.1', /^169\.254\.1\.1 is a link-local address$/],
    ['100.64.0.1', /CGNAT/],
    ['100.127.255.255', /CGNAT/],
    ['0.0.0.0', /unspecified/],
    ['0.1.2.3', /reserved/],
    ['224.0.0.1', /multicast/],
    ['239.255.255.250', /multicast/],
    ['240.0.0.1', /reserved/],
    ['255.255.255.255', /reserved/],
    ['192.0.0.8', /reserved/],
    ['192.0.2.1', /documentation/],
    ['198.51.100.7', /documentation/],
    ['203.0.113.9', /documentation/],
    ['198.18.0.1', /benchmarking/],
    ['::1', /^::1 is a loopback address$/],
    ['::', /unspecified/],
    ['::ffff:127.0.0.1', /IPv4-mapped form of 127\.0\.0\.1, a loopback/],
    ['::ffff:7f00:1', /IPv4-mapped form of 127\.0\.0\.1, a loopback/],
    ['::ffff:10.0.0.1', /IPv4-mapped form of 10\.0\.0\.1, a private/],
    ['0:0:0:0:0:ffff:a9fe:a9fe', /cloud metadata/],
    ['64:ff9b::a9fe:a9fe', /NAT64 form of 169\.254\.169\.254/],
    ['64:ff9b::10.0.0.1', /NAT64 form of 10\.0\.0\.1/],
    ['64:ff9b:1::1', /local-use NAT64/],
    ['2002:c0a8:101::1', /6to4 form of 192\.168\.1\.1/],
    ['2002:7f00:1::', /6to4 form of 127\.0\.0\.1/],
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', /Teredo form of 10\.0\.0\.1/],
    ['::127.0.0.1', /IPv4-compatible form of 127\.0\.0\.1/],
    ['::8.8.8.8', /deprecated IPv4-compatible/],
    ['fd00::1', /unique local/],
    ['fc00::1', /unique local/],
    ['fd00:ec2::254', /^fd00:ec2::254 is a unique local address \(cloud metadata\)$/],
    ['169.254.170.2', /container metadata/],
    ['100.100.100.200', /CGNAT.*cloud metadata/],
    ['168.63.129.16', /Azure WireServer/],
    ['fe80::1', /link-local/],
    ['FE80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['fec0::1', /site-local/],
    ['ff02::1', /multicast/],
    ['2001:db8::1', /documentation/],
    ['100::1', /discard-only/],
    ['1::1', /outside global unicast/],
    ['not-an-ip', /not an IP address/],
    ['8.8.8.8', null],
    ['1.1.1.1', null],
    ['172.32.0.1', null],
    ['100.128.0.1', null],
    ['169.255.0.1', null],
    ['2606:4700::1111', null],
    ['2001:4860:4860::8888', null],
    ['::ffff:8.8.8.8', null],
    ['64:ff9b::808:808', null],
    ['2002:808:808::1', null],
  ];
  for (const [ip, expected] of cases) {
    test(`${ip} ${expected === null ? 'allowed' : 'refused'}`, () => {
      const reason = nothingAllowed.refusal(ip, 'files.example.test');
      if (expected === null) assert.equal(reason, null);
      else assert.match(reason ?? 'allowed', expected);
    });
  }

  test('allow entries: CIDRs of both families, addresses, names, wildcards', () => {
    const policy = AddressPolicy.fromSetting(
      ' 127.0.0.1/32 , fd00::/8, 192.168.5.5, Files.Example.TEST., *.cdn.test,, ',
    );
    assert.equal(policy.refusal('127.0.0.1', 'x.test'), null);
    assert.equal(policy.refusal('::ffff:127.0.0.1', 'x.test'), null);
    assert.match(policy.refusal('127.0.0.2', 'x.test') ?? '', /loopback/);
    assert.equal(policy.refusal('fd12::1', 'x.test'), null);
    assert.match(policy.refusal('fc00::1', 'x.test') ?? '', /unique local/);
    assert.equal(policy.refusal('192.168.5.5', 'x.test'), null);
    assert.match(policy.refusal('192.168.5.6', 'x.test') ?? '', /private/);
    assert.equal(policy.refusal('10.0.0.1', 'files.example.test'), null);
    assert.equal(policy.refusal('10.0.0.1', 'FILES.example.test.'), null);
    assert.match(policy.refusal('10.0.0.1', 'other.example.test') ?? '', /private/);
    assert.equal(policy.refusal('10.0.0.1', 'a.b.cdn.test'), null);
    assert.match(policy.refusal('10.0.0.1', 'cdn.test') ?? '', /private/);
    // A host-name entry never matches an IP literal that happens to be in the URL.
    assert.match(policy.refusal('10.0.0.1', '10.0.0.1') ?? '', /private/);
  });

  test('an allowed host name lets every address through but cloud metadata ones; a CIDR does', () => {
    const byName = AddressPolicy.fromSetting('allowed.test, *.cdn.test');
    assert.equal(byName.refusal('127.0.0.1', 'allowed.test'), null);
    assert.equal(byName.refusal('10.1.2.3', 'a.cdn.test'), null);
    const metadata: Array<[string, RegExp]> = [
      ['169.254.169.254', /^169\.254\.169\.254 is a link-local address \(cloud metadata\)$/],
      ['169.254.170.2', /container metadata/],
      ['169.254.170.23', /container credentials/],
      ['100.100.100.200', /cloud metadata/],
      ['168.63.129.16', /Azure WireServer/],
      ['fd00:ec2::254', /cloud metadata/],
      ['FD00:EC2:0::23', /container credentials/],
      ['::ffff:169.254.169.254', /IPv4-mapped form of 169\.254\.169\.254, .*cloud metadata/],
      ['::ffff:a9fe:a9fe', /cloud metadata/],
      ['64:ff9b::a9fe:a9fe', /NAT64 form of 169\.254\.169\.254/],
    ];
    for (const [ip, reason] of metadata) {
      assert.match(byName.refusal(ip, 'allowed.test') ?? 'allowed', reason, ip);
      assert.match(byName.refusal(ip, 'x.cdn.test') ?? 'allowed', reason, ip);
    }
    // Only by address: a CIDR (or a single address) that holds the metadata address.
    const byAddress = AddressPolicy.fromSetting('169.254.0.0/16, fd00:ec2::/32, 100.100.100.200');
    for (const ip of ['169.254.169.254', '169.254.170.2', 'fd00:ec2::254', '100.100.100.200']) {
      assert.equal(byAddress.refusal(ip, 'anything.test'), null, ip);
    }
    assert.match(byAddress.refusal('168.63.129.16', 'anything.test') ?? '', /WireServer/);
  });

  test("'' allows nothing extra", () => {
    assert.match(AddressPolicy.fromSetting('').refusal('127.0.0.1', 'localhost') ?? '', /loopback/);
    assert.match(AddressPolicy.fromSetting(' , ').refusal('10.0.0.1', 'x') ?? '', /private/);
  });

  test('error messages name the entry and say what is wrong', () => {
    assert.throws(() => AddressPolicy.fromSetting('10.0.0.0/33'), {
      message:
        'allowlist entry "10.0.0.0/33" is not a CIDR: the prefix length must be 0 to 32 for IPv4',
    });
    assert.throws(() => AddressPolicy.fromSetting('not a cidr!'), {
      message: /^allowlist entry "not a cidr!" is neither a CIDR/,
    });
  });
});
