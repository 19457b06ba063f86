import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import type { Token } from '../../src/domain/records.js';
import { addConsoleUser, mainText, signIn } from '../helpers/console.js';
import { nextLink, text } from '../helpers/console-pages.js';
import { basic, buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

/** The token prefixes a keys page lists (by their revoke forms), in page order. */
function listedPrefixes(page: string): string[] {
  return [...page.matchAll(/action="\/console\/tokens\/([^/"]+)\/revoke"/g)].map(
    (match) => match[1] ?? '',
  );
}

describe('the console’s temporary tokens', () => {
  test('listed 50 to a page newest first, each by a 12-character prefix, never a whole id; revoked by it', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const client = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    // 120 tokens, three to a millisecond, and 5 expired ones (never listed).
    const start = Date.now() - 60_000;
    const token = (created: number, expires: number, id = randomBytes(16).toString('hex')) => ({
      id,
      accountId: svc.accountId,
      apiKeyId: svc.keyId,
      creationDate: new Date(created).toISOString(),
      expirationDate: new Date(expires).toISOString(),
    });
    const live: Token[] = Array.from({ length: 120 }, (_, index) =>
      token(start + Math.floor(index / 3), Date.now() + 3_600_000),
    );
    const expired = Array.from({ length: 5 }, () => token(start - 10_000, start));
    for (const one of [...live, ...expired]) await svc.store.tokens.insert(one);
    const made = await fetch(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: svc.auth },
    });
    const { id: apiToken } = (await made.json()) as { id: string };

    const pages: string[][] = [];
    for (let path: string | null = '/console/keys'; path !== null; ) {
      const { status, page } = await text(client, path);
      assert.equal(status, 200, path);
      for (const whole of [apiToken, ...live.map((one) => one.id)]) {
        assert.ok(!page.includes(whole), `no whole token id on ${path}`);
      }
      pages.push(listedPrefixes(page));
      path = nextLink(page);
      assert.ok(pages.length <= 4, 'the pages end');
    }
    assert.deepEqual(
      pages.map((page) => page.length),
      [50, 50, 21],
    );
    const newestFirst = [
      apiToken,
      ...live
        .sort((a, b) =>
          a.creationDate === b.creationDate
            ? b.id.localeCompare(a.id, 'en')
            : b.creationDate.localeCompare(a.creationDate, 'en'),
        )
        .map((one) => one.id),
    ];
    assert.deepEqual(
      pages.flat(),
      newestFirst.map((id) => id.slice(0, 12)),
    );
    const first = await (await client.get('/console/keys')).text();
    assert.match(mainText(first), new RegExp(`${apiToken.slice(0, 12)}… ${svc.keyId}`));
    assert.equal((await client.get('/console/keys?before=x~y')).status, 400);

    // Revoked by its prefix: the API refuses it at once.
    const revoked = await client.post(`/console/tokens/${apiToken.slice(0, 12)}/revoke`);
    assert.equal(revoked.status, 303);
    assert.equal(revoked.headers.get('location'), '/console/keys?done=revoked');
    const ping = await fetch(`${svc.url}/v2.2/ping`, {
      headers: { authorization: basic(apiToken, '') },
    });
    assert.equal(ping.status, 401);
    const after = await (await client.get('/console/keys?done=revoked')).text();
    assert.match(mainText(after), /The token is revoked\./);
    assert.ok(!listedPrefixes(after).includes(apiToken.slice(0, 12)));

    // Two tokens starting alike: neither is revoked by the prefix. Another account's: 404.
    const twin = `${live[0]?.id.slice(0, 12)}${randomBytes(10).toString('hex')}`;
    await svc.store.tokens.insert(token(Date.now(), Date.now() + 3_600_000, twin));
    const ambiguous = await client.post(`/console/tokens/${twin.slice(0, 12)}/revoke`);
    assert.equal(ambiguous.status, 409);
    assert.notEqual(await svc.store.tokens.find(twin), null);
    assert.notEqual(await svc.store.tokens.find(live[0]?.id ?? ''), null);
    const other = await svc.createAccountKey();
    const theirs = (await (
      await fetch(`${svc.url}/v2.2/auth/tokens`, {
        method: 'POST',
        headers: { authorization: other.auth },
      })
    ).json()) as { id: string };
    for (const guess of [theirs.id.slice(0, 12), theirs.id]) {
      assert.equal((await client.post(`/console/tokens/${guess}/revoke`)).status, 404, guess);
    }
    assert.notEqual(await svc.store.tokens.find(theirs.id), null);
  });

  test('a done= that is no message of the page shows none', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const operator = await signIn(
      svc.url,
      await addConsoleUser(svc.store, svc.accountId, { operator: true }),
    );
    for (const path of ['/console/keys', `/console/accounts/${svc.accountId}`]) {
      const plain = mainText(await (await operator.get(path)).text());
      for (const done of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
        const answer = await operator.get(`${path}?done=${done}`);
        assert.equal(answer.status, 200, `${path} ${done}`);
        const shown = mainText(await answer.text());
        assert.doesNotMatch(shown, /function|native code|\[object/, `${path} ${done}`);
        assert.equal(shown, plain, `${path} ${done}: no notice`);
      }
    }
  });
});
