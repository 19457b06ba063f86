import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { eicar } from '../../src/engines/test-content.js';
import { randomContent } from '../helpers/content.js';
import { FORMATS, type LegacyFormat, legacyRequest, UUID } from '../helpers/legacy.js';
import {
  basic,
  buildService,
  credentialsRefreshed,
  tempDir,
  useSharedClamd,
} from '../helpers/service.js';

const clamd = useSharedClamd();
const env = () => ({ ASSAY_CLAMD: clamd.socket });

/**
 * Sends the same failing request plainly and with suppress_response_codes, in each format:
 * the code, then 200; the body is `oops` with the reason and a request_id both times.
 */
async function expectError(
  url: string,
  init: () => RequestInit,
  code: number,
  reason: RegExp,
): Promise<void> {
  for (const [index, format] of FORMATS.entries()) {
    for (const suppress of [false, true]) {
      const answer = await legacyRequest(url, {
        ...init(),
        format: format as LegacyFormat,
        query: suppress ? `suppress_response_codes=${index === 0 ? '' : '1'}` : '',
      });
      const what = `${code} as ${format}${suppress ? ', suppressed' : ''}`;
      assert.equal(answer.status, suppress ? 200 : code, `${what}: ${answer.text}`);
      assert.equal(answer.body.status, 'oops', what);
      assert.match(answer.body.reason ?? '', reason, what);
      assert.match(answer.body.request_id ?? '', UUID, what);
      assert.equal(answer.body.request_id, answer.headers.get('x-service-request-id'));
      assert.equal('virus' in answer.body, false);
    }
  }
}

const scanWith =
  (auth: string, body: Buffer | string = eicar()) =>
  () => ({
    method: 'POST',
    headers: { authorization: auth },
    body: typeof body === 'string' ? body : new Uint8Array(body),
  });

describe('v1.0 error codes, with and without suppress_response_codes', () => {
  test('400 bad request: empty content, fetch without url, an unknown format', async (t) => {
    const svc = await buildService(t, env());
    await expectError(`${svc.url}/api/scan/`, scanWith(svc.auth, ''), 400, /empty/);
    await expectError(`${svc.url}/api/scan/async`, scanWith(svc.auth, ''), 400, /empty/);
    await expectError(
      `${svc.url}/api/scan/fetch`,
      () => ({
        method: 'POST',
        headers: { authorization: svc.auth, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'callback=https://example.com/hook',
      }),
      400,
      /url is required/,
    );
    const bogus = await legacyRequest(`${svc.url}/api/scan/?format=toml`, scanWith(svc.auth)());
    assert.equal(bogus.status, 400);
    assert.match(bogus.body.reason ?? '', /format must be one of json, xml, yaml/);
  });

  test('401 for a wrong secret, an unknown key or no credentials', async (t) => {
    const svc = await buildService(t, env());
    for (const auth of [basic(svc.keyId, 'wrong'), basic('f'.repeat(32), 'x')]) {
      await expectError(`${svc.url}/api/scan/`, scanWith(auth), 401, /invalid credentials/);
    }
    await expectError(
      `${svc.url}/api/scan/status/${'0'.repeat(32)}`,
      () => ({}),
      401,
      /authentication required/,
    );
  });

  test('406 for a token, a key without the malware engine, and a spent balance', async (t) => {
    const svc = await buildService(t, env());
    const created = await fetch(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: svc.auth },
    });
    const token = basic(((await created.json()) as { id: string }).id, '');
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: token } });
    assert.equal(ping.status, 200, 'the token works on v2.x');
    await expectError(`${svc.url}/api/scan/`, scanWith(token), 406, /tokens are not accepted/);
    await expectError(
      `${svc.url}/api/scan/status/${'0'.repeat(32)}`,
      () => ({ headers: { authorization: token } }),
      406,
      /tokens are not accepted/,
    );

    const other = await svc.createAccountKey();
    await svc.store.apiKeys.update(other.keyId, { detectionCategories: ['NSFW_LANGUAGE'] });
    await credentialsRefreshed(svc);
    await expectError(
      `${svc.url}/api/scan/`,
      scanWith(other.auth),
      406,
      /malware engine is disabled/,
    );

    await svc.store.accounts.update(
      svc.accountId,
      { balance: 0, enforceBalance: true },
      new Date().toISOString(),
    );
    await credentialsRefreshed(svc);
    for (const path of ['/api/scan/', '/api/scan/async']) {
      await expectError(`${svc.url}${path}`, scanWith(svc.auth), 406, /no balance left/);
    }
    await expectError(
      `${svc.url}/api/scan/fetch`,
      () => ({
        method: 'POST',
        headers: { authorization: svc.auth, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'url=https://example.com/x',
      }),
      406,
      /no balance left/,
    );
    const files = await svc.store.db.selectFrom('files').selectAll().execute();
    assert.deepEqual(files, [], 'nothing was processed');
  });

  test('413 over the legacy maximum POST size', async (t) => {
    const svc = await buildService(t, { ...env(), ASSAY_LEGACY_MAX_POST_SIZE: '1000' });
    for (const path of ['/api/scan/', '/api/scan/async']) {
      await expectError(
        `${svc.url}${path}`,
        scanWith(svc.auth, randomContent(1001)),
        413,
        /maximum POST size of 1000 bytes/,
      );
    }
  });

  test('404 for an unknown resource', async (t) => {
    const svc = await buildService(t, env());
    await expectError(
      `${svc.url}/api/scan/elsewhere`,
      () => ({ headers: { authorization: svc.auth } }),
      404,
      /no such v1.0 resource/,
    );
  });

  test('YAML escapes DEL, C1 controls and line separators; the reason reads back unchanged', async (t) => {
    const svc = await buildService(t, env());
    // The status path echoes the request id it could not find: any characters the client chose.
    const chosen = 'a\u007fb\u0080c\u0085d\u009fe\u2028f\u2029g\ufeffh\u00a0i\u00e9j\u0009k';
    const answer = await legacyRequest(`${svc.url}/api/scan/status/${encodeURIComponent(chosen)}`, {
      headers: { authorization: svc.auth },
      format: 'yaml',
    });
    assert.equal(answer.status, 404);
    assert.doesNotMatch(
      answer.text,
      /[\u007f-\u009f\u2028\u2029\ufeff]/,
      'no raw character YAML cannot carry',
    );
    assert.equal(answer.body.reason, `no scan with request_id ${chosen}`, 'the round trip');
  });

  test('500 for an internal failure, without its details', async (t) => {
    const svc = await buildService(t, env());
    const scanned = await legacyRequest(`${svc.url}/api/scan/`, scanWith(svc.auth)());
    await sql`drop table files`.execute(svc.store.db);
    await expectError(
      `${svc.url}/api/scan/status/${scanned.body.request_id}`,
      () => ({ headers: { authorization: svc.auth } }),
      500,
      /^internal error$/,
    );
  });

  test('502 when the engine is down; nothing is reported clean', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: `${tempDir()}/no-clamd.sock` });
    await expectError(`${svc.url}/api/scan/`, scanWith(svc.auth, 'clean?'), 502, /malware engine/);
    const files = await svc.store.db.selectFrom('files').selectAll().execute();
    assert.deepEqual(files, []);
  });

  test('502 with Retry-After for a rate limit or the failed-authentication limit (retryable, not 400)', async (t) => {
    const svc = await buildService(t, {
      ...env(),
      ASSAY_RATE_LIMIT: '0.01',
      ASSAY_RATE_BURST: '1',
      ASSAY_AUTH_FAIL_RATE: '0.01',
      ASSAY_AUTH_FAIL_BURST: '1',
    });
    const scan = () =>
      legacyRequest(`${svc.url}/api/scan/`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: 'within the limit',
      });
    assert.equal((await scan()).status, 200);
    const limited = await scan();
    assert.equal(limited.status, 502, limited.text);
    assert.equal(limited.body.status, 'oops');
    assert.match(limited.body.reason ?? '', /rate limit/);
    assert.ok(Number(limited.headers.get('retry-after')) > 0, 'Retry-After');

    const wrong = () =>
      legacyRequest(`${svc.url}/api/scan/`, {
        method: 'POST',
        headers: { authorization: basic(svc.keyId, 'wrong') },
        body: 'a guess',
      });
    assert.equal((await wrong()).status, 401);
    const locked = await wrong();
    assert.equal(locked.status, 502, locked.text);
    assert.match(locked.body.reason ?? '', /failed authentications/);
    assert.ok(Number(locked.headers.get('retry-after')) > 0, 'Retry-After');
  });
});
