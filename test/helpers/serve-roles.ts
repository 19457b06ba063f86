import { rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import type { TestContext } from 'node:test';
import type { ServeProcess } from './cli.js';
import { startLocalServer } from './local-server.js';
import { tempDir } from './service.js';

export interface Ready {
  status: string;
  problems: string[];
  queue?: { due: number; running: number; oldestDueSeconds: number } | null;
}

/** A process's readiness: its status and what it says. */
export async function readyOf(serve: ServeProcess): Promise<{ status: number; body: Ready }> {
  const response = await fetch(`${serve.url}/health/ready`);
  return { status: response.status, body: (await response.json()) as Ready };
}

/** A data dir for the test, removed after it. */
export function dataDir(t: TestContext): string {
  const dir = tempDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A remote whose first `held` requests get no answer until the test ends; later ones `content`. */
export async function remoteHolding(t: TestContext, held: number, content: Buffer) {
  const open: ServerResponse[] = [];
  const remote = await startLocalServer((_request, response) => {
    if (remote.requests.length <= held) {
      open.push(response);
      return;
    }
    response.end(content);
  });
  t.after(() => {
    for (const response of open) response.destroy();
    return remote.close();
  });
  return remote;
}

/** Every process's settings in the roles tests: one clamd, fetches and callbacks on this machine. */
export function rolesEnv(clamd: { readonly socket: string }) {
  return () => ({
    ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
    ASSAY_CLAMD: clamd.socket,
    ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    ASSAY_CALLBACK_RETRY_BASE_MS: '100',
  });
}
