#!/usr/bin/env node
// Entry point of the `assay` command: runs the compiled CLI (npm run build creates dist/).
import { existsSync } from 'node:fs';

/**
 * `serve` runs with a 16 MB semi-space (a 32 MB young generation). Node 24 sizes it from the
 * machine's memory, 64 MB (128 MB young generation) on a 24 GB machine, and a service under
 * small uploads fills it: 100 MB of its peak RSS, for no throughput gain measured
 * (docs/ARCHITECTURE.md, Memory). And with a 64 MB initial old space: V8 starts marking the old
 * generation whenever the room left under its limit is less than the young generation could
 * promote, and with the 30 MB the service keeps live, a limit sized from that left less: under
 * 1 MB uploads a full collection ran every 200 ms, and half of Assay's CPU went to marking.
 * Three more for V8's own schedules. After a full collection V8 sets the old generation's next
 * limit from what is live times a factor it derives from how fast it collects; under 64 KB
 * uploads it chose ~1.3 (a 40 MB limit for 30 MB live) and then ran a full collection every
 * 0.3 s (39-46 in three rounds), 1.9-2.0 ms of CPU a file against 1.1-1.3: the factor is fixed
 * at 3 (1 collection). Its memory reducer, after a few idle seconds, shrinks both generations
 * to what is live, and the next burst paid the same way (18 full collections against 2 in five
 * rounds with idle gaps, 60% more young ones): off, memory freed in a burst stays for the next
 * one (the peak is the same). And TurboFan compiles a function after 1,000 calls instead of
 * 3,000: most of the request path runs once a request, so a new process took ~15,000 requests to
 * reach its steady CPU a request (V8's compiler threads 0.1-0.2 ms a request until then), now
 * ~3,500; the same compilations, earlier, and no more deoptimisations (docs/ARCHITECTURE.md).
 * V8 reads these only at start, so the process replaces itself once with the flags (same pid,
 * stdio and environment). A flag set by the user (NODE_OPTIONS or a node option) is kept;
 * `--processes` children inherit the primary's flags.
 *
 * The same restart sets MALLOC_ARENA_MAX=2 unless it is set: glibc gives each thread that
 * allocates (libmagic's worker, the checkpointing thread, libuv's and V8's helpers) an arena of
 * its own, up to 8 per CPU, each holding freed memory; two arenas cut 5-25 MB of peak RSS under
 * load for no CPU measured (docs/ARCHITECTURE.md, Memory). And MALLOC_MMAP_THRESHOLD_: glibc
 * raises its threshold for giving an allocation a mapping of its own to the largest such block
 * freed (up to 32 MB), so once one of libmagic's large start buffers (10-12 MB) had been freed,
 * later ones came from the arenas and stayed there when freed: ~10 MB resident for good. Fixed at
 * 4 MB, blocks that large always go back to the system when freed; the request path allocates
 * none (a head for libmagic is 1 MiB at most). glibc reads both only at start too.
 */
const SERVICE_FLAGS = [
  { flag: '--max-semi-space-size=16', name: /--max[-_]semi[-_]space[-_]size/ },
  { flag: '--initial-old-space-size=64', name: /--initial[-_]old[-_]space[-_]size/ },
  { flag: '--no-memory-reducer', name: /^--(no[-_])?memory[-_]reducer(=|$)/ },
  { flag: '--heap-growing-percent=200', name: /--heap[-_]growing[-_]percent/ },
  {
    flag: '--invocation-count-for-turbofan=1000',
    name: /--invocation[-_]count[-_]for[-_]turbofan/,
  },
];

function restartWithServiceFlags() {
  if (process.argv[2] !== 'serve' || typeof process.execve !== 'function') return;
  if (process.env.NODE_CHANNEL_FD !== undefined) return; // forked with an IPC channel: keep it
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  const missing = SERVICE_FLAGS.filter(({ name }) => !given.some((flag) => name.test(flag)));
  // Once replaced, the flags are in execArgv and the variable in the environment: the check
  // below ends the loop.
  if (missing.length === 0 && process.env.MALLOC_ARENA_MAX !== undefined) return;
  // (With every flag and MALLOC_ARENA_MAX given, nothing is added: whoever set those tunes malloc.)
  process.execve(
    process.execPath,
    [
      process.execPath,
      ...missing.map(({ flag }) => flag),
      ...process.execArgv,
      ...process.argv.slice(1),
    ],
    { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: String(4 * 1024 * 1024), ...process.env },
  );
}

restartWithServiceFlags();

const main = new URL('../dist/main.js', import.meta.url);
if (!existsSync(main)) {
  console.error('assay is not built: run `npm run build` in the assay folder first');
  process.exit(1);
}
await import(main.href);
