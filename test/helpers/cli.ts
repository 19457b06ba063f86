import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { TestContext } from 'node:test';
import { nodeArgsOf } from './entry.js';
import { prepareStore, storeEnv, TEST_POOL_ENV } from './test-database.js';

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** clamd's pid in managed mode, else 0. */
  clamdPid: number;
  /** Log messages so far (`msg` of each JSON line). */
  messages: string[];
  /** The JSON log lines so far, whole (`pid` tells the processes of `--processes` apart). */
  records: LogRecord[];
}

export type LogRecord = Record<string, unknown> & { msg?: string; pid?: number };

/**
 * Starts the real CLI (`assay serve`) in its own process group, as a terminal would, and reads
 * its JSON log until it serves. Killed when the test ends.
 */
export async function startServe(
  t: TestContext,
  env: Record<string, string>,
  /** A command that runs the service, e.g. strace and its options. */
  wrapper: string[] = [],
  /** Options of `serve`, e.g. `--role worker`. */
  serveArgs: string[] = [],
): Promise<ServeProcess> {
  const [command = process.execPath, ...args] = [
    ...wrapper,
    process.execPath,
    ...nodeArgsOf('src/main.ts'),
    'serve',
    ...serveArgs,
  ];
  const child = spawn(command, args, {
    env: {
      ...process.env,
      ASSAY_PORT: '0',
      ...TEST_POOL_ENV,
      ...(env.ASSAY_DATA_DIR === undefined ? {} : await prepareStore(env.ASSAY_DATA_DIR)),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
  });
  return serving(t, child);
}

/**
 * Reads the JSON log of a `serve` started in its own process group (by startServe, or `npm start`)
 * until it serves. Killed when the test ends.
 */
export async function serving(t: TestContext, child: ChildProcess): Promise<ServeProcess> {
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const messages: string[] = [];
  const records: LogRecord[] = [];
  let url = '';
  let clamdPid = 0;
  // One listener for the process's whole life: breaking out of a `for await` would close the
  // reader, losing the lines after 'assay is serving' and leaving the child's stdout unread.
  const lines = createInterface({ input: child.stdout ?? process.stdin });
  await new Promise<void>((resolve) => {
    lines.on('line', (line) => {
      // npm's own lines (`> assay@… start`) are not the service's log.
      if (!line.startsWith('{')) return;
      const record = JSON.parse(line) as LogRecord & { url?: string };
      messages.push(record.msg ?? '');
      records.push(record);
      if (record.msg === 'clamd started' && clamdPid === 0) clamdPid = record.pid ?? 0;
      if (record.msg === 'assay is serving' && url === '') {
        url = record.url ?? '';
        resolve();
      }
    });
    lines.on('close', resolve);
  });
  assert.match(
    url,
    /^http:\/\/127\.0\.0\.1:\d+$/,
    `assay serve did not start: ${messages.join(' | ')}`,
  );
  return { child, url, clamdPid, messages, records };
}

/**
 * Runs the real CLI (`assay admin …`) on a data dir, as an operator would; `input` is its stdin. On
 * PostgreSQL the data dir's database must exist: a data dir of buildService, startServe or
 * openTestStore, or one given to `await prepareStore(dataDir)` first.
 */
export function assayCli(
  dataDir: string,
  args: string[],
  input?: string,
  /** Variables over the data dir's own, e.g. another ASSAY_DATABASE_URL. */
  env: Record<string, string> = {},
) {
  const result = spawnSync(process.execPath, [...nodeArgsOf('src/main.ts'), ...args], {
    env: {
      ...process.env,
      ASSAY_DATA_DIR: dataDir,
      ...TEST_POOL_ENV,
      ...(env.ASSAY_DATABASE_URL === undefined ? storeEnv(dataDir) : {}),
      ...env,
    },
    encoding: 'utf8',
    timeout: 30_000,
    input,
  });
  return { status: result.status, stdout: result.stdout.trim(), stderr: result.stderr.trim() };
}

export interface CliRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

export interface CliRunOptions {
  /** Variables over this process's. */
  env?: Record<string, string>;
  /** A command that runs the CLI, e.g. setpriv and its options to drop root. */
  wrapper?: string[];
  /** Killed after this long. */
  timeoutMs?: number;
  /** Told the child's pid (with a wrapper: the wrapper's, which becomes the CLI's by exec). */
  onStart?(pid: number): void;
  /** Told each piece of stdout as it arrives. */
  onStdout?(chunk: Buffer): void;
}

/**
 * Runs the real CLI (`assay …`) without blocking this process, for commands that talk to a
 * service this test process runs (assayCli's spawnSync would stall that service).
 */
export function assayCliAsync(args: string[], options: CliRunOptions = {}): Promise<CliRun> {
  const { env = {}, wrapper = [], timeoutMs = 60_000 } = options;
  const [command = process.execPath, ...rest] = [
    ...wrapper,
    process.execPath,
    ...nodeArgsOf('src/main.ts'),
    ...args,
  ];
  const child = spawn(command, rest, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid !== undefined) options.onStart?.(child.pid);
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout.push(chunk);
    options.onStdout?.(chunk);
  });
  child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({
        status,
        stdout: Buffer.concat(stdout).toString(),
        stderr: Buffer.concat(stderr).toString(),
      });
    });
  });
}

/**
 * Signals the process group a detached child leads. Refuses a child without a pid: `kill(-0)`
 * would signal the test's own group, and end the test file with it.
 */
export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  assert.ok(child.pid !== undefined && child.pid > 0, 'a child that started');
  process.kill(-child.pid, signal);
}
