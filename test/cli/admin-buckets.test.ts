import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assayCli } from '../helpers/cli.js';
import { addAccount, openTestStore } from '../helpers/store-fixture.js';

/** Runs the real CLI (`assay admin …`) on a data dir, as an operator would. */
const assay = (dataDir: string, ...args: string[]) => assayCli(dataDir, args);

function json<T>(run: { status: number | null; stdout: string; stderr: string }): T {
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout) as T;
}

describe('assay admin bucket', () => {
  test('add, list, update and remove a watched bucket; the webhook token is shown once, never its hash', async (t) => {
    // The account and key are set up in the store: the CLI under test is `admin bucket`.
    const { store, dataDir } = await openTestStore(t);
    await addAccount(store, 'uploads');
    const account = { id: 'uploads' };
    const key = 'key-uploads';

    const added = json<{ name: string; accountId: string; webhook: boolean; webhookToken: string }>(
      assay(
        dataDir,
        ...['admin', 'bucket', 'add', 'uploads', '--bucket', 'user-uploads', '--key', key],
        ...['--endpoint', 'http://127.0.0.1:5000/ignored/path', '--prefix', 'incoming/'],
        ...['--on-threat', 'quarantine', '--quarantine', 'quarantine-bucket/found'],
        ...['--webhook', '--json'],
      ),
    );
    assert.equal(added.accountId, account.id, "the key's account");
    assert.equal(added.webhook, true);
    assert.match(added.webhookToken, /^[A-Za-z0-9_-]{32}$/);

    const listed = assay(dataDir, 'admin', 'bucket', 'list', '--json');
    const sources = json<Array<Record<string, unknown>>>(listed);
    assert.equal(sources.length, 1);
    assert.equal(sources[0]?.endpoint, 'http://127.0.0.1:5000', 'only the origin is kept');
    assert.equal(sources[0]?.onThreat, 'quarantine');
    assert.deepEqual(sources[0]?.objects, {});
    assert.equal(
      listed.stdout.includes(added.webhookToken),
      false,
      'the token is never shown again',
    );
    assert.doesNotMatch(listed.stdout, /Hash/i);

    const updated = json<{ webhook: boolean; onThreat: string; webhookToken: string | null }>(
      assay(
        dataDir,
        'admin',
        'bucket',
        'update',
        'uploads',
        '--no-webhook',
        '--on-threat',
        'delete',
        '--json',
      ),
    );
    assert.equal(updated.webhook, false);
    assert.equal(updated.onThreat, 'delete');
    assert.equal(updated.webhookToken, null);

    const text = assay(dataDir, 'admin', 'bucket', 'list');
    assert.match(
      text.stdout,
      /uploads {2}s3:\/\/user-uploads\/incoming\/ at http:\/\/127\.0\.0\.1:5000/,
    );
    assert.match(text.stdout, /on threat: delete to quarantine-bucket\/found/);
    assert.match(text.stdout, /events: none \(listing only\)/);

    const removed = assay(dataDir, 'admin', 'bucket', 'remove', 'uploads');
    assert.equal(removed.status, 0, removed.stderr);
    assert.equal(assay(dataDir, 'admin', 'bucket', 'list').stdout, 'no bucket is watched');
  });

  test('what cannot work is refused with the reason, and nothing is added', async (t) => {
    // The account and key are set up in the store: the CLI under test is `admin bucket`.
    const { store, dataDir } = await openTestStore(t);
    await addAccount(store, 'uploads');
    const key = 'key-uploads';
    // Each setting's own checks: test/buckets/bucket-sources.test.ts. Here, how the CLI says so.
    const refusals: Array<[string[], RegExp]> = [
      [['--bucket', 'b1', '--key', key], /^error: "b1" is not an S3 bucket name/],
      [['--bucket', 'uploads'], /--key <id> is required/],
      [
        ['--bucket', 'uploads', '--key', key, '--on-threat', 'burn'],
        /Allowed choices are tag, quarantine, delete/,
      ],
    ];
    for (const [options, reason] of refusals) {
      const run = assay(dataDir, 'admin', 'bucket', 'add', 'uploads', ...options);
      assert.notEqual(run.status, 0, options.join(' '));
      assert.match(run.stderr, reason, options.join(' '));
    }
    assert.equal(assay(dataDir, 'admin', 'bucket', 'list').stdout, 'no bucket is watched');
    const bad = assay(
      dataDir,
      'admin',
      'bucket',
      'add',
      'Bad Name',
      '--bucket',
      'uploads',
      '--key',
      key,
    );
    assert.match(bad.stderr, /the name takes lower-case letters/);
    assert.match(
      assay(dataDir, 'admin', 'bucket', 'remove', 'ghost').stderr,
      /no bucket source is named ghost/,
    );
  });
});
