import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { newId } from '../../src/accounts/credentials.js';
import { loadConfig } from '../../src/config.js';
import { eicar } from '../../src/engines/test-content.js';
import { startService } from '../../src/service.js';
import { uploadForm } from '../helpers/content.js';
import { capturedLogger } from '../helpers/logs.js';
import { basic, buildService, credentialsRefreshed, useSharedClamd } from '../helpers/service.js';
import { storeEnv, TEST_POOL_ENV } from '../helpers/test-database.js';

const clamd = useSharedClamd();
const env = () => ({ ASSAY_CLAMD: clamd.socket });

async function createToken(
  url: string,
  auth: string,
  timeout?: string,
  path = '/v2.2/auth/tokens',
) {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
    body: timeout === undefined ? '' : new URLSearchParams({ timeout }).toString(),
  });
  return { response, body: (await response.json()) as Record<string, string> };
}

const tokenAuth = (id: string) => basic(id, '');

describe('temporary tokens', () => {
  test('201 with Location; expiration is creation plus the timeout exactly; both paths', async (t) => {
    const svc = await buildService(t, env());
    for (const [path, timeout, seconds] of [
      ['/v2.2/auth/tokens', '60', 60],
      ['/v2.2/auth/tokens/', '86400', 86_400],
      ['/v2.0/auth/tokens', undefined, 300],
    ] as const) {
      const { response, body } = await createToken(svc.url, svc.auth, timeout, path);
      assert.equal(response.status, 201, path);
      assert.match(body.id ?? '', /^[0-9a-f]{32}$/);
      assert.equal(
        response.headers.get('location'),
        `${svc.url}${path.replace(/\/$/, '')}/${body.id}`,
      );
      assert.equal(
        Date.parse(body.expiration_date ?? '') - Date.parse(body.creation_date ?? ''),
        seconds * 1000,
      );
      assert.match(body.creation_date ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });

  test('400 for a timeout outside 1..86400 or not a whole number', async (t) => {
    const svc = await buildService(t, env());
    for (const timeout of ['0', '86401', 'abc', '1.5', '-5', '1e3']) {
      const { response, body } = await createToken(svc.url, svc.auth, timeout);
      assert.equal(response.status, 400, timeout);
      assert.match(body.error ?? '', /timeout/);
    }
  });

  test('GET 200, DELETE 204 with an empty body, then 404; unknown ids 404', async (t) => {
    const svc = await buildService(t, env());
    const { body: token } = await createToken(svc.url, svc.auth, '60');
    const read = await fetch(`${svc.url}/v2.2/auth/tokens/${token.id}`, {
      headers: { authorization: svc.auth },
    });
    assert.equal(read.status, 200);
    assert.deepEqual(await read.json(), token);
    const removed = await fetch(`${svc.url}/v2.2/auth/tokens/${token.id}`, {
      method: 'DELETE',
      headers: { authorization: svc.auth },
    });
    assert.equal(removed.status, 204);
    assert.equal(await removed.text(), '');
    for (const method of ['GET', 'DELETE']) {
      const gone = await fetch(`${svc.url}/v2.2/auth/tokens/${token.id}`, {
        method,
        headers: { authorization: svc.auth },
      });
      assert.equal(gone.status, 404, method);
    }
  });

  test('a token pings, processes (sync, async) and reads its account files; ping names the token', async (t) => {
    const svc = await buildService(t, env());
    const { body: token } = await createToken(svc.url, svc.auth, '60');
    const auth = tokenAuth(token.id ?? '');
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: auth } });
    assert.deepEqual(await ping.json(), { message: 'pong', key: token.id });
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: auth },
      body: uploadForm(eicar()),
    });
    assert.equal(upload.status, 201);
    const { id } = (await upload.json()) as { id: string };
    const asKey = await fetch(`${svc.url}/v2.2/files/${id}`, {
      headers: { authorization: svc.auth },
    });
    assert.equal(asKey.status, 200, 'the file belongs to the account');
    const async = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: auth },
      body: uploadForm('x'),
    });
    assert.equal(async.status, 202);
  });

  test('403 (JSON) for a token creating tokens, managing tokens or reading the account', async (t) => {
    const svc = await buildService(t, env());
    const { body: token } = await createToken(svc.url, svc.auth, '60');
    const auth = tokenAuth(token.id ?? '');
    const attempts: Array<[string, string]> = [
      ['POST', '/v2.2/auth/tokens'],
      ['GET', `/v2.2/auth/tokens/${token.id}`],
      ['DELETE', `/v2.2/auth/tokens/${token.id}`],
      ['GET', '/v2.2/account.json'],
    ];
    for (const [method, path] of attempts) {
      const response = await fetch(`${svc.url}${path}`, {
        method,
        headers: { authorization: auth },
      });
      assert.equal(response.status, 403, `${method} ${path}`);
      assert.equal(response.headers.get('content-type'), 'application/json');
      assert.match(((await response.json()) as { error: string }).error, /token/);
    }
  });

  test('an expired token and a deleted token get 401', async (t) => {
    const svc = await buildService(t, env());
    const { body: short } = await createToken(svc.url, svc.auth, '1');
    const { body: removed } = await createToken(svc.url, svc.auth, '60');
    const before = await fetch(`${svc.url}/v2.2/ping`, {
      headers: { authorization: tokenAuth(short.id ?? '') },
    });
    assert.equal(before.status, 200);
    await fetch(`${svc.url}/v2.2/auth/tokens/${removed.id}`, {
      method: 'DELETE',
      headers: { authorization: svc.auth },
    });
    await sleep(1_100);
    for (const token of [short, removed]) {
      const response = await fetch(`${svc.url}/v2.2/ping`, {
        headers: { authorization: tokenAuth(token.id ?? '') },
      });
      assert.equal(response.status, 401);
      assert.match(response.headers.get('www-authenticate') ?? '', /^Basic/);
    }
  });

  test('expired tokens are deleted at start (with a log line); live ones stay', async (t) => {
    const svc = await buildService(t, env());
    const { body: live } = await createToken(svc.url, svc.auth, '3600');
    const hourAgo = Date.now() - 3_600_000;
    const expired = {
      id: newId(),
      accountId: svc.accountId,
      apiKeyId: svc.keyId,
      creationDate: new Date(hourAgo - 300_000).toISOString(),
      expirationDate: new Date(hourAgo).toISOString(),
    };
    await svc.store.tokens.insert(expired);
    await svc.service.stop();

    const log = capturedLogger('info');
    const restarted = await startService(
      loadConfig({
        ASSAY_PORT: '0',
        ASSAY_DATA_DIR: svc.dataDir,
        ...TEST_POOL_ENV,
        ...storeEnv(svc.dataDir),
        ...env(),
      }),
      log.logger,
    );
    try {
      assert.equal(await svc.store.tokens.find(expired.id), null, 'the expired token is gone');
      const deleted = log.records().find((record) => record.msg === 'expired tokens deleted');
      assert.equal(deleted?.removed, 1);
      const read = await fetch(`${restarted.url}/v2.2/auth/tokens/${live.id}`, {
        headers: { authorization: svc.auth },
      });
      assert.equal(read.status, 200, 'the live token stays');
      const ping = await fetch(`${restarted.url}/v2.2/ping`, {
        headers: { authorization: tokenAuth(live.id ?? '') },
      });
      assert.equal(ping.status, 200);
    } finally {
      await restarted.stop();
    }
  });

  test("another account's tokens and files answer 404", async (t) => {
    const svc = await buildService(t, env());
    const other = await svc.createAccountKey();
    const { body: token } = await createToken(svc.url, svc.auth, '60');
    const foreign = await fetch(`${svc.url}/v2.2/auth/tokens/${token.id}`, {
      headers: { authorization: other.auth },
    });
    assert.equal(foreign.status, 404);
    const removal = await fetch(`${svc.url}/v2.2/auth/tokens/${token.id}`, {
      method: 'DELETE',
      headers: { authorization: other.auth },
    });
    assert.equal(removal.status, 404);
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('x'),
    });
    const { id } = (await upload.json()) as { id: string };
    const { body: otherToken } = await createToken(svc.url, other.auth, '60');
    const read = await fetch(`${svc.url}/v2.2/files/${id}`, {
      headers: { authorization: tokenAuth(otherToken.id ?? '') },
    });
    assert.equal(read.status, 404);
  });
});

describe('GET /account.json', () => {
  test('every field on v2.1 and v2.2; 404 on v2.0', async (t) => {
    const svc = await buildService(t, env());
    await svc.store.users.insert({
      accountId: svc.accountId,
      email: 'ops@example.com',
      creationDate: '2026-01-02T03:04:05.678Z',
      lastLoginDate: null,
    });
    for (const version of ['v2.1', 'v2.2']) {
      const response = await fetch(`${svc.url}/${version}/account.json`, {
        headers: { authorization: svc.auth },
      });
      assert.equal(response.status, 200);
      const account = (await response.json()) as Record<string, unknown>;
      assert.deepEqual(Object.keys(account).sort(), [
        'balance',
        'billing_email',
        'creation_date',
        'keys',
        'modification_date',
        'name',
        'starting_balance',
        'subscription',
        'users',
      ]);
      assert.equal(account.name, 'Test account');
      assert.equal(typeof account.balance, 'number');
      assert.match(String(account.creation_date), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.deepEqual(account.users, {
        'ops@example.com': {
          creation_date: '2026-01-02T03:04:05Z',
          last_login_date: null,
          last_login: null,
        },
      });
      const key = (account.keys as Record<string, Record<string, unknown>>)[svc.keyId];
      assert.ok(key, 'the key is listed');
      assert.equal(key.active, true);
      assert.deepEqual(key.detection_categories_enabled, [
        'MALWARE',
        'NSFW_LANGUAGE',
        'NSFW_IMAGE',
      ]);
      assert.deepEqual(key.tags, []);
      assert.match(
        String(key.last_seen_date),
        /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/,
        'seen when it authenticated',
      );
    }
    const v20 = await fetch(`${svc.url}/v2.0/account.json`, {
      headers: { authorization: svc.auth },
    });
    assert.equal(v20.status, 404);
  });
});

describe('balance', () => {
  test('each processed item consumes one credit; an enforcing account at zero gets 403 and nothing is processed', async (t) => {
    const svc = await buildService(t, env());
    await svc.store.accounts.update(
      svc.accountId,
      { balance: 2, enforceBalance: true },
      new Date().toISOString(),
    );
    await credentialsRefreshed(svc);
    const balance = async () =>
      (
        (await (
          await fetch(`${svc.url}/v2.2/account.json`, { headers: { authorization: svc.auth } })
        ).json()) as { balance: number }
      ).balance;
    const first = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('one'),
    });
    assert.equal(first.status, 201);
    assert.equal(await balance(), 1);
    const second = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('two'),
    });
    assert.equal(second.status, 201);
    assert.equal(await balance(), 0);
    for (const path of ['/v2.2/files', '/v2.2/files/async']) {
      const refused = await fetch(`${svc.url}${path}`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: uploadForm('three'),
      });
      assert.equal(refused.status, 403, path);
      assert.match(((await refused.json()) as { error: string }).error, /balance/);
    }
    const fetched = await fetch(`${svc.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: svc.auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'location=https://example.com/x',
    });
    assert.equal(fetched.status, 403);
    assert.equal(await balance(), 0, 'nothing more was processed');
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: svc.auth } });
    assert.equal(ping.status, 200, 'the key itself still works');
  });
});
