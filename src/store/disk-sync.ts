import { type FileHandle, open } from 'node:fs/promises';

/**
 * Makes a directory's entries durable: a file created or renamed into it survives power loss only
 * once the directory itself is synced, not just the file's bytes.
 */
export async function syncDirectory(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Syncs shared by the callers that ask at once: a sync started after a caller asked covers
 * everything that caller wrote before asking, so callers arriving while one runs share the next.
 */
export class SharedSync {
  private running: Promise<void> | null = null;
  private next: Promise<void> | null = null;

  constructor(private readonly syncOnce: () => Promise<void>) {}

  sync(): Promise<void> {
    if (this.next !== null) return this.next;
    if (this.running === null) return this.start();
    // The sync under way may have begun before this caller's writes: it waits for the next one.
    this.next = this.running
      .catch(() => {})
      .then(() => {
        this.next = null;
        return this.start();
      });
    return this.next;
  }

  /** Settles once no sync runs or waits (whatever they came to). */
  async idle(): Promise<void> {
    while (this.running !== null || this.next !== null) {
      await (this.next ?? this.running)?.catch(() => {});
    }
  }

  private start(): Promise<void> {
    const run = this.syncOnce().finally(() => {
      if (this.running === run) this.running = null;
    });
    this.running = run;
    return run;
  }
}

/**
 * fsyncs of one directory shared by the callers that ask at once (SharedSync): many spool files
 * renamed together cost two directory syncs, not one each.
 */
export class SharedDirectorySync extends SharedSync {
  constructor(path: string) {
    super(() => syncDirectory(path));
  }
}

/**
 * fdatasyncs of one file (SQLite's WAL), on libuv's threads, shared by the callers that ask at
 * once (SharedSync), through a descriptor kept open: an open and a close for every sync were 40%
 * of the main thread's share of it. A file that is not there yet has nothing to sync; a sync that
 * fails closes the descriptor, so the next one opens the file anew.
 */
export class FileDataSync {
  private handle: FileHandle | null = null;
  private closed = false;
  private readonly shared = new SharedSync(() => this.syncOnce());

  constructor(private readonly path: string) {}

  sync(): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`${this.path}: closed`));
    return this.shared.sync();
  }

  /** Waits for the syncs under way, then closes the descriptor. */
  async close(): Promise<void> {
    this.closed = true;
    await this.shared.idle();
    await this.handle?.close();
    this.handle = null;
  }

  private async syncOnce(): Promise<void> {
    if (this.handle === null) {
      try {
        this.handle = await open(this.path, 'r');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw error;
      }
    }
    const handle = this.handle;
    try {
      await handle.datasync();
    } catch (error) {
      this.handle = null;
      await handle.close().catch(() => {});
      throw error;
    }
  }
}
