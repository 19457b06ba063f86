import { mkdir, rm, symlink, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { type DatabaseFileStat, databaseFiles, fileIdentity } from './clamd-databases.js';
import type { ClamdLogger } from './managed-clamd.js';

/** A folder of ClamAV databases the managed clamd loads. */
export interface SignatureSource {
  dir: string;
  /** `own`: Assay's (a broken one is a bug, never refused); `operator`: ASSAY_SIGNATURES_DIR; `official`: freshclam's. */
  kind: 'own' | 'operator' | 'official';
}

interface Linked {
  path: string;
  stat: string;
  kind: SignatureSource['kind'];
}

/** A file clamd could not load, as found in its output. */
export interface RefusedFile {
  name: string;
  reason: string;
}

/**
 * The managed clamd's DatabaseDirectory: a link to every database file of its sources (the first
 * source wins a name), kept in step with them by `sync()`, so files added, changed or removed
 * after the start reach clamd at its next reload. A file clamd could not load is refused: its link
 * goes until the file changes, so the rest of the set loads without it.
 */
export class ClamdDatabaseDir {
  private readonly linked = new Map<string, Linked>();
  /** Source path -> the identity (stat) that was refused, and its name in clamd's folder. */
  private readonly refused = new Map<string, { stat: string; name: string }>();
  private readonly clashes = new Set<string>();

  constructor(
    readonly dir: string,
    private readonly sources: readonly SignatureSource[],
    private readonly logger: ClamdLogger,
  ) {}

  /** Empties the directory and links every source's files (at clamd's start). */
  async rebuild(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
    await mkdir(this.dir, { recursive: true });
    this.linked.clear();
    await this.sync();
    const own = [...this.linked.values()].filter((file) => file.kind === 'own');
    if (own.length === 0) {
      const dir = this.sources.find((source) => source.kind === 'own')?.dir;
      throw new Error(`no ClamAV database files in ${dir}`);
    }
    this.logger.info(
      {
        own: this.names('own'),
        operator: this.names('operator'),
        official: this.names('official'),
      },
      this.names('official').length > 0
        ? 'clamd databases prepared'
        : 'clamd databases prepared (no official ones)',
    );
  }

  /**
   * Links what the sources hold now; true when anything was added, changed or removed (clamd
   * must reload). A folder that cannot be read counts as empty, with a warning.
   */
  async sync(): Promise<boolean> {
    const wanted = await this.wanted();
    let changed = false;
    for (const [name, file] of this.linked) {
      const now = wanted.get(name);
      if (now === undefined || now.path !== file.path) {
        await unlink(join(this.dir, name)).catch(ignoreMissing);
        this.linked.delete(name);
        changed = true;
      }
    }
    for (const [name, file] of wanted) {
      const had = this.linked.get(name);
      if (had === undefined) {
        await symlink(file.path, join(this.dir, name));
        changed = true;
      } else if (had.stat !== file.stat) {
        changed = true;
      }
      this.linked.set(name, file);
    }
    return changed;
  }

  /**
   * Takes away the files clamd could not load until they change; false if one of them cannot be
   * refused (Assay's own, or not a linked file), so loading again would fail the same way.
   */
  async refuse(files: readonly RefusedFile[]): Promise<boolean> {
    let all = files.length > 0;
    for (const { name, reason } of files) {
      const file = this.linked.get(name);
      if (file === undefined || file.kind === 'own') {
        all = false;
        continue;
      }
      // As it is now: it may have changed since it was linked (a clamd restart read it through
      // its link).
      this.refused.set(file.path, { stat: (await fileIdentity(file.path)) ?? file.stat, name });
      this.linked.delete(name);
      await unlink(join(this.dir, name)).catch(ignoreMissing);
      this.logger.error(
        { file: file.path, reason },
        'signature database refused: clamd could not load it; the other databases are loaded without it until it changes',
      );
    }
    return all;
  }

  /** The source path of a database file clamd names by its link. */
  sourceOf(name: string): string | undefined {
    return this.linked.get(name)?.path;
  }

  /** The files linked now, by name in clamd's folder. */
  files(): Array<{ name: string } & Linked> {
    return [...this.linked].map(([name, file]) => ({ name, ...file }));
  }

  /** The names of the files refused now (until they change or go), for readiness. */
  refusedNames(): string[] {
    return [...this.refused.values()].map((file) => file.name).sort();
  }

  private names(kind: SignatureSource['kind']): string[] {
    return [...this.linked].filter(([, file]) => file.kind === kind).map(([name]) => name);
  }

  private async wanted(): Promise<Map<string, Linked>> {
    const wanted = new Map<string, Linked>();
    const stillRefused = new Set<string>();
    for (const source of this.sources) {
      let files: DatabaseFileStat[];
      try {
        files = await databaseFiles(source.dir);
      } catch (error) {
        if (source.kind === 'own') throw error;
        this.logger.warn({ err: error, dir: source.dir }, 'cannot read a signature folder');
        continue;
      }
      for (const file of files) {
        if (this.refused.get(file.path)?.stat === file.stat) {
          stillRefused.add(file.path);
          continue;
        }
        if (wanted.has(file.name)) {
          if (!this.clashes.has(file.path)) {
            this.clashes.add(file.path);
            this.logger.warn(
              { file: file.path, loaded: wanted.get(file.name)?.path },
              'clamd database name is taken by an earlier folder; skipped',
            );
          }
          continue;
        }
        wanted.set(file.name, { path: file.path, stat: file.stat, kind: source.kind });
      }
    }
    // A refused file that changed is tried again; one that went is no longer refused.
    for (const path of this.refused.keys()) {
      if (!stillRefused.has(path)) this.refused.delete(path);
    }
    return wanted;
  }
}

function ignoreMissing(error: NodeJS.ErrnoException): void {
  if (error.code !== 'ENOENT') throw error;
}
