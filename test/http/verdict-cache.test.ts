import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { AccountService } from '../../src/accounts/account-service.js';
import type { DetectionCategory } from '../../src/domain/records.js';
import { ClamdClient } from '../../src/engines/clamav/clamd-client.js';
import { findClamdBinary, ManagedClamd } from '../../src/engines/clamav/managed-clamd.js';
import { eicar } from '../../src/engines/test-content.js';
import { traceMessages } from '../helpers/callbacks.js';
import { writeDailyDatabase } from '../helpers/clamd-databases.js';
import { watchClamd } from '../helpers/clamd-watch.js';
import { assayCli } from '../helpers/cli.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { drawing } from '../helpers/images.js';
import { startLocalServer } from '../helpers/local-server.js';
import {
  buildService,
  engineVersionsReread,
  quietLogger,
  type TestService,
  tempDir,
  useSharedClamd,
} from '../helpers/service.js';

const clamd = useSharedClamd();
const EICAR_FINDING = 'content.malicious.eicar-test-signature';
/** Versions read again after 100 ms (1 s by default): what waits for a new reading waits little. */
const SHORT_VERSIONS_AGE = { ASSAY_ENGINE_VERSIONS_MAX_AGE_MS: '100' };

type Result = Record<string, unknown> & { id: string };

async function upload(
  url: string,
  auth: string,
  content: Buffer | string,
  fields: Record<string, string> = {},
  path = '/v2.2/files',
): Promise<{ status: number; body: Result }> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(content, fields),
  });
  return { status: response.status, body: (await response.json()) as Result };
}

/** Submits asynchronously and waits for the result. */
async function uploadAsync(url: string, auth: string, content: Buffer | string): Promise<Result> {
  const accepted = await upload(url, auth, content, {}, '/v2.2/files/async');
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  for (let i = 0; i < 400; i++) {
    const response = await fetch(`${url}/v2.2/files/${accepted.body.id}`, {
      headers: { authorization: auth },
    });
    if (response.status === 200) return (await response.json()) as Result;
    await sleep(50);
  }
  throw new Error(`no result for ${accepted.body.id}`);
}

/** The trace line of a reused verdict, naming the item it came from. */
function reusedFrom(messages: string[]): string | null {
  for (const message of messages) {
    const match = /^verdict of item (\S+) \(received [^)]+\) reused: /.exec(message);
    if (match?.[1] !== undefined) return match[1];
  }
  return null;
}

async function keyWith(svc: TestService, categories: DetectionCategory[]): Promise<string> {
  const { key, secret } = await new AccountService(svc.store).createKey(svc.accountId, {
    categories,
  });
  return `Basic ${Buffer.from(`${key.id}:${secret}`).toString('base64')}`;
}

/** The service, with clamd behind a relay that counts its streams and verdicts. */
async function watchedService(t: test.TestContext, env: Record<string, string> = {}) {
  const dir = tempDir('assay-watch-');
  const watch = await watchClamd(clamd.socket, dir);
  t.after(async () => {
    await watch.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const svc = await buildService(t, {
    ASSAY_CLAMD: watch.socket,
    ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    ...env,
  });
  return { svc, watch };
}

describe('the verdict cache', () => {
  test('content sent again gets the verdict as a new result of its own, without clamd', async (t) => {
    const { svc, watch } = await watchedService(t);
    const receiver = await startLocalServer((_request, response) => response.end());
    t.after(() => receiver.close());
    const content = randomContent(4096);
    const first = await upload(svc.url, svc.auth, content, { 'metadata[order]': 'first' });
    assert.equal(first.status, 201);
    assert.deepEqual(first.body.findings, []);
    const scanned = { streams: watch.streams, verdicts: watch.verdicts };

    const second = await upload(svc.url, svc.auth, content, {
      'metadata[order]': 'second',
      callback: `${receiver.url}/hook`,
    });
    assert.equal(second.status, 201, JSON.stringify(second.body));
    assert.notEqual(second.body.id, first.body.id);
    assert.deepEqual(second.body.findings, []);
    assert.deepEqual(second.body.metadata, { order: 'second' });
    assert.equal(second.body.checksum, sha1(content));
    assert.equal(second.body.content_length, 4096);
    assert.equal(second.body.content_type, first.body.content_type);
    assert.deepEqual(
      { streams: watch.streams, verdicts: watch.verdicts },
      scanned,
      'clamd never heard of the repeat',
    );

    const messages = await traceMessages(svc.url, svc.auth, second.body.id);
    assert.equal(reusedFrom(messages), first.body.id, messages.join('\n'));
    assert.ok(!messages.some((m) => m.startsWith('engine clamav')), messages.join('\n'));
    const firstMessages = await traceMessages(svc.url, svc.auth, first.body.id);
    assert.equal(reusedFrom(firstMessages), null);
    assert.ok(firstMessages.includes('engine clamav (MALWARE): clean'));

    const [delivered] = await receiver.waitFor(1);
    const callback = JSON.parse(String(delivered?.body)) as Result;
    assert.equal(callback.id, second.body.id);
    assert.deepEqual(callback.metadata, { order: 'second' });
    const earlier = await fetch(`${svc.url}/v2.2/files/${first.body.id}`, {
      headers: { authorization: svc.auth },
    });
    assert.deepEqual(((await earlier.json()) as Result).metadata, { order: 'first' });

    // A repeat names the item that was scanned, never another repeat.
    const third = await upload(svc.url, svc.auth, content);
    assert.equal(reusedFrom(await traceMessages(svc.url, svc.auth, third.body.id)), first.body.id);
  });

  test('a large repeat streams into clamd as it arrives and is dropped before clamd scans it', async (t) => {
    const { svc, watch } = await watchedService(t);
    const content = randomContent(3 * 1024 * 1024);
    const first = await upload(svc.url, svc.auth, content);
    assert.equal(first.status, 201);
    const scanned = { streams: watch.streams, verdicts: watch.verdicts };
    const second = await upload(svc.url, svc.auth, content);
    assert.equal(second.status, 201);
    assert.deepEqual(second.body.findings, []);
    assert.equal(second.body.checksum, sha1(content));
    assert.equal(reusedFrom(await traceMessages(svc.url, svc.auth, second.body.id)), first.body.id);
    assert.equal(watch.streams, scanned.streams + 1, 'the repeat streamed into clamd');
    assert.equal(watch.verdicts, scanned.verdicts, 'but clamd gave no verdict: it never scanned');
  });

  test('a finding is reused too, synchronously and by an asynchronous job', async (t) => {
    const { svc, watch } = await watchedService(t);
    const auth = await keyWith(svc, ['MALWARE']);
    const content = `harmless text around ${eicar()} ${randomBytes(8).toString('hex')}`;
    const first = await upload(svc.url, auth, content);
    assert.deepEqual(first.body.findings, [EICAR_FINDING]);
    const verdicts = watch.verdicts;

    const again = await upload(svc.url, auth, content);
    assert.equal(again.status, 201);
    assert.deepEqual(again.body.findings, [EICAR_FINDING]);
    assert.equal(reusedFrom(await traceMessages(svc.url, auth, again.body.id)), first.body.id);

    const job = await uploadAsync(svc.url, auth, content);
    assert.deepEqual(job.findings, [EICAR_FINDING]);
    const messages = await traceMessages(svc.url, auth, job.id);
    assert.equal(reusedFrom(messages), first.body.id, messages.join('\n'));
    assert.equal(watch.verdicts, verdicts, 'clamd scanned neither repeat');
  });

  test('an error or a partial verdict is never reused', async (t) => {
    const { svc } = await watchedService(t, { ASSAY_NSFW_WORKERS: '1' });
    // A PNG cut off and padded: the image engine cannot decode it.
    const corrupt = Buffer.concat([(await drawing()).subarray(0, 200), Buffer.alloc(300, 7)]);
    const imageOnly = await keyWith(svc, ['NSFW_IMAGE']);
    for (let i = 0; i < 2; i++) {
      const failed = await uploadAsync(svc.url, imageOnly, corrupt);
      assert.match(String(failed.error), /NSFW_IMAGE/);
      assert.equal(failed.findings, undefined);
      assert.equal(reusedFrom(await traceMessages(svc.url, imageOnly, failed.id)), null);
    }
    const sync = await upload(svc.url, imageOnly, corrupt);
    assert.equal(sync.status, 422, 'examined again, and failing again');

    // EICAR in it: a finding, with the image engine's failure beside it (a partial verdict).
    const partial = Buffer.concat([corrupt, Buffer.from(eicar())]);
    const both = await keyWith(svc, ['MALWARE', 'NSFW_IMAGE']);
    for (let i = 0; i < 2; i++) {
      const result = await upload(svc.url, both, partial);
      assert.deepEqual(result.body.findings, [EICAR_FINDING]);
      const messages = await traceMessages(svc.url, both, result.body.id);
      assert.equal(reusedFrom(messages), null, messages.join('\n'));
      assert.ok(messages.some((m) => m.startsWith('engine nsfw-image (NSFW_IMAGE): failed')));
    }
  });

  test('other categories are scanned again; the same ones in another order are not', async (t) => {
    const { svc } = await watchedService(t, { ASSAY_NSFW_WORKERS: '1' });
    const malware = await keyWith(svc, ['MALWARE']);
    const malwareAndLanguage = await keyWith(svc, ['MALWARE', 'NSFW_LANGUAGE']);
    const languageAndMalware = await keyWith(svc, ['NSFW_LANGUAGE', 'MALWARE']);
    const text = `A plain sentence, nothing rude in it: ${randomBytes(8).toString('hex')}\n`;

    const first = await upload(svc.url, malware, text);
    assert.deepEqual(first.body.findings, []);
    const other = await upload(svc.url, malwareAndLanguage, text);
    assert.deepEqual(other.body.findings, []);
    const messages = await traceMessages(svc.url, malwareAndLanguage, other.body.id);
    assert.equal(reusedFrom(messages), null, messages.join('\n'));
    assert.ok(messages.some((m) => m.startsWith('engine nsfw-language (NSFW_LANGUAGE)')));

    const same = await upload(svc.url, languageAndMalware, text);
    assert.equal(
      reusedFrom(await traceMessages(svc.url, languageAndMalware, same.body.id)),
      other.body.id,
    );
  });

  test('another account’s content is scanned again, unless the cache is shared', async (t) => {
    const content = randomContent(2048);
    const { svc } = await watchedService(t);
    const other = await svc.createAccountKey();
    const first = await upload(svc.url, svc.auth, content);
    const theirs = await upload(svc.url, other.auth, content);
    assert.equal(theirs.status, 201);
    assert.equal(reusedFrom(await traceMessages(svc.url, other.auth, theirs.body.id)), null);

    const { svc: shared } = await watchedService(t, { ASSAY_VERDICT_CACHE: 'shared' });
    const sharing = await shared.createAccountKey();
    const mine = await upload(shared.url, shared.auth, content);
    const reused = await upload(shared.url, sharing.auth, content);
    assert.equal(
      reusedFrom(await traceMessages(shared.url, sharing.auth, reused.body.id)),
      mine.body.id,
    );
    // Named, but still another account's: it reads as absent.
    const hidden = await fetch(`${shared.url}/v2.2/files/${mine.body.id}`, {
      headers: { authorization: sharing.auth },
    });
    assert.equal(hidden.status, 404);
    assert.notEqual(first.body.id, mine.body.id);
  });

  test('ASSAY_VERDICT_CACHE=off scans every item', async (t) => {
    const { svc, watch } = await watchedService(t, { ASSAY_VERDICT_CACHE: 'off' });
    const content = randomContent(4096);
    for (let i = 0; i < 3; i++) {
      const result = await upload(svc.url, svc.auth, content);
      assert.equal(result.status, 201);
      const messages = await traceMessages(svc.url, svc.auth, result.body.id);
      assert.equal(reusedFrom(messages), null);
      assert.ok(messages.includes('engine clamav (MALWARE): clean'));
    }
    assert.equal(watch.verdicts, 3);
  });

  test('a verdict answers only within ASSAY_VERDICT_CACHE_TTL of its item', async (t) => {
    const { svc, watch } = await watchedService(t, { ASSAY_VERDICT_CACHE_TTL: '3600' });
    const content = randomContent(4096);
    const first = await upload(svc.url, svc.auth, content);
    const receivedAgo = (minutes: number) =>
      svc.store.db
        .updateTable('files')
        .set({ creation_date: new Date(Date.now() - minutes * 60_000).toISOString() })
        .where('id', '=', first.body.id)
        .execute();
    await receivedAgo(59);
    const within = await upload(svc.url, svc.auth, content);
    assert.equal(reusedFrom(await traceMessages(svc.url, svc.auth, within.body.id)), first.body.id);
    await receivedAgo(61);
    const verdicts = watch.verdicts;
    const expired = await upload(svc.url, svc.auth, content);
    assert.equal(expired.status, 201);
    assert.deepEqual(expired.body.findings, []);
    assert.equal(reusedFrom(await traceMessages(svc.url, svc.auth, expired.body.id)), null);
    assert.equal(watch.verdicts, verdicts + 1, 'scanned again');
    // That scan answers the next repeat.
    const next = await upload(svc.url, svc.auth, content);
    assert.equal(reusedFrom(await traceMessages(svc.url, svc.auth, next.body.id)), expired.body.id);
  });
});

describe('the verdict cache and signature updates', () => {
  test('a signature update (a new daily database) invalidates every earlier verdict', async (t) => {
    const clamdPath = findClamdBinary();
    if (clamdPath === null) throw new Error('clamd is not installed');
    const dir = tempDir('assay-update-');
    const official = join(dir, 'official');
    mkdirSync(official);
    const marker = randomBytes(24);
    writeDailyDatabase(official, 27001, { 'Assay.Test.Unrelated': randomBytes(24) });
    const updated = new ManagedClamd({
      dataDir: join(dir, 'clamd'),
      clamdPath,
      maxFileSize: 64 * 1024 * 1024,
      systemDatabaseDir: official,
      logger: quietLogger,
    });
    await updated.start();
    t.after(async () => {
      await updated.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    const socket = updated.address.kind === 'unix' ? updated.address.path : '';
    const client = new ClamdClient(updated.address);
    assert.equal((await client.version()).databaseVersion, 27001);
    const svc = await buildService(t, { ASSAY_CLAMD: socket, ...SHORT_VERSIONS_AGE });
    const auth = await keyWith(svc, ['MALWARE']);
    const content = Buffer.concat([randomContent(1000), marker, randomContent(1000)]);
    const large = Buffer.concat([randomContent(2 * 1024 * 1024), marker]);

    const first = await upload(svc.url, auth, content);
    assert.deepEqual(first.body.findings, []);
    const firstLarge = await upload(svc.url, auth, large);
    assert.deepEqual(firstLarge.body.findings, []);
    const repeat = await upload(svc.url, auth, content);
    assert.equal(reusedFrom(await traceMessages(svc.url, auth, repeat.body.id)), first.body.id);

    // A new daily database, as freshclam writes it, and clamd started again with it. (A RELOAD
    // would do, but clamd 1.4 without ConcurrentDatabaseReload answers nothing after one until
    // its idle threads time out, 30 s.)
    writeDailyDatabase(official, 27002, { 'Assay.Test.Update': marker });
    await updated.stop();
    await updated.start();
    assert.equal((await client.version()).databaseVersion, 27002);
    // Assay reads the versions again at most this long after it last did.
    await engineVersionsReread(svc);
    for (const [item, earlier] of [
      [content, first],
      [large, firstLarge],
    ] as const) {
      const after = await upload(svc.url, auth, item);
      assert.equal(after.status, 201);
      assert.deepEqual(after.body.findings, ['content.malicious.assay.test.update']);
      const messages = await traceMessages(svc.url, auth, after.body.id);
      assert.equal(reusedFrom(messages), null, messages.join('\n'));
      assert.ok(messages.includes('engine clamav (MALWARE): found Assay.Test.Update.UNOFFICIAL'));
      assert.notEqual(after.body.id, earlier.body.id);
    }
    // The new verdict is the one reused from now on.
    const reused = await upload(svc.url, auth, content);
    assert.deepEqual(reused.body.findings, ['content.malicious.assay.test.update']);
    assert.notEqual(reusedFrom(await traceMessages(svc.url, auth, reused.body.id)), null);
  });

  test('assay admin verdict-cache clear retires every stored verdict, in every process', async (t) => {
    const { svc, watch } = await watchedService(t, SHORT_VERSIONS_AGE);
    const content = randomContent(4096);
    const first = await upload(svc.url, svc.auth, content);
    const repeat = await upload(svc.url, svc.auth, content);
    assert.equal(reusedFrom(await traceMessages(svc.url, svc.auth, repeat.body.id)), first.body.id);

    // What an operator runs after changing databases clamd's VERSION does not show.
    const cleared = assayCli(svc.dataDir, ['admin', 'verdict-cache', 'clear']);
    assert.equal(cleared.status, 0, cleared.stderr);
    assert.match(cleared.stdout, /no longer reused/);
    await engineVersionsReread(svc);
    const verdicts = watch.verdicts;
    const after = await upload(svc.url, svc.auth, content);
    assert.equal(after.status, 201);
    assert.equal(reusedFrom(await traceMessages(svc.url, svc.auth, after.body.id)), null);
    assert.equal(watch.verdicts, verdicts + 1, 'scanned again');
    const next = await upload(svc.url, svc.auth, content);
    assert.equal(reusedFrom(await traceMessages(svc.url, svc.auth, next.body.id)), after.body.id);
  });
});
