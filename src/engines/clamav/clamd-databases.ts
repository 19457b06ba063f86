import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ClamdAddress } from './clamd-client.js';

// What libclamav loads from a database directory (CLI_DBEXT in libclamav/readdb.h).
const DATABASE_FILE =
  /\.(?:db|hdb|hdu|fp|mdb|mdu|hsb|hsu|sfp|msb|msu|ndb|ndu|ldb|ldu|sdb|zmd|rmd|pdb|gdb|wdb|cbc|ftm|cfg|cvd|cld|cud|cdb|cat|crb|idb|ioc|yar|yara|pwdb|ign|ign2|imp)$/i;

/** The state file a managed clamd keeps beside its socket: what it has loaded. */
export const LOAD_STATE_FILE = 'databases.json';

/** A database file as clamd would read it: its name, where it is, and its identity on disk. */
export interface DatabaseFileStat {
  name: string;
  path: string;
  /** Device, inode, size, modification and change times: a write or a replacement changes it. */
  stat: string;
}

/** A set of database files with each one's content digest, and the set's digest. */
export interface DatabaseSet {
  /** `sha256:` and 16 hex digits over every file's name and content: the same files anywhere, the same digest. */
  digest: string;
  files: Array<{ name: string; stat: string; sha256: string }>;
}

/**
 * What a managed clamd has loaded: `loaded` with the set, or `loading` (a start or reload under
 * way, or a set that changed while it loaded): then no verdict may be reused or stored. `refused`
 * names the files left out because clamd could not load them.
 */
export type LoadState = ({ state: 'loaded'; set: DatabaseSet } | { state: 'loading' }) & {
  refused?: string[];
};

/** The database files in `dir`, sorted by name, links followed (as clamd follows them). */
export async function databaseFiles(dir: string): Promise<DatabaseFileStat[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const files: DatabaseFileStat[] = [];
  for (const name of names.sort()) {
    if (!DATABASE_FILE.test(name)) continue;
    const path = join(dir, name);
    const identity = await fileIdentity(path);
    if (identity !== null) files.push({ name, path, stat: identity });
  }
  return files;
}

/** A file's identity on disk (`DatabaseFileStat.stat`); null if it is not a file (any more). */
export async function fileIdentity(path: string): Promise<string | null> {
  const info = await stat(path, { bigint: true }).catch(() => null);
  if (info === null || !info.isFile()) return null;
  return [info.dev, info.ino, info.size, info.mtimeNs, info.ctimeNs].join(':');
}

/** Whether two listings name the same files, unchanged. */
export function sameFiles(
  a: ReadonlyArray<{ name: string; stat: string }>,
  b: ReadonlyArray<{ name: string; stat: string }>,
): boolean {
  return (
    a.length === b.length &&
    a.every((file, index) => file.name === b[index]?.name && file.stat === b[index]?.stat)
  );
}

/**
 * Digests of database directories. A file's content is hashed once per identity (stat), so a set
 * read again costs a directory listing and a stat per file; the official databases (some hundred
 * MB) are hashed when they change, not at every reading.
 */
export class DatabaseDigests {
  private readonly hashes = new Map<string, { stat: string; sha256: string }>();

  async of(dir: string): Promise<DatabaseSet> {
    const files: DatabaseSet['files'] = [];
    for (const file of await databaseFiles(dir)) {
      const known = this.hashes.get(file.path);
      const sha256 =
        known !== undefined && known.stat === file.stat ? known.sha256 : await hashFile(file.path);
      this.hashes.set(file.path, { stat: file.stat, sha256 });
      files.push({ name: file.name, stat: file.stat, sha256 });
    }
    const digest = createHash('sha256');
    for (const file of files) digest.update(`${file.name}\0${file.sha256}\n`);
    return { digest: `sha256:${digest.digest('hex').slice(0, 16)}`, files };
  }
}

async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Writes the load state atomically (a reader never sees half of it). */
export async function writeLoadState(dir: string, state: LoadState): Promise<void> {
  const path = join(dir, LOAD_STATE_FILE);
  await writeFile(`${path}.tmp`, JSON.stringify(state));
  await rename(`${path}.tmp`, path);
}

/** The load state in `dir`; null when there is none (no managed clamd writes one there). */
export async function readLoadState(dir: string): Promise<LoadState | null> {
  try {
    return JSON.parse(await readFile(join(dir, LOAD_STATE_FILE), 'utf8')) as LoadState;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/**
 * The names of the database files a managed clamd left out because it could not load them (its
 * state file beside its socket); none for a clamd Assay does not run.
 */
export function refusedDatabases(address: ClamdAddress): () => Promise<string[]> {
  const stateDir = address.kind === 'unix' ? dirname(address.path) : null;
  return async () => (stateDir === null ? [] : ((await readLoadState(stateDir))?.refused ?? []));
}

/** Why no databases version can be given now: the verdict cache is off for the item. */
export class DatabasesUnsettledError extends Error {}

/**
 * The version of what a managed clamd has loaded (its state file in `stateDir`, beside its socket;
 * null when there is none: not a clamd Assay runs), provided its database directory still holds
 * exactly those files: a file changed on disk and not yet loaded (clamd's SelfCheck will) leaves
 * no version, so no verdict is stored under a set clamd has not scanned with.
 */
export async function loadedDatabasesVersion(stateDir: string): Promise<string | null> {
  const state = await readLoadState(stateDir);
  if (state === null) return null;
  if (state.state !== 'loaded') throw new DatabasesUnsettledError('clamd is loading its databases');
  if (!sameFiles(await databaseFiles(join(stateDir, 'db')), state.set.files)) {
    throw new DatabasesUnsettledError('a database changed that clamd has not loaded yet');
  }
  return state.set.digest;
}

/**
 * The version of a directory of databases that a clamd Assay does not run loads: its digest once
 * the directory has stayed unchanged for `settleMs` (the clamd's SelfCheck), so a verdict is never
 * stored under a set that clamd may not have loaded yet. What the directory holds when this starts
 * counts as loaded.
 */
export class SettledDatabases {
  private readonly digests = new DatabaseDigests();
  private current: { set: DatabaseSet; since: number } | null = null;

  constructor(
    private readonly dir: string,
    private readonly settleMs: number,
  ) {}

  async version(): Promise<string> {
    const set = await this.digests.of(this.dir);
    const now = Date.now();
    if (this.current === null) this.current = { set, since: now - this.settleMs };
    else if (this.current.set.digest !== set.digest) this.current = { set, since: now };
    if (now - this.current.since < this.settleMs) {
      throw new DatabasesUnsettledError('a database changed that clamd may not have loaded yet');
    }
    return set.digest;
  }
}

/**
 * The version of every database clamd loads, for the verdict cache's key and readiness: the set a
 * managed clamd (one with a state file beside its socket) has loaded, else the settled digest of
 * `watchedDir` (a clamd you run), else `none`. Throws while it cannot be known (the cache is then
 * off for the item).
 */
export function clamdDatabasesVersion(
  address: ClamdAddress,
  watchedDir: string,
  settleMs: number,
): () => Promise<string> {
  const stateDir = address.kind === 'unix' ? dirname(address.path) : null;
  const settled = watchedDir === '' ? null : new SettledDatabases(watchedDir, settleMs);
  return async () => {
    const loaded = stateDir === null ? null : await loadedDatabasesVersion(stateDir);
    return loaded ?? (await settled?.version()) ?? 'none';
  };
}
