import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { packageRoot } from '../../src/paths.js';

const RUNNER = join(packageRoot(), 'scripts/run-tests.mjs');
const TEST_DATABASE = pathToFileURL(join(packageRoot(), 'test/helpers/test-database.ts')).href;
const SERVER = process.env.ASSAY_TEST_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432';

/** scripts/run-tests.mjs (npm test) on test files of its own, run from their sources. */
describe('scripts/run-tests.mjs (npm test)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'assay-run-tests-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const log = join(dir, 'intervals.log');
  // Each file notes when it ran, so the test can tell what overlapped.
  const timed = (name: string, body: string) =>
    `import { appendFileSync } from 'node:fs';\nimport { test } from 'node:test';\n` +
    `test('${name}', async () => {\n  const start = Date.now();\n  await new Promise((r) => setTimeout(r, 600));\n` +
    `  appendFileSync(${JSON.stringify(log)}, \`${name} \${process.env.ASSAY_TEST_STORE} \${start} \${Date.now()}\\n\`);\n${body}\n});\n`;
  const files = {
    // A timer it leaves behind holds its process after its test: the runner says so.
    'a.test.ts': timed('a', '  setTimeout(() => {}, 4_000);'),
    'b.test.ts': timed(
      'b',
      "  if (process.env.ASSAY_TEST_STORE === 'postgres') throw new Error('b fails on postgres');",
    ),
    'c.test.ts': `// @run-alone: measures time\n${timed('c', '')}`,
  };
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);

  const run = (...args: string[]) =>
    spawnSync(process.execPath, [RUNNER, '--from-sources', ...args], {
      encoding: 'utf8',
      env: { ...process.env, NODE_TEST_CONTEXT: undefined },
      timeout: 120_000,
    });

  test('every file on each store; a failure on one store is reported and fails the run; files marked alone overlap nothing', () => {
    const result = run(
      '--jobs',
      '4',
      join(dir, 'a.test.ts'),
      join(dir, 'b.test.ts'),
      join(dir, 'c.test.ts'),
    );
    assert.equal(result.status, 1, result.stdout + result.stderr);
    assert.match(result.stdout, /^sqlite: passed: 3 files, 3 tests, 3 passed, 0 failed/m);
    assert.match(result.stdout, /^postgres: FAILED: 3 files, 3 tests, 2 passed, 1 failed/m);
    assert.match(result.stdout, /✖ \[postgres\] .*b\.test\.ts: 1 tests, .*: FAILED/);
    assert.match(result.stdout, /b fails on postgres/, 'the failing file’s output is shown');
    assert.match(result.stdout, /^ {4}failed: b$/m);
    assert.match(result.stdout, /a\.test\.ts: 1 tests, .*ran on [\d.]+ s after its last test\)/);
    assert.doesNotMatch(result.stdout, /c\.test\.ts: .*after its last test/);
    const intervals = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((line) => {
        const [name = '', store = '', start = '0', end = '0'] = line.split(' ');
        return { name, store, start: Number(start), end: Number(end) };
      });
    assert.equal(intervals.length, 6, 'each file ran once on each store');
    const pooled = intervals.filter(({ name }) => name !== 'c');
    const overlapping = pooled.some((x) =>
      pooled.some((y) => x !== y && x.start < y.end && y.start < x.end),
    );
    assert.ok(overlapping, 'the files not marked alone ran at once');
    for (const alone of intervals.filter(({ name }) => name === 'c')) {
      for (const other of intervals.filter((x) => x !== alone)) {
        assert.ok(alone.start >= other.end || other.start >= alone.end, 'c ran with nothing else');
      }
    }
  });

  test('a file past its timeout is killed and fails; the databases it made are dropped all the same', async () => {
    writeFileSync(
      join(dir, 'hangs.test.ts'),
      `import { writeFileSync } from 'node:fs';\nimport { test } from 'node:test';\n` +
        `import { freshPostgresDatabase } from ${JSON.stringify(TEST_DATABASE)};\n` +
        `test('hangs', async () => {\n  writeFileSync(${JSON.stringify(join(dir, 'database'))}, await freshPostgresDatabase());\n` +
        '  await new Promise(() => setInterval(() => {}, 1000));\n});\n',
    );
    const result = run('--store', 'postgres', '--file-timeout', '15', join(dir, 'hangs.test.ts'));
    assert.equal(result.status, 1, result.stdout + result.stderr);
    assert.match(result.stdout, /hangs\.test\.ts: .*timed out after 15 s/);
    const name = readFileSync(join(dir, 'database'), 'utf8').split('/').pop() ?? '';
    assert.match(name, /^assay_t_/);
    const client = new pg.Client({ connectionString: `${SERVER}/postgres` });
    await client.connect();
    try {
      const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [
        name,
      ]);
      assert.equal(rowCount, 0, `${name} was dropped`);
    } finally {
      await client.end();
    }
  });
});
