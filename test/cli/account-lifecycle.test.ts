import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { assayCli } from '../helpers/cli.js';
import { pollResult, submitFetch, waitUntil } from '../helpers/client.js';
import { uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import {
  basic,
  buildService,
  credentialsRefreshed,
  spoolOf,
  type TestService,
  useSharedClamd,
} from '../helpers/service.js';

const clamd = useSharedClamd();

async function upload(svc: TestService, auth: string, path: string, content: string) {
  const response = await fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(content),
  });
  return { status: response.status, id: ((await response.json()) as { id: string }).id };
}

const ping = (svc: TestService, auth: string) =>
  fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: auth } }).then((r) => r.status);

describe('assay admin account disable, enable and delete', () => {
  test('disable refuses every key and token at once and keeps the data; delete erases it all', async (t) => {
    // An api process runs no job: its fetch and async upload stay pending (the upload's content in
    // the spool), beside a job another process is scanning (claimed in the store, its lease long).
    const hanging = await startLocalServer(() => undefined);
    t.after(() => hanging.close());
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_ROLE: 'api',
      // Through a spool file (small content would be kept in its job), which erasing removes.
      ASSAY_ASYNC_INLINE_BYTES: '0',
    });
    const now = new Date().toISOString();
    const elsewhere = randomBytes(16).toString('hex');
    await svc.store.jobs.insert({
      id: elsewhere,
      accountId: svc.accountId,
      apiKeyId: svc.keyId,
      apiVersion: 'v2.2',
      kind: 'upload',
      state: 'pending',
      location: null,
      spoolKey: null,
      metadata: {},
      callback: null,
      attempts: 0,
      runAfter: now,
      creationDate: now,
    });
    assert.ok(
      await svc.store.jobs.claim(elsewhere, now, new Date(Date.now() + 3_600_000).toISOString()),
    );
    const other = await svc.createAccountKey();
    const made = await fetch(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: svc.auth },
    });
    const token = basic(((await made.json()) as { id: string }).id, '');
    const result = await upload(svc, svc.auth, '/v2.2/files', 'a result of the account');
    assert.equal(result.status, 201);
    const otherResult = await upload(svc, other.auth, '/v2.2/files', "another account's result");
    const fetching = await fetch(`${svc.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: new URLSearchParams({ location: `${hanging.url}/never` }),
    });
    assert.equal(fetching.status, 202);
    const pending = await upload(svc, svc.auth, '/v2.2/files/async', 'waiting in the spool');
    assert.equal(pending.status, 202);
    assert.equal(readdirSync(join(svc.dataDir, 'spool')).length, 1);

    const disabled = assayCli(svc.dataDir, ['admin', 'account', 'disable', svc.accountId]);
    assert.equal(disabled.status, 0, disabled.stderr);
    // The CLI is another process: the service sees its change once its credentials refresh.
    await credentialsRefreshed(svc);
    assert.equal(await ping(svc, svc.auth), 401, 'its key');
    assert.equal(await ping(svc, token), 401, 'its token');
    assert.equal(await ping(svc, other.auth), 200, 'other accounts are not touched');
    const shown = assayCli(svc.dataDir, ['admin', 'account', 'show', svc.accountId]);
    assert.match(shown.stdout, /state: +disabled/);

    assert.equal(assayCli(svc.dataDir, ['admin', 'account', 'enable', svc.accountId]).status, 0);
    await credentialsRefreshed(svc);
    assert.equal(await ping(svc, token), 200, 'enabled again, its tokens work again');
    assert.equal((await pollResult(svc.url, svc.auth, result.id)).id, result.id, 'data kept');

    const declined = assayCli(svc.dataDir, ['admin', 'account', 'delete', svc.accountId], 'no\n');
    assert.equal(declined.status, 1);
    assert.match(declined.stdout, /Type yes.*nothing was deleted/s);
    assert.equal(await ping(svc, svc.auth), 200, 'nothing deleted without a yes');

    const deleted = assayCli(svc.dataDir, ['admin', 'account', 'delete', svc.accountId, '--yes']);
    assert.equal(deleted.status, 0, deleted.stderr);
    assert.match(
      deleted.stdout,
      /deleted: 1 keys, 1 tokens, 0 users, 1 results, \d+ trace events, 3 pending jobs, 0 callbacks, 1 spooled files/,
    );
    assert.deepEqual(readdirSync(join(svc.dataDir, 'spool')), [], 'its spooled content is gone');
    await credentialsRefreshed(svc);
    assert.equal(await ping(svc, svc.auth), 401);
    assert.equal(await ping(svc, token), 401);
    const gone = assayCli(svc.dataDir, ['admin', 'account', 'show', svc.accountId]);
    assert.notEqual(gone.status, 0);
    assert.equal(await ping(svc, other.auth), 200);
    assert.equal(
      (await pollResult(svc.url, other.auth, otherResult.id)).id,
      otherResult.id,
      "another account's results stay",
    );
  });
});

describe('a job running when its account is deleted', () => {
  test('a fetch downloading then leaves nothing in the spool and writes nothing', async (t) => {
    let answer: (() => void) | undefined;
    const remote = await startLocalServer(
      (_request, response) =>
        new Promise<void>((resolve) => {
          answer = () => {
            response.end(randomBytes(64 * 1024));
            resolve();
          };
        }),
    );
    t.after(() => remote.close());
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    });
    const id = await submitFetch(svc.url, svc.auth, `${remote.url}/file.bin`);
    await waitUntil('the download started', () => remote.requests.length === 1);
    const deleted = assayCli(svc.dataDir, ['admin', 'account', 'delete', svc.accountId, '--yes']);
    assert.equal(deleted.status, 0, deleted.stderr);
    answer?.(); // the download ends after the account is gone
    await waitUntil(
      'the worker is done with the job',
      async () => {
        const ready = (await (await fetch(`${svc.url}/health/ready`)).json()) as {
          queue: { running: number };
        };
        return ready.queue.running === 0;
      },
      10_000,
    );
    assert.deepEqual(spoolOf(svc.dataDir), [], 'what it downloaded is removed');
    assert.deepEqual(await svc.store.trace.list(id), [], 'no trace line of the erased job');
    assert.equal(await svc.store.jobs.find(id), null);
  });
});
