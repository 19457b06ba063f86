import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  BucketSourceError,
  BucketSourceService,
  webhookTokenHash,
} from '../../src/buckets/bucket-source-service.js';
import { addAccount, openTestStore } from '../helpers/store-fixture.js';

describe('bucket sources', () => {
  test('a source takes its account from its key; settings S3 would refuse are refused first', async (t) => {
    const { store } = await openTestStore(t);
    await addAccount(store, 'acme');
    const sources = new BucketSourceService(store);
    const base = { name: 'uploads', keyId: 'key-acme', bucket: 'user-uploads' };
    const refusals: Array<[Record<string, unknown>, RegExp]> = [
      [{ bucket: 'b1' }, /not an S3 bucket name/],
      [{ bucket: 'Upper' }, /not an S3 bucket name/],
      [{ name: '-x' }, /the name takes/],
      [{ keyId: 'nope' }, /no API key has the id nope/],
      [{ onThreat: 'quarantine' }, /needs --quarantine/],
      [{ onThreat: 'burn' }, /--on-threat takes tag, quarantine, delete/],
      [{ quarantine: 'user-uploads' }, /must not be inside the watched bucket/],
      [{ quarantine: 'user-uploads/q', prefix: 'q' }, /must not be inside the watched bucket/],
      [{ quarantine: 'no' }, /valid bucket name/],
      [{ credentials: 'env:lower' }, /credentials are/],
      [{ credentials: 'AKIAEXAMPLE:secret' }, /credentials are/],
      [{ endpoint: 'not a url' }, /not a URL/],
      [{ endpoint: 'file:///etc' }, /http:\/\/ or https:\/\//],
      [{ queueUrl: 'ftp://x' }, /not an http/],
      [{ callback: 'javascript:alert(1)' }, /not an http/],
      [{ region: 'EU WEST' }, /not a region/],
    ];
    for (const [change, reason] of refusals) {
      await assert.rejects(
        sources.add({ ...base, ...change } as Parameters<BucketSourceService['add']>[0]),
        (error: unknown) => error instanceof BucketSourceError && reason.test(error.message),
        JSON.stringify(change),
      );
    }
    assert.deepEqual(await sources.list(), [], 'nothing was added');

    const { source, webhookToken } = await sources.add({
      ...base,
      prefix: 'in/',
      quarantine: 'user-uploads/quarantine',
      webhook: true,
    });
    assert.equal(source.accountId, 'acme');
    assert.equal(source.webhookTokenHash, webhookTokenHash(webhookToken ?? ''));
    await assert.rejects(sources.add(base), /exists already/);

    await store.apiKeys.setActive('key-acme', false);
    await assert.rejects(sources.update('uploads', { keyId: 'key-acme' }), /is disabled/);
    const { webhookToken: next } = await sources.update('uploads', { webhook: true });
    assert.notEqual(next, webhookToken, 'a new token replaces the old one');
    assert.equal((await sources.named('uploads')).webhookTokenHash, webhookTokenHash(next ?? ''));
  });

  test('removing an account stops watching its buckets', async (t) => {
    const { store } = await openTestStore(t);
    await addAccount(store, 'acme');
    const sources = new BucketSourceService(store);
    await sources.add({ name: 'uploads', keyId: 'key-acme', bucket: 'user-uploads' });
    await store.transaction((trx) => trx.accounts.erase('acme'));
    assert.deepEqual(await sources.list(), []);
  });
});
