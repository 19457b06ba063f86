import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import type { ManagedClamd } from '../../src/engines/clamav/managed-clamd.js';
import { traceMessages } from '../helpers/callbacks.js';
import { watchClamd } from '../helpers/clamd-watch.js';
import { waitUntil } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import {
  buildService,
  engineVersionsReread,
  startSharedClamd,
  type TestService,
  tempDir,
} from '../helpers/service.js';

// What clamd loads beyond VERSION's daily database (a third-party .ndb, say) is part of the
// verdict key (issue 25: a clean verdict outlived a new database and came back [] for content it
// now flags).

/** Versions read again after 100 ms (1 s by default): what waits for a new reading waits little. */
const SHORT_VERSIONS_AGE = { ASSAY_ENGINE_VERSIONS_MAX_AGE_MS: '100' };

/** Writes `<dir>/<name>` with one body signature, replacing it at once (as updaters do). */
function writeNdb(dir: string, name: string, signature: string, marker: Buffer): void {
  const path = join(dir, name);
  writeFileSync(`${path}.new`, `${signature}:0:*:${marker.toString('hex')}\n`);
  renameSync(`${path}.new`, path);
}

/** A managed clamd loading `official` beside Assay's own databases, stopped after the test. */
async function clamdWith(t: TestContext, official: string): Promise<ManagedClamd> {
  const started = await startSharedClamd(64 * 1024 * 1024, official);
  t.after(() => started.stop());
  return started.clamd;
}

function socketOf(clamd: ManagedClamd): string {
  return clamd.address.kind === 'unix' ? clamd.address.path : '';
}

async function scan(svc: TestService, content: Buffer) {
  const response = await fetch(`${svc.url}/v2.2/files`, {
    method: 'POST',
    headers: { authorization: svc.auth },
    body: uploadForm(content),
  });
  assert.equal(response.status, 201);
  const result = (await response.json()) as { id: string; findings: string[] };
  const trace = await traceMessages(svc.url, svc.auth, result.id);
  return { findings: result.findings, reused: trace.some((line) => / reused: /.test(line)) };
}

async function databasesVersion(svc: TestService): Promise<string | null> {
  const ready = (await (await fetch(`${svc.url}/health/ready`)).json()) as {
    engines: Array<{ databases_version: string | null }>;
  };
  return ready.engines[0]?.databases_version ?? null;
}

describe('the verdict cache and every database clamd loads', () => {
  test('a third-party database added, clamd started again: the earlier clean verdict is not reused', async (t) => {
    const dir = tempDir('assay-databases-');
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const official = join(dir, 'official');
    mkdirSync(official);
    const clamd = await clamdWith(t, official);
    const svc = await buildService(t, { ASSAY_CLAMD: socketOf(clamd), ...SHORT_VERSIONS_AGE });
    const marker = randomBytes(24);
    const content = Buffer.concat([randomContent(1000), marker, randomContent(1000)]);
    assert.deepEqual(await scan(svc, content), { findings: [], reused: false });
    assert.deepEqual(await scan(svc, content), { findings: [], reused: true });
    const before = await databasesVersion(svc);
    assert.match(before ?? '', /^sha256:[0-9a-f]{16}$/, 'readiness names what clamd loaded');

    writeNdb(official, 'third-party.ndb', 'Assay.Test.ThirdParty', marker);
    await clamd.stop();
    await clamd.start();
    await engineVersionsReread(svc);
    assert.deepEqual(await scan(svc, content), {
      findings: ['content.malicious.assay.test.thirdparty'],
      reused: false,
    });
    const after = await databasesVersion(svc);
    assert.notEqual(after, before);
    assert.match(after ?? '', /^sha256:[0-9a-f]{16}$/);
  });

  test('a database changed while clamd runs: nothing reused or stored until clamd loads it, then the new verdict (managed clamd, and a clamd you run)', async (t) => {
    const dir = tempDir('assay-databases-');
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const official = join(dir, 'official');
    mkdirSync(official);
    writeNdb(official, 'third-party.ndb', 'Assay.Test.Unrelated', randomBytes(24));
    const clamd = await clamdWith(t, official);
    // The managed clamd, as Assay's own (its load state beside the socket)...
    const managed = await buildService(t, { ASSAY_CLAMD: socketOf(clamd), ...SHORT_VERSIONS_AGE });
    // ...and as a clamd someone else runs: reached through a relay in a folder of its own, with
    // the database folder watched and a SelfCheck of 3 s.
    const relayDir = tempDir('assay-relay-');
    const relay = await watchClamd(socketOf(clamd), relayDir);
    t.after(async () => {
      await relay.close();
      rmSync(relayDir, { recursive: true, force: true });
    });
    const external = await buildService(t, {
      ASSAY_CLAMD: relay.socket,
      ASSAY_CLAMD_DATABASE_DIR: official,
      ASSAY_CLAMD_SELFCHECK: '3',
      ...SHORT_VERSIONS_AGE,
    });
    const marker = randomBytes(24);
    const content = Buffer.concat([randomContent(1000), marker, randomContent(1000)]);
    for (const svc of [managed, external]) {
      assert.deepEqual(await scan(svc, content), { findings: [], reused: false });
      assert.deepEqual(await scan(svc, content), { findings: [], reused: true });
    }
    const before = await databasesVersion(managed);
    const externalBefore = await databasesVersion(external);
    assert.notEqual(before, null);
    assert.notEqual(externalBefore, null);

    writeNdb(official, 'third-party.ndb', 'Assay.Test.Changed', marker);
    await engineVersionsReread(managed); // and `external`, started with the same setting
    // On disk, not loaded (SelfCheck is 10 minutes away): clamd still scans with the old set, so
    // its verdict stands, but it is neither reused nor stored.
    for (const svc of [managed, external]) {
      assert.equal(await databasesVersion(svc), null, 'readiness: not loaded yet');
      assert.deepEqual(await scan(svc, content), { findings: [], reused: false });
      assert.deepEqual(await scan(svc, content), { findings: [], reused: false });
    }

    // clamd loads it (as its SelfCheck or an updater's RELOAD would).
    await new Promise<void>((resolve, reject) => {
      const socket = connect(socketOf(clamd));
      socket.on('error', reject);
      socket.on('close', () => resolve());
      socket.end('zRELOAD\0');
      socket.resume();
    });
    await waitUntil(
      'the reload is seen',
      async () => ![null, before].includes(await databasesVersion(managed)),
      30_000,
    );
    // The SelfCheck the external service was told to wait for: counted from when it saw the
    // change, so part of it has passed already.
    await waitUntil(
      'the external service trusts the folder again',
      async () => (await databasesVersion(external)) !== null,
      30_000,
    );
    for (const svc of [managed, external]) {
      // clamd 1.4 may stall up to ~30 s after a reload without ConcurrentDatabaseReload.
      assert.deepEqual(await scan(svc, content), {
        findings: ['content.malicious.assay.test.changed'],
        reused: false,
      });
      assert.deepEqual(await scan(svc, content), {
        findings: ['content.malicious.assay.test.changed'],
        reused: true,
      });
    }
    // The external service digests the folder it watches; the managed one, all clamd loads.
    assert.notEqual(await databasesVersion(external), externalBefore);
    assert.notEqual(await databasesVersion(external), null);
  });
});
