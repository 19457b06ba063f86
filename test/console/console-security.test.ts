import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AccountService } from '../../src/accounts/account-service.js';
import { ConsoleAccess } from '../../src/accounts/console-access.js';
import { loadConfig } from '../../src/config.js';
import { addConsoleUser, mainText, signIn, signInAnswer } from '../helpers/console.js';
import { basic, buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

const PAGES = [
  '/console',
  '/console/keys',
  '/console/upload',
  '/console/keys/0123456789abcdef0123456789abcdef',
  '/console/keys/0123456789abcdef0123456789abcdef/disable',
];
const ACTIONS = [
  '/console/keys',
  '/console/keys/0123456789abcdef0123456789abcdef/disable',
  '/console/tokens/0123456789abcdef0123456789abcdef/revoke',
  '/console/sign-out',
];

describe('console security', () => {
  test('no page or action without a session; a state change without the CSRF token is refused', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    for (const path of PAGES) {
      const answer = await fetch(`${svc.url}${path}`, { redirect: 'manual' });
      assert.equal(answer.status, 303, path);
      assert.match(answer.headers.get('location') ?? '', /^\/console\/sign-in\?next=/);
    }
    for (const path of ACTIONS) {
      const answer = await fetch(`${svc.url}${path}`, {
        method: 'POST',
        body: new URLSearchParams({ csrf: 'x' }),
        redirect: 'manual',
      });
      assert.equal(answer.status, 401, path);
    }
    // A made-up cookie is no session.
    const forged = await fetch(`${svc.url}/console`, {
      headers: { cookie: 'assay_console=forged' },
      redirect: 'manual',
    });
    assert.equal(forged.status, 303);

    const client = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    const other = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    for (const csrf of [null, '', 'wrong', other.csrf]) {
      const answer = await client.post('/console/keys', { category: 'MALWARE' }, csrf);
      assert.equal(answer.status, 403, `csrf ${csrf}`);
    }
    const { keys } = await new AccountService(svc.store).overview(svc.accountId);
    assert.equal(keys.length, 1, 'no key was created without the token');
    assert.equal((await client.post('/console/keys', { category: 'MALWARE' })).status, 201);
  });

  test("another account's keys and tokens are never shown or changed, ids guessed included", async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const second = await svc.createAccountKey();
    const token = (await (
      await fetch(`${svc.url}/v2.2/auth/tokens`, {
        method: 'POST',
        headers: { authorization: second.auth },
      })
    ).json()) as { id: string };
    const client = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    const keysPage = mainText(await (await client.get('/console/keys')).text());
    assert.ok(keysPage.includes(svc.keyId));
    assert.ok(!keysPage.includes(second.keyId) && !keysPage.includes(token.id));
    assert.equal((await client.get(`/console/keys/${second.keyId}`)).status, 404);
    for (const path of [
      `/console/keys/${second.keyId}/disable`,
      `/console/keys/${second.keyId}/update`,
      `/console/tokens/${token.id}/revoke`,
    ]) {
      assert.equal((await client.post(path, { category: 'MALWARE', tags: 'x' })).status, 404, path);
    }
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: second.auth } });
    assert.equal(ping.status, 200, "the other account's key still works");
    const tokenPing = await fetch(`${svc.url}/v2.2/ping`, {
      headers: { authorization: basic(token.id, '') },
    });
    assert.equal(tokenPing.status, 200, 'and so does its token');
  });

  test('cookie flags, Secure behind a trusted proxy that says https; what users typed is escaped', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '127.0.0.1/32',
    });
    const login = await addConsoleUser(svc.store, svc.accountId);
    const plain = await signInAnswer(svc.url, login.email, login.password);
    const cookie = plain.headers.get('set-cookie') ?? '';
    assert.match(cookie, /; HttpOnly/);
    assert.match(cookie, /; SameSite=Strict/);
    assert.match(cookie, /; Path=\/console/);
    assert.doesNotMatch(cookie, /Secure/, 'plain http: a Secure cookie would never come back');
    const proxied = await signInAnswer(svc.url, login.email, login.password, {
      'x-forwarded-proto': 'https',
    });
    assert.match(proxied.headers.get('set-cookie') ?? '', /; Secure/);

    const client = await signIn(svc.url, login);
    const page = await client.get('/console/keys');
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'none'/);
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
    assert.equal(page.headers.get('access-control-allow-origin'), null, 'no CORS on the console');
    assert.equal(page.headers.get('cache-control'), 'no-store');
    assert.equal(
      (
        await client.post('/console/keys', {
          category: 'MALWARE',
          tags: '<script>alert(1)</script>',
        })
      ).status,
      201,
    );
    const html = await (await client.get('/console/keys')).text();
    assert.ok(!html.includes('<script>alert(1)'), 'a tag is text, never markup');
    assert.ok(html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
  });

  test('failed sign-ins are limited per user and per address; a sign-in sets last_login_date', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_TRUST_PROXY: '127.0.0.1/32',
    });
    const login = await addConsoleUser(svc.store, svc.accountId);
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 7; attempt++) {
      // From different addresses: the user's own limit applies.
      const answer = await signInAnswer(svc.url, login.email, 'wrong password', {
        'x-forwarded-for': `10.0.0.${attempt + 1}`,
      });
      statuses.push(answer.status);
    }
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429, 429]);
    const limited = await signInAnswer(svc.url, login.email, login.password, {
      'x-forwarded-for': '10.0.0.99',
    });
    assert.equal(limited.status, 429, 'the right password too, until the limit lets it through');
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    assert.match(mainText(await limited.text()), /Too many sign-in attempts/);

    // One address trying many users, at once: one after the other, a slow machine's hashes let
    // the bucket refill (one every 6 s) between them. Each attempt takes its token first.
    const perAddress = await Promise.all(
      Array.from({ length: 16 }, async (_, attempt) => {
        const answer = await signInAnswer(svc.url, `nobody${attempt}@example.com`, 'x', {
          'x-forwarded-for': '10.9.9.9',
        });
        return answer.status;
      }),
    );
    const refused = perAddress.filter((status) => status === 429).length;
    assert.ok(refused >= 4, `${refused} of 16 refused: ${perAddress.join(' ')}`);

    const fresh = await addConsoleUser(svc.store, svc.accountId);
    const before = (await (
      await fetch(`${svc.url}/v2.2/account.json`, { headers: { authorization: svc.auth } })
    ).json()) as { users: Record<string, { last_login_date: string | null }> };
    assert.equal(before.users[fresh.email]?.last_login_date, null);
    await signIn(svc.url, fresh);
    const after = (await (
      await fetch(`${svc.url}/v2.2/account.json`, { headers: { authorization: svc.auth } })
    ).json()) as typeof before;
    assert.match(after.users[fresh.email]?.last_login_date ?? '', /^\d{4}-\d\d-\d\dT/);
  });

  test('a session made through one process works through another; signing out or a new password ends it everywhere', async (t) => {
    const first = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const second = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_DATA_DIR: first.dataDir,
    });
    const login = await addConsoleUser(first.store, first.accountId);
    const onFirst = await signIn(first.url, login);
    const elsewhere = await signIn(first.url, login);
    const onSecond = (path: string, cookie: string) =>
      fetch(`${second.url}${path}`, { headers: { cookie }, redirect: 'manual' });
    assert.equal(
      (await onSecond('/console/keys', onFirst.cookie)).status,
      200,
      'the other process knows the session',
    );
    // Signing out (through the second process) ends every session of the user.
    const out = await fetch(`${second.url}/console/sign-out`, {
      method: 'POST',
      headers: { cookie: onFirst.cookie },
      body: new URLSearchParams({ csrf: onFirst.csrf }),
      redirect: 'manual',
    });
    assert.equal(out.status, 303);
    assert.match(out.headers.get('set-cookie') ?? '', /Max-Age=0/);
    for (const cookie of [onFirst.cookie, elsewhere.cookie]) {
      assert.equal((await onFirst.get('/console')).status, 303);
      assert.equal((await onSecond('/console', cookie)).status, 303);
    }
    // A new password (the admin CLI's reset) ends the sessions too.
    const again = await signIn(second.url, login);
    assert.equal((await again.get('/console')).status, 200);
    assert.ok(
      await new ConsoleAccess(first.store, loadConfig({}).console).resetPassword(
        login.email,
        'a brand new password',
      ),
    );
    assert.equal((await again.get('/console')).status, 303);
    assert.equal(
      (await signInAnswer(second.url, login.email, login.password)).status,
      401,
      'the old password is gone',
    );
  });
});
