import {
  abortedError,
  ClamdConnection,
  type ClamdTimeouts,
  COMMANDS,
  type Command,
  errorFromReply,
  instreamRequest,
  rejection,
  type ScanControl,
} from './clamd-connection.js';
import { FileScans } from './clamd-file-scan.js';
import { parseScanReply, parseVersion, scanVerdict } from './clamd-replies.js';
import { ClamdSessionPool } from './clamd-session-pool.js';
import { ClamdSessionError } from './clamd-sessions.js';
import { loadDescriptorPassing, MemoryFileBudget } from './descriptor-passing.js';

export { ClamdUnavailableError } from './clamd-connection.js';

export type ClamdAddress =
  | { kind: 'unix'; path: string }
  | { kind: 'tcp'; host: string; port: number };

/** Parses `/path/to/clamd.sock` or `tcp://host:port` (IPv6 hosts in brackets). */
export function parseClamdAddress(value: string): ClamdAddress {
  if (value.startsWith('/')) return { kind: 'unix', path: value };
  const match = /^tcp:\/\/(?:\[([0-9A-Fa-f:.]+)\]|([^\s:/[\]]+)):(\d{1,5})$/.exec(value);
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (host === undefined || !(port >= 1 && port <= 65535)) {
    throw new Error(
      `Invalid clamd address "${value}": expected an absolute unix socket path (e.g. /run/clamav/clamd.ctl) or tcp://host:port`,
    );
  }
  return { kind: 'tcp', host, port };
}

export interface ClamdVerdict {
  /** clamd's name for the match, e.g. `Eicar-Test-Signature.UNOFFICIAL`; null when clean. */
  signature: string | null;
}

export interface ClamdVersion {
  engine: string;
  databaseVersion: number | null;
  databaseDate: Date | null;
}

export interface InstreamScan {
  /**
   * Sends one chunk; settles once the socket can take more (backpressure). A chunk may be held
   * until finish() (small streams go whole on a session): its buffer must not change until then.
   */
  write(chunk: Buffer): Promise<void>;
  /** Ends the stream and reads clamd's verdict. */
  finish(): Promise<ClamdVerdict>;
  /** Drops the connection; the scan is abandoned. */
  abort(): void;
}

export interface ClamdClientOptions {
  connectTimeoutMs?: number;
  /** No bytes either way for this long while a command or stream is sent: clamd has stalled. */
  idleTimeoutMs?: number;
  /** How long to wait for the verdict once a stream has ended: above clamd's MaxScanTime. */
  verdictTimeoutMs?: number;
  /** clamd sessions (IDSESSION) kept for reuse by small scans; 0: a connection per scan. */
  sessions?: number;
  /**
   * A session is not used again this long after its last command went out. clamd ends a session
   * silent for its ReadTimeout (120 s by default and in the managed clamd.conf), not IdleTimeout.
   */
  sessionIdleMs?: number;
  /** A session is closed after this many commands. */
  sessionMaxCommands?: number;
  /** Streams up to this size are held and sent whole on a session; larger ones stream on their own connection. */
  sessionMaxBytes?: number;
  /**
   * Hand clamd each item as a file (FILDES) instead of a stream (INSTREAM), where clamd listens on
   * a unix socket and sessions are on: items over `sessionMaxBytes` are written to unnamed files in
   * this folder as they arrive. clamd then scans the file itself rather than first writing its own
   * copy of the stream. Unset: INSTREAM.
   */
  descriptorDir?: string;
  /** FILDES failed where INSTREAM then gave a verdict: items go as streams from then on. */
  onDescriptorsRefused?: (reply: string) => void;
}

/**
 * clamd's default MaxScanTime (ms), which Assay's managed clamd sets explicitly. A scan that takes
 * longer ends with `Heuristics.Limits.Exceeded.MaxScanTime` (with `AlertExceedsMax yes`).
 */
export const CLAMD_MAX_SCAN_TIME_MS = 120_000;
/** The client waits this much longer than MaxScanTime, so clamd's own verdict arrives first. */
export const VERDICT_MARGIN_MS = 30_000;
const RESOLVED = Promise.resolve();

export class ClamdClient {
  private readonly target: ClamdAddress;
  private readonly timeouts: ClamdTimeouts;
  private readonly sessions: ClamdSessionPool | null;
  private readonly sessionMaxBytes: number;
  /** Items go to clamd as files while set (null: as streams). */
  private files: FileScans | null;
  /** Items past the sessions' hold, in memory files: at most 16 MiB each, 64 MiB in all. */
  readonly memoryFiles = new MemoryFileBudget(64 * 1024 * 1024, 16 * 1024 * 1024);
  /** How long a scan's verdict is awaited after the stream ends (above clamd's MaxScanTime). */
  readonly verdictTimeoutMs: number;

  constructor(address: ClamdAddress, options: ClamdClientOptions = {}) {
    this.target = address;
    this.verdictTimeoutMs = options.verdictTimeoutMs ?? CLAMD_MAX_SCAN_TIME_MS + VERDICT_MARGIN_MS;
    this.timeouts = {
      connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
      idleTimeoutMs: options.idleTimeoutMs ?? 30_000,
      verdictTimeoutMs: this.verdictTimeoutMs,
    };
    const size = options.sessions ?? 8;
    this.sessions =
      size > 0
        ? new ClamdSessionPool(address, this.timeouts, {
            size,
            idleMs: options.sessionIdleMs ?? 10_000,
            maxCommands: options.sessionMaxCommands ?? 1_000,
          })
        : null;
    this.sessionMaxBytes = this.sessions === null ? 0 : (options.sessionMaxBytes ?? 256 * 1024);
    const { passing } = loadDescriptorPassing();
    const onRefused = options.onDescriptorsRefused ?? (() => undefined);
    this.files =
      address.kind === 'unix' &&
      this.sessions !== null &&
      options.descriptorDir !== undefined &&
      passing !== null
        ? new FileScans(
            passing,
            options.descriptorDir,
            this.sessions,
            this.sessionMaxBytes,
            this.memoryFiles,
            (command) => this.open(command),
            () => {
              this.filesScanned += 1;
            },
            (reply) => {
              this.files = null;
              onRefused(reply);
            },
          )
        : null;
  }

  /** Verdicts clamd gave for files handed to it (the rest came by INSTREAM). */
  filesScanned = 0;

  /** Items go to clamd as files (FILDES), not streams. */
  get byDescriptor(): boolean {
    return this.files !== null;
  }

  get address(): ClamdAddress {
    return this.target;
  }

  /** On a connection of its own: readiness wants to know that clamd takes connections. */
  async ping(): Promise<void> {
    const reply = await this.command('PING');
    if (reply !== 'PONG') throw errorFromReply(reply);
  }

  /** `signal` ends the command's connection at once (a caller that stopped waiting). */
  async version(signal?: AbortSignal): Promise<ClamdVersion> {
    return parseVersion(await this.command('VERSION', signal));
  }

  /**
   * A stream of at most `sessionMaxBytes` is held, then sent whole on a pooled session at
   * finish(); past that it streams on a connection of its own, with backpressure, as it arrives.
   */
  instream(): InstreamScan {
    if (this.files !== null) return this.files.scan();
    const control: ScanControl = { aborted: false, cancel: undefined };
    // Without sessions, connect at once so the connection is ready when the first bytes arrive.
    let connection: ClamdConnection | undefined =
      this.sessions === null ? this.open('INSTREAM') : undefined;
    let held: Buffer[] = [];
    let heldBytes = 0;
    return {
      write: (chunk) => {
        if (connection !== undefined) return connection.write(chunk);
        if (control.aborted) return rejection(abortedError());
        if (heldBytes + chunk.length <= this.sessionMaxBytes) {
          if (chunk.length > 0) held.push(chunk);
          heldBytes += chunk.length;
          return RESOLVED;
        }
        // Too large for a session: on a connection of its own from here, as it arrives.
        connection = this.open('INSTREAM');
        held.push(chunk);
        const written = connection.writeChunk(held, heldBytes + chunk.length);
        held = [];
        return written;
      },
      finish: async () => {
        if (connection === undefined) {
          if (control.aborted) throw abortedError();
          const request = instreamRequest(held, heldBytes);
          held = [];
          return this.scanWhole(request, control);
        }
        try {
          const blocked = connection.end();
          if (blocked !== undefined) throw blocked;
          return parseScanReply(await connection.readReply());
        } finally {
          connection.destroy();
        }
      },
      abort: () => {
        control.aborted = true;
        held = [];
        connection?.destroy();
        control.cancel?.();
      },
    };
  }

  /** Ends idle sessions; scans under way finish, and their sessions close after. */
  close(): void {
    this.sessions?.close();
  }

  /**
   * One INSTREAM of the whole content: on a session when one is free; once more on a connection
   * of its own if that session failed before any reply to it (a session clamd closed, reset or
   * timed out just then), never after one.
   */
  private async scanWhole(request: Buffer[], control: ScanControl): Promise<ClamdVerdict> {
    const session = this.sessions?.acquire();
    if (session !== undefined) {
      control.cancel = () => session.cancel();
      try {
        const reply = await session.command(request);
        const verdict = scanVerdict(reply);
        // clamd closes a session after an error reply; it is not reused.
        this.sessions?.release(session, verdict !== undefined);
        if (verdict === undefined) throw errorFromReply(reply);
        return verdict;
      } catch (error) {
        if (!(error instanceof ClamdSessionError) || !error.retryable || control.aborted) {
          throw error;
        }
        if (error.unsupported) this.sessions?.suspend();
      } finally {
        control.cancel = undefined;
      }
    }
    const connection = new ClamdConnection(this.target, request, this.timeouts, true);
    control.cancel = () => connection.destroy();
    try {
      return parseScanReply(await connection.readReply());
    } finally {
      control.cancel = undefined;
      connection.destroy();
    }
  }

  private open(command: Command): ClamdConnection {
    return new ClamdConnection(this.target, COMMANDS[command], this.timeouts);
  }

  private async command(command: Command, signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    const connection = this.open(command);
    const abandon = () => connection.destroy();
    signal?.addEventListener('abort', abandon, { once: true });
    try {
      return await connection.readReply();
    } finally {
      signal?.removeEventListener('abort', abandon);
      connection.destroy();
    }
  }
}
