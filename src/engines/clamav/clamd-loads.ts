import { connect } from 'node:net';
import {
  DatabaseDigests,
  type DatabaseSet,
  databaseFiles,
  sameFiles,
  writeLoadState,
} from './clamd-databases.js';
import type { ClamdLogger } from './managed-clamd.js';

/**
 * What a managed clamd has loaded, kept in its load state file for the verdict cache's key
 * (issue 25) in every process that uses it: `loading` from the moment a load may begin; `loaded`
 * with the set once clamd answers (a start) or activates a reload, if the files on disk are still
 * those it began with. Else it stays `loading` and clamd is asked to load again, so the key never
 * names a set clamd did not scan with.
 */
export class ClamdLoads {
  private readonly digests = new DatabaseDigests();
  /** Steps run one at a time, in the order clamd reported them. */
  private steps: Promise<void> = Promise.resolve();
  /** The set on disk when the reload under way began. */
  private reloadBefore: Promise<DatabaseSet> | null = null;

  constructor(
    /** Where the state file goes: beside clamd's socket. */
    private readonly stateDir: string,
    /** clamd's DatabaseDirectory. */
    private readonly dbDir: string,
    private readonly options: {
      logger: ClamdLogger;
      onLoadChange?: () => void;
      /** Asks clamd to load its databases again. */
      reload: () => Promise<void>;
    },
  ) {}

  /** Before clamd starts: `loading`, and the set it is about to read. */
  async starting(): Promise<DatabaseSet> {
    await this.markLoading();
    return this.digests.of(this.dbDir);
  }

  /** After clamd loaded `before`: `loaded` if the files are still those, else load again. */
  async settle(before: DatabaseSet): Promise<void> {
    if (sameFiles(await databaseFiles(this.dbDir), before.files)) {
      await writeLoadState(this.stateDir, { state: 'loaded', set: before });
      this.options.logger.info({ databases: before.digest }, 'clamd databases loaded');
    } else {
      await writeLoadState(this.stateDir, { state: 'loading' });
      this.options.logger.warn({}, 'clamd databases changed while they loaded; reloading');
      await this.options.reload();
    }
    this.options.onLoadChange?.();
  }

  /** Runs a step after those before it; a failure is logged, never thrown. */
  enqueue(step: () => Promise<void>): void {
    this.steps = this.steps.then(step).catch((error: unknown) => {
      this.options.logger.error({ err: error }, 'could not record what clamd loaded');
    });
  }

  /** A line clamd wrote once it answered: a reload begins or is activated. */
  onOutput(line: string): void {
    // SelfCheck found a change, or RELOAD: the set on disk now is what it reads.
    if (line.startsWith('Reading databases from ')) {
      this.enqueue(async () => {
        await this.markLoading();
        this.reloadBefore = this.digests.of(this.dbDir);
        await this.reloadBefore;
      });
    } else if (line.startsWith('Activating the newly loaded database')) {
      this.enqueue(async () => {
        const before = this.reloadBefore;
        this.reloadBefore = null;
        if (before !== null) await this.settle(await before);
      });
    }
  }

  private async markLoading(): Promise<void> {
    await writeLoadState(this.stateDir, { state: 'loading' });
    this.options.onLoadChange?.();
  }
}

/** Sends clamd RELOAD; its output then reports the load. A failure is logged. */
export function reloadClamd(socketPath: string, logger: ClamdLogger): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    socket.setTimeout(5_000, () => socket.destroy());
    socket.on('error', (error) => logger.warn({ err: error }, 'could not ask clamd to reload'));
    socket.on('close', () => resolve());
    socket.end('zRELOAD\0');
    socket.resume();
  });
}
