import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { capturedLogger } from '../helpers/logs.js';
import { basic, buildService, credentialsRefreshed, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
// A slow refill (one request per 100 s) keeps every count exact however slow the machine is.
const SLOW = '0.01';

async function ping(url: string, auth: string | null, headers: Record<string, string> = {}) {
  const response = await fetch(`${url}/v2.2/ping`, {
    headers: auth === null ? headers : { authorization: auth, ...headers },
  });
  const body = (await response.json()) as Record<string, unknown>;
  return {
    status: response.status,
    body,
    limit: response.headers.get('x-ratelimit-limit'),
    remaining: response.headers.get('x-ratelimit-remaining'),
    retryAfter: response.headers.get('retry-after'),
  };
}

async function createToken(url: string, auth: string): Promise<string> {
  const response = await fetch(`${url}/v2.2/auth/tokens`, {
    method: 'POST',
    headers: { authorization: auth },
  });
  assert.equal(response.status, 201);
  return ((await response.json()) as { id: string }).id;
}

describe('rate limits per key', () => {
  test('headers count down; then 429 with Retry-After and a JSON error; a token draws on its key', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_RATE_LIMIT: SLOW,
      ASSAY_RATE_BURST: '4',
    });
    const token = await createToken(svc.url, svc.auth);
    const seen = [];
    for (const auth of [svc.auth, basic(token, ''), basic(token, '')]) {
      const result = await ping(svc.url, auth);
      assert.equal(result.status, 200);
      assert.equal(result.limit, '4');
      seen.push(result.remaining);
    }
    assert.deepEqual(seen, ['2', '1', '0']);

    for (const auth of [svc.auth, basic(token, '')]) {
      const refused = await ping(svc.url, auth);
      assert.equal(refused.status, 429);
      assert.match(String(refused.body.error), /rate limit/);
      assert.equal(refused.limit, '4');
      assert.equal(refused.remaining, '0');
      const retryAfter = Number(refused.retryAfter);
      assert.ok(
        Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 100,
        refused.retryAfter ?? 'none',
      );
    }

    // Another key of the same account has its own bucket.
    const other = await svc.createAccountKey();
    const fresh = await ping(svc.url, other.auth);
    assert.equal(fresh.status, 200);
    assert.equal(fresh.remaining, '3');
  });

  test('a refused upload is not read, processed or charged', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_RATE_LIMIT: SLOW,
      ASSAY_RATE_BURST: '1',
    });
    await svc.store.accounts.update(svc.accountId, { balance: 10 }, new Date().toISOString());
    assert.equal((await ping(svc.url, svc.auth)).status, 200);
    const form = new FormData();
    form.set('file', new Blob(['hello']), 'hello.txt');
    const response = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: form,
    });
    assert.equal(response.status, 429);
    assert.equal((await svc.store.accounts.find(svc.accountId))?.balance, 10);
  });

  test("a key's own limit from the store overrides the default, and takes effect within the credential cache's time", async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_RATE_BURST: '50' });
    assert.equal((await ping(svc.url, svc.auth)).limit, '50');
    await svc.store.apiKeys.update(svc.keyId, { rateLimit: { rate: 0.01, burst: 2 } });
    await credentialsRefreshed(svc);
    const first = await ping(svc.url, svc.auth);
    assert.equal(first.limit, '2');
    assert.equal((await ping(svc.url, svc.auth)).status, 200);
    assert.equal((await ping(svc.url, svc.auth)).status, 429);
    // Back to the default: unlimited keys carry no rate headers.
    await svc.store.apiKeys.update(svc.keyId, { rateLimit: { rate: 0, burst: 1 } });
    await credentialsRefreshed(svc);
    const unlimited = await ping(svc.url, svc.auth);
    assert.equal(unlimited.status, 200);
    assert.equal(unlimited.limit, null);
  });

  test('ASSAY_RATE_LIMIT=0 turns the limit off: no headers, no 429', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_RATE_LIMIT: '0',
      ASSAY_RATE_BURST: '1',
    });
    for (let i = 0; i < 5; i++) {
      const result = await ping(svc.url, svc.auth);
      assert.equal(result.status, 200);
      assert.equal(result.limit, null);
    }
  });
});

describe('failed authentication per client address', () => {
  test('wrong secrets are refused with 429 after the burst, even the right one then', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_AUTH_FAIL_RATE: SLOW,
      ASSAY_AUTH_FAIL_BURST: '3',
    });
    const wrong = basic(svc.keyId, 'not-the-secret');
    // Asking without credentials (to get the challenge) is not a failed guess.
    for (let i = 0; i < 5; i++) assert.equal((await ping(svc.url, null)).status, 401);
    for (let i = 0; i < 3; i++) assert.equal((await ping(svc.url, wrong)).status, 401);
    const refused = await ping(svc.url, wrong);
    assert.equal(refused.status, 429);
    assert.match(String(refused.body.error), /failed authentications/);
    assert.ok(Number(refused.retryAfter) >= 1);
    // A correct guess must look no different, or guessing would still go at full speed.
    assert.equal((await ping(svc.url, svc.auth)).status, 429);
    // Unknown keys count too.
    assert.equal((await ping(svc.url, basic('nobody', 'x'))).status, 429);
  });

  test('X-Forwarded-For names the client only when the proxy is trusted', async (t) => {
    const settings = {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_AUTH_FAIL_RATE: SLOW,
      ASSAY_AUTH_FAIL_BURST: '1',
    };
    const wrong = basic('nobody', 'x');
    const from = (address: string) => ({ 'x-forwarded-for': address });

    const direct = await buildService(t, settings);
    assert.equal((await ping(direct.url, wrong, from('203.0.113.1'))).status, 401);
    // Untrusted: the header is ignored, so this is the same client (127.0.0.1) again.
    assert.equal((await ping(direct.url, wrong, from('203.0.113.2'))).status, 429);

    const proxied = await buildService(t, { ...settings, ASSAY_TRUST_PROXY: '127.0.0.1' });
    assert.equal((await ping(proxied.url, wrong, from('203.0.113.1'))).status, 401);
    assert.equal((await ping(proxied.url, wrong, from('203.0.113.1'))).status, 429);
    assert.equal((await ping(proxied.url, wrong, from('203.0.113.2'))).status, 401);
  });

  test('an IPv6 client is its /64; an IPv4-mapped address is its IPv4 address', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_AUTH_FAIL_RATE: SLOW,
      ASSAY_AUTH_FAIL_BURST: '1',
      ASSAY_TRUST_PROXY: '127.0.0.1',
    });
    const wrong = basic('nobody', 'x');
    const from = (address: string) => ({ 'x-forwarded-for': address });
    const outcomes: Array<[string, number]> = [
      ['2001:db8:1:2::a', 401],
      // The same /64, however written: one client choosing another interface id.
      ['2001:db8:1:2:ffff:ffff:ffff:ffff', 429],
      ['2001:0DB8:0001:0002::b', 429],
      // The neighbouring /64 is another client.
      ['2001:db8:1:3::a', 401],
      ['198.51.100.7', 401],
      ['::ffff:198.51.100.7', 429],
      ['::ffff:c633:6408', 401], // 198.51.100.8
      ['198.51.100.8', 429],
    ];
    for (const [address, status] of outcomes) {
      assert.equal((await ping(svc.url, wrong, from(address))).status, status, address);
    }
  });

  test('proxy headers without ASSAY_TRUST_PROXY: a warning, once, in the log', async (t) => {
    const untrusted = capturedLogger('info');
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket }, untrusted.logger);
    await ping(svc.url, svc.auth);
    await ping(svc.url, svc.auth, { 'x-forwarded-for': '203.0.113.1' });
    await ping(svc.url, svc.auth, { forwarded: 'for=203.0.113.2' });
    await ping(svc.url, null, { 'x-forwarded-for': '203.0.113.3' });
    const warnings = (log: ReturnType<typeof capturedLogger>) =>
      log.records().filter((record) => /ASSAY_TRUST_PROXY/.test(String(record.msg)));
    const [warning, ...more] = warnings(untrusted);
    assert.ok(warning, 'a warning names ASSAY_TRUST_PROXY');
    assert.equal(warning.level, 40);
    assert.match(String(warning.msg), /lock out/);
    assert.equal(more.length, 0, 'said once, not per request');

    const trusted = capturedLogger('info');
    const proxied = await buildService(
      t,
      { ASSAY_CLAMD: clamd.socket, ASSAY_TRUST_PROXY: '127.0.0.1' },
      trusted.logger,
    );
    await ping(proxied.url, proxied.auth, { 'x-forwarded-for': '203.0.113.1' });
    assert.deepEqual(warnings(trusted), []);
  });
});
