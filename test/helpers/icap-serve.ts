import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { type ServeProcess, startServe } from './cli.js';

export interface ServedIcap {
  serve: ServeProcess;
  /** The ICAP listener's port. */
  port: number;
  /** The service process's peak resident memory so far (VmHWM), in bytes. */
  peakRss(): number;
}

/**
 * `assay serve` as its own process with the ICAP listener (service avscan acting as the
 * bootstrapped key `icap-key`), so that its memory is its own and not the test's.
 */
export async function serveIcap(
  t: TestContext,
  dataDir: string,
  clamdSocket: string,
  env: Record<string, string> = {},
  serveArgs: string[] = [],
): Promise<ServedIcap> {
  const serve = await startServe(
    t,
    {
      ASSAY_DATA_DIR: dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'icap-key:icap-secret-0123456789',
      ASSAY_CLAMD: clamdSocket,
      ASSAY_ICAP_PORT: '0',
      ASSAY_ICAP_SERVICES: 'avscan=icap-key',
      ASSAY_SHUTDOWN_GRACE: '0',
      ...env,
    },
    [],
    serveArgs,
  );
  const serving = serve.records.find((record) => record.msg === 'assay is serving');
  const port = Number(/:(\d+)$/.exec(String(serving?.icap ?? ''))?.[1]);
  assert.ok(port > 0, `the serving line names the ICAP URL: ${JSON.stringify(serving)}`);
  const peakRss = () => {
    const status = readFileSync(`/proc/${serve.child.pid}/status`, 'utf8');
    return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]) * 1024;
  };
  return { serve, port, peakRss };
}
