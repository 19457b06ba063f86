import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { assayCli } from '../helpers/cli.js';
import {
  basic,
  buildService,
  credentialsRefreshed,
  tempDir,
  useSharedClamd,
} from '../helpers/service.js';
import { prepareStore } from '../helpers/test-database.js';

/** Runs the real CLI (`assay admin …`) on a data dir, as an operator would. */
const assay = (dataDir: string, ...args: string[]) => assayCli(dataDir, args);

const clamd = useSharedClamd();

describe('assay admin', () => {
  test('creates an account and a key whose secret works once printed; disable gives 401 and ends its tokens', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const account = assay(
      svc.dataDir,
      'admin',
      'account',
      'create',
      '--name',
      'Example Ltd',
      '--json',
    );
    assert.equal(account.status, 0, account.stderr);
    const accountId = JSON.parse(account.stdout).id as string;
    assert.match(accountId, /^[0-9a-f]{32}$/);

    const shown = assay(svc.dataDir, 'admin', 'account', 'show', accountId, '--json');
    assert.equal(shown.status, 0, shown.stderr);
    assert.match(JSON.parse(shown.stdout).callbackSecret, /^[0-9a-f]{64}$/);
    const listedAccounts = assay(svc.dataDir, 'admin', 'account', 'list', '--json');
    assert.doesNotMatch(listedAccounts.stdout, /callbackSecret/);

    const created = assay(svc.dataDir, 'admin', 'key', 'create', '--account', accountId, '--json');
    assert.equal(created.status, 0, created.stderr);
    const { key, secret } = JSON.parse(created.stdout) as { key: string; secret: string };
    assert.match(key, /^[0-9a-f]{32}$/);
    assert.ok(secret.length >= 22, 'at least 128 bits');

    const ping = await fetch(`${svc.url}/v2.2/ping`, {
      headers: { authorization: basic(key, secret) },
    });
    assert.deepEqual(await ping.json(), { message: 'pong', key });

    const listed = assay(svc.dataDir, 'admin', 'key', 'list', '--account', accountId, '--json');
    assert.equal(listed.status, 0);
    assert.doesNotMatch(listed.stdout, new RegExp(secret.replace(/[-]/g, '\\-')));
    assert.doesNotMatch(listed.stdout, /secret/i);
    const keys = JSON.parse(listed.stdout) as Array<{ id: string; active: boolean }>;
    assert.deepEqual(
      keys.map((k) => [k.id, k.active]),
      [[key, true]],
    );

    const made = await fetch(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: basic(key, secret) },
    });
    assert.equal(made.status, 201);
    const token = ((await made.json()) as { id: string }).id;
    const withToken = () =>
      fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: basic(token, '') } });
    assert.equal((await withToken()).status, 200);

    const disabled = assay(svc.dataDir, 'admin', 'key', 'disable', key);
    assert.equal(disabled.status, 0);
    assert.match(disabled.stdout, /1 of its tokens ended/);
    // The CLI is another process: the service sees its change once its credentials refresh.
    await credentialsRefreshed(svc);
    const refused = await fetch(`${svc.url}/v2.2/ping`, {
      headers: { authorization: basic(key, secret) },
    });
    assert.equal(refused.status, 401);
    assert.equal((await withToken()).status, 401);

    assert.equal(assay(svc.dataDir, 'admin', 'key', 'enable', key).status, 0);
    await credentialsRefreshed(svc);
    const again = await fetch(`${svc.url}/v2.2/ping`, {
      headers: { authorization: basic(key, secret) },
    });
    assert.equal(again.status, 200);
    assert.equal((await withToken()).status, 401, 'enabling the key does not revive its tokens');
  });

  test('account update, user add, key categories and tags, token list and revoke', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const ok = (...args: string[]) => {
      const result = assay(svc.dataDir, 'admin', ...args);
      assert.equal(result.status, 0, `${args.join(' ')}: ${result.stderr}`);
      return result.stdout;
    };
    ok(
      'account',
      'update',
      svc.accountId,
      '--name',
      'Renamed',
      '--billing-email',
      'bill@example.com',
      '--subscription',
      'pro',
      '--balance',
      '7',
      '--enforce-balance',
    );
    ok('user', 'add', '--account', svc.accountId, '--email', 'ops@example.com');
    const { key } = JSON.parse(
      ok(
        'key',
        'create',
        '--account',
        svc.accountId,
        '--category',
        'malware',
        '--tag',
        'ci',
        '--json',
      ),
    ) as { key: string };
    ok(
      'key',
      'update',
      svc.keyId,
      '--tag',
      'a',
      '--tag',
      'b',
      '--category',
      'MALWARE',
      '--category',
      'NSFW_IMAGE',
    );

    const account = (await (
      await fetch(`${svc.url}/v2.2/account.json`, { headers: { authorization: svc.auth } })
    ).json()) as {
      name: string;
      billing_email: string;
      subscription: string;
      balance: number;
      users: Record<string, unknown>;
      keys: Record<string, { tags: string[]; detection_categories_enabled: string[] }>;
    };
    assert.equal(account.name, 'Renamed');
    assert.equal(account.billing_email, 'bill@example.com');
    assert.equal(account.subscription, 'pro');
    assert.equal(account.balance, 7);
    assert.deepEqual(Object.keys(account.users), ['ops@example.com']);
    assert.deepEqual(account.keys[svc.keyId]?.tags, ['a', 'b']);
    assert.deepEqual(account.keys[svc.keyId]?.detection_categories_enabled, [
      'MALWARE',
      'NSFW_IMAGE',
    ]);
    assert.deepEqual(account.keys[key]?.detection_categories_enabled, ['MALWARE']);
    assert.deepEqual(account.keys[key]?.tags, ['ci']);

    const created = await fetch(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: svc.auth },
    });
    const { id: tokenId } = (await created.json()) as { id: string };
    const listed = JSON.parse(ok('token', 'list', '--account', svc.accountId, '--json')) as Array<{
      id: string;
    }>;
    assert.deepEqual(
      listed.map((token) => token.id),
      [tokenId],
    );
    ok('token', 'revoke', tokenId);
    await credentialsRefreshed(svc);
    const refused = await fetch(`${svc.url}/v2.2/ping`, {
      headers: { authorization: basic(tokenId, '') },
    });
    assert.equal(refused.status, 401);
    const unknown = assay(
      svc.dataDir,
      'admin',
      'key',
      'create',
      '--account',
      svc.accountId,
      '--category',
      'NOPE',
    );
    assert.notEqual(unknown.status, 0);
    assert.match(unknown.stderr, /unknown category/);
  });

  test("key update sets the key's own rate limit, seen in the headers; default restores it", async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_RATE_BURST: '50' });
    const limitHeader = async () =>
      (await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: svc.auth } })).headers.get(
        'x-ratelimit-limit',
      );
    assert.equal(await limitHeader(), '50');
    const set = assay(svc.dataDir, 'admin', 'key', 'update', svc.keyId, '--rate-limit', '2.5');
    assert.equal(set.status, 0, set.stderr);
    await credentialsRefreshed(svc);
    assert.equal(await limitHeader(), '5', 'burst defaults to twice the rate');
    const listed = assay(svc.dataDir, 'admin', 'key', 'list');
    assert.match(listed.stdout, /rate=2\.5\/s burst 5/);
    assert.equal(
      assay(
        svc.dataDir,
        'admin',
        'key',
        'update',
        svc.keyId,
        '--rate-limit',
        '1',
        '--rate-burst',
        '7',
      ).status,
      0,
    );
    await credentialsRefreshed(svc);
    assert.equal(await limitHeader(), '7');
    assert.equal(
      assay(svc.dataDir, 'admin', 'key', 'update', svc.keyId, '--default-rate-limit').status,
      0,
    );
    await credentialsRefreshed(svc);
    assert.equal(await limitHeader(), '50');

    for (const [args, message] of [
      [['--rate-limit', 'fast'], /number >= 0/],
      [['--rate-limit', '1', '--rate-burst', '0'], /whole number >= 1/],
      [['--rate-burst', '3'], /needs --rate-limit/],
    ] as const) {
      const refused = assay(svc.dataDir, 'admin', 'key', 'update', svc.keyId, ...args);
      assert.notEqual(refused.status, 0, args.join(' '));
      assert.match(refused.stderr, message);
    }
  });

  test('clear errors for unknown accounts and keys', async () => {
    const dataDir = tempDir();
    try {
      await prepareStore(dataDir);
      const noAccount = assay(dataDir, 'admin', 'key', 'create', '--account', 'f'.repeat(32));
      assert.equal(noAccount.status, 1);
      assert.match(noAccount.stderr, /no account/);
      const noKey = assay(dataDir, 'admin', 'key', 'disable', 'f'.repeat(32));
      assert.equal(noKey.status, 1);
      assert.match(noKey.stderr, /no API key/);
      const missingName = assay(dataDir, 'admin', 'account', 'create');
      assert.notEqual(missingName.status, 0);
      assert.match(missingName.stderr, /--name/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
