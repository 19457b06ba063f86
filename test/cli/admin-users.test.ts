import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assayCli } from '../helpers/cli.js';
import { signIn } from '../helpers/console.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

describe('assay admin user', () => {
  test('add refuses a user the account has already; remove removes one and ends their sessions', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const user = (args: string[], input?: string) =>
      assayCli(svc.dataDir, ['admin', 'user', ...args], input);
    const login = { email: 'ann@example.com', password: 'the first long password' };
    const ofAnn = ['--account', svc.accountId, '--email', login.email];
    const usersListed = async () => {
      const account = (await (
        await fetch(`${svc.url}/v2.2/account.json`, { headers: { authorization: svc.auth } })
      ).json()) as { users: Record<string, unknown> };
      return Object.keys(account.users);
    };

    const listed = user(['add', ...ofAnn]);
    assert.equal(listed.status, 0, listed.stderr);
    assert.match(listed.stdout, /added .*no password: cannot sign in/);
    const again = user(['add', ...ofAnn]);
    assert.equal(again.status, 1, 'a user the account has already');
    assert.doesNotMatch(again.stdout, /added/);
    assert.match(again.stderr, /ann@example\.com is a user of .* already/);

    // A listed user is given a password once; a second one is refused and changes nothing.
    const given = user(['add', ...ofAnn, '--password-stdin'], `${login.password}\n`);
    assert.equal(given.status, 0, given.stderr);
    assert.match(given.stdout, /given a password: can sign in/);
    const twice = user(['add', ...ofAnn, '--password-stdin'], 'another long password\n');
    assert.equal(twice.status, 1);
    assert.doesNotMatch(twice.stdout, /added|given/);
    assert.match(twice.stderr, /already .*reset-password/);
    const client = await signIn(svc.url, login);
    assert.equal((await client.get('/console')).status, 200, 'the first password still works');
    assert.deepEqual(await usersListed(), [login.email]);

    const removed = user(['remove', ...ofAnn]);
    assert.equal(removed.status, 0, removed.stderr);
    assert.match(removed.stdout, /ann@example\.com removed from/);
    assert.equal((await client.get('/console')).status, 303, 'their session is ended');
    const refused = await fetch(`${svc.url}/console/sign-in`, {
      method: 'POST',
      body: new URLSearchParams(login),
      redirect: 'manual',
    });
    assert.equal(refused.status, 401, 'they cannot sign in');
    assert.deepEqual(await usersListed(), [], 'nor are they listed in the account');
    const gone = user(['remove', ...ofAnn]);
    assert.equal(gone.status, 1);
    assert.match(gone.stderr, /has no user ann@example\.com/);
  });
});
