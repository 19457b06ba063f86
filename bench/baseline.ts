/**
 * `npm run bench:baseline -- <built checkout>`: `npm run bench` against this checkout's service
 * and against another commit's, in one run. The other checkout is made outside this repository
 * and built there, e.g.
 *   git worktree add /tmp/assay-base 89444c1 && (cd /tmp/assay-base && npm ci && npm run build)
 *   BENCH_ONLY=4kb,10mb,async npm run bench:baseline -- /tmp/assay-base
 *
 * The same benchmark code (this checkout's bench/run.ts, BENCH_ONLY and the other BENCH_ settings
 * passed on) runs each service in turn (BENCH_ASSAY_ROOT names the one it starts), BENCH_PAIRS
 * times (2 by default), the order swapping each pair, so neither always runs on a machine the
 * other warmed. Each run starts its own clamd and service. Printed: every run's summary, then
 * each summary line of every run under its scenario, this checkout's first. Not a test.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

const PAIRS = Number(process.env.BENCH_PAIRS ?? 2);

interface Run {
  label: 'this' | 'baseline';
  summary: string[];
}

/** One `bench/run.ts` against the service in `root`; its summary lines. */
function benchOnce(root: string): Promise<string[]> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts'], {
      env: { ...process.env, BENCH_ASSAY_ROOT: root },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (text: string) => {
      output += text;
      process.stdout.write(text);
    });
    child.on('error', fail);
    child.on('exit', (code) => {
      if (code !== 0) {
        fail(new Error(`bench/run.ts against ${root} exited with ${code}`));
        return;
      }
      const at = output.lastIndexOf('== summary\n');
      const lines = at < 0 ? [] : output.slice(at + '== summary\n'.length).split('\n');
      done(lines.map((line) => line.trim()).filter(Boolean));
    });
  });
}

/** The scenario a summary line is about: its text up to the first colon. */
function scenarioOf(line: string): string {
  const colon = line.indexOf(':');
  return colon < 0 ? line : line.slice(0, colon);
}

async function main(): Promise<void> {
  const given = process.argv[2] ?? process.env.BENCH_BASELINE;
  if (given === undefined || !existsSync(resolve(given, 'dist', 'main.js'))) {
    console.error('usage: npm run bench:baseline -- <another checkout of Assay, built>');
    process.exit(2);
  }
  const roots = { this: process.cwd(), baseline: resolve(given) };
  const runs: Run[] = [];
  for (let pair = 0; pair < PAIRS; pair++) {
    const order =
      pair % 2 === 0 ? (['this', 'baseline'] as const) : (['baseline', 'this'] as const);
    for (const label of order) {
      console.log(`\n##### pair ${pair + 1}: ${label} (${roots[label]})\n`);
      runs.push({ label, summary: await benchOnce(roots[label]) });
    }
  }
  const scenarios = new Map<string, string[]>();
  for (const label of ['this', 'baseline'] as const) {
    for (const [index, run] of runs.filter((one) => one.label === label).entries()) {
      for (const line of run.summary) {
        const lines = scenarios.get(scenarioOf(line)) ?? [];
        lines.push(`${label} ${index + 1}: ${line}`);
        scenarios.set(scenarioOf(line), lines);
      }
    }
  }
  console.log(`\n== side by side (this checkout, then ${roots.baseline})`);
  for (const [scenario, lines] of scenarios) {
    console.log(`${scenario}`);
    for (const line of lines) console.log(`  ${line}`);
  }
}

await main();
