import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Job } from '../../src/domain/records.js';
import { ClaimShortcuts } from '../../src/processing/claim-shortcuts.js';
import { FairClaims } from '../../src/processing/fair-claims.js';
import type { RunningJobs } from '../../src/store/job-claims.js';
import type { Store } from '../../src/store/store.js';
import { addAccount, openTestStore, pendingUpload } from '../helpers/store-fixture.js';

// The shortcuts serve the due-list runner on both stores (at acceptance: SQLite's runner only).
const LIMITS = { slots: 4, perAccount: 2 };
const LEASE_MS = 60_000;

async function withStore(t: { after: (fn: () => unknown) => void }): Promise<Store> {
  const { store } = await openTestStore(t);
  for (const id of ['account-a', 'account-b']) await addAccount(store, id);
  return store;
}

const upload = pendingUpload;

/** Accepts `job` as JobRunner.submit does: the shortcut decides in the acceptance's transaction. */
async function accept(store: Store, shortcuts: ClaimShortcuts, job: Job): Promise<Job | null> {
  let claimed: Job | null = null;
  await store.transaction(async (trx) => {
    claimed = await shortcuts.atAcceptance(trx, job);
    assert.ok(
      await trx.jobs.accept(claimed ?? job, { timestamp: job.creationDate, message: 'received' }),
    );
  });
  shortcuts.settled(job.id);
  return claimed;
}

/**
 * A job of `accountId` ends in `store`'s transaction: its slot to the account's oldest due job if
 * the shortcuts allow, as ResultRecorder claims it (SlotHandOff, here alone).
 */
async function handOff(
  store: Store,
  shortcuts: ClaimShortcuts,
  accountId: string,
  running: RunningJobs = new Map(),
  count = 1,
): Promise<Job[]> {
  if (!shortcuts.mayHandOff(accountId)) return [];
  const now = Date.now();
  const lease = new Date(now + LEASE_MS).toISOString();
  return store.jobs.claimDue('scan', accountId, new Date(now).toISOString(), lease, count, running);
}

/** A scan round of the due list, as JobRunner.tick runs it, told to the shortcuts. */
async function round(claims: FairClaims, shortcuts: ClaimShortcuts, free: number) {
  const startedAt = shortcuts.roundStarting();
  const claimed: Job[] = [];
  const ended = await claims.claim('scan', free, new Map(), (job) => claimed.push(job));
  shortcuts.roundEnded(startedAt, ended, claims.soleAccount('scan'));
  return { ended, claimed };
}

describe('claims without a round', () => {
  test('at acceptance: claimed with its lease while nothing waits, never past the account cap', async (t) => {
    const store = await withStore(t);
    let running = 0;
    const shortcuts = new ClaimShortcuts(LIMITS, LEASE_MS, () => running);
    const claims = new FairClaims(store, { scan: LIMITS, download: LIMITS }, LEASE_MS);
    shortcuts.enabled = true;
    // No round has looked yet: the due list may hold anything.
    assert.equal(await accept(store, shortcuts, upload('account-a')), null);
    assert.equal((await round(claims, shortcuts, 4)).claimed.length, 1);
    running = 1;
    // The round found nothing left: the next upload is claimed as it is accepted.
    const first = await accept(store, shortcuts, upload('account-a'));
    assert.ok(first);
    const stored = await store.jobs.findForAccount('account-a', first.id);
    assert.equal(stored?.state, 'processing');
    assert.equal(stored?.attempts, 1);
    assert.ok(Date.parse(stored?.runAfter ?? '') > Date.now() + LEASE_MS / 2, 'leased');
    running = 2;
    // Account A holds its cap (2) in the store: its next upload waits, pending.
    const capped = upload('account-a');
    assert.equal(await accept(store, shortcuts, capped), null);
    assert.equal((await store.jobs.findForAccount('account-a', capped.id))?.state, 'pending');
    // And from then on something waits: account B's upload is not claimed either, until a round.
    assert.equal(await accept(store, shortcuts, upload('account-b')), null);
  });

  test('no free slot: pending', async (t) => {
    const store = await withStore(t);
    const shortcuts = new ClaimShortcuts(LIMITS, LEASE_MS, () => LIMITS.slots);
    const claims = new FairClaims(store, { scan: LIMITS, download: LIMITS }, LEASE_MS);
    shortcuts.enabled = true;
    await round(claims, shortcuts, 4);
    assert.equal(await accept(store, shortcuts, upload('account-b')), null);
  });

  test("hand-off: an ending job of the only account waiting gets its oldest due job; another account's upload stops it", async (t) => {
    const store = await withStore(t);
    const shortcuts = new ClaimShortcuts(LIMITS, LEASE_MS, () => 2);
    const claims = new FairClaims(store, { scan: LIMITS, download: LIMITS }, LEASE_MS);
    shortcuts.enabled = true;
    const backlog = [
      upload('account-a', 5000),
      upload('account-a', 4000),
      upload('account-a', 3000),
    ];
    for (const job of [...backlog, upload('account-a', 2000), upload('account-a', 1000)]) {
      await accept(store, shortcuts, job);
    }
    // The round claims A's cap (2) and finds A alone with jobs left.
    const { ended, claimed } = await round(claims, shortcuts, 4);
    assert.equal(ended, 'capped');
    assert.deepEqual(
      claimed.map((job) => job.id),
      backlog.slice(0, 2).map((job) => job.id),
    );
    assert.equal(shortcuts.mayHandOff('account-b'), false, 'B has no jobs waiting');
    assert.equal(shortcuts.mayHandOff('account-a'), true);
    // A's first job ends: in the transaction that removes it, its slot goes to A's oldest due job.
    const [handed] = await store.transaction(async (trx) => {
      assert.ok(await trx.jobs.delete(claimed[0]?.id ?? ''));
      return handOff(trx, shortcuts, 'account-a');
    });
    assert.equal(handed?.id, backlog[2]?.id);
    assert.equal(handed?.attempts, 1);
    assert.equal(
      (await store.jobs.inFlightByAccount('scan', new Date().toISOString())).get('account-a'),
      2,
    );
    // B's upload waits now: A's jobs no longer hand off until a round has given B its turn.
    assert.equal(await accept(store, shortcuts, upload('account-b')), null);
    assert.equal(shortcuts.mayHandOff('account-a'), false);
    await store.transaction(async (trx) => {
      assert.deepEqual(await handOff(trx, shortcuts, 'account-a'), []);
    });
    const turn = await round(claims, shortcuts, 2);
    assert.deepEqual(
      turn.claimed.map((job) => job.accountId),
      ['account-b'],
      'the round serves B (A is at its cap)',
    );
  });

  test("a hand-off of two slots takes two jobs, never one running here; another process's signal stops hand-offs", async (t) => {
    const store = await withStore(t);
    const shortcuts = new ClaimShortcuts({ slots: 8, perAccount: 8 }, LEASE_MS, () => 0);
    const claims = new FairClaims(store, { scan: LIMITS, download: LIMITS }, LEASE_MS);
    shortcuts.enabled = true;
    const backlog = [5000, 4000, 3000, 2000, 1000].map((age) => upload('account-a', age));
    for (const job of backlog) await accept(store, shortcuts, job);
    const { claimed } = await round(claims, shortcuts, 2);
    assert.equal(claimed.length, 2);
    // The third job runs here already (its lease ended, say): a hand-off must not take it.
    const runningHere = new Map([[backlog[2]?.id ?? '', null]]);
    const handed = await store.transaction(async (trx) => {
      for (const job of claimed) assert.ok(await trx.jobs.delete(job.id));
      return handOff(trx, shortcuts, 'account-a', runningHere, 2);
    });
    assert.deepEqual(
      new Set(handed.map((job) => job.id)),
      new Set([backlog[3]?.id, backlog[4]?.id]),
      'two jobs, neither the one running here',
    );
    // Another process made a job of B due: A's jobs no longer hand off until a round has looked.
    shortcuts.dueElsewhere('account-b');
    assert.equal(shortcuts.mayHandOff('account-a'), false);
    // A's own signals change nothing; a round that began before B's latest signal has not seen it.
    shortcuts.dueElsewhere('account-a');
    const before = shortcuts.roundStarting();
    shortcuts.dueElsewhere('account-b');
    shortcuts.roundEnded(before, 'capped', 'account-a');
    assert.equal(shortcuts.mayHandOff('account-a'), false, "B's signal during the round is unseen");
    shortcuts.roundEnded(shortcuts.roundStarting(), 'capped', 'account-a');
    assert.equal(shortcuts.mayHandOff('account-a'), true, 'a round has looked since');
  });

  test('off (the runner stopping): neither shortcut', async (t) => {
    const store = await withStore(t);
    const shortcuts = new ClaimShortcuts(LIMITS, LEASE_MS, () => 0);
    const claims = new FairClaims(store, { scan: LIMITS, download: LIMITS }, LEASE_MS);
    shortcuts.enabled = true;
    await round(claims, shortcuts, 4);
    shortcuts.enabled = false;
    assert.equal(await accept(store, shortcuts, upload('account-a')), null);
    assert.equal(shortcuts.mayHandOff('account-a'), false);
  });
});
