#!/usr/bin/env node
// Entry point of the `assay` command: runs the compiled CLI (npm run build creates dist/).
import { existsSync } from 'node:fs';

/**
 * `serve` runs with a 16 MB semi-space (a 32 MB young generation). Node 24 sizes it from the
 * machine's memory, 64 MB (128 MB young generation) on a 24 GB machine, and a service under
 * small uploads fills it: 100 MB of its peak RSS, for no throughput gain measured
 * (docs/ARCHITECTURE.md, Memory). V8 reads the size only at start, so the process replaces
 * itself once with the flag (same pid, stdio and environment). A size set by the user
 * (NODE_OPTIONS or a node option) is kept; `--processes` children inherit the primary's flags.
 */
const SEMI_SPACE_FLAG = '--max-semi-space-size=16';

function restartWithServiceFlags() {
  if (process.argv[2] !== 'serve' || typeof process.execve !== 'function') return;
  if (process.env.NODE_CHANNEL_FD !== undefined) return; // forked with an IPC channel: keep it
  const setByUser = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((flag) =>
    /--max[-_]semi[-_]space[-_]size/.test(flag),
  );
  if (setByUser) return;
  process.execve(process.execPath, [
    process.execPath,
    SEMI_SPACE_FLAG,
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
