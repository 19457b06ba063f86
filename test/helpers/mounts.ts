import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tempDir } from './service.js';

/**
 * A shell command: mounts a 20 MiB tmpfs on `$0` (in the private mount namespace `unshare -m`
 * makes), then runs the command given. Wrap a service in `unshare -m sh -c ON_TMPFS <dir>`.
 */
export const ON_TMPFS = 'mount -t tmpfs -o size=20m tmpfs "$0" && exec "$@"';

/** Why this machine cannot mount a private tmpfs (not root, no user namespaces...), or null. */
export function cannotMountTmpfs(): string | null {
  const dir = tempDir('assay-mount-check-');
  try {
    const check = spawnSync('unshare', ['-m', 'sh', '-c', ON_TMPFS, dir, 'true'], {
      encoding: 'utf8',
    });
    if (check.error !== undefined) return `unshare cannot run: ${check.error.message}`;
    if (check.status !== 0) return `no private tmpfs: ${check.stderr.trim()}`;
    return null;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A wrapper that runs a command in the mount namespace of process `pid` (it sees its mounts). */
export function inMountNamespaceOf(pid: number | undefined): string[] {
  // Entering a mount namespace moves to its root: the command runs where the test does.
  return ['nsenter', `--mount=/proc/${pid}/ns/mnt`, `--wd=${process.cwd()}`, '--'];
}

/** Remounts `dir` read-only or read-write, as seen by process `pid` and its namespace. */
export function remount(pid: number | undefined, dir: string, mode: 'ro' | 'rw'): void {
  const result = spawnSync(
    'nsenter',
    [`--mount=/proc/${pid}/ns/mnt`, '--', 'mount', '-o', `remount,${mode}`, dir],
    { encoding: 'utf8' },
  );
  if (result.status !== 0) throw new Error(`remount,${mode} failed: ${result.stderr}`);
}
