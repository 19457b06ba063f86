import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { nodeArgsOf } from '../helpers/entry.js';
import { onPostgres } from '../helpers/test-database.js';

// @run-alone: a 60-s soak with chaos loads the machine

/**
 * A 60-second soak with chaos (soak/run.ts) on this run's store: embedded on SQLite, scale-out
 * (2 api processes, 2 workers) on PostgreSQL. A fault every 15 s: clamd killed, the processes
 * SIGKILLed and started again, the callback receiver hanging. (Stopping PostgreSQL, the script's
 * fourth fault, would stop it for every other test: the long runs do that, not the suite.)
 */
describe(`a 60-second soak with chaos (${onPostgres ? 'scale-out, PostgreSQL' : 'embedded, SQLite'})`, () => {
  const out = mkdtempSync(join(tmpdir(), 'assay-soak-test-'));
  after(() => rmSync(out, { recursive: true, force: true }));

  test('nothing lost, duplicated or passed unscanned; every fault recovered; RSS reported', () => {
    const run = spawnSync(
      process.execPath,
      [
        ...nodeArgsOf('soak/run.ts'),
        '--minutes',
        '1',
        '--deployment',
        onPostgres ? 'scale-out' : 'embedded',
        '--chaos',
        '--chaos-every',
        '15',
        '--faults',
        'clamd,processes,receiver',
        '--out',
        out,
      ],
      {
        encoding: 'utf8',
        timeout: 600_000,
        env: {
          ...process.env,
          ASSAY_SOAK_POSTGRES:
            process.env.ASSAY_TEST_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432',
        },
      },
    );
    const summary = readFileSync(join(out, 'summary.md'), 'utf8');
    assert.equal(run.status, 0, `${summary}\n${run.stderr.slice(-3000)}`);
    assert.match(summary, /^PASS$/m);
    for (const line of [
      /- lost: 0$/m,
      /- silent cleans \(not scanned, came back \[\]\): 0$/m,
      /- callbacks with more than one delivery id: 0$/m,
      /- wrong synchronous answers: 0$/m,
    ]) {
      assert.match(summary, line);
    }
    const accepted = Number(
      /items accepted \(async, fetch\): (\d+); results: (\d+)/.exec(summary)?.[1],
    );
    assert.ok(accepted > 50, `${accepted} items accepted`);
    // Each of the three faults happened and was recovered from.
    for (const fault of [
      /clamd killed \| \d+ \| [\d.]+ \| \d+ \|/,
      /SIGKILLed and started again \| \d+ \| [\d.]+ \| \d+ \|/,
      /hanging for 30 s .*\| \d+ \|$/m,
    ]) {
      assert.match(summary, fault);
    }
    const chart = readFileSync(join(out, 'chart.svg'), 'utf8');
    assert.match(chart, /<polyline/);
    const samples = JSON.parse(readFileSync(join(out, 'samples.json'), 'utf8')) as Array<{
      processes: Array<{ rssMb: number }>;
    }>;
    assert.ok(samples.length >= 10, `${samples.length} samples`);
    assert.ok(samples.every((s) => s.processes.every((p) => p.rssMb >= 0)));
  });
});
