import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { tempDir } from './service.js';

export interface RunningSquid {
  /** `http://127.0.0.1:<port>`: the forward proxy to send requests through. */
  proxy: string;
  /** Squid's cache.log so far (for a failing assertion's message). */
  log(): string;
}

async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Debian 13's Squid, unpacked beside the system's by scripts/install-test-squid.sh (`./setup.sh
 * --test`): Debian 12's Squid 5.7 stalls on RESPMOD bodies over 64 KiB (Squid's bug 5352, see
 * docs/ICAP.md), 13's does not. ASSAY_TEST_SQUID names another Squid binary to use.
 */
export function squidBinary(): string {
  const binary = process.env.ASSAY_TEST_SQUID ?? '/usr/local/lib/squid-debian13/squid';
  if (!existsSync(binary)) {
    throw new Error(`${binary} is missing: run ./setup.sh --test (scripts/install-test-squid.sh)`);
  }
  return binary;
}

/**
 * Debian's Squid as a forward proxy on loopback with Assay's ICAP service for RESPMOD
 * (`bypass=off`: an ICAP failure is an error page, never the content), its own config, pid file
 * and logs in a temporary folder, no cache, no persistent connections to the origin; killed when
 * the test ends. Squid marks a failing service down for 180 s after 10 failures:
 * `icap_service_failure_limit -1` keeps using it.
 */
export async function startSquid(t: TestContext, icapUrl: string): Promise<RunningSquid> {
  const dir = tempDir('assay-squid-');
  // Squid started as root runs as `proxy`: its folder must be writable by it.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const config = [
    `http_port 127.0.0.1:${port}`,
    `pid_filename ${join(dir, 'squid.pid')}`,
    `cache_log ${join(dir, 'cache.log')}`,
    'access_log none',
    'cache_store_log none',
    'cache deny all',
    // A fresh connection to the origin for each fetch: Node's server closes an idle keep-alive
    // connection after 5 s, and a fetch that reused one just then got ERR_READ_ERROR (502).
    'server_persistent_connections off',
    'cache_mem 8 MB',
    `coredump_dir ${dir}`,
    'netdb_filename none',
    'pinger_enable off',
    'shutdown_lifetime 1 seconds',
    'http_access allow localhost',
    'http_access deny all',
    'icap_enable on',
    `icap_service assay respmod_precache bypass=off ${icapUrl}`,
    'adaptation_access assay allow all',
    'icap_service_failure_limit -1',
  ].join('\n');
  const file = join(dir, 'squid.conf');
  writeFileSync(file, `${config}\n`);
  const child: ChildProcess = spawn(squidBinary(), ['-N', '-f', file], { stdio: 'ignore' });
  t.after(async () => {
    child.kill('SIGKILL');
    await sleep(50);
  });
  const log = () => {
    try {
      return readFileSync(join(dir, 'cache.log'), 'utf8');
    } catch {
      return '';
    }
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.on('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (open) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`squid did not start: ${log()}`);
    }
    await sleep(100);
  }
  return { proxy: `http://127.0.0.1:${port}`, log };
}

/** A GET through a forward proxy (absolute-form request line): its status and body. */
export async function getThroughProxy(
  proxy: string,
  url: string,
): Promise<{ status: number; body: Buffer }> {
  const { request } = await import('node:http');
  const target = new URL(proxy);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: target.hostname, port: target.port, path: url, headers: { host: new URL(url).host } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks) }),
        );
        response.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}
