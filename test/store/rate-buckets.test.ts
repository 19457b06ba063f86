import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openTestStore } from '../helpers/store-fixture.js';

// The shared token buckets of `--processes` and PostgreSQL (SharedRequestLimits): whatever the
// store, a lease takes what the bucket holds and refuses only an empty bucket.

test('a lease takes from a bucket that is not there yet (a full one) and refuses an empty one', async (t) => {
  const { store } = await openTestStore(t);
  const limit = { rate: 0.001, burst: 6 };
  const now = Date.now();
  assert.deepEqual(await store.rateBuckets.lease('key:a', limit, 4, now), { granted: 4, left: 2 });
  // Fewer than wanted are left: one is taken.
  const second = await store.rateBuckets.lease('key:a', limit, 4, now);
  assert.equal(second.granted, 1);
  assert.ok(Math.abs(second.left - 1) < 1e-6, String(second.left));
  assert.equal((await store.rateBuckets.lease('key:a', limit, 1, now)).granted, 1);
  const refused = await store.rateBuckets.lease('key:a', limit, 1, now);
  assert.equal(refused.granted, 0);
  assert.ok(refused.left < 1, String(refused.left));
  // Another bucket is its own.
  assert.equal((await store.rateBuckets.lease('key:b', limit, 1, now)).granted, 1);
});

test('forgetting full buckets at the same time as leases refuses none of them', async (t) => {
  // Another process's periodic `deleteFull` may run between any two statements of a lease. With
  // a bucket that is full again at once, a lease that inserted the bucket and then updated it
  // found it gone and refused the request (a spurious 429 seen in CI).
  const { store } = await openTestStore(t);
  const limit = { rate: 1_000_000, burst: 1_000_000 };
  let leasing = true;
  const forgetting = (async () => {
    let rounds = 0;
    while (leasing) {
      await store.rateBuckets.deleteFull(Date.now());
      rounds += 1;
    }
    return rounds;
  })();
  const refused: number[] = [];
  try {
    for (let round = 0; round < 400; round += 1) {
      const leases = await Promise.all(
        Array.from({ length: 4 }, (_, i) =>
          store.rateBuckets.lease(`key:${i}`, limit, 5, Date.now()),
        ),
      );
      for (const lease of leases) if (lease.granted !== 5) refused.push(round);
    }
  } finally {
    leasing = false;
  }
  assert.ok((await forgetting) > 10, 'the buckets were forgotten meanwhile');
  assert.deepEqual(refused, [], `${refused.length} of 1,600 leases refused`);
});
