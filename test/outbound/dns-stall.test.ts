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
import { test } from 'node:test';

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

function runChild(namespace: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'ip',
      [
        'netns',
        'exec',
        namespace,
        process.execPath,
        '--import',
        'tsx',
        'test/helpers/dns-stall-child.ts',
      ],
      { env: { ...process.env, UNRESOLVABLE: '40', HOSTED_TIMEOUT_MS: '5000' } },
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

test('40 fetches stalled on a silent resolver do not hold up a fetch of an /etc/hosts name', async (t) => {
  const reason = unavailable();
  if (reason !== null) return void t.skip(reason);
  const namespace = `assay-dns-${process.pid}`;
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
    return void t.skip(`no network namespace here: ${String(error).split('\n')[0]}`);
  }
  const report = JSON.parse(await runChild(namespace, 60_000)) as {
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
