import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SETTINGS } from '../../src/settings.js';
import { basic, buildService, type TestService, useSharedClamd } from '../helpers/service.js';

// @run-alone: a disabled key refused within 1 s (cache: 500 ms)

const clamd = useSharedClamd();
/** The cache as shipped (tests elsewhere shorten it): what these tests measure. */
const env = () => ({
  ASSAY_CLAMD: clamd.socket,
  ASSAY_CREDENTIAL_CACHE_MS: SETTINGS.ASSAY_CREDENTIAL_CACHE_MS.default,
});

const ping = (svc: TestService, auth: string) =>
  fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: auth } }).then((r) => r.status);

async function tokenOf(svc: TestService): Promise<string> {
  const made = await fetch(`${svc.url}/v2.2/auth/tokens`, {
    method: 'POST',
    headers: { authorization: svc.auth },
  });
  assert.equal(made.status, 201);
  return basic(((await made.json()) as { id: string }).id, '');
}

/**
 * Warms each of `auths` (accepted), makes `change`, then pings each back to back until it is
 * refused (401): the ms from the change to each one's first refusal. None is accepted after.
 */
async function refusedAfter(
  svc: TestService,
  auths: string[],
  change: () => Promise<void>,
): Promise<number[]> {
  for (const auth of auths) {
    for (let i = 0; i < 5; i++) assert.equal(await ping(svc, auth), 200, 'warm');
  }
  await change();
  const changed = Date.now();
  return Promise.all(
    auths.map(async (auth) => {
      // Pinging back to back meets the key's rate limit too (429): only a 401 is the refusal.
      while ((await ping(svc, auth)) !== 401) {
        assert.ok(Date.now() - changed < 5_000, 'still accepted 5 s after the change');
      }
      const elapsed = Date.now() - changed;
      for (let i = 0; i < 5; i++)
        assert.notEqual(await ping(svc, auth), 200, 'refused from then on');
      return elapsed;
    }),
  );
}

describe('credentials reused between requests', () => {
  test('a key disabled elsewhere while its credentials are warm is refused within a second, and its token', async (t) => {
    const svc = await buildService(t, env());
    const token = await tokenOf(svc);
    // Another process (the admin CLI, another Assay) changes the store: this one is not told.
    const elsewhere = async () => {
      await svc.store.apiKeys.setActive(svc.keyId, false);
      await svc.store.tokens.deleteForKey(svc.keyId);
    };
    const [key = NaN, tokenMs = NaN] = await refusedAfter(svc, [svc.auth, token], elsewhere);
    assert.ok(key <= 1000, `the key was refused ${key} ms after it was disabled`);
    assert.ok(tokenMs <= 1000, `its token was refused ${tokenMs} ms after`);
  });

  test('an account disabled elsewhere is refused within a second', async (t) => {
    const svc = await buildService(t, env());
    const [ms = NaN] = await refusedAfter(svc, [svc.auth], async () => {
      await svc.store.accounts.setActive(svc.accountId, false, new Date().toISOString());
    });
    assert.ok(ms <= 1000, `refused ${ms} ms after the account was disabled`);
  });

  test('through this process, a revoked token is refused at once', async (t) => {
    const svc = await buildService(t, env());
    const token = await tokenOf(svc);
    for (let i = 0; i < 5; i++) assert.equal(await ping(svc, token), 200);
    const id = Buffer.from(token.slice('Basic '.length), 'base64').toString().split(':')[0];
    const revoked = await fetch(`${svc.url}/v2.2/auth/tokens/${id}`, {
      method: 'DELETE',
      headers: { authorization: svc.auth },
    });
    assert.equal(revoked.status, 204);
    assert.equal(await ping(svc, token), 401);
  });
});
