import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How often the checkpointing thread copies the WAL back into the database. */
const CHECKPOINT_EVERY_MS = 100;
/**
 * The connection's own checkpoints, a backstop should the thread fall behind or stop: SQLite's
 * default is 1,000 pages (4 MB); this is 40 MB.
 */
export const BACKSTOP_CHECKPOINT_PAGES = 10_000;

// CommonJS, run by the worker as its whole program: a connection of its own that checkpoints
// (PASSIVE: never waits for, nor holds up, the writer), and closes when told to stop.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const SQLite = require(workerData.module);
const db = new SQLite(workerData.file);
db.pragma('busy_timeout = 1000');
db.pragma('synchronous = NORMAL');
let failures = 0;
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    failures = 0;
  } catch (error) {
    if (failures++ === 0) parentPort.postMessage({ error: String(error && error.message || error) });
  }
}, workerData.everyMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

/**
 * Checkpoints of the SQLite WAL on a thread of their own. A checkpoint copies every page written
 * since the last one into the database file and syncs it: run by the committing connection (SQLite's
 * default, every 1,000 pages), that held the event loop for up to 18 ms every hundred commits or
 * so, 40-60% of all commit time under load (`BENCH_ONLY=async-e2e`; issue 28).
 */
export class SqliteCheckpoints {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;

  constructor(file: string, onError: (message: string) => void) {
    const module = createRequire(import.meta.url).resolve('better-sqlite3');
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { module, file, everyMs: CHECKPOINT_EVERY_MS },
    });
    this.worker.unref();
    this.worker.on('message', (message: { error?: string }) => {
      if (message.error !== undefined) onError(message.error);
    });
    this.worker.on('error', (error) => onError(error.message));
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
  }

  /** Stops the thread once it has closed its connection. */
  async stop(): Promise<void> {
    this.worker.ref(); // the wait for its exit keeps the process up
    this.worker.postMessage('stop');
    await this.exited;
  }
}
