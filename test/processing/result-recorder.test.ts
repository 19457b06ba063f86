import assert from 'node:assert/strict';
import { test } from 'node:test';
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

test('work alongside a result acts only on the attempt that committed: a group rolled back and written again one by one runs the second', async (t) => {
  const { store } = await openTestStore(t);
  await addAccount(store, 'account');
  const groupFailures: number[] = [];
  const recorder = new ResultRecorder(
    store,
    () => {},
    undefined,
    (_error, results) => groupFailures.push(results),
  );
  const acted: string[] = [];
  let firstCalls = 0;
  let secondCalls = 0;
  const jobs = [pendingUpload('account'), pendingUpload('account')];
  for (const job of jobs) await store.jobs.insert(job);
  const [first, second] = jobs.map((job) => job.id) as [string, string];
  // Finishing in one turn: written as one group. The second's work fails the group's transaction
  // once; both are then written alone.
  const recorded = await Promise.all([
    recorder.complete({
      ...completion(first),
      alongside: async () => {
        const call = ++firstCalls;
        return () => acted.push(`first, call ${call}`);
      },
    }),
    recorder.complete({
      ...completion(second),
      alongside: async () => {
        const call = ++secondCalls;
        if (call === 1) throw new Error('refused in the group');
        return () => acted.push(`second, call ${call}`);
      },
    }),
  ]);
  assert.deepEqual(recorded, [true, true]);
  assert.deepEqual(groupFailures, [2], 'the group failed once, then each was written alone');
  assert.equal(firstCalls, 2, "the first's work ran in the group and again alone");
  assert.deepEqual(acted.sort(), ['first, call 2', 'second, call 2']);

  // A job finished already is not recorded again, and its work is not run.
  let again = 0;
  const repeated = await recorder.complete({
    ...completion(first),
    alongside: async () => {
      again++;
      return undefined;
    },
  });
  assert.equal(repeated, false);
  assert.equal(again, 0);
});
