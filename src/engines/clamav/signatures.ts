import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../paths.js';

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
