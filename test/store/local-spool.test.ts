import assert from 'node:assert/strict';
import { readdirSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { describe, type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  SpooledContentError,
  SpoolTooLargeError,
  SpoolUnavailableError,
} from '../../src/domain/failures.js';
import { LocalSpool } from '../../src/spool/local-spool.js';
import { SpoolHealth } from '../../src/spool/spool-health.js';
import { waitUntil } from '../helpers/client.js';
import { tempDir } from '../helpers/service.js';

const key = () => Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString('hex');

async function* chunks(...parts: string[]): AsyncGenerator<Buffer> {
  for (const part of parts) yield Buffer.from(part);
}

async function text(stream: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(chunk as Buffer);
  return Buffer.concat(parts).toString();
}

/** How long the spool's check outcome answers later ones here (a second in the service). */
const HEALTH_REUSE_MS = 100;

function spoolDir(t: TestContext): { dir: string; spool: LocalSpool } {
  const dir = tempDir('assay-local-spool-');
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return { dir, spool: new LocalSpool(dir, HEALTH_REUSE_MS) };
}

/** The error `work` rejects with; the test fails if it resolves. */
async function failureOf(work: Promise<unknown>): Promise<Error> {
  try {
    await work;
  } catch (error) {
    assert.ok(error instanceof Error);
    return error;
  }
  assert.fail('it did not fail');
}

describe('LocalSpool tells an outage from one item', () => {
  test("a file missing from a directory that answers: the item's failure, naming no path", async (t) => {
    const { dir, spool } = spoolDir(t);
    const error = await failureOf(text(spool.read(key())));
    assert.ok(error instanceof SpooledContentError, String(error));
    assert.equal(error.missing, true);
    assert.ok(!error.message.includes(dir), error.message);
    assert.match(String((error.cause as Error).message), /ENOENT/);
    await spool.check();
  });

  test('the directory replaced by a file: writes, reads and the check do not answer; back, all work', async (t) => {
    const { dir, spool } = spoolDir(t);
    const stored = key();
    await spool.write(stored, chunks('kept'), 100);
    renameSync(dir, `${dir}-away`);
    t.after(() => rmSync(`${dir}-away`, { recursive: true, force: true }));
    writeFileSync(dir, 'not a directory');
    const write = await failureOf(spool.write(key(), chunks('new'), 100));
    assert.ok(write instanceof SpoolUnavailableError, String(write));
    assert.match(write.message, /^the spool is not answering \(writing: ENOTDIR\)$/);
    const read = await failureOf(text(spool.read(stored)));
    assert.ok(read instanceof SpoolUnavailableError, String(read));
    assert.ok(!read.message.includes(dir), read.message);
    assert.ok((await failureOf(spool.check())) instanceof SpoolUnavailableError);

    rmSync(dir);
    renameSync(`${dir}-away`, dir);
    // A check's outcome answers for a while. The write that failed is remembered, so the next
    // check writes (its probe is gone after it).
    await sleep(HEALTH_REUSE_MS + 50);
    await spool.check();
    assert.deepEqual(readdirSync(dir), [stored]);
    assert.equal(await text(spool.read(stored)), 'kept');
  });

  test('a directory back between a read failing and its check: the outage, never the item', async (t) => {
    const { dir, spool } = spoolDir(t);
    const stored = key();
    await spool.write(stored, chunks('kept'), 100);
    const away = `${dir}-away`;
    t.after(() => rmSync(away, { recursive: true, force: true }));
    let outages = 0;
    // A share unmounted and mounted again: reads whose open failed while it was away are checked
    // after it is back (setImmediate runs after the failures are heard), which must not make
    // them the item's.
    for (let round = 0; round < 100; round++) {
      renameSync(dir, away);
      const reads = Array.from({ length: 8 }, () =>
        text(spool.read(stored)).catch((error: unknown) => error),
      );
      setImmediate(() => renameSync(away, dir));
      for (const outcome of await Promise.all(reads)) {
        if (outcome === 'kept') continue;
        assert.ok(outcome instanceof SpoolUnavailableError, `round ${round}: ${String(outcome)}`);
        outages += 1;
      }
    }
    assert.ok(outages > 0, 'reads failed while the directory was away');
  });

  test('what the source throws stays itself, and nothing is left behind', async (t) => {
    const { dir, spool } = spoolDir(t);
    const tooLarge = await failureOf(spool.write(key(), chunks('0123456789'), 5));
    assert.ok(tooLarge instanceof SpoolTooLargeError);
    const gone = new Error('the client went away');
    const failing = async function* () {
      yield Buffer.from('some');
      throw gone;
    };
    assert.equal(await failureOf(spool.write(key(), failing(), 100)), gone);
    assert.deepEqual(readdirSync(dir), []);
    await spool.check();
  });

  test('a read stopped early closes its file', async (t) => {
    const { dir, spool } = spoolDir(t);
    const stored = key();
    await spool.write(stored, chunks('x'.repeat(3 * 1024 * 1024)), 4 * 1024 * 1024);
    const path = join(dir, stored);
    const openFiles = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === path;
        } catch {
          return false; // closed meanwhile
        }
      }).length;
    for await (const _chunk of spool.read(stored)) {
      assert.equal(openFiles(), 1, 'open while read');
      break;
    }
    await waitUntil('the file is closed', () => openFiles() === 0, 2_000);
  });
});

describe('SpoolHealth', () => {
  /** Checks that count their calls and answer what the test says. */
  function counted() {
    const calls = { quick: 0, thorough: 0 };
    let answer: () => Promise<void> = async () => {};
    const health = new SpoolHealth(
      {
        quick: () => {
          calls.quick += 1;
          return answer();
        },
        thorough: () => {
          calls.thorough += 1;
          return answer();
        },
      },
      { reuseMs: 200, timeoutMs: 100 },
    );
    return { calls, health, answerWith: (next: () => Promise<void>) => (answer = next) };
  }

  test('a check is reused for a while, but not by a caller that needs one started after a failure', async () => {
    const { calls, health } = counted();
    await Promise.all([health.check(), health.check()]);
    await health.check();
    assert.equal(calls.quick, 1);
    await health.check(performance.now());
    assert.equal(calls.quick, 2);
    await sleep(250);
    await health.check();
    assert.equal(calls.quick, 3);
  });

  test('after a failed operation, checks write until one works, then the quick one again', async () => {
    const { calls, health, answerWith } = counted();
    health.noteFailure(new Error('EIO'));
    answerWith(() => Promise.reject(new Error('EIO again')));
    await assert.rejects(health.check(), SpoolUnavailableError);
    await sleep(250);
    answerWith(async () => {});
    await health.check();
    assert.deepEqual(calls, { quick: 0, thorough: 2 });
    await sleep(250);
    await health.check();
    assert.deepEqual(calls, { quick: 1, thorough: 2 });
  });

  test('a check that hangs fails after its time, and none starts until it ends', async () => {
    const { calls, health, answerWith } = counted();
    let end: () => void = () => {};
    answerWith(() => new Promise<void>((resolve) => (end = resolve)));
    await assert.rejects(health.check(), /not answering \(checking/);
    await sleep(250);
    await assert.rejects(health.check(), SpoolUnavailableError);
    assert.equal(calls.quick, 1, 'the hung one holds its place');
    end();
    await sleep(10);
    answerWith(async () => {});
    await health.check();
    assert.equal(calls.quick, 2);
  });
});
