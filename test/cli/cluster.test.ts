import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { startServe } from '../helpers/cli.js';
import { waitUntil } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { basic, tempDir } from '../helpers/service.js';
import { TEST_STORE } from '../helpers/test-database.js';

const AUTH = basic('key', 'secret');

// Each pass runs it on its own store: SQLite shared by the processes, or PostgreSQL.
describe(`serve --processes 2 (${TEST_STORE})`, () => {
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
