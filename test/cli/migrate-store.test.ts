import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { assayCli, startServe } from '../helpers/cli.js';
import { pollResult, traceOf, waitUntil } from '../helpers/client.js';
import { uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';
import { freshPostgresDatabase, onPostgres } from '../helpers/test-database.js';

const clamd = useSharedClamd();
const AUTH = basic('key', 'secret');

describe('assay admin migrate-store', { skip: onPostgres ? 'its source is SQLite' : false }, () => {
  test('copies an embedded deployment into PostgreSQL, where it goes on; refuses a non-empty target unless --force', async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    let answering = false;
    // A remote that does not answer until the move: the fetch job is pending when it happens.
    const remote = await startLocalServer((_request, response) => {
      if (answering) response.end('fetched after the move');
    });
    t.after(() => remote.close());
    // A receiver that fails until the move: the callback is still to deliver.
    const receiver = await startLocalServer((_request, response) => {
      response.writeHead(answering ? 200 : 500);
      response.end();
    });
    t.after(() => receiver.close());
    const env = {
      ASSAY_DATA_DIR: dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_CALLBACK_RETRY_BASE_MS: '500',
      ASSAY_SHUTDOWN_GRACE: '0',
    };
    const embedded = await startServe(t, env);
    const made = await fetch(`${embedded.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: AUTH },
    });
    const token = basic(((await made.json()) as { id: string }).id, '');
    const synced = await fetch(`${embedded.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: AUTH },
      body: uploadForm('a result from before the move', { callback: `${receiver.url}/hook` }),
    });
    assert.equal(synced.status, 201);
    const result = (await synced.json()) as { id: string };
    await receiver.waitFor(1);
    const fetching = await fetch(`${embedded.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: AUTH },
      body: new URLSearchParams({ location: `${remote.url}/content` }),
    });
    assert.equal(fetching.status, 202);
    const pending = (await fetching.json()) as { id: string };
    await remote.waitFor(1);
    const traceBefore = await traceOf(embedded.url, AUTH, result.id);
    embedded.child.kill('SIGTERM');
    await once(embedded.child, 'exit');

    const target = await freshPostgresDatabase();
    const moved = assayCli(dataDir, ['admin', 'migrate-store', '--to', target]);
    assert.equal(moved.status, 0, moved.stderr);
    assert.match(moved.stdout, /^accounts: 1 copied$/m);
    assert.match(moved.stdout, /^tokens: 1 copied$/m);
    assert.match(moved.stdout, /^files: 1 copied$/m);
    assert.match(moved.stdout, /^jobs: 1 copied$/m);
    assert.match(moved.stdout, /^callback_deliveries: 1 copied$/m);
    assert.match(moved.stderr, /files .*1\/1 \(100%\)/, 'progress is shown');

    const again = assayCli(dataDir, ['admin', 'migrate-store', '--to', target]);
    assert.notEqual(again.status, 0);
    assert.match(again.stderr, /holds data already: nothing was copied/);
    const forced = assayCli(dataDir, ['admin', 'migrate-store', '--to', target, '--force']);
    assert.equal(forced.status, 0, forced.stderr);
    assert.match(forced.stdout, /^files: 0 copied, 1 kept as they were$/m);

    answering = true;
    const moved2 = await startServe(t, { ...env, ASSAY_DATABASE_URL: target });
    assert.equal(
      (await fetch(`${moved2.url}/v2.2/ping`, { headers: { authorization: token } })).status,
      200,
      'the token works',
    );
    const read = await fetch(`${moved2.url}/v2.2/files/${result.id}`, {
      headers: { authorization: AUTH },
    });
    assert.equal(read.status, 200);
    assert.deepEqual(((await read.json()) as { findings: string[] }).findings, []);
    const traceAfter = await traceOf(moved2.url, AUTH, result.id);
    assert.deepEqual(traceAfter.slice(0, traceBefore.length), traceBefore, 'the trace, in order');
    for (const message of traceBefore) {
      assert.equal(traceAfter.filter((m) => m === message).length, 1, `once: ${message}`);
    }
    const finished = await pollResult(moved2.url, AUTH, pending.id, 30_000);
    assert.deepEqual(finished.findings, [], 'the pending job is finished on PostgreSQL');
    await waitUntil(
      'the callback delivered from PostgreSQL',
      () => receiver.requests.length >= 2,
      20_000,
    );
  });
});
