import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { AccountService } from '../../src/accounts/account-service.js';
import { BucketSourceService } from '../../src/buckets/bucket-source-service.js';
import { NodeHeartbeat } from '../../src/processing/node-heartbeat.js';
import { assayCli, startServe } from '../helpers/cli.js';
import { waitUntil } from '../helpers/client.js';
import { addConsoleUser, type ConsoleClient, mainText, signIn } from '../helpers/console.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import {
  buildService,
  credentialsRefreshed,
  quietLogger,
  tempDir,
  useSharedClamd,
} from '../helpers/service.js';
import { TEST_STORE } from '../helpers/test-database.js';

const clamd = useSharedClamd();

async function textOf(answer: Response): Promise<string> {
  return mainText(await answer.text());
}

/** Every account id the list shows, following its "Next page" links from `path`. */
async function walkAccounts(client: ConsoleClient, path: string): Promise<string[]> {
  const ids: string[] = [];
  let next: string | null = path;
  for (let pages = 0; next !== null && pages < 20; pages++) {
    const answer = await client.get(next);
    assert.equal(answer.status, 200, next);
    const page = await answer.text();
    ids.push(
      ...[...page.matchAll(/<span class="mono id">([0-9a-f]{32})<\/span>/g)].map((m) => m[1] ?? ''),
    );
    const link = /<a href="([^"]+)" rel="next">/.exec(page)?.[1];
    next = link === undefined ? null : link.replaceAll('&amp;', '&');
  }
  return ids;
}

describe(`the console's operator pages (${TEST_STORE})`, () => {
  test('are not there for an account user, whose actions on them are refused too', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const other = await svc.createAccountKey();
    const user = await signIn(svc.url, await addConsoleUser(svc.store, svc.accountId));
    for (const path of [
      '/console/accounts',
      '/console/operations',
      `/console/accounts/${other.accountId}`,
      `/console/accounts/${svc.accountId}`,
    ]) {
      assert.equal((await user.get(path)).status, 404, path);
    }
    for (const action of ['disable', 'enable', 'balance']) {
      const answer = await user.post(`/console/accounts/${other.accountId}/${action}`, {
        balance: '5',
      });
      assert.equal(answer.status, 404, action);
    }
    const after = await svc.store.accounts.find(other.accountId);
    assert.equal(after?.active, true);
    assert.equal(after?.balance, 0);
    // The navigation does not offer them either.
    assert.doesNotMatch(await (await user.get('/console')).text(), /\/console\/operations/);

    // Without a session: sent to sign in, or refused.
    const anonymous = await fetch(`${svc.url}/console/operations`, { redirect: 'manual' });
    assert.equal(anonymous.status, 303);
    const post = await fetch(`${svc.url}/console/accounts/${other.accountId}/disable`, {
      method: 'POST',
      body: new URLSearchParams({ csrf: user.csrf }),
      redirect: 'manual',
    });
    assert.equal(post.status, 401);
  });

  test('an operator disables and enables an account (the API follows) and sets an enforced balance', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const other = await svc.createAccountKey();
    const operator = await signIn(
      svc.url,
      await addConsoleUser(svc.store, svc.accountId, { operator: true }),
    );
    const list = await textOf(await operator.get('/console/accounts'));
    assert.ok(list.includes(svc.accountId) && list.includes(other.accountId), list);
    const ping = async () =>
      (await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: other.auth } })).status;
    assert.equal(await ping(), 200);

    const forged = await operator.post(`/console/accounts/${other.accountId}/disable`, {}, null);
    assert.equal(forged.status, 403, 'no CSRF token: refused');
    const wrong = await operator.post(`/console/accounts/${other.accountId}/disable`, {}, 'x');
    assert.equal(wrong.status, 403, 'a wrong CSRF token: refused');
    assert.equal((await svc.store.accounts.find(other.accountId))?.active, true);

    const disabled = await operator.post(`/console/accounts/${other.accountId}/disable`);
    assert.equal(disabled.status, 303);
    assert.equal(
      disabled.headers.get('location'),
      `/console/accounts/${other.accountId}?done=disabled`,
    );
    await credentialsRefreshed(svc);
    assert.equal(await ping(), 401, 'the API refuses a disabled account');
    const shown = await textOf(await operator.get(disabled.headers.get('location') ?? ''));
    assert.match(shown, /The account is disabled/);
    assert.match(shown, /Enable the account/);

    assert.equal((await operator.post(`/console/accounts/${other.accountId}/enable`)).status, 303);
    await credentialsRefreshed(svc);
    assert.equal(await ping(), 200, 'enabled again');

    // An operator cannot lock themselves out.
    const own = await operator.post(`/console/accounts/${svc.accountId}/disable`);
    assert.equal(own.status, 400);
    assert.equal((await svc.store.accounts.find(svc.accountId))?.active, true);

    for (const balance of ['-1', '1.5', 'x', '10000000000000', '']) {
      const refused = await operator.post(`/console/accounts/${other.accountId}/balance`, {
        balance,
      });
      assert.equal(refused.status, 400, `balance ${balance}`);
    }
    const unknown = await operator.post(
      '/console/accounts/00000000000000000000000000000000/balance',
      {
        balance: '1',
      },
    );
    assert.equal(unknown.status, 404);

    const set = await operator.post(`/console/accounts/${other.accountId}/balance`, {
      balance: '1',
      enforce: 'on',
    });
    assert.equal(set.status, 303);
    await credentialsRefreshed(svc);
    const account = (await (
      await fetch(`${svc.url}/v2.2/account.json`, { headers: { authorization: other.auth } })
    ).json()) as { balance: number };
    assert.equal(account.balance, 1, 'the account resource shows the new balance');
    const upload = async () =>
      (
        await fetch(`${svc.url}/v2.2/files`, {
          method: 'POST',
          headers: { authorization: other.auth },
          body: uploadForm(randomContent(100)),
        })
      ).status;
    assert.equal(await upload(), 201, 'the last credit');
    await credentialsRefreshed(svc);
    assert.equal(await upload(), 403, 'the balance is spent and enforced');
    const detail = await textOf(await operator.get(`/console/accounts/${other.accountId}`));
    assert.match(detail, /Balance None left: items are refused until the balance is raised/);

    // Not enforced any more: items are processed whatever the balance.
    const loose = await operator.post(`/console/accounts/${other.accountId}/balance`, {
      balance: '0',
    });
    assert.equal(loose.status, 303);
    await credentialsRefreshed(svc);
    assert.equal(await upload(), 201);
  });

  test('accounts are listed a page at a time in the store, and found by name or id', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const accounts = new AccountService(svc.store);
    const made: string[] = [svc.accountId];
    for (let i = 0; i < 57; i++) {
      const name = `Zeta ${String(i).padStart(3, '0')}`;
      made.push((await accounts.createAccount({ name })).id);
    }
    const odd = await accounts.createAccount({ name: '100% pure_x <b>bold</b>' });
    made.push(odd.id);
    const operator = await signIn(
      svc.url,
      await addConsoleUser(svc.store, svc.accountId, { operator: true }),
    );

    const first = await operator.get('/console/accounts');
    const firstPage = await first.text();
    assert.equal([...firstPage.matchAll(/<span class="mono id">/g)].length, 50, 'a page of 50');
    assert.ok(firstPage.includes('100% pure_x &lt;b&gt;bold&lt;/b&gt;'), 'names are escaped');
    const all = await walkAccounts(operator, '/console/accounts');
    assert.equal(all.length, made.length, 'every account, once');
    assert.deepEqual(new Set(all), new Set(made));

    const found = async (search: string) =>
      walkAccounts(operator, `/console/accounts?q=${encodeURIComponent(search)}`);
    assert.equal((await found('zeta 05')).length, 7, 'by name, in any case');
    assert.deepEqual(await found('%'), [odd.id], 'LIKE wildcards are matched literally');
    assert.deepEqual(await found('_'), [odd.id]);
    assert.deepEqual(await found('\\'), []);
    assert.ok((await found(odd.id.slice(0, 10))).includes(odd.id), 'by the start of an id');
    assert.deepEqual(await found('no such account'), []);
    assert.match(
      await textOf(await operator.get('/console/accounts?q=nothing')),
      /No account matches/,
    );

    // Search within pages: 57 Zetas are two pages.
    const zetas = await found('zeta');
    assert.equal(zetas.length, 57);
    assert.equal(new Set(zetas).size, 57);

    for (const bad of [
      `/console/accounts?q=${'x'.repeat(101)}`,
      '/console/accounts?after=..%2Fx',
      '/console/accounts?q=a&q=b',
    ]) {
      assert.equal((await operator.get(bad)).status, 400, bad);
    }
    // A cursor whose account is gone starts over.
    const restarted = await operator.get('/console/accounts?after=gone');
    assert.equal(restarted.status, 200);
  });

  test('the operations page shows each node with its versions, the queue and recent errors', async (t) => {
    // An api node runs no jobs: what it accepts waits in the queue.
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_ROLE: 'api' });
    const operator = await signIn(
      svc.url,
      await addConsoleUser(svc.store, svc.accountId, { operator: true }),
    );
    const ready = (await (await fetch(`${svc.url}/health/ready`)).json()) as {
      engines: Array<{
        version: string;
        databases_version: string;
        own_signatures_version: string;
      }>;
    };
    const engine = ready.engines[0];
    assert.ok(engine !== undefined);
    const queued = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(randomContent(100)),
    });
    assert.equal(queued.status, 202);

    // Another node: its clamd loaded other databases; one more stopped answering long ago.
    const now = Date.now();
    const otherNode = {
      id: 'othernode0000001',
      host: 'worker-7.example',
      pid: 4242,
      role: 'worker',
      version: '0.1.0',
      clamdVersion: 'ClamAV 1.0.0',
      signaturesVersion: 27000,
      signaturesDate: new Date(now - 3 * 86_400_000).toISOString(),
      ownSignaturesVersion: engine.own_signatures_version,
      databasesVersion: 'sha256:00000000deadbeef',
      runningJobs: 3,
      startedAt: now - 3_600_000,
      lastSeenAt: now - 2_000,
    };
    await svc.store.nodeHeartbeats.write(otherNode);
    await svc.store.nodeHeartbeats.write({
      ...otherNode,
      id: 'stalenode0000001',
      host: 'gone.example',
      lastSeenAt: now - 5 * 60_000,
    });
    await svc.store.nodeHeartbeats.write({
      ...otherNode,
      id: 'ancientnode00001',
      host: 'ancient.example',
      lastSeenAt: now - 2 * 86_400_000,
    });

    // A result that ended in an error, a callback that failed: with markup in them.
    await svc.store.files.insert({
      id: 'e'.repeat(32),
      accountId: svc.accountId,
      apiKeyId: svc.keyId,
      checksum: null,
      sha256: null,
      contentLength: null,
      contentType: null,
      findings: null,
      metadata: {},
      callback: null,
      error: 'download failed: <script>alert(1)</script>',
      creationDate: new Date().toISOString(),
    });
    await svc.store.callbacks.enqueue({
      id: 'c'.repeat(32),
      fileId: 'e'.repeat(32),
      accountId: svc.accountId,
      url: 'https://hooks.example/x',
      destination: 'https://hooks.example:443',
      method: 'POST',
      body: '{}',
      contentType: 'application/json',
      state: 'failed',
      attempts: 5,
      nextAttemptAt: new Date().toISOString(),
      lastError: 'connect ECONNREFUSED',
      creationDate: new Date().toISOString(),
      finishedDate: new Date().toISOString(),
    });

    // A watched bucket, fed by a webhook, with one object scanned clean.
    const { source } = await new BucketSourceService(svc.store).add({
      name: 'uploads',
      keyId: svc.keyId,
      bucket: 'user-uploads',
      prefix: 'incoming/',
      webhook: true,
    });
    await svc.store.bucketObjects.startScan(
      {
        sourceId: source.id,
        key: 'incoming/a.txt',
        etag: 'e1',
        versionId: null,
        size: 1,
        signatures: null,
      },
      'f'.repeat(32),
      new Date().toISOString(),
    );
    await svc.store.bucketObjects.recordVerdict(
      { sourceId: source.id, key: 'incoming/a.txt' },
      'f'.repeat(32),
      { status: 'NO_THREATS_FOUND', scannedAt: new Date().toISOString() },
      Date.now(),
    );

    const answer = await operator.get('/console/operations');
    assert.equal(answer.status, 200);
    const page = await answer.text();
    const text = mainText(page);
    assert.match(text, /Queue 1 due, the oldest waiting \d+ s; 0 running/);
    assert.match(text, /Callbacks 0 pending/);
    assert.match(text, /Nodes 2 live, 1 stale/);
    assert.match(text, /this page/);
    assert.ok(text.includes(engine.version), 'clamd version of this node');
    assert.ok(text.includes(engine.databases_version), 'its loaded databases');
    assert.ok(text.includes(engine.own_signatures_version));
    assert.match(
      text,
      /worker-7\.example · pid 4242 worker · Assay 0\.1\.0 live seen \d+ s ago up 60 min ClamAV 1\.0\.0/,
    );
    assert.match(text, /daily 27000, 3 d old/);
    assert.match(text, /sha256:00000000deadbeef differs/);
    assert.match(text, /Live nodes have loaded different signature databases/);
    assert.match(text, /gone\.example · pid 4242 worker · Assay 0\.1\.0 stale seen 5 min ago/);
    assert.doesNotMatch(text, /ancient\.example/, 'seen over a day ago: not listed');
    assert.match(text, /none \(api\)/, 'this node runs no jobs');
    assert.ok(page.includes('download failed: &lt;script&gt;'), 'errors are escaped');
    assert.doesNotMatch(page, /<script>alert/);
    assert.match(text, /connect ECONNREFUSED/);
    assert.match(text, /given up 5 attempts connect ECONNREFUSED/);
    assert.match(
      text,
      /Watched buckets .*uploads s3:\/\/user-uploads\/incoming\/ on threat: tag webhook idle 0 objects NO_THREATS_FOUND 1/,
    );

    // A heartbeat removes rows not seen for a day, and one that stops removes its own.
    const heartbeat = new NodeHeartbeat(
      svc.store,
      { role: 'worker', version: 'test', ownSignaturesVersion: 'x' },
      {
        clamd: () => Promise.reject(new Error('down')),
        databasesVersion: () => Promise.reject(new Error('loading')),
        runningJobs: () => 0,
      },
      quietLogger,
    );
    await heartbeat.start();
    const nodes = await svc.store.nodeHeartbeats.seenSince(0, 100);
    assert.deepEqual(
      nodes.map((n) => n.host).filter((h) => h.endsWith('.example')),
      ['worker-7.example', 'gone.example'],
    );
    const mine = nodes.find((n) => n.id === heartbeat.id);
    assert.equal(mine?.clamdVersion, null, 'a clamd that does not answer: written without');
    assert.match(
      await textOf(await operator.get('/console/operations')),
      /not answering/,
      'shown as such',
    );
    await heartbeat.stop();
    assert.equal(
      (await svc.store.nodeHeartbeats.seenSince(0, 100)).some((n) => n.id === heartbeat.id),
      false,
    );
  });

  test('serve --processes 2: the operations page lists both processes', async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const serve = await startServe(
      t,
      { ASSAY_DATA_DIR: dataDir, ASSAY_CLAMD_DATABASE_DIR: 'none' },
      [],
      ['--processes', '2', '--role', 'all'],
    );
    const created = assayCli(dataDir, ['admin', 'account', 'create', '--name', 'Operators']);
    assert.equal(created.status, 0, created.stderr);
    const accountId = created.stdout;
    const login = { email: 'ops@example.com', password: 'a long enough password' };
    const added = assayCli(
      dataDir,
      [
        'admin',
        'user',
        'add',
        '--account',
        accountId,
        '--email',
        login.email,
        '--operator',
        '--password-stdin',
      ],
      `${login.password}\n`,
    );
    assert.equal(added.status, 0, added.stderr);
    const operator = await signIn(serve.url, login);
    const children = () =>
      serve.records.filter((r) => r.msg === 'process serving').map((r) => r.pid as number);
    await waitUntil('both processes serve', () => children().length === 2, 30_000);
    let text = '';
    await waitUntil(
      'the page lists two live nodes',
      async () => {
        text = await textOf(await operator.get('/console/operations'));
        return /Nodes 2 live/.test(text);
      },
      15_000,
    );
    for (const pid of children())
      assert.match(text, new RegExp(`· pid ${pid}( this page)? (all|api) · Assay \\S+ live`));
    assert.doesNotMatch(text, new RegExp(`pid ${serve.child.pid} `), 'the primary serves nothing');
    assert.match(text, /sha256:[0-9a-f]{16}/, 'the databases both children see');
    assert.doesNotMatch(text, /differs/);
  });
});
