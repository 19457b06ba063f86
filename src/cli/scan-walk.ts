import { lstat, readdir } from 'node:fs/promises';
import { compileGlob } from './glob.js';
import { baseName, joinPath } from './scan-names.js';

/**
 * A regular file to scan, as found by the walk. Paths are bytes: a name need not be UTF-8, and
 * as text two names could read alike (see scan-names.ts).
 */
export interface FoundFile {
  path: Buffer;
  size: number;
}

/** What the walk did not scan, and why: said on a line of its own, never silently. */
export type WalkNotice =
  | { kind: 'symlink'; path: Buffer }
  | { kind: 'special'; path: Buffer; type: string }
  | { kind: 'empty'; path: Buffer }
  | { kind: 'excluded'; path: Buffer }
  | { kind: 'error'; path: Buffer; message: string };

export interface WalkOptions {
  /** `--exclude` patterns (see glob.ts). */
  exclude: string[];
  onNotice(notice: WalkNotice): void;
  /** Called now and then with the number of files found so far. */
  onProgress?(found: number): void;
}

/**
 * Lists the regular files under `paths` (files, or folders walked recursively), in a stable order
 * (each folder's entries sorted by name). Symbolic links are never followed, neither inside
 * folders nor given on the command line: a link may lead out of the tree or around in a loop.
 * FIFOs, sockets and devices are skipped (opening a FIFO would wait for a writer forever), and so
 * are empty files: the API refuses empty content (400), and nothing can hide in no bytes.
 */
export async function walkPaths(paths: Buffer[], options: WalkOptions): Promise<FoundFile[]> {
  const excluded = exclusionTest(options.exclude);
  const found: FoundFile[] = [];
  for (const root of paths) {
    // A path given on the command line is excluded only by a name pattern: it has no path
    // relative to itself.
    if (excluded(baseName(root).toString('utf8'), null)) {
      options.onNotice({ kind: 'excluded', path: root });
      continue;
    }
    // Folders to read: their path and their path relative to the root they came from.
    const stack: Array<{ path: Buffer; relative: string }> = [];
    const visit = async (path: Buffer, relative: string | null) => {
      let stats: Awaited<ReturnType<typeof lstat>>;
      try {
        stats = await lstat(relative === null ? ownEntry(path) : path);
      } catch (error) {
        options.onNotice({ kind: 'error', path, message: describeFsError(error) });
        return;
      }
      if (stats.isSymbolicLink()) options.onNotice({ kind: 'symlink', path });
      else if (stats.isDirectory()) stack.push({ path, relative: relative ?? '' });
      else if (stats.isFile() && stats.size === 0) options.onNotice({ kind: 'empty', path });
      else if (stats.isFile()) {
        found.push({ path, size: stats.size });
        if (found.length % 1000 === 0) options.onProgress?.(found.length);
      } else options.onNotice({ kind: 'special', path, type: specialType(stats) });
    };
    await visit(root, null);
    for (let folder = stack.pop(); folder !== undefined; folder = stack.pop()) {
      let names: Buffer[];
      try {
        names = (await readdir(folder.path, { encoding: 'buffer' })).sort(Buffer.compare);
      } catch (error) {
        options.onNotice({ kind: 'error', path: folder.path, message: describeFsError(error) });
        continue;
      }
      const before = stack.length;
      for (const name of names) {
        const path = joinPath(folder.path, name);
        // Patterns are text: a name that is not UTF-8 is matched with U+FFFD for its bad bytes.
        const text = name.toString('utf8');
        const relative = folder.relative === '' ? text : `${folder.relative}/${text}`;
        if (excluded(text, relative)) options.onNotice({ kind: 'excluded', path });
        else await visit(path, relative);
      }
      // Sub-folders were pushed in name order: reverse them so the first is read first.
      stack.push(...stack.splice(before).reverse());
    }
  }
  return found;
}

/**
 * The entry a path given on the command line names itself: `link/` and `link/.` are the folder a
 * link leads to, and lstat would follow it; without the trailing `/` (or `/.`) lstat sees the link.
 */
function ownEntry(path: Buffer): Buffer {
  const text = path.toString('latin1');
  let end = text.length;
  for (;;) {
    if (text.endsWith('/', end)) end -= 1;
    else if (text.endsWith('/.', end)) end -= 2;
    else break;
  }
  return end === 0 || end === text.length ? path : Buffer.from(text.slice(0, end), 'latin1');
}

/**
 * A pattern without `/` is matched against each entry's name (`*.log`, `node_modules`); one with
 * a `/` against the path relative to the folder given on the command line (`build/**`).
 */
function exclusionTest(patterns: string[]): (name: string, relative: string | null) => boolean {
  const byName = patterns.filter((p) => !p.includes('/')).map(compileGlob);
  const byPath = patterns.filter((p) => p.includes('/')).map(compileGlob);
  return (name, relative) =>
    byName.some((matches) => matches(name)) ||
    (relative !== null && byPath.some((matches) => matches(relative)));
}

function specialType(stats: { isFIFO(): boolean; isSocket(): boolean }): string {
  if (stats.isFIFO()) return 'a FIFO';
  if (stats.isSocket()) return 'a socket';
  return 'a device';
}

/** `EACCES: permission denied` rather than a message that repeats the path. */
export function describeFsError(error: unknown): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  const reasons: Record<string, string> = {
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    ENOENT: 'no such file (it may have vanished)',
    ELOOP: 'a symbolic link (not followed)',
    EISDIR: 'a folder',
    EIO: 'input/output error',
  };
  if (typeof code === 'string') return `${code}: ${reasons[code] ?? String(message)}`;
  return String(message ?? error);
}
