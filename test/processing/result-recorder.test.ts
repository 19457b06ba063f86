import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Job } from '../../src/domain/records.js';
import { type Completion, ResultRecorder } from '../../src/processing/result-recorder.js';
import { addAccount, openTestStore, pendingUpload } from '../helpers/store-fixture.js';

function completion(id: string): Completion {
  return {
    file: {
      id,
      accountId: 'account',
      apiKeyId: 'key-account',
      checksum: null,
      sha256: null,
      contentLength: 4,
      contentType: 'text/plain',
      findings: [],
      metadata: {},
      callback: null,
      error: null,
      creationDate: new Date().toISOString(),
    },
    version: 'v2.2',
    legacy: null,
    jobId: id,
    events: [],
    creditHeld: false,
  };
}

test('hand-offs are claimed with their results: each finished slot gets a due job of its account, taken only from the commit that wrote it', async (t) => {
  const { store } = await openTestStore(t);
  await addAccount(store, 'account');
  const groupFailures: number[] = [];
  const recorder = new ResultRecorder(
    store,
    () => {},
    undefined,
    (_error, results) => groupFailures.push(results),
  );
  // Two jobs running, three due behind them.
  const running = [pendingUpload('account', 9000), pendingUpload('account', 8000)];
  const due = [7000, 6000, 5000].map((age) => pendingUpload('account', age));
  for (const job of [...running, ...due]) await store.jobs.insert(job);
  const lease = () => new Date(Date.now() + 60_000).toISOString();
  const started = await store.jobs.claimDue(
    'scan',
    'account',
    new Date().toISOString(),
    lease(),
    2,
  );
  assert.deepEqual(started.map((job) => job.id).sort(), running.map((job) => job.id).sort());
  const taken: Array<string | null> = [];
  const contents = new Map(due.map((job) => [job.id, job.content]));
  const handOff = () => ({
    accountId: 'account',
    running: new Map<string, unknown>(),
    leaseMs: 60_000,
    taken: (job: Job | null) => {
      taken.push(job?.id ?? null);
      // The claimed job comes whole, its content too (PostgreSQL: through JSON).
      if (job !== null) assert.deepEqual(job.content, contents.get(job.id));
      assert.equal(job?.state, 'processing');
    },
  });
  const inFlight = async () =>
    (await store.jobs.inFlightByAccount('scan', new Date().toISOString())).get('account');

  // Finishing in one turn: one write for both, and one claim for both slots.
  const recorded = await Promise.all(
    running.map((job) => recorder.complete({ ...completion(job.id), handOff: handOff() })),
  );
  assert.deepEqual(recorded, [true, true]);
  assert.deepEqual(new Set(taken), new Set([due[0]?.id, due[1]?.id]), 'the two oldest due');
  assert.equal(await inFlight(), 2, 'the count toward the cap did not change');

  // A group that fails (the second result's file exists already) is written again one by one:
  // its claim was rolled back and is never taken; the first result claims again, alone.
  taken.length = 0;
  const outcomes = await Promise.allSettled([
    recorder.complete({ ...completion(due[0]?.id ?? ''), handOff: handOff() }),
    recorder.complete({ ...completion(running[0]?.id ?? ''), jobId: undefined }),
  ]);
  assert.equal(outcomes[0].status, 'fulfilled');
  assert.equal(outcomes[1].status, 'rejected', 'a file under that id exists');
  assert.deepEqual(groupFailures, [2], 'the group failed once, then each was written alone');
  assert.deepEqual(taken, [due[2]?.id], 'one claim taken: the one that committed');
  assert.equal(await inFlight(), 2);
});
