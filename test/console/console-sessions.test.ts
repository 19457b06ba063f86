import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AccountService } from '../../src/accounts/account-service.js';
import { addConsoleUser, signIn } from '../helpers/console.js';
import { buildService, quietLogger, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

describe('console sessions', () => {
  test('a session refused while its account is disabled stays ended once the account is enabled', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const login = await addConsoleUser(svc.store, svc.accountId);
    const client = await signIn(svc.url, login);
    const accounts = new AccountService(svc.store);
    assert.ok(await accounts.setAccountActive(svc.accountId, false));
    assert.equal((await client.get('/console')).status, 303, 'refused while disabled');
    assert.ok(await accounts.setAccountActive(svc.accountId, true));
    const after = await client.get('/console/keys');
    assert.equal(after.status, 303, 'still ended: the user signs in again');
    assert.match(after.headers.get('location') ?? '', /^\/console\/sign-in\?next=/);
    const again = await signIn(svc.url, login);
    assert.equal((await again.get('/console')).status, 200, 'a new sign-in works');
  });

  test('a session in use is never ended by a short idle timeout; one left unused is', async (t) => {
    let now = Date.now();
    const svc = await buildService(
      t,
      { ASSAY_CLAMD: clamd.socket, ASSAY_CONSOLE_IDLE_MINUTES: '1' },
      quietLogger,
      { consoleClock: () => now },
    );
    const client = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    // A page every 20 s of the console's clock for 4 minutes: four times the idle timeout.
    for (let seconds = 20; seconds <= 240; seconds += 20) {
      now += 20_000;
      assert.equal((await client.get('/console')).status, 200, `in use, after ${seconds} s`);
    }
    now += 61_000;
    assert.equal((await client.get('/console')).status, 303, 'unused for over a minute: ended');
  });

  test('a next= page that is not plain console path is replaced by the overview, never a 500', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const login = await addConsoleUser(svc.store, svc.accountId);
    const client = await signIn(svc.url, login);
    for (const next of ['/console/ā', '/console/\x7f', '/console/a\u2028b', '/console?x=\x01']) {
      const signedIn = await client.get(`/console/sign-in?next=${encodeURIComponent(next)}`);
      assert.equal(signedIn.status, 303, JSON.stringify(next));
      assert.equal(signedIn.headers.get('location'), '/console', JSON.stringify(next));
      const posted = await fetch(`${svc.url}/console/sign-in`, {
        method: 'POST',
        body: new URLSearchParams({ ...login, next }),
        redirect: 'manual',
      });
      assert.equal(posted.status, 303, JSON.stringify(next));
      assert.equal(posted.headers.get('location'), '/console', JSON.stringify(next));
    }
    // A plain console path (percent-encoded, as browsers send one) is kept.
    const kept = await client.get(
      `/console/sign-in?next=${encodeURIComponent('/console/files?finding=%C4%81')}`,
    );
    assert.equal(kept.headers.get('location'), '/console/files?finding=%C4%81');
  });
});
