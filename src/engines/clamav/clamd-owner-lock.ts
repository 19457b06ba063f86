import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';

/**
 * The lock that makes one process the runner of a data dir's managed clamd: an fcntl lock on a
 * file in `<data dir>/clamd/`, taken through SQLite (Node has no file lock of its own; SQLite's is
 * fcntl's, and also tells two holders in one process apart). The kernel releases it when the
 * holder ends however it ends (SIGKILL and OOM included), no pid is trusted (pids are reused, and
 * differ between containers sharing the folder), and it holds across containers sharing the
 * folder on one host. The file holds no data and is never removed.
 */
export class ClamdOwnerLock {
  private held: SQLite.Database | null = null;

  constructor(readonly path: string) {}

  get isHeld(): boolean {
    return this.held !== null;
  }

  /** Takes the lock unless another holds it (a process, or another lock in this one); never waits. */
  tryAcquire(): boolean {
    if (this.held !== null) return true;
    mkdirSync(dirname(this.path), { recursive: true });
    const db = new SQLite(this.path, { timeout: 0 });
    try {
      // No journal file beside the lock: nothing is ever written.
      db.pragma('journal_mode = MEMORY');
      // Held until close(): an EXCLUSIVE lock, which no other connection can share.
      db.exec('BEGIN EXCLUSIVE');
    } catch (error) {
      db.close();
      if ((error as { code?: unknown }).code === 'SQLITE_BUSY') return false;
      throw new Error(`cannot lock ${this.path}: ${(error as Error).message}`);
    }
    this.held = db;
    return true;
  }

  release(): void {
    this.held?.close();
    this.held = null;
  }
}
