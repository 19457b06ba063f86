/**
 * A resolver that never answers costs only the requests that asked it: in a private network
 * namespace whose resolv.conf points at a name server that reads and never replies, 40 fetches
 * of unresolvable names are under way while a fetch of a name in /etc/hosts is timed.
 * Needs root and `ip netns` (the namespace's /etc/resolv.conf and /etc/hosts are bind-mounted by
 * `ip netns exec` from /etc/netns/<name>/); skipped, saying why, where that cannot be had.
 */
import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { nodeArgsOf } from '../helpers/entry.js';
import { useSharedClamd } from '../helpers/service.js';

// @run-alone: a fetch of an /etc/hosts name must be prompt (1 s; 5 s over HTTP) beside 40 stalled lookups

const clamd = useSharedClamd();
let namespaces = 0;

const NETNS_ROOT = '/etc/netns';

/** Why the namespace cannot be made here, or null when it can. */
function unavailable(): string | null {
  if (process.platform !== 'linux') return 'network namespaces are Linux only';
  if (process.getuid?.() !== 0) return 'creating a network namespace needs root';
  try {
    execFileSync('ip', ['-V'], { stdio: 'ignore' });
  } catch {
    return 'the ip command (iproute2) is not installed';
  }
  return null;
}

function runChild(
  namespace: string,
  script: string,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'ip',
      ['netns', 'exec', namespace, process.execPath, ...nodeArgsOf(script)],
      { env: { ...process.env, UNRESOLVABLE: '40', HOSTED_TIMEOUT_MS: '5000', ...env } },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`the child exited with ${code}: ${err.slice(-2000)}`));
    });
  });
}

/** A network namespace whose resolver is 127.0.0.53 and whose /etc/hosts names hosted.test; null (the test skipped) where none can be made. */
function silentResolverNamespace(t: TestContext): string | null {
  const reason = unavailable();
  if (reason !== null) {
    t.skip(reason);
    return null;
  }
  const namespace = `assay-dns-${process.pid}-${++namespaces}`;
  const createdRoot = !existsSync(NETNS_ROOT);
  const dir = join(NETNS_ROOT, namespace);
  mkdirSync(dir, { recursive: true });
  t.after(() => {
    try {
      execFileSync('ip', ['netns', 'del', namespace], { stdio: 'ignore' });
    } catch {
      // never created
    }
    rmSync(dir, { recursive: true, force: true });
    try {
      if (createdRoot) rmdirSync(NETNS_ROOT);
    } catch {
      // another namespace of another test run is still there
    }
  });
  // A glibc stub resolver (dns.lookup) would wait 2 s per name on it; c-ares as configured.
  writeFileSync(join(dir, 'resolv.conf'), 'nameserver 127.0.0.53\noptions timeout:2 attempts:1\n');
  writeFileSync(join(dir, 'hosts'), '127.0.0.1 localhost\n127.0.0.1 hosted.test\n');
  try {
    execFileSync('ip', ['netns', 'add', namespace], { stdio: 'pipe' });
    execFileSync('ip', ['netns', 'exec', namespace, 'ip', 'link', 'set', 'lo', 'up'], {
      stdio: 'pipe',
    });
  } catch (error) {
    t.skip(`no network namespace here: ${String(error).split('\n')[0]}`);
    return null;
  }
  return namespace;
}

test('40 fetches stalled on a silent resolver do not hold up a fetch of an /etc/hosts name', async (t) => {
  const namespace = silentResolverNamespace(t);
  if (namespace === null) return;
  const output = await runChild(namespace, 'test/helpers/dns-stall-child.ts', {}, 60_000);
  const report = JSON.parse(output) as {
    hosted: string;
    hostedMs: number;
    queries: number;
    stalled: string[] | string;
  };
  t.diagnostic(`fetch of an /etc/hosts name during 40 stalled lookups: ${report.hostedMs} ms`);
  assert.equal(report.hosted, 'hosted', JSON.stringify(report));
  assert.ok(report.queries >= 40, `the silent resolver was asked (${report.queries} queries)`);
  // The fixed code takes ~20 ms; dns.lookup's four threads made it ~40 s (5 s here: its timeout).
  assert.ok(report.hostedMs < 1_000, `took ${report.hostedMs} ms`);
  // The stalled fetches end on their own, with an error that says what went wrong.
  assert.ok(Array.isArray(report.stalled), 'the stalled lookups ended within 20 s');
  for (const message of report.stalled) {
    assert.match(message, /could not resolve unresolvable-\d+\.example .*DNS lookup timed out/);
  }
});

test('over HTTP: 40 async fetches stalled on DNS; a sync fetch of an /etc/hosts name and its callback are prompt', async (t) => {
  const namespace = silentResolverNamespace(t);
  if (namespace === null) return;
  const output = await runChild(
    namespace,
    'test/helpers/dns-stall-service-child.ts',
    { ASSAY_CLAMD: clamd.socket },
    90_000,
  );
  const report = JSON.parse(output) as {
    fetchMs: number;
    callbackMs: number | null;
    queries: number;
    answer: { status: number; body: string };
  };
  t.diagnostic(
    `during 40 stalled lookups: sync fetch of an /etc/hosts name ${report.fetchMs} ms, its callback after ${report.callbackMs} ms`,
  );
  assert.equal(report.answer.status, 201, JSON.stringify(report));
  assert.deepEqual((JSON.parse(report.answer.body) as { findings: string[] }).findings, []);
  assert.ok(report.queries >= 40, `the silent resolver was asked (${report.queries} queries)`);
  // Generous bounds for a shared machine: the scan is most of it.
  assert.ok(report.fetchMs < 3_000, `the fetch took ${report.fetchMs} ms`);
  assert.ok(report.callbackMs !== null && report.callbackMs < 4_000, JSON.stringify(report));
});
