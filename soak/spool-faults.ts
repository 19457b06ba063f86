/**
 * The soak's spool and the faults that take it away: a directory, on a tmpfs of its own in a
 * private mount namespace when the `disk` fault is chosen (filled for 30 s: 507s, then room
 * again), or a bucket on the S3 emulator the tests use, behind a relay that the `s3` fault stops
 * for 30 s (connections refused, as from a stopped server; the objects stay).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { startS3Server } from '../test/helpers/s3-server.js';
import { startTcpProxy } from '../test/helpers/tcp-proxy.js';
import type { Fault } from './chaos.js';
import { spoolUsage } from './sampler.js';

export interface SoakSpool {
  /** Settings of every Assay process: where the spool is. */
  env: Record<string, string>;
  /** Prefix of the command that starts an Assay process (into the tmpfs's namespace), or []. */
  wrapper: string[];
  /** The spool's files (objects) and their bytes now. */
  usage(): Promise<{ files: number; bytes: number }>;
  /** The fault on this spool (`disk` or `s3`), if it has one. */
  fault: (Fault & { key: string }) | null;
  close(): Promise<void>;
}

/** How long the spool is away in its fault. */
const DOWN_MS = 30_000;

/**
 * `dir`: a directory at `dir`; with `tmpfsBytes`, a tmpfs of that size mounted there in a private
 * mount namespace that a holder process keeps (root; unshare and nsenter). `s3`: the emulator.
 */
export async function openSoakSpool(
  kind: 'dir' | 's3',
  dir: string,
  tmpfsBytes: number | null,
): Promise<SoakSpool> {
  if (kind === 's3') return s3Spool();
  mkdirSync(dir, { recursive: true });
  if (tmpfsBytes === null) {
    return {
      env: { ASSAY_SPOOL_DIR: dir },
      wrapper: [],
      usage: async () => spoolUsage(dir),
      fault: null,
      close: async () => {},
    };
  }
  return tmpfsSpool(dir, tmpfsBytes);
}

async function s3Spool(): Promise<SoakSpool> {
  const server = await startS3Server('assay-soak');
  const { hostname, port } = new URL(server.endpoint);
  const relay = await startTcpProxy(hostname, Number(port));
  return {
    env: {
      ASSAY_SPOOL_URL: `s3://${server.bucket}/spool`,
      ASSAY_S3_ENDPOINT: `http://${relay.address}`,
    },
    wrapper: [],
    async usage() {
      const listed = await server.client.send(
        new ListObjectsV2Command({ Bucket: server.bucket, MaxKeys: 1000 }),
      );
      const objects = listed.Contents ?? [];
      return { files: objects.length, bytes: objects.reduce((sum, o) => sum + (o.Size ?? 0), 0) };
    },
    fault: {
      key: 's3',
      name: `the S3 server stopped for ${DOWN_MS / 1000} s`,
      killsProcesses: false,
      async run() {
        relay.cut();
        await sleep(DOWN_MS);
        relay.restore();
      },
    },
    async close() {
      await relay.close();
      await server.stop();
    },
  };
}

async function tmpfsSpool(dir: string, bytes: number): Promise<SoakSpool> {
  const mount = `mount -t tmpfs -o size=${bytes} tmpfs "$0" && echo mounted && exec sleep infinity`;
  const holder: ChildProcess = spawn(
    'unshare',
    ['-m', '--propagation', 'private', 'sh', '-c', mount, dir],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve, reject) => {
    holder.once('exit', (code) =>
      reject(new Error(`no private tmpfs for the spool (exit ${code}): run as root`)),
    );
    holder.stdout?.once('data', () => resolve());
  });
  const namespace = `--mount=/proc/${holder.pid}/ns/mnt`;
  const inside = (script: string) => {
    const run = spawnSync('nsenter', [namespace, '--', 'sh', '-c', script, dir], {
      encoding: 'utf8',
    });
    if (run.status !== 0) throw new Error(`in the spool's namespace: ${run.stderr.trim()}`);
  };
  return {
    env: { ASSAY_SPOOL_DIR: dir },
    wrapper: ['nsenter', namespace, `--wd=${process.cwd()}`, '--'],
    // The namespace's mounts, seen through its holder's root.
    usage: async () => spoolUsage(`/proc/${holder.pid}/root${dir}`),
    fault: {
      key: 'disk',
      name: `the spool's filesystem full for ${DOWN_MS / 1000} s`,
      killsProcesses: false,
      async run() {
        // dd stops at ENOSPC: every byte left is taken, until the file is removed.
        inside('dd if=/dev/zero of="$0/soak-filler" bs=1M 2>/dev/null; true');
        try {
          await sleep(DOWN_MS);
        } finally {
          inside('rm -f "$0/soak-filler"');
        }
      },
    },
    async close() {
      holder.kill('SIGKILL');
    },
  };
}
