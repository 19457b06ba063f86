import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { type TestContext, test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { FAILURES_TO_OPEN_CIRCUIT } from '../../src/processing/callback-destinations.js';
import { SharedDestinationGate } from '../../src/processing/shared-destination-gate.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { tempDir } from '../helpers/service.js';
import { prepareStore } from '../helpers/test-database.js';

const LIMITS = { concurrency: 2, accountConcurrency: 3, retryBaseMs: 1000 };
const LEASE_MS = 60_000;

async function freshStore(t: TestContext): Promise<Store> {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const store = await openStore(
    loadConfig({ ASSAY_DATA_DIR: dataDir, ...(await prepareStore(dataDir)) }),
  );
  t.after(() => store.close());
  return store;
}

const lane = (accountId: string, destination: string) => ({ accountId, destination });

test('the shared callback gate: admissions at once never pass the lane or account limit', async (t) => {
  const store = await freshStore(t);
  // Two gates on one store stand for two processes (on PostgreSQL, each admission its own connection).
  const gates = [0, 1].map(() => new SharedDestinationGate(store, LIMITS, LEASE_MS));
  const now = Date.now();
  const oneLane = await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      gates[i % 2]?.admit(lane('a', 'http://x:80'), `x${i}`, now),
    ),
  );
  assert.equal(oneLane.filter((a) => a?.kind === 'go').length, 2, JSON.stringify(oneLane));
  assert.ok(oneLane.every((a) => a?.kind === 'go' || a?.kind === 'busy'));
  const manyLanes = await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      gates[i % 2]?.admit(lane('a', `http://y${i}:80`), `y${i}`, now),
    ),
  );
  assert.equal(manyLanes.filter((a) => a?.kind === 'go').length, 1, 'the account had 2 of its 3');
  // Another account is not held by the first one's limit.
  assert.equal((await gates[0]?.admit(lane('b', 'http://x:80'), 'b1', now))?.kind, 'go');

  const busy = await gates[1]?.busy(now);
  assert.deepEqual(busy?.accounts, ['a']);
  assert.deepEqual(busy?.lanes, [lane('a', 'http://x:80')]);

  // A finished delivery frees its place, in whichever process it ends.
  const admitted = oneLane.flatMap((a, i) => (a?.kind === 'go' ? [`x${i}`] : []));
  await gates[1]?.finish(lane('a', 'http://x:80'), admitted[0] ?? '', 'delivered', now);
  assert.equal((await gates[0]?.admit(lane('a', 'http://x:80'), 'x-next', now))?.kind, 'go');
  // A delivery whose process died counts until its lease ends, not after.
  const later = now + LEASE_MS + 1;
  assert.deepEqual(await gates[0]?.busy(later), { accounts: [], lanes: [] });
  assert.equal((await gates[0]?.admit(lane('a', 'http://x:80'), 'x-late', later))?.kind, 'go');
});

test('the shared callback gate: a lane that keeps failing opens its circuit for every process, probes once, closes on a delivery', async (t) => {
  const store = await freshStore(t);
  const [one, two] = [0, 1].map(() => new SharedDestinationGate(store, LIMITS, LEASE_MS, () => 1));
  assert.ok(one !== undefined && two !== undefined);
  const failing = lane('a', 'http://down:80');
  let now = Date.now();
  for (let i = 1; i <= FAILURES_TO_OPEN_CIRCUIT; i++) {
    assert.equal((await one.admit(failing, `f${i}`, now)).kind, 'go');
    const circuit = await two.finish(failing, `f${i}`, 'failed', now);
    assert.equal(circuit.opened, i === FAILURES_TO_OPEN_CIRCUIT, `attempt ${i}`);
  }
  assert.deepEqual(await two.admit(failing, 'held', now), { kind: 'wait', until: now + 1000 });
  // The other account's deliveries to the same destination are not held back.
  assert.equal((await two.admit(lane('b', 'http://down:80'), 'b1', now)).kind, 'go');
  // Past the wait: one probe at a time.
  now += 1001;
  assert.equal((await one.admit(failing, 'probe', now)).kind, 'go');
  assert.equal((await two.admit(failing, 'second', now)).kind, 'busy');
  const reopened = await one.finish(failing, 'probe', 'failed', now);
  assert.deepEqual(reopened, { openUntil: now + 2000, opened: true });
  now += 2001;
  assert.equal((await two.admit(failing, 'probe2', now)).kind, 'go');
  assert.deepEqual(await two.finish(failing, 'probe2', 'delivered', now), {
    openUntil: null,
    opened: false,
  });
  // Closed: the lane takes its limit again, and keeps no row.
  assert.equal((await one.admit(failing, 'n1', now)).kind, 'go');
  assert.equal((await two.admit(failing, 'n2', now)).kind, 'go');
  const rows = await store.db
    .selectFrom('callback_lanes')
    .select('destination')
    .where('destination', '!=', '*')
    .execute();
  assert.deepEqual(rows, []);
});

test('the shared callback gate: one delivery is admitted once at a time, so a process that lost its claim cannot free another’s place', async (t) => {
  const store = await freshStore(t);
  const [one, two] = [0, 1].map(() => new SharedDestinationGate(store, LIMITS, LEASE_MS));
  assert.ok(one !== undefined && two !== undefined);
  const now = Date.now();
  // Two processes found the same due delivery: the first is admitted, the second is not.
  assert.equal((await one.admit(lane('a', 'http://x:80'), 'd1', now)).kind, 'go');
  assert.equal((await two.admit(lane('a', 'http://x:80'), 'd1', now)).kind, 'busy');
  // The first attempt still counts: the account takes 2 more (3 in all), not 3 more.
  const more = [
    await two.admit(lane('a', 'http://y:80'), 'd2', now),
    await two.admit(lane('a', 'http://y:80'), 'd3', now),
    await one.admit(lane('a', 'http://z:80'), 'd4', now),
  ];
  assert.deepEqual(
    more.map((a) => a.kind),
    ['go', 'go', 'busy'],
  );
  // Once its attempt ends (or its lease does), the delivery may be admitted again.
  await one.finish(lane('a', 'http://x:80'), 'd1', 'failed', now);
  assert.equal((await two.admit(lane('a', 'http://x:80'), 'd1', now)).kind, 'go');
  const later = now + LEASE_MS + 1;
  assert.equal((await one.admit(lane('a', 'http://x:80'), 'd1', later)).kind, 'go');
});
