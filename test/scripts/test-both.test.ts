import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

const SCRIPT = join(import.meta.dirname, '../../scripts/test-both.mjs');

describe('scripts/test-both.mjs (npm test)', () => {
  // A package of its own, whose scripts stand for the two halves of the suite.
  const dir = mkdtempSync(join(tmpdir(), 'assay-test-both-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      name: 'halves',
      private: true,
      scripts: {
        fails: 'echo first half ran; exit 3',
        passes: 'echo second half ran',
        'also-passes': 'echo third half ran',
      },
    }),
  );
  const run = (...scripts: string[]) =>
    spawnSync(process.execPath, [SCRIPT, ...scripts], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, npm_config_update_notifier: 'false' }, // npm asks no registry
    });

  test('the second half runs and reports when the first fails; the exit status is non-zero', () => {
    const result = run('fails', 'passes');
    assert.match(result.stdout, /first half ran/);
    assert.match(result.stdout, /second half ran/);
    assert.match(result.stdout, /^fails: FAILED \(exit status 3\) in \d+ s$/m);
    assert.match(result.stdout, /^passes: passed in \d+ s$/m);
    assert.equal(result.status, 1, result.stderr);
  });

  test('a failing second half fails the run too; both passing exit 0', () => {
    const last = run('passes', 'fails');
    assert.match(last.stdout, /^passes: passed/m);
    assert.match(last.stdout, /^fails: FAILED/m);
    assert.equal(last.status, 1, last.stderr);
    const both = run('passes', 'also-passes');
    assert.match(both.stdout, /^also-passes: passed/m);
    assert.equal(both.status, 0, both.stderr);
  });
});
