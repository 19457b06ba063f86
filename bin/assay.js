#!/usr/bin/env node
// Entry point of the `assay` command: runs the compiled CLI (npm run build creates dist/).
import { existsSync } from 'node:fs';

/**
 * V8's heap sizes for `serve`, which V8 reads only at start (docs/ARCHITECTURE.md, Memory):
 * - a 16 MB semi-space (a 32 MB young generation): Node 24 sizes it from the machine's memory, 64 MB
 *   (a 128 MB young generation) on a 24 GB machine, and 4 KB uploads fill it: 100 MB of RSS for no
 *   throughput gain measured;
 * - a 1 GB old generation: below 2 GB V8 lets the old generation grow less between full
 *   collections (to about twice what is live rather than four times: 60 MB rather than 120 MB under
 *   4 KB uploads). Content never lives on this heap (it streams, or waits in Buffers outside it);
 *   what does is about 40 MB.
 * The process replaces itself once with the flags (same pid, stdio and environment). A flag the
 * user set (NODE_OPTIONS or a node option) is kept; `--processes` children inherit the primary's.
 */
const SERVICE_FLAGS = ['--max-semi-space-size=16', '--max-old-space-size=1024'];

function restartWithServiceFlags() {
  if (process.argv[2] !== 'serve' || typeof process.execve !== 'function') return;
  if (process.env.NODE_CHANNEL_FD !== undefined) return; // forked with an IPC channel: keep it
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].map(
    (flag) => flag.split('=')[0]?.replaceAll('_', '-'),
  );
  const missing = SERVICE_FLAGS.filter((flag) => !given.includes(flag.split('=')[0]));
  if (missing.length === 0) return;
  process.execve(process.execPath, [
    process.execPath,
    ...missing,
    ...process.execArgv,
    ...process.argv.slice(1),
  ]);
}

restartWithServiceFlags();

const main = new URL('../dist/main.js', import.meta.url);
if (!existsSync(main)) {
  console.error('assay is not built: run `npm run build` in the assay folder first');
  process.exit(1);
}
await import(main.href);
