import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { startServe } from '../helpers/cli.js';
import { waitUntil } from '../helpers/client.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { basic, tempDir } from '../helpers/service.js';
import { TEST_STORE } from '../helpers/test-database.js';

// @run-alone: a killed process must be replaced (a node start) within 15 s

const AUTH = basic('key', 'secret');

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// Each pass runs it on its own store: SQLite shared by the processes, or PostgreSQL.
describe(`serve --processes 2 (${TEST_STORE})`, () => {
  test('both processes serve one port, a dead one is started again, SIGTERM stops them and clamd', async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const serve = await startServe(
      t,
      {
        ASSAY_DATA_DIR: dataDir,
        ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
        ASSAY_CLAMD_DATABASE_DIR: 'none',
        // Per process: 20 at once fit in either.
        ASSAY_SYNC_CONCURRENCY: '24',
        ASSAY_ACCOUNT_SYNC_CONCURRENCY: '24',
      },
      [],
      ['--processes', '2', '--role', 'all'],
    );
    assert.ok(serve.clamdPid > 0 && isRunning(serve.clamdPid), 'one clamd, run by the primary');
    const children = () =>
      serve.records.filter((r) => r.msg === 'process serving').map((r) => r.pid as number);
    // Lines from different processes come in any order: the children's may follow the primary's.
    await waitUntil('both processes log that they serve', () => children().length === 2);
    const roles = serve.records.filter((r) => r.msg === 'process serving').map((r) => r.role);
    assert.deepEqual(roles.sort(), ['all', 'api'], 'one process runs jobs, the other only the API');
    // Every child knows what the primary's clamd loaded (for the verdict key): readiness says so.
    for (let request = 0; request < 4; request++) {
      const ready = (await (await fetch(`${serve.url}/health/ready`)).json()) as {
        engines: Array<{ databases_version: string | null }>;
      };
      assert.match(ready.engines[0]?.databases_version ?? '', /^sha256:[0-9a-f]{16}$/);
    }

    const upload = async () => {
      const content = randomContent(4096);
      const response = await fetch(`${serve.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: AUTH },
        body: uploadForm(content),
      });
      assert.equal(response.status, 201);
      const { id } = (await response.json()) as { id: string };
      return { id, checksum: sha1(content) };
    };
    const uploaded = await Promise.all(Array.from({ length: 20 }, upload));
    for (const { id, checksum } of uploaded) {
      const read = await fetch(`${serve.url}/v2.2/files/${id}`, {
        headers: { authorization: AUTH },
      });
      assert.equal(read.status, 200);
      assert.equal(((await read.json()) as { checksum: string }).checksum, checksum);
    }
    const served = new Set(
      serve.records
        .filter((r) => r.msg === 'request completed')
        .map((r) => r.pid)
        .filter((pid) => pid !== undefined),
    );
    assert.equal(served.size, 2, 'both processes answered requests');

    // A child that dies is replaced; the service answers meanwhile through the other.
    const [victim] = children();
    process.kill(victim as number, 'SIGKILL');
    await waitUntil('the dead process is replaced', () => children().length === 3, 15_000);
    assert.ok(serve.messages.includes('a process died; starting another'));
    await upload();

    serve.child.kill('SIGTERM');
    const [code] = await once(serve.child, 'exit');
    assert.equal(code, 0);
    for (const pid of [serve.clamdPid, ...children()]) {
      assert.equal(isRunning(pid), false, `process ${pid} stopped with the service`);
    }
  });

  test("a signature file added while it serves flags content in every process, each showing the new set's version", async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const signatures = join(dataDir, 'signatures');
    mkdirSync(signatures);
    const serve = await startServe(
      t,
      {
        ASSAY_DATA_DIR: dataDir,
        ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
        ASSAY_CLAMD_DATABASE_DIR: 'none',
        ASSAY_SIGNATURES_DIR: signatures,
        ASSAY_SIGNATURES_CHECK: '1',
      },
      [],
      ['--processes', '2'],
    );
    const versions = async () => {
      const seen = new Set<string | null>();
      for (let request = 0; request < 8; request++) {
        const ready = (await (await fetch(`${serve.url}/health/ready`)).json()) as {
          engines: Array<{ databases_version: string | null }>;
        };
        seen.add(ready.engines[0]?.databases_version ?? null);
      }
      return seen;
    };
    const [before] = await versions();
    const marker = randomBytes(24);
    const scanMany = async () => {
      const findings = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const content = Buffer.concat([randomContent(500), marker, randomContent(500)]);
          const response = await fetch(`${serve.url}/v2.2/files`, {
            method: 'POST',
            headers: { authorization: AUTH },
            body: uploadForm(content),
          });
          assert.equal(response.status, 201);
          return ((await response.json()) as { findings: string[] }).findings.join(',');
        }),
      );
      return new Set(findings);
    };
    assert.deepEqual(await scanMany(), new Set(['']));
    writeFileSync(
      join(signatures, 'mine.ndb.new'),
      `Assay.Test.Cluster:0:*:${marker.toString('hex')}\n`,
    );
    renameSync(join(signatures, 'mine.ndb.new'), join(signatures, 'mine.ndb'));
    await waitUntil(
      'every process shows one new version',
      async () => {
        const seen = await versions();
        return seen.size === 1 && ![null, before].includes([...seen][0] ?? null);
      },
      30_000,
    );
    const servedBefore = serve.records.length;
    assert.deepEqual(await scanMany(), new Set(['content.malicious.assay.test.cluster']));
    // A process logs a request after answering it: its line may come a moment after the answer.
    const served = () =>
      new Set(
        serve.records
          .slice(servedBefore)
          .filter((r) => r.msg === 'request completed')
          .map((r) => r.pid),
      );
    await waitUntil('both processes scanned with the new set', () => served().size === 2, 5_000);
  });
});
