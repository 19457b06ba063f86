import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { delimiter, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ClamdAddress, ClamdClient } from './clamd-client.js';
import { type ClamdLimits, clamdConfig, clamdLimits } from './clamd-config.js';
import { ClamdDatabaseDir, type SignatureSource } from './clamd-database-dir.js';
import { ClamdLoadCheck } from './clamd-load-check.js';
import { ClamdLoads, reloadClamd } from './clamd-loads.js';
import { ownSignaturesDir } from './signatures.js';

export interface ClamdLogger {
  info(o: object, msg?: string): void;
  warn(o: object, msg?: string): void;
  error(o: object, msg?: string): void;
  debug(o: object, msg?: string): void;
}

export interface ManagedClamdOptions {
  /** Assay's data dir; clamd's config, socket, database and temp files go to `<dataDir>/clamd/`. */
  dataDir: string;
  clamdPath: string;
  /** Assay's upload limit in bytes; clamd's limits are set above it. */
  maxFileSize: number;
  /** Official databases (freshclam's) found here are loaded beside Assay's own ('': none). */
  systemDatabaseDir?: string;
  /** The operator's own databases and YARA rules (ASSAY_SIGNATURES_DIR; '': none). */
  operatorSignaturesDir?: string;
  /** How often the signature folders are looked at for added, changed and removed files. */
  signatureCheckMs?: number;
  /**
   * `concurrent`: clamd scans on with the old set while it loads the new one (both in memory for
   * the load); `blocking`: it answers nothing until the new set is loaded. Default concurrent.
   */
  reload?: ClamdReloadMode;
  /** clamd's ScanImageFuzzyHash: a fuzzy hash of every image, for fuzzy_img signatures. */
  imageFuzzyHash?: boolean;
  logger: ClamdLogger;
  startTimeoutMs?: number;
  /** clamd's SelfCheck: how often it looks for changed databases and reloads them. Default 600. */
  selfCheckSeconds?: number;
  /** Told when what clamd has loaded changes (a load begins or ends), to read versions again. */
  onLoadChange?: () => void;
}

export type ClamdReloadMode = 'concurrent' | 'blocking';

// A sun_path holds 108 bytes including the NUL.
const SOCKET_PATH_MAX = 107;
const RESTART_DELAY_MIN_MS = 500;
const RESTART_DELAY_MAX_MS = 10_000;
const STABLE_RUN_MS = 60_000;
const STOP_GRACE_MS = 10_000;
const OUTPUT_TAIL_LINES = 20;
const SETPRIV = '/usr/bin/setpriv';
const SIGNATURE_CHECK_MS = 10_000;
// How often the socket is looked for: a clamd whose socket was removed is restarted.
const SOCKET_CHECK_MS = 1_000;

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Debian's and the usual source-install locations, then PATH. */
export function findClamdBinary(): string | null {
  const known = ['/usr/sbin/clamd', '/usr/bin/clamd', '/usr/local/sbin/clamd'];
  const onPath = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => dir !== '')
    .map((dir) => join(dir, 'clamd'));
  return [...known, ...onPath].find(isExecutableFile) ?? null;
}

/** How clamd is run with `configPath`: setpriv makes the kernel stop it if Assay dies (SIGKILL, OOM). */
export function clamdCommand(clamdPath: string, configPath: string): [string, string[]] {
  const args = ['-c', configPath];
  return process.platform === 'linux' && isExecutableFile(SETPRIV)
    ? [SETPRIV, ['--pdeathsig', 'TERM', '--', clamdPath, ...args]]
    : [clamdPath, args];
}

interface Child {
  process: ChildProcess;
  startedAt: number;
  exited: Promise<string>;
  exit: string | undefined;
  /** It answered PING: its first load is done. */
  answered: boolean;
}

/**
 * Assay's own clamd: a foreground child with its own config and database, restarted if it dies.
 * One process per data dir runs it (DataDirClamd decides which).
 */
export class ManagedClamd {
  readonly address: ClamdAddress;
  readonly limits: ClamdLimits;
  private readonly options: ManagedClamdOptions;
  private readonly dir: string;
  private readonly socketPath: string;
  private readonly configPath: string;
  /** clamd's DatabaseDirectory: links to every signature folder's files. */
  private readonly databases: ClamdDatabaseDir;
  /** What clamd has loaded, for the verdict cache's key. */
  private readonly loads: ClamdLoads;
  private signatureCheck: NodeJS.Timeout | undefined;
  private socketCheck: NodeJS.Timeout | undefined;
  private readonly outputTail: string[] = [];
  private child: Child | undefined;
  private running = false;
  private restartDelayMs = RESTART_DELAY_MIN_MS;
  private restartTimer: NodeJS.Timeout | undefined;
  // The 'exit' listener runs synchronously at process exit, the last chance to take clamd along.
  private readonly killOnExit = (): void => {
    this.child?.process.kill('SIGTERM');
  };

  constructor(options: ManagedClamdOptions) {
    this.options = options;
    this.dir = join(resolve(options.dataDir), 'clamd');
    this.socketPath = join(this.dir, 'clamd.sock');
    this.configPath = join(this.dir, 'clamd.conf');
    this.limits = clamdLimits(options.maxFileSize);
    const sources: SignatureSource[] = [{ dir: ownSignaturesDir(), kind: 'own' }];
    if ((options.operatorSignaturesDir ?? '') !== '') {
      sources.push({ dir: resolve(options.operatorSignaturesDir ?? ''), kind: 'operator' });
    }
    const systemDir = options.systemDatabaseDir ?? '/var/lib/clamav';
    if (systemDir !== '') sources.push({ dir: resolve(systemDir), kind: 'official' });
    this.databases = new ClamdDatabaseDir(join(this.dir, 'db'), sources, options.logger);
    this.loads = new ClamdLoads(this.dir, this.databases, {
      logger: options.logger,
      onLoadChange: options.onLoadChange,
      reload: () => reloadClamd(this.socketPath, options.logger),
      check: new ClamdLoadCheck(this.dir, {
        command: (configPath) => clamdCommand(options.clamdPath, configPath),
        limits: this.limits,
        timeoutMs: options.startTimeoutMs ?? 120_000,
      }),
    });
    this.address = { kind: 'unix', path: this.socketPath };
  }

  get pid(): number | undefined {
    return this.child?.process.pid;
  }

  async start(): Promise<void> {
    if (this.child !== undefined) throw new Error('clamd is already started');
    if (Buffer.byteLength(this.socketPath) > SOCKET_PATH_MAX) {
      throw new Error(
        `clamd socket path ${this.socketPath} is longer than ${SOCKET_PATH_MAX} bytes: use a shorter data dir`,
      );
    }
    // clamd.conf values end at the first blank.
    if (/\s/.test(this.dir))
      throw new Error(`clamd cannot use a data dir with blanks: ${this.dir}`);
    const startedAt = Date.now();
    await this.prepareFiles();
    process.on('exit', this.killOnExit);
    for (;;) {
      const before = await this.loads.starting();
      try {
        await this.waitUntilAnswering(this.spawnChild());
        await this.loads.settle(before);
        break;
      } catch (error) {
        await this.stop();
        // A database file it could not load: once more without it (logged as refused). Each
        // attempt refuses one file more, so this ends.
        if (await this.loads.refuseFailed()) {
          process.on('exit', this.killOnExit);
          continue;
        }
        throw error;
      }
    }
    this.running = true;
    const checkMs = this.options.signatureCheckMs ?? SIGNATURE_CHECK_MS;
    this.signatureCheck = setInterval(
      () => this.loads.enqueue(() => this.loadChangedSignatures()),
      checkMs,
    );
    this.signatureCheck.unref();
    this.socketCheck = setInterval(() => this.restartIfSocketGone(), SOCKET_CHECK_MS);
    this.socketCheck.unref();
    this.options.logger.info(
      { pid: this.pid, ms: Date.now() - startedAt, socket: this.socketPath },
      'clamd started',
    );
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.restartTimer);
    clearInterval(this.signatureCheck);
    clearInterval(this.socketCheck);
    const child = this.child;
    if (child !== undefined && child.exit === undefined) {
      child.process.kill('SIGTERM');
      const kill = setTimeout(() => child.process.kill('SIGKILL'), STOP_GRACE_MS);
      await child.exited;
      clearTimeout(kill);
    }
    this.child = undefined;
    process.off('exit', this.killOnExit);
  }

  /** Links added, changed or removed signature files into clamd's folder, and has it reload them. */
  private async loadChangedSignatures(): Promise<void> {
    if (!this.running || this.child?.answered !== true) return;
    if (!(await this.databases.sync())) return;
    this.options.logger.info({}, 'signature databases changed; clamd loads them');
    await reloadClamd(this.socketPath, this.options.logger);
  }

  /**
   * A socket removed under a running clamd (by hand, or by a process that thought it stale) leaves
   * it serving no one: it is stopped, and restarted as if it had died.
   */
  private restartIfSocketGone(): void {
    const child = this.child;
    if (!this.running || child?.answered !== true || child.exit !== undefined) return;
    if (existsSync(this.socketPath)) return;
    this.options.logger.warn(
      { pid: child.process.pid, socket: this.socketPath },
      'clamd socket is gone; restarting clamd',
    );
    child.process.kill('SIGTERM');
  }

  private async prepareFiles(): Promise<void> {
    const tmpDir = join(this.dir, 'tmp');
    // Rebuilt at every start: leftovers of a killed clamd and links to removed databases go.
    await rm(tmpDir, { recursive: true, force: true });
    await mkdir(tmpDir, { recursive: true });
    await this.databases.rebuild();
    if (this.limits.maxFileSize < this.options.maxFileSize) {
      this.options.logger.warn(
        { maxFileSize: this.options.maxFileSize, clamdMaxFileSize: this.limits.maxFileSize },
        'clamd cannot scan files this large: they will be reported as Heuristics.Limits.Exceeded',
      );
    }
    await writeFile(
      this.configPath,
      clamdConfig({
        socketPath: this.socketPath,
        tmpDir,
        dbDir: this.databases.dir,
        limits: this.limits,
        selfCheckSeconds: this.options.selfCheckSeconds ?? 600,
        reload: this.options.reload ?? 'concurrent',
        imageFuzzyHash: this.options.imageFuzzyHash ?? true,
      }),
    );
  }

  private spawnChild(): Child {
    // A socket left by a clamd that died is removed by clamd itself (FixStaleSocket), and only if
    // nothing answers on it.
    const { clamdPath } = this.options;
    const [command, argv] = clamdCommand(clamdPath, this.configPath);
    // Its own process group: a terminal's Ctrl-C reaches Assay, which stops clamd in order,
    // instead of killing clamd behind the supervisor's back.
    const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let settle: (exit: string) => void = () => {};
    const state: Child = {
      process: child,
      startedAt: Date.now(),
      exited: new Promise((resolve) => {
        settle = resolve;
      }),
      exit: undefined,
      answered: false,
    };
    const gone = (exit: string): void => {
      if (state.exit !== undefined) return;
      state.exit = exit;
      settle(exit);
      this.onExit(state);
    };
    child.once('error', (error) => gone(`could not run ${clamdPath}: ${error.message}`));
    child.once('exit', (code, signal) =>
      gone(signal === null ? `exit code ${code}` : `signal ${signal}`),
    );
    for (const stream of [child.stdout, child.stderr]) {
      if (stream !== null)
        createInterface({ input: stream }).on('line', (line) => this.onOutput(line));
    }
    this.child = state;
    return state;
  }

  private onOutput(line: string): void {
    if (line.trim() === '') return;
    this.loads.onAnyOutput(line);
    // (The first load of each clamd is the start's, settled once it answers.)
    if (this.child?.answered === true) this.loads.onOutput(line);
    this.outputTail.push(line);
    if (this.outputTail.length > OUTPUT_TAIL_LINES) this.outputTail.shift();
    const log = /\b(?:error|warning)\b/i.test(line)
      ? this.options.logger.warn
      : this.options.logger.debug;
    log.call(this.options.logger, { pid: this.pid }, `clamd: ${line}`);
  }

  private onExit(child: Child): void {
    // During start(), waitUntilAnswering reports the exit; after stop(), it is expected.
    if (!this.running || this.child !== child) return;
    if (Date.now() - child.startedAt >= STABLE_RUN_MS) this.restartDelayMs = RESTART_DELAY_MIN_MS;
    this.scheduleRestart({
      pid: child.process.pid,
      exit: child.exit,
      output: this.outputTail.slice(-5),
    });
  }

  private scheduleRestart(details: object): void {
    const delayMs = this.restartDelayMs;
    this.restartDelayMs = Math.min(2 * delayMs, RESTART_DELAY_MAX_MS);
    this.options.logger.warn({ ...details, restartInMs: delayMs }, 'clamd stopped; restarting');
    this.restartTimer = setTimeout(() => {
      if (!this.running) return;
      this.loads.enqueue(async () => {
        // It may have died loading a file it cannot read: that file is left out.
        await this.loads.refuseFailed();
        const before = await this.loads.starting();
        if (!this.running) return;
        let child: Child;
        try {
          child = this.spawnChild();
        } catch (error) {
          // spawn() throws for some errors (e.g. ENOMEM) instead of emitting 'error'.
          this.scheduleRestart({ error: String(error) });
          return;
        }
        this.options.logger.warn({ pid: child.process.pid }, 'clamd restarted');
        // Settled once it answers; if it dies first, onExit schedules the next restart.
        void this.waitUntilAnswering(child).then(
          () => this.loads.enqueue(() => this.loads.settle(before)),
          () => {},
        );
      });
    }, delayMs);
  }

  private async waitUntilAnswering(child: Child): Promise<void> {
    const timeoutMs = this.options.startTimeoutMs ?? 120_000;
    const deadline = Date.now() + timeoutMs;
    // Short timeouts per attempt: clamd may accept connections before its database is loaded.
    const client = new ClamdClient(this.address, {
      connectTimeoutMs: 1_000,
      idleTimeoutMs: 2_000,
      sessions: 0,
    });
    while (child.exit === undefined) {
      try {
        await client.ping();
        child.answered = true;
        return;
      } catch {
        // Not up yet.
      }
      if (Date.now() >= deadline) {
        throw new Error(
          `clamd did not answer PING within ${timeoutMs} ms: ${this.describeOutput()}`,
        );
      }
      await Promise.race([sleep(100), child.exited]);
    }
    throw new Error(`clamd exited during start (${child.exit}): ${this.describeOutput()}`);
  }

  private describeOutput(): string {
    return this.outputTail.length > 0 ? this.outputTail.join(' | ') : '(no output)';
  }
}
