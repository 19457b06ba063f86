#!/usr/bin/env node
// The suite's runner (npm test): every test file on each store, in one pool. Files that wait more
// than they compute run several at once (--jobs); a file that measures time or loads the machine
// says so in a line `// @run-alone: <why>` and runs with nothing else running. Each file runs in
// its own process group, is killed past a timeout, and on PostgreSQL the databases it made are
// dropped when it ends, however it ends (their names carry a prefix of the file's run). Per file:
// wall time, CPU time (the file's processes and the children they waited for: services, CLIs,
// clamd), counts. The suite is compiled into .build/ first and runs as JavaScript (--from-sources:
// through tsx instead). Each store's counts and outcome, and the 20 slowest files, are printed at
// the end; the exit status is non-zero when a file failed on either store. docs/DEVELOPMENT.md
// tells the options.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = resolve(import.meta.dirname, '..');
const REPORTER = join(ROOT, 'scripts/test-summary-reporter.mjs');
const DURATIONS = join(ROOT, 'test/durations.json');
/** A file's process running on this long after its last test is named in its line. */
const LINGER_NOTED_S = 3;
const CLOCK_TICKS = 100; // USER_HZ: /proc's unit of CPU time on Linux

const { values: options, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    store: { type: 'string', default: 'sqlite,postgres' },
    jobs: { type: 'string', default: process.env.ASSAY_TEST_JOBS },
    repeat: { type: 'string', default: '1' },
    'write-durations': { type: 'boolean', default: false },
    'name-pattern': { type: 'string' },
    'file-timeout': { type: 'string', default: process.env.ASSAY_TEST_FILE_TIMEOUT ?? '1200' },
    verbose: { type: 'boolean', default: false },
    'from-sources': { type: 'boolean', default: false },
  },
});

const stores = options.store.split(',').map((store) => store.trim());
for (const store of stores) {
  if (store !== 'sqlite' && store !== 'postgres') fail(`unknown store "${store}"`);
}
const jobs = Number(options.jobs ?? Math.max(2, availableParallelism() * 2));
const repeat = Number(options.repeat);
const fileTimeoutMs = Number(options['file-timeout']) * 1000;
if (!Number.isInteger(jobs) || jobs < 1) fail('--jobs takes a whole number of at least 1');
if (!Number.isInteger(repeat) || repeat < 1) fail('--repeat takes a whole number of at least 1');
if (!(fileTimeoutMs > 0)) fail('--file-timeout takes seconds');

function fail(message) {
  console.error(`run-tests: ${message}`);
  process.exit(2);
}

/** The test files under the paths given (default test/), sorted. */
function testFiles(paths) {
  const found = [];
  const walk = (path) => {
    if (statSync(path).isDirectory()) {
      for (const entry of readdirSync(path)) walk(join(path, entry));
    } else if (path.endsWith('.test.ts')) {
      found.push(relative(ROOT, resolve(path)));
    }
  };
  for (const path of paths.length > 0 ? paths : ['test']) walk(resolve(path));
  return [...new Set(found)].sort();
}

/** Why a file runs alone, from its `// @run-alone: <why>` line, or null. */
function aloneReason(file) {
  const match = /^\/\/ @run-alone: (.+)$/m.exec(readFileSync(join(ROOT, file), 'utf8'));
  return match === null ? null : match[1];
}

function knownDurations() {
  try {
    return JSON.parse(readFileSync(DURATIONS, 'utf8'));
  } catch {
    return {};
  }
}

const runId = randomBytes(3).toString('hex');
let taskCount = 0;
/** The process groups of the files running now: stopping the runner stops them too. */
const running = new Set();
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    for (const pid of running) killGroup(pid);
    console.error(`run-tests: stopped by ${signal}`);
    if (stores.includes('postgres')) await dropDatabases(`assay_t_${runId}_`);
    process.exit(130);
  });
}

/** Runs one file on one store; resolves with what it measured. */
function runFile(task) {
  const index = taskCount++;
  const scratch = mkdtempSync(join(tmpdir(), 'assay-run-tests-'));
  const summaryPath = join(scratch, 'summary.json');
  const statPath = join(scratch, 'stat');
  const databasePrefix = `assay_t_${runId}_${index}_`;
  const nodeArgs = [
    ...(options['from-sources'] ? ['--import', 'tsx'] : ['--enable-source-maps']),
    '--test',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${REPORTER}`,
    `--test-reporter-destination=${summaryPath}`,
    ...(options['name-pattern'] === undefined
      ? []
      : [`--test-name-pattern=${options['name-pattern']}`]),
    options['from-sources'] ? task.file : join('.build', task.file.replace(/\.ts$/, '.js')),
  ];
  // bash waits for the file's process, then reads its own children's CPU time (cutime, cstime).
  const script = '"$@"; status=$?; cat /proc/$$/stat > "$STAT_PATH"; exit $status';
  const started = performance.now();
  const child = spawn('bash', ['-c', script, 'bash', process.execPath, ...nodeArgs], {
    cwd: ROOT,
    env: {
      ...process.env,
      // A file reports to this runner, not to a test run this runner may itself be part of.
      NODE_TEST_CONTEXT: undefined,
      ASSAY_TEST_STORE: task.store,
      ASSAY_TEST_DATABASE_PREFIX: databasePrefix,
      STAT_PATH: statPath,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  running.add(child.pid);
  const output = [];
  child.stdout.on('data', (chunk) => output.push(chunk));
  child.stderr.on('data', (chunk) => output.push(chunk));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child.pid);
  }, fileTimeoutMs);
  return new Promise((resolveRun) => {
    child.on('close', async (status, signal) => {
      clearTimeout(timer);
      const wallS = (performance.now() - started) / 1000;
      // Whatever the file left running in its group (a serve, a clamd) goes with it.
      killGroup(child.pid);
      running.delete(child.pid);
      if (task.store === 'postgres') await dropDatabases(databasePrefix);
      const summary = readJson(summaryPath);
      const cpuS = readCpuSeconds(statPath);
      rmSync(scratch, { recursive: true, force: true });
      const counts = summary?.counts ?? null;
      const passed = status === 0 && counts !== null && counts.failed === 0 && !timedOut;
      let outcome = 'passed';
      if (timedOut) outcome = `timed out after ${fileTimeoutMs / 1000} s`;
      else if (counts === null) outcome = `ended before its tests reported (${signal ?? status})`;
      else if (!passed) outcome = 'FAILED';
      resolveRun({
        ...task,
        wallS,
        cpuS,
        counts,
        failedTests: summary?.failed ?? [],
        lingeredS: typeof summary?.lingeredMs === 'number' ? summary.lingeredMs / 1000 : null,
        passed,
        outcome,
        output: Buffer.concat(output).toString(),
      });
    });
  });
}

function killGroup(pid) {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // The group has ended already.
  }
}

function readJson(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return null;
  }
}

function readCpuSeconds(statPath) {
  try {
    const fields = readFileSync(statPath, 'utf8').split(') ')[1].split(' ');
    // Fields 16 and 17 of /proc/PID/stat (cutime, cstime); the split starts at field 3.
    return (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

const SERVER = process.env.ASSAY_TEST_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432';

async function dropDatabases(prefix) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: `${SERVER}/postgres` });
  try {
    await client.connect();
    const { rows } = await client.query(
      'SELECT datname FROM pg_database WHERE starts_with(datname, $1)',
      [prefix],
    );
    for (const { datname } of rows) {
      await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    }
  } catch (error) {
    console.error(`run-tests: could not drop the databases ${prefix}*: ${error.message}`);
  } finally {
    await client.end().catch(() => {});
  }
}

function formatSeconds(seconds) {
  if (seconds === null) return '?';
  return seconds >= 60
    ? `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`
    : `${seconds.toFixed(1)} s`;
}

function report(result) {
  const tests = result.counts === null ? '' : `${result.counts.tests} tests, `;
  // A process that outlives its tests by seconds holds something open: worth a look.
  const lingered =
    result.lingeredS !== null && result.lingeredS >= LINGER_NOTED_S
      ? `; ran on ${formatSeconds(result.lingeredS)} after its last test`
      : '';
  const line = `${result.passed ? '✔' : '✖'} [${result.store}] ${result.file}: ${tests}${formatSeconds(result.wallS)} (CPU ${formatSeconds(result.cpuS)}${lingered})${result.passed ? '' : `: ${result.outcome}`}`;
  if (!result.passed || options.verbose) process.stdout.write(result.output);
  console.log(line);
  for (const name of result.failedTests) console.log(`    failed: ${name}`);
}

async function runPool(tasks, width) {
  const results = [];
  let next = 0;
  const lane = async () => {
    while (next < tasks.length) {
      const result = await runFile(tasks[next++]);
      report(result);
      results.push(result);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, tasks.length) }, lane));
  return results;
}

async function runOnce(round) {
  const files = testFiles(positionals);
  if (files.length === 0) fail('no test files found');
  const durations = knownDurations();
  const tasks = stores.flatMap((store) =>
    files.map((file) => ({ file, store, alone: aloneReason(file) })),
  );
  // A file not timed yet (a new one) goes first: it may be long, and last is where a long file
  // costs most.
  const expected = (task) => durations[`${task.store} ${task.file}`] ?? Number.POSITIVE_INFINITY;
  // The longest first, so that the pool does not end waiting on one long file.
  const together = tasks
    .filter((task) => task.alone === null)
    .sort((a, b) => expected(b) - expected(a));
  const alone = tasks.filter((task) => task.alone !== null);
  const started = performance.now();
  const pooled = await runPool(together, jobs);
  const poolS = (performance.now() - started) / 1000;
  const results = [...pooled, ...(await runPool(alone, 1))];
  const wallS = (performance.now() - started) / 1000;

  console.log(
    `\nRound ${round} of ${repeat}: ${formatSeconds(wallS)} with --jobs ${jobs} (${together.length} at once: ${formatSeconds(poolS)}; ${alone.length} alone: ${formatSeconds(wallS - poolS)})`,
  );
  let allPassed = true;
  for (const store of stores) {
    const mine = results.filter((result) => result.store === store);
    const sum = (key) => mine.reduce((total, result) => total + (result.counts?.[key] ?? 0), 0);
    const failedFiles = mine.filter((result) => !result.passed);
    allPassed &&= failedFiles.length === 0;
    console.log(
      `${store}: ${failedFiles.length === 0 ? 'passed' : 'FAILED'}: ${mine.length} files, ${sum('tests')} tests, ${sum('passed')} passed, ${sum('failed')} failed, ${sum('skipped')} skipped, ${sum('todo')} todo, ${sum('cancelled')} cancelled; CPU ${formatSeconds(mine.reduce((total, result) => total + (result.cpuS ?? 0), 0))}`,
    );
    for (const result of failedFiles) console.log(`  ✖ ${result.file}: ${result.outcome}`);
  }
  return { results, allPassed, wallS };
}

function timesTable(results) {
  const rows = [...results].sort((a, b) => b.wallS - a.wallS).slice(0, 20);
  const lines = [
    '| file | store | tests | wall | CPU | alone |',
    '|---|---|---|---|---|---|',
    ...rows.map(
      (result) =>
        `| ${result.file} | ${result.store} | ${result.counts?.tests ?? '?'} | ${result.wallS.toFixed(1)} s | ${result.cpuS?.toFixed(1) ?? '?'} s | ${result.alone === null ? '' : 'yes'} |`,
    ),
  ];
  return lines.join('\n');
}

/**
 * Compiles src/, test/, soak/ and bench/ into .build/ (incremental: a second run compiles what
 * changed), so that neither the test files nor what they spawn transpile the sources again.
 */
function build() {
  const started = performance.now();
  const tsc = spawnSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.test.json'],
    {
      cwd: ROOT,
      stdio: 'inherit',
    },
  );
  if (tsc.status !== 0) fail('the suite does not compile (tsc -p tsconfig.test.json)');
  console.log(
    `Compiled the suite into .build/ in ${formatSeconds((performance.now() - started) / 1000)}`,
  );
}

if (!options['from-sources']) build();
let everyRoundPassed = true;
for (let round = 1; round <= repeat; round++) {
  const { results, allPassed } = await runOnce(round);
  everyRoundPassed &&= allPassed;
  console.log(`\nThe 20 slowest files:\n\n${timesTable(results)}`);
  if (options['write-durations']) {
    const durations = knownDurations();
    for (const result of results) {
      durations[`${result.store} ${result.file}`] = Math.round(result.wallS * 10) / 10;
    }
    const sorted = Object.fromEntries(
      Object.entries(durations).sort(([a], [b]) => a.localeCompare(b)),
    );
    writeFileSync(DURATIONS, `${JSON.stringify(sorted, null, 2)}\n`);
  }
}
process.exitCode = everyRoundPassed ? 0 : 1;
