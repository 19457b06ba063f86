import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
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
});
