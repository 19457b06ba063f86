import { connect } from 'node:net';
import { basename, dirname } from 'node:path';
import type { ClamdDatabaseDir, RefusedFile } from './clamd-database-dir.js';
import {
  DatabaseDigests,
  type DatabaseSet,
  databaseFiles,
  type LoadState,
  readLoadState,
  sameFiles,
  writeLoadState,
} from './clamd-databases.js';
import { type ClamdLoadCheck, findRefusedFile } from './clamd-load-check.js';
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
  /** Database files the load under way could not read, as clamd named them. */
  private failed: RefusedFile[] = [];
  /** The files of the last set clamd loaded here (null: not read yet from the state file). */
  private lastLoaded: DatabaseSet['files'] | null = null;
  /** A start or reload began and has not ended in a loaded set. */
  private unsettled = false;
  private readonly dbDir: string;

  constructor(
    /** Where the state file goes: beside clamd's socket. */
    private readonly stateDir: string,
    /** clamd's DatabaseDirectory. */
    private readonly databases: ClamdDatabaseDir,
    private readonly options: {
      logger: ClamdLogger;
      onLoadChange?: () => void;
      /** Asks clamd to load its databases again. */
      reload: () => Promise<void>;
      /** A throwaway clamd, to find a file clamd refuses without naming it. */
      check: ClamdLoadCheck;
    },
  ) {
    this.dbDir = databases.dir;
  }

  /** Before clamd starts: `loading`, and the set it is about to read. */
  async starting(): Promise<DatabaseSet> {
    this.unsettled = true;
    // At Assay's start, what the data dir's clamd last loaded: only files changed since are new.
    if (this.lastLoaded === null) {
      const previous = await readLoadState(this.stateDir).catch(() => null);
      this.lastLoaded = previous?.state === 'loaded' ? previous.set.files : [];
    }
    await this.markLoading();
    return this.digests.of(this.dbDir);
  }

  /** After clamd loaded `before`: `loaded` if the files are still those, else load again. */
  async settle(before: DatabaseSet): Promise<void> {
    this.unsettled = false;
    this.lastLoaded = before.files;
    if (sameFiles(await databaseFiles(this.dbDir), before.files)) {
      await this.writeState({ state: 'loaded', set: before });
      this.options.logger.info({ databases: before.digest }, 'clamd databases loaded');
    } else {
      await this.writeState({ state: 'loading' });
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

  /**
   * After a load that failed (clamd exited at its start, or kept its previous set): refuses the
   * database files clamd named, or else the one file of those new since the last loaded set that
   * a check clamd refuses (found by halving them). False when there is none, one cannot be
   * refused, or no load failed (a clamd that died after its load).
   */
  async refuseFailed(): Promise<boolean> {
    const failed = this.failed;
    this.failed = [];
    if (failed.length > 0) return this.databases.refuse(failed);
    if (!this.unsettled) return false;
    const found = await this.findRefused();
    return found !== null && (await this.databases.refuse([found]));
  }

  /**
   * The one file a check clamd refuses (checked beside Assay's own files), if any, among those
   * new or changed since the last loaded set (all of them if none is: clamd itself changed).
   */
  private async findRefused(): Promise<RefusedFile | null> {
    // Compared as clamd reads them now: a linked file may have changed since it was linked.
    const current = new Map((await databaseFiles(this.dbDir)).map((file) => [file.name, file]));
    const files = this.databases.files().filter((file) => current.has(file.name));
    const loaded = new Map((this.lastLoaded ?? []).map((file) => [file.name, file.stat]));
    const others = files.filter((file) => file.kind !== 'own');
    const changed = others.filter((file) => loaded.get(file.name) !== current.get(file.name)?.stat);
    const candidates = changed.length > 0 ? changed : others;
    if (candidates.length === 0) return null;
    const started = Date.now();
    const { check, logger } = this.options;
    logger.warn(
      { candidates: candidates.length },
      'clamd could not load its databases and names no file: checking which one it cannot load',
    );
    const { refused, checks } = await findRefusedFile(
      files.filter((file) => file.kind === 'own'),
      candidates,
      (subset) => check.loads(subset),
      logger,
    );
    logger.info(
      {
        file: refused?.file.path ?? null,
        candidates: candidates.length,
        checks,
        ms: Date.now() - started,
      },
      refused === null
        ? 'no database file found at fault'
        : 'found the database file clamd cannot load',
    );
    return refused === null ? null : { name: refused.file.name, reason: refused.reason };
  }

  /** Any line of clamd's output, its first load's included: files it could not load. */
  onAnyOutput(line: string): void {
    const cannotLoad = CANNOT_LOAD.exec(line);
    if (cannotLoad !== null) {
      const [, path = '', reason = ''] = cannotLoad;
      if (dirname(path) === this.dbDir) this.failed.push({ name: basename(path), reason });
      return;
    }
    // clamd loads a YARA file's other rules and leaves out those it cannot parse.
    const yara = YARA_RULES_FAILED.exec(line);
    if (yara !== null) {
      const [, count = '', path = ''] = yara;
      this.options.logger.error(
        { file: this.databases.sourceOf(basename(path)) ?? path, rules: Number(count) },
        'YARA rules refused: clamd could not parse them (its other rules are loaded)',
      );
    }
  }

  /** A line clamd wrote once it answered: a reload begins, is activated, or failed. */
  onOutput(line: string): void {
    // SelfCheck found a change, or RELOAD: the set on disk now is what it reads.
    if (line.startsWith('Reading databases from ')) {
      this.failed = [];
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
    } else if (line.includes('Database reload failed, keeping the previous instance')) {
      this.enqueue(async () => {
        this.reloadBefore = null;
        this.unsettled = true;
        // Still `loading`: no verdict is reused or stored until a load succeeds.
        if (await this.refuseFailed()) {
          await this.options.reload();
        } else {
          this.options.logger.error(
            {},
            'clamd could not load its databases and keeps the previous ones; it will load them again at the next change',
          );
        }
      });
    }
  }

  private async markLoading(): Promise<void> {
    await this.writeState({ state: 'loading' });
    this.options.onLoadChange?.();
  }

  /** The state, with the files refused now (readiness names them). */
  private async writeState(state: LoadState): Promise<void> {
    await writeLoadState(this.stateDir, { ...state, refused: this.databases.refusedNames() });
  }
}

// libclamav: "LibClamAV Error: Can't load /path/x.ndb: Malformed database".
const CANNOT_LOAD = /^LibClamAV Error: Can't load (\/[^:]{1,4096}): (.{0,500})$/;
// "cli_loadyara: failed to parse or load 1 yara rules from file /path/x.yar, successfully ..."
const YARA_RULES_FAILED =
  /cli_loadyara: failed to parse or load (\d{1,9}) yara rules from file (\/[^,]{1,4096}),/;

/** Sends clamd RELOAD; its output then reports the load. A failure is logged. */
export function reloadClamd(socketPath: string, logger: ClamdLogger): Promise<void> {
  return sendClamdCommand(socketPath, 'RELOAD', (error) =>
    logger.warn({ err: error }, 'could not ask clamd to reload'),
  );
}

/** Sends clamd a command whose answer is not read (RELOAD, SHUTDOWN); settles when it hangs up. */
export function sendClamdCommand(
  socketPath: string,
  command: 'RELOAD' | 'SHUTDOWN',
  onError: (error: Error) => void = () => {},
): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    socket.setTimeout(5_000, () => socket.destroy());
    socket.on('error', onError);
    socket.on('close', () => resolve());
    socket.end(`z${command}\0`);
    socket.resume();
  });
}
