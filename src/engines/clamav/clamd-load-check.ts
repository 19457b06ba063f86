import { spawn } from 'node:child_process';
import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClamdClient } from './clamd-client.js';
import { type ClamdLimits, clamdConfig } from './clamd-config.js';
import type { ClamdLogger } from './managed-clamd.js';

/** A database file to give a check clamd: its name in clamd's folder, and the file it links to. */
export interface CheckedFile {
  name: string;
  path: string;
}

/** A check's outcome: clamd loaded the files, refused them (with what it said), or did neither. */
export type LoadOutcome = { loads: true } | { loads: false; reason: string } | { unknown: string };

// What a check keeps of clamd's output: its error lines, else its last lines.
const REASON_LINES = 3;

/**
 * A throwaway clamd that tells whether it loads a set of database files, for the files clamd
 * refuses with a message naming none (a YARA regex PCRE2 cannot compile fails the whole load at
 * its end). It runs beside the managed clamd, in `<dir>/check/` with the socket `<dir>/check.sock`
 * (as long as the managed one's), and is stopped as soon as it answers or exits.
 */
export class ClamdLoadCheck {
  private readonly checkDir: string;
  private readonly socketPath: string;

  constructor(
    /** The managed clamd's folder (`<dataDir>/clamd`). */
    dir: string,
    private readonly options: {
      /** The command and arguments that run clamd with a config file. */
      command: (configPath: string) => [string, string[]];
      limits: ClamdLimits;
      timeoutMs: number;
    },
  ) {
    this.checkDir = join(dir, 'check');
    this.socketPath = join(dir, 'check.sock');
  }

  /** Whether clamd loads `files` (and compiles them: some errors come only then). */
  async loads(files: readonly CheckedFile[]): Promise<LoadOutcome> {
    const dbDir = join(this.checkDir, 'db');
    const tmpDir = join(this.checkDir, 'tmp');
    const configPath = join(this.checkDir, 'clamd.conf');
    await rm(this.checkDir, { recursive: true, force: true });
    await rm(this.socketPath, { force: true });
    await mkdir(dbDir, { recursive: true });
    await mkdir(tmpDir);
    for (const file of files) await symlink(file.path, join(dbDir, file.name));
    await writeFile(
      configPath,
      clamdConfig({
        socketPath: this.socketPath,
        tmpDir,
        dbDir,
        limits: this.options.limits,
        selfCheckSeconds: 3600,
        reload: 'blocking',
      }),
    );
    try {
      return await this.run(configPath);
    } finally {
      await rm(this.checkDir, { recursive: true, force: true });
      await rm(this.socketPath, { force: true });
    }
  }

  private async run(configPath: string): Promise<LoadOutcome> {
    const [command, argv] = this.options.command(configPath);
    const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    // Taken along if Assay exits during a check.
    const killOnExit = (): void => {
      child.kill('SIGKILL');
    };
    process.on('exit', killOnExit);
    const errors: string[] = [];
    const tail: string[] = [];
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        if (/^(?:LibClamAV )?Error:/i.test(line) && errors.length < REASON_LINES) {
          errors.push(line.replace(/^(?:LibClamAV )?Error:\s*/i, ''));
        }
        tail.push(line);
        if (tail.length > REASON_LINES) tail.shift();
      });
    }
    let exit: string | undefined;
    const exited = new Promise<void>((resolve) => {
      child.once('error', (error) => {
        exit = `could not run clamd: ${error.message}`;
        resolve();
      });
      child.once('close', (code, signal) => {
        exit ??= signal === null ? `exit code ${code}` : `signal ${signal}`;
        resolve();
      });
    });
    const client = new ClamdClient(
      { kind: 'unix', path: this.socketPath },
      { connectTimeoutMs: 1_000, idleTimeoutMs: 2_000, sessions: 0 },
    );
    const deadline = Date.now() + this.options.timeoutMs;
    try {
      while (exit === undefined) {
        const answered = await client.ping().then(
          () => true,
          () => false,
        );
        if (answered) return { loads: true };
        if (Date.now() >= deadline) {
          return { unknown: `clamd did not load within ${this.options.timeoutMs} ms` };
        }
        await Promise.race([sleep(100), exited]);
      }
      if (exit.startsWith('could not run')) return { unknown: exit };
      return { loads: false, reason: (errors.length > 0 ? errors : tail).join(' | ') || exit };
    } finally {
      if (exit === undefined) child.kill('SIGKILL');
      await exited;
      process.off('exit', killOnExit);
    }
  }
}

/**
 * One file of `candidates` that clamd refuses, with what it said, found by halving: a check of
 * `base` (files known to load) with the first half; if that loads, the file is in the other half.
 * At most ceil(log2(n)) + 1 checks for n candidates (the last confirms a file reached by
 * elimination). `refused` is null when no single file is refused (the load fails for another
 * reason, or a check could not tell).
 */
export async function findRefusedFile<File extends CheckedFile>(
  base: readonly CheckedFile[],
  candidates: readonly File[],
  check: (files: readonly CheckedFile[]) => Promise<LoadOutcome>,
  logger: ClamdLogger,
): Promise<{ refused: { file: File; reason: string } | null; checks: number }> {
  let suspects = candidates;
  // The reason clamd gave for a check of exactly `suspects`, once one refused them.
  let reason: string | null = null;
  let checks = 0;
  const tell = async (files: readonly File[]): Promise<LoadOutcome> => {
    checks++;
    const outcome = await check([...base, ...files]);
    if ('unknown' in outcome) {
      logger.error(
        { reason: outcome.unknown, checks },
        'could not tell which database file clamd refuses',
      );
    }
    return outcome;
  };
  while (suspects.length > 1) {
    const half = suspects.slice(0, Math.ceil(suspects.length / 2));
    const outcome = await tell(half);
    if ('unknown' in outcome) return { refused: null, checks };
    if (outcome.loads) {
      suspects = suspects.slice(half.length);
      reason = null;
    } else {
      suspects = half;
      reason = outcome.reason;
    }
  }
  const [file] = suspects;
  if (file === undefined) return { refused: null, checks };
  if (reason === null) {
    const outcome = await tell(suspects);
    if ('unknown' in outcome) return { refused: null, checks };
    if (outcome.loads) {
      logger.error(
        { candidates: candidates.length, checks },
        'clamd could not load its databases, yet loads each file that could be at fault: no single file is refused',
      );
      return { refused: null, checks };
    }
    reason = outcome.reason;
  }
  return { refused: { file, reason }, checks };
}
