import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../paths.js';
import { databaseFiles, readLoadState } from './clamd-databases.js';

export function ownSignaturesDir(): string {
  return join(packageRoot(), 'signatures');
}

/** Version of Assay's own database: a digest of its files, so any change shows in readiness. */
export function ownSignaturesVersion(): string {
  const dir = ownSignaturesDir();
  const hash = createHash('sha256');
  for (const name of readdirSync(dir).sort()) {
    if (name.endsWith('.md')) continue;
    hash.update(name).update(readFileSync(join(dir, name)));
  }
  return `sha256:${hash.digest('hex').slice(0, 16)}`;
}

/**
 * Whether the managed clamd whose state file is in `stateDir` (beside its socket) has loaded
 * nothing but Assay's own test signatures, no official or operator database: it then finds test
 * files only. null when that cannot be told (no state file: a clamd Assay does not run; a load
 * under way). Assay's own files win a name clash, so a loaded name of theirs is theirs.
 */
export async function hasOnlyOwnSignatures(stateDir: string): Promise<boolean | null> {
  const state = await readLoadState(stateDir);
  if (state === null || state.state !== 'loaded') return null;
  const own = new Set((await databaseFiles(ownSignaturesDir())).map((file) => file.name));
  return state.set.files.every((file) => own.has(file.name));
}
