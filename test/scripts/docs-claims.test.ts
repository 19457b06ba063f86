import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { TEST_STORE } from '../helpers/test-database.js';

/** What a new user reads in the README and docs/DEVELOPMENT.md, held to what happens. */
describe('the docs a new user follows', () => {
  test("docs/DEVELOPMENT.md's command for one test file runs it, on this run's store", () => {
    const guide = readFileSync('docs/DEVELOPMENT.md', 'utf8');
    const prefix = TEST_STORE === 'postgres' ? 'ASSAY_TEST_STORE=postgres ' : '';
    const line = guide
      .split('\n')
      .find((text) => text.startsWith(`${prefix}node --import tsx --test test/`));
    assert.ok(
      line !== undefined,
      `DEVELOPMENT.md gives a command for one test file (${TEST_STORE})`,
    );
    const [, file = ''] = /--test (test\/\S+\.test\.ts)/.exec(line) ?? [];
    const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', file], {
      // As a person runs it: not as a child of this test run, which node:test would report to.
      env: { ...process.env, ASSAY_TEST_STORE: TEST_STORE, NODE_TEST_CONTEXT: undefined },
      encoding: 'utf8',
      timeout: 300_000,
    });
    assert.equal(result.status, 0, result.stdout + result.stderr);
    assert.match(result.stdout, /^(# |ℹ )pass [1-9]/m);
  });

  test('a package npm warns about at install (EBADENGINE on this Node.js) is explained in the README', () => {
    const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
      packages: Record<string, { engines?: { node?: string } }>;
    };
    const readme = readFileSync('README.md', 'utf8');
    // An exact version asked for (nsfwjs asks for 22.13.0): npm warns on every other.
    const warned = Object.entries(lock.packages)
      .filter(([, meta]) => /^\d+\.\d+\.\d+$/.test(meta.engines?.node ?? ''))
      .filter(([, meta]) => meta.engines?.node !== process.versions.node)
      .map(([path]) => path.replace(/^.*node_modules\//, ''));
    for (const name of warned) {
      assert.match(readme, new RegExp(`EBADENGINE\` for ${name}\\b`), name);
    }
  });
});
