import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import type { CallbackDelivery, StoredFile } from '../../src/domain/records.js';
import { addConsoleUser, signIn } from '../helpers/console.js';
import { listedIds, nextLink, rowsOf, text } from '../helpers/console-pages.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

describe('the console’s list pages', () => {
  test('pages of 50 in the store: every result and delivery once, in order, filter kept; an error never reads as clean', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const bulk = await svc.createAccountKey();
    const client = await signIn(svc.url, await addConsoleUser(svc.store, bulk.accountId));
    // 120 results, three to a millisecond: the cursor's id tells rows of one instant apart.
    const start = Date.now() - 3_600_000;
    const files: StoredFile[] = Array.from({ length: 120 }, (_, index) => ({
      id: randomBytes(16).toString('hex'),
      accountId: bulk.accountId,
      apiKeyId: bulk.keyId,
      checksum: randomBytes(20).toString('hex'),
      sha256: null,
      contentLength: index,
      contentType: 'text/plain',
      findings: index % 2 === 0 ? ['Bulk.Test-Finding'] : [],
      metadata: {},
      callback: null,
      error: null,
      creationDate: new Date(start + Math.floor(index / 3)).toISOString(),
    }));
    for (const file of files) await svc.store.files.insert(file);
    const newestFirst = (a: { creationDate: string; id: string }, b: typeof a) =>
      a.creationDate === b.creationDate
        ? b.id.localeCompare(a.id, 'en')
        : b.creationDate.localeCompare(a.creationDate, 'en');
    const walk = async (first: string, ids: (page: string) => string[]) => {
      const pages: string[][] = [];
      for (let path: string | null = first; path !== null; ) {
        const { status, page } = await text(client, path);
        assert.equal(status, 200, path);
        pages.push(ids(page));
        path = nextLink(page);
        assert.ok(pages.length <= 5, 'the pages end');
      }
      return pages;
    };

    const pages = await walk('/console/files', listedIds);
    assert.deepEqual(
      pages.map((p) => p.length),
      [50, 50, 20],
    );
    assert.deepEqual(
      pages.flat(),
      [...files].sort(newestFirst).map((file) => file.id),
    );
    const flagged = await walk('/console/files?flagged=1', listedIds);
    assert.deepEqual(
      flagged.map((p) => p.length),
      [50, 10],
      'the next page keeps the filter',
    );
    assert.deepEqual(
      flagged.flat(),
      files
        .filter((file) => file.findings?.length)
        .sort(newestFirst)
        .map((file) => file.id),
    );

    // 60 deliveries, one per result: 20 failed, 20 pending (not due for a day), 20 delivered.
    const states = ['delivered', 'pending', 'failed'] as const;
    const deliveries: CallbackDelivery[] = files.slice(0, 60).map((file, index) => {
      const state = states[index % 3] ?? 'failed';
      return {
        id: randomBytes(16).toString('hex'),
        fileId: file.id,
        accountId: bulk.accountId,
        url: 'http://127.0.0.1:9/hook',
        destination: 'http://127.0.0.1:9',
        method: 'POST',
        body: '{}',
        contentType: 'application/json',
        state,
        attempts: 1,
        nextAttemptAt: new Date(Date.now() + 86_400_000).toISOString(),
        lastError: state === 'delivered' ? null : 'HTTP 503',
        creationDate: file.creationDate,
        finishedDate: state === 'pending' ? null : file.creationDate,
      };
    });
    for (const delivery of deliveries) await svc.store.callbacks.enqueue(delivery);
    const callbackPages = await walk('/console/callbacks', listedIds);
    assert.deepEqual(
      callbackPages.map((p) => p.length),
      [50, 10],
    );
    const inOrder = (['failed', 'pending', 'delivered'] as const).flatMap((state) =>
      deliveries
        .filter((delivery) => delivery.state === state)
        .sort(newestFirst)
        .map((delivery) => delivery.fileId),
    );
    assert.deepEqual(callbackPages.flat(), inOrder);
    assert.equal((await text(client, '/console/callbacks?before=failed~x~y~z')).status, 400);

    // A result without a verdict reads as such, never as clean.
    const failedScan: StoredFile = {
      id: randomBytes(16).toString('hex'),
      accountId: bulk.accountId,
      apiKeyId: bulk.keyId,
      checksum: null,
      sha256: null,
      contentLength: null,
      contentType: null,
      findings: null,
      metadata: {},
      callback: null,
      error: 'the engine could not read it',
      creationDate: new Date(start - 1000).toISOString(),
    };
    await svc.store.files.insert(failedScan);
    const [errorRow] = rowsOf((await text(client, `/console/files?id=${failedScan.id}`)).page);
    assert.match(errorRow ?? '', /no verdict Error: the engine could not read it$/);
    assert.doesNotMatch(errorRow ?? '', /None/);
  });
});
