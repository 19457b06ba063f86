import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { BucketClients } from '../../src/buckets/bucket-clients.js';
import type { BucketIntake } from '../../src/buckets/bucket-intake.js';
import { BucketListings } from '../../src/buckets/bucket-listings.js';
import { BucketSourceService } from '../../src/buckets/bucket-source-service.js';
import { BucketVerdicts } from '../../src/buckets/bucket-verdicts.js';
import { SourcePresence } from '../../src/buckets/source-presence.js';
import type { Store } from '../../src/store/store.js';
import { quietLogger } from '../helpers/service.js';
import { addAccount, openTestStore } from '../helpers/store-fixture.js';

/** `store`, its bucket repositories' calls written to `asked` ('bucketObjects.orphans', ...). */
function observed(store: Store, asked: string[]): Store {
  const watch = <T extends object>(name: string, repository: T): T =>
    new Proxy(repository, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          asked.push(`${name}.${String(property)}`);
          return value.apply(target, args);
        };
      },
    });
  return Object.assign(Object.create(store) as Store, {
    bucketSources: watch('bucketSources', store.bucketSources),
    bucketObjects: watch('bucketObjects', store.bucketObjects),
  });
}

test('a service that watches no bucket asks its store one question a second for them; a source added is seen at the next round', async (t) => {
  const { store } = await openTestStore(t);
  await addAccount(store, 'acme');
  const asked: string[] = [];
  const seen = observed(store, asked);
  const presence = new SourcePresence(seen);
  const clients = new BucketClients(seen, {
    connectTimeoutMs: 1000,
    idleTimeoutMs: 1000,
    maxAttempts: 1,
  });
  t.after(() => clients.close());
  // Never reached: no object is announced (no listing is requested, no orphan exists).
  const intake = {} as BucketIntake;
  const events = { listed() {}, verdictGiven() {}, threatHandled() {}, writeFailed() {} };
  const verdicts = new BucketVerdicts(
    seen,
    presence,
    clients,
    intake,
    { status: 'AssayScanStatus', findings: 'AssayScanFindings', time: 'AssayScanTime' },
    events,
    quietLogger,
    2_000,
  );
  const listings = new BucketListings(
    seen,
    presence,
    clients,
    intake,
    { backlog: 10, pageSize: 10, leaseMs: 2_000 },
    events,
    quietLogger,
  );
  const round = () => Promise.all([verdicts.runOnce(), listings.runOnce()]);

  await round();
  assert.deepEqual(asked, ['bucketSources.any'], 'one round without a source');
  await sleep(1_000);
  await round();
  assert.deepEqual(asked, ['bucketSources.any', 'bucketSources.any'], 'the next second');

  await new BucketSourceService(store).add({
    name: 'uploads',
    keyId: 'key-acme',
    bucket: 'user-uploads',
  });
  asked.length = 0;
  await sleep(1_000);
  await round();
  for (const question of [
    'bucketSources.claimListing',
    'bucketObjects.finishedScans',
    'bucketObjects.takeDueWrites',
    'bucketObjects.orphans',
  ]) {
    assert.ok(asked.includes(question), `${question} in ${asked.join(', ')}`);
  }
});
