import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/config.js';
import { type HttpAnswer, httpRequest } from '../helpers/client.js';
import { nodeArgsOf } from '../helpers/entry.js';
import { startLocalServer } from '../helpers/local-server.js';
import { capturedLogger } from '../helpers/logs.js';
import { multipartFile } from '../helpers/raw-http.js';
import { basic, buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
// One failed authentication per client, refilled every 100 s: every count is exact on a slow machine.
const lockout = { ASSAY_AUTH_FAIL_RATE: '0.01', ASSAY_AUTH_FAIL_BURST: '1' };
const WRONG = basic('nobody', 'wrong');
/** The address a proxy in front saw: what nginx's $proxy_add_x_forwarded_for appends. */
const REAL_CLIENT = '198.51.100.1';

function ping(
  url: string,
  auth: string,
  headers: Record<string, string> = {},
  localAddress?: string,
): Promise<HttpAnswer> {
  return httpRequest(`${url}/v2.2/ping`, {
    headers: { authorization: auth, ...headers },
    localAddress,
  });
}

/** What an appending proxy passes on: whatever the client wrote, then the address it saw. */
function appended(written: string, seen = REAL_CLIENT): Record<string, string> {
  return { 'x-forwarded-for': `${written}, ${seen}` };
}

async function tokenLocation(url: string, auth: string, headers: Record<string, string>) {
  const answer = await httpRequest(`${url}/v2.2/auth/tokens`, {
    method: 'POST',
    headers: { authorization: auth, ...headers },
  });
  assert.equal(answer.status, 201, answer.body);
  return String(answer.headers.location);
}

describe('ASSAY_TRUST_PROXY: the client address is taken from the right of X-Forwarded-For', () => {
  // `true` is deprecated and means one hop: it used to take the leftmost entry, the client's own.
  for (const setting of ['1', 'true']) {
    test(`trust ${setting}: varying the leftmost entry does not escape the failure limit`, async (t) => {
      const svc = await buildService(t, {
        ASSAY_CLAMD: clamd.socket,
        ASSAY_TRUST_PROXY: setting,
        ...lockout,
      });
      assert.equal((await ping(svc.url, WRONG, appended('203.0.113.1'))).status, 401);
      for (const written of ['203.0.113.2', '203.0.113.3', '2001:db8::1', 'unknown']) {
        const answer = await ping(svc.url, WRONG, appended(written));
        assert.equal(answer.status, 429, `leftmost ${written}: still ${REAL_CLIENT}`);
      }
      // The right secret from the same client is refused too, another client is not.
      assert.equal((await ping(svc.url, svc.auth, appended('203.0.113.9'))).status, 429);
      assert.equal((await ping(svc.url, svc.auth, appended('x', '198.51.100.2'))).status, 200);
    });

    test(`trust ${setting}: naming another address in X-Forwarded-For does not lock it out`, async (t) => {
      const svc = await buildService(t, {
        ASSAY_CLAMD: clamd.socket,
        ASSAY_TRUST_PROXY: setting,
        ...lockout,
      });
      const victim = '198.51.100.50';
      for (let i = 0; i < 3; i++) await ping(svc.url, WRONG, appended(victim));
      assert.equal((await ping(svc.url, WRONG, appended(victim))).status, 429, 'the attacker is');
      const own = await ping(svc.url, svc.auth, { 'x-forwarded-for': victim });
      assert.equal(own.status, 200, 'the named address is not locked out');
    });
  }

  test('a port with the forwarded address does not make another client', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '1',
      ...lockout,
    });
    const from = (seen: string) => ({ 'x-forwarded-for': seen });
    assert.equal((await ping(svc.url, WRONG, from(`${REAL_CLIENT}:40001`))).status, 401);
    assert.equal((await ping(svc.url, WRONG, from(`${REAL_CLIENT}:40002`))).status, 429);
    assert.equal((await ping(svc.url, WRONG, from('[2001:db8::7]:40001'))).status, 401);
    assert.equal((await ping(svc.url, WRONG, from('[2001:db8::8]:40002'))).status, 429);
  });

  test('trust 2 (a load balancer, then nginx): the client is the second entry from the right', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '2',
      ...lockout,
    });
    const viaBalancer = (written: string) => ({
      'x-forwarded-for': `${written}, ${REAL_CLIENT}, 10.0.0.5`,
    });
    assert.equal((await ping(svc.url, WRONG, viaBalancer('203.0.113.1'))).status, 401);
    assert.equal((await ping(svc.url, WRONG, viaBalancer('203.0.113.2'))).status, 429);
    // Another client behind the same balancer keeps its own bucket.
    const other = { 'x-forwarded-for': `${REAL_CLIENT}, 198.51.100.2, 10.0.0.5` };
    assert.equal((await ping(svc.url, svc.auth, other)).status, 200);
  });

  test('trust by address: trusted hops are skipped from the right; an untrusted peer is itself', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '127.0.0.1, 10.0.0.0/8',
      ...lockout,
    });
    // The proxy at 127.0.0.1, behind another trusted proxy in 10/8: the client is the entry before.
    const chain = (written: string) => ({
      'x-forwarded-for': `${written}, ${REAL_CLIENT}, 10.9.8.7`,
    });
    assert.equal((await ping(svc.url, WRONG, chain('203.0.113.1'))).status, 401);
    assert.equal((await ping(svc.url, WRONG, chain('203.0.113.2'))).status, 429);

    // A client connecting from 127.0.0.2 is not a trusted proxy: its X-Forwarded-For is ignored.
    const untrusted = '127.0.0.2';
    assert.equal((await ping(svc.url, WRONG, appended('203.0.113.7'), untrusted)).status, 401);
    const again = await ping(svc.url, WRONG, { 'x-forwarded-for': '203.0.113.8' }, untrusted);
    assert.equal(again.status, 429, 'still 127.0.0.2, whatever it wrote');
    // ... and it did not lock out the addresses it named.
    assert.equal((await ping(svc.url, svc.auth, { 'x-forwarded-for': '203.0.113.8' })).status, 200);
    // Nor do its X-Forwarded-Proto and -Host shape Location.
    const location = await httpRequest(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: {
        authorization: svc.auth,
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'evil.example',
      },
      localAddress: '127.0.0.3',
    });
    assert.ok(String(location.headers.location).startsWith(`${svc.url}/v2.2/auth/tokens/`));
  });
});

describe('forwarded protocol and host are checked', () => {
  test('only http and https are taken from X-Forwarded-Proto; a host must be a host', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_TRUST_PROXY: '1' });
    const local = new URL(svc.url).host;
    const cases: Array<[Record<string, string>, string]> = [
      [
        { 'x-forwarded-proto': 'javascript', 'x-forwarded-host': 'evil.example' },
        'http://evil.example',
      ],
      [{ 'x-forwarded-proto': 'https, javascript' }, `http://${local}`],
      [{ 'x-forwarded-proto': 'data' }, `http://${local}`],
      [
        { 'x-forwarded-proto': 'HTTPS', 'x-forwarded-host': 'scan.example.com:8443' },
        'https://scan.example.com:8443',
      ],
      [{ 'x-forwarded-host': '[2001:db8::1]:8080' }, 'http://[2001:db8::1]:8080'],
      [{ 'x-forwarded-host': 'evil.example/x?y=' }, `http://${local}`],
      [{ 'x-forwarded-host': 'user@evil.example' }, `http://${local}`],
      [{ 'x-forwarded-host': 'evil.example:99999' }, `http://${local}`],
      [{ 'x-forwarded-host': 'javascript:alert(1)' }, `http://${local}`],
      [{ 'x-forwarded-host': '<script>' }, `http://${local}`],
      // The Host header itself is checked too: a bad one gives the address the client reached.
      [{ host: 'evil.example/x?' }, `http://${local}`],
    ];
    for (const [headers, origin] of cases) {
      const location = await tokenLocation(svc.url, svc.auth, headers);
      assert.match(
        location,
        new RegExp(`^${origin.replace(/[.[\]]/g, '\\$&')}/v2\\.2/auth/tokens/[0-9a-f]{32}$`),
        JSON.stringify(headers),
      );
    }
  });
});

describe('ASSAY_PUBLIC_URL', () => {
  test('every Location is built from it alone, whatever Host and X-Forwarded-* say', async (t) => {
    const remote = await startLocalServer((_request, response) => response.end('remote content'));
    t.after(() => remote.close());
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '1',
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_PUBLIC_URL: 'https://scan.example.com/assay/',
    });
    const hostile = {
      authorization: svc.auth,
      host: 'evil.example',
      'x-forwarded-host': 'evil2.example',
      'x-forwarded-proto': 'javascript',
    };
    const upload = multipartFile(Buffer.from('harmless text'));
    const form = Buffer.concat([
      Buffer.from(upload.before),
      upload.content,
      Buffer.from(upload.after),
    ]);
    const answers: Array<[string, number, HttpAnswer]> = [
      [
        'POST /files',
        201,
        await httpRequest(`${svc.url}/v2.2/files`, {
          method: 'POST',
          headers: { ...hostile, 'content-type': upload.contentType },
          body: form,
        }),
      ],
      [
        'POST /files/async',
        202,
        await httpRequest(`${svc.url}/v2.2/files/async`, {
          method: 'POST',
          headers: { ...hostile, 'content-type': upload.contentType },
          body: form,
        }),
      ],
      [
        'POST /files/fetch',
        202,
        await httpRequest(`${svc.url}/v2.2/files/fetch`, {
          method: 'POST',
          headers: { ...hostile, 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ location: `${remote.url}/content.txt` }).toString(),
        }),
      ],
      [
        'POST /auth/tokens',
        201,
        await httpRequest(`${svc.url}/v2.2/auth/tokens`, { method: 'POST', headers: hostile }),
      ],
    ];
    for (const [route, status, answer] of answers) {
      assert.equal(answer.status, status, `${route}: ${answer.body}`);
      const { id } = JSON.parse(answer.body) as { id: string };
      const path = route === 'POST /auth/tokens' ? 'auth/tokens' : 'files';
      assert.equal(
        answer.headers.location,
        `https://scan.example.com/assay/v2.2/${path}/${id}`,
        route,
      );
    }
  });
});

describe('bad settings stop the start, naming the variable', () => {
  const bad: Array<[string, string]> = [
    ['ASSAY_TRUST_PROXY', 'yes'],
    ['ASSAY_TRUST_PROXY', '-1'],
    ['ASSAY_TRUST_PROXY', '1.5'],
    ['ASSAY_TRUST_PROXY', '100'],
    ['ASSAY_TRUST_PROXY', '1, 10.0.0.1'],
    ['ASSAY_TRUST_PROXY', '10.0.0.0/40'],
    ['ASSAY_TRUST_PROXY', 'proxy.example.com'],
    ['ASSAY_PUBLIC_URL', 'javascript:alert(1)'],
    ['ASSAY_PUBLIC_URL', 'scan.example.com'],
    ['ASSAY_PUBLIC_URL', 'https://scan.example.com/?a=1'],
    ['ASSAY_PUBLIC_URL', 'https://scan.example.com/#top'],
    ['ASSAY_PUBLIC_URL', 'https://user:secret@scan.example.com'],
  ];
  for (const [name, value] of bad) {
    test(`${name}=${value}`, async (t) => {
      await assert.rejects(
        buildService(t, { ASSAY_CLAMD: clamd.socket, [name]: value }),
        (error: unknown) => error instanceof ConfigError && error.message.includes(name),
      );
    });
  }

  test('`assay serve` exits 1 with the variable in its message', () => {
    for (const [name, value] of [
      ['ASSAY_TRUST_PROXY', 'everyone'],
      ['ASSAY_PUBLIC_URL', 'https://scan.example.com/?q'],
    ] as const) {
      const result = spawnSync(process.execPath, [...nodeArgsOf('src/main.ts'), 'serve'], {
        env: { ...process.env, [name]: value },
        encoding: 'utf8',
        timeout: 30_000,
      });
      assert.equal(result.status, 1, result.stderr);
      assert.match(result.stderr, new RegExp(`configuration error: ${name}`));
    }
  });

  test('`true` still starts, with a warning that it means one hop', async (t) => {
    const log = capturedLogger('info');
    await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_TRUST_PROXY: 'true' }, log.logger);
    const warning = log
      .records()
      .find((record) => /ASSAY_TRUST_PROXY=true/.test(String(record.msg)));
    assert.ok(warning, 'a warning names the setting');
    assert.equal(warning.level, 40);
    assert.match(String(warning.msg), /one hop|1/);
  });
});
