import { connect, type Socket } from 'node:net';

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

/**
 * How errors name clamd's address: by its kind only. Their messages reach clients (503 bodies,
 * traces, results), which must not learn the service's paths or internal hosts; the operator knows
 * the address from ASSAY_CLAMD.
 */
function publicClamdAddress(address: ClamdAddress): string {
  return address.kind === 'unix' ? 'its unix socket' : 'TCP';
}

/** clamd could not scan: unreachable, timed out, closed early, or answered with an error. */
export class ClamdUnavailableError extends Error {
  override readonly name = 'ClamdUnavailableError';
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
  /** Sends one chunk; settles once the socket can take more (backpressure). */
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
}

/**
 * clamd's default MaxScanTime (ms), which Assay's managed clamd sets explicitly. A scan that takes
 * longer ends with `Heuristics.Limits.Exceeded.MaxScanTime` (with `AlertExceedsMax yes`).
 */
export const CLAMD_MAX_SCAN_TIME_MS = 120_000;
/** The client waits this much longer than MaxScanTime, so clamd's own verdict arrives first. */
const VERDICT_MARGIN_MS = 30_000;

// The `z` forms: NUL-terminated commands and replies.
const COMMANDS = {
  PING: Buffer.from('zPING\0'),
  VERSION: Buffer.from('zVERSION\0'),
  INSTREAM: Buffer.from('zINSTREAM\0'),
};
type Command = keyof typeof COMMANDS;
const TERMINATOR = Buffer.alloc(4);
const RESOLVED = Promise.resolve();
// Small chunks are copied behind their header (one write); large ones go out as a corked writev.
const COALESCE_MAX = 16 * 1024;

function noop(): void {}

/** A rejected promise that never counts as unhandled: the failure is sticky and surfaces again. */
function rejection(error: Error): Promise<never> {
  const promise = Promise.reject(error);
  promise.catch(noop);
  return promise;
}

function errorFromReply(reply: string): ClamdUnavailableError {
  if (reply.endsWith('ERROR')) return new ClamdUnavailableError(`clamd: ${reply}`);
  return new ClamdUnavailableError(`unexpected clamd reply: ${JSON.stringify(reply)}`);
}

function describeSocketError(error: NodeJS.ErrnoException, where: string, sent: number): string {
  switch (error.code) {
    case 'ENOENT':
      return `clamd's socket does not exist (is clamd running?)`;
    case 'ECONNREFUSED':
      return `clamd over ${where} refused the connection (is clamd running?)`;
    case 'EPIPE':
    case 'ECONNRESET':
      // Node drops the socket on a write error, sometimes before clamd's reply was read.
      return `clamd over ${where} closed the connection early (${error.code}) after ${sent} bytes of stream: more than its StreamMaxLength, or clamd stopped`;
    default:
      return `clamd over ${where}: ${error.code ?? 'socket error'}`; // Node's message names the path
  }
}

interface Waiter<T> {
  resolve(value: T): void;
  reject(error: Error): void;
}

/**
 * One clamd connection carrying one `z` command. The reply is read eagerly so that an early
 * answer (e.g. a size-limit error) is known before the next write, and every socket event is
 * handled here, so nothing can surface as an unhandled 'error' event.
 */
class ClamdConnection {
  private readonly socket: Socket;
  private readonly where: string;
  private readonly received: Buffer[] = [];
  private reply: string | undefined;
  private failure: ClamdUnavailableError | undefined;
  private aborted = false;
  private closed = false;
  /** The stream's terminator is sent: clamd is scanning, which may take up to its MaxScanTime. */
  private ended = false;
  private sent = 0;
  private drainWaiter: Waiter<void> | undefined;
  private replyWaiter: Waiter<string> | undefined;

  constructor(
    address: ClamdAddress,
    command: Buffer,
    connectTimeoutMs: number,
    idleTimeoutMs: number,
    private readonly verdictTimeoutMs: number,
  ) {
    this.where = publicClamdAddress(address);
    const socket =
      address.kind === 'unix' ? connect(address.path) : connect(address.port, address.host);
    this.socket = socket;
    // Without this, Nagle plus delayed ACKs can hold the small terminator back on TCP.
    socket.setNoDelay(true);
    // One socket timer serves three phases: connecting, idle while sending (no bytes either
    // way), then waiting for the verdict (clamd is silent while it scans).
    socket.setTimeout(connectTimeoutMs);
    socket.once('connect', () =>
      socket.setTimeout(this.ended ? this.verdictTimeoutMs : idleTimeoutMs),
    );
    socket.on('timeout', () => {
      this.fail(
        new ClamdUnavailableError(
          socket.connecting
            ? `could not connect to clamd over ${this.where} within ${connectTimeoutMs} ms`
            : this.ended
              ? `clamd over ${this.where} gave no verdict within ${this.verdictTimeoutMs} ms of the end of the stream`
              : `clamd over ${this.where} was idle for ${idleTimeoutMs} ms`,
        ),
      );
    });
    socket.on('data', (data: Buffer) => this.onData(data));
    socket.on('drain', () => {
      const waiter = this.drainWaiter;
      this.drainWaiter = undefined;
      waiter?.resolve();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      this.fail(
        new ClamdUnavailableError(describeSocketError(error, this.where, this.sent), {
          cause: error,
        }),
      );
    });
    socket.on('end', () => this.onClose());
    socket.on('close', () => this.onClose());
    socket.write(command);
  }

  /** Why nothing more can be sent, if so: clamd already answered (always an error mid-stream) or the socket failed. */
  private blocked(): ClamdUnavailableError | undefined {
    if (this.reply !== undefined) return errorFromReply(this.reply);
    if (this.failure === undefined && this.aborted) {
      this.failure = new ClamdUnavailableError('scan aborted');
    }
    return this.failure;
  }

  write(chunk: Buffer): Promise<void> {
    const blocked = this.blocked();
    if (blocked !== undefined) return rejection(blocked);
    // A zero length would end the stream early.
    if (chunk.length === 0) return RESOLVED;
    this.sent += chunk.length;
    let room: boolean;
    if (chunk.length <= COALESCE_MAX) {
      const framed = Buffer.allocUnsafe(chunk.length + 4);
      framed.writeUInt32BE(chunk.length, 0);
      chunk.copy(framed, 4);
      room = this.socket.write(framed);
    } else {
      const header = Buffer.allocUnsafe(4);
      header.writeUInt32BE(chunk.length, 0);
      this.socket.cork();
      this.socket.write(header);
      room = this.socket.write(chunk);
      this.socket.uncork();
    }
    if (room) return RESOLVED;
    const promise = new Promise<void>((resolve, reject) => {
      this.drainWaiter = { resolve, reject };
    });
    promise.catch(noop);
    return promise;
  }

  /** Sends the zero-length chunk that ends an INSTREAM. */
  end(): ClamdUnavailableError | undefined {
    const blocked = this.blocked();
    if (blocked === undefined) {
      this.ended = true;
      // From here clamd is silent while it scans: the idle timer gives way to the verdict's
      // (set on connect when the stream ended before the connection was up).
      if (!this.socket.connecting) this.socket.setTimeout(this.verdictTimeoutMs);
      this.socket.write(TERMINATOR);
    }
    return blocked;
  }

  /** clamd's reply without its NUL terminator; rejects if the connection fails before one arrives. */
  readReply(): Promise<string> {
    if (this.reply !== undefined) return Promise.resolve(this.reply);
    const failure = this.blocked();
    if (failure !== undefined) return Promise.reject(failure);
    return new Promise<string>((resolve, reject) => {
      this.replyWaiter = { resolve, reject };
    });
  }

  destroy(): void {
    // Errors are built only if someone waits: this runs after every scan.
    this.aborted = true;
    this.closed = true;
    this.socket.destroy();
    this.settle();
  }

  private onData(data: Buffer): void {
    if (this.reply !== undefined) return;
    this.received.push(data);
    if (data.includes(0)) this.takeReply();
  }

  private takeReply(): void {
    const text = Buffer.concat(this.received).toString('utf8');
    const end = text.indexOf('\0');
    this.reply = (end === -1 ? text : text.slice(0, end)).trim();
    this.received.length = 0;
    this.settle();
  }

  private onClose(): void {
    if (this.closed) return;
    this.closed = true;
    // clamd may close right after an unterminated answer; keep what it said.
    if (this.reply === undefined && this.received.length > 0) this.takeReply();
    if (this.reply === undefined && this.failure === undefined) {
      this.failure = new ClamdUnavailableError(
        `clamd over ${this.where} closed the connection without a reply`,
      );
    }
    this.settle();
  }

  private fail(error: ClamdUnavailableError): void {
    if (this.failure === undefined) this.failure = error;
    // Anything clamd said before the failure is more telling than the socket error.
    if (this.reply === undefined && this.received.length > 0) this.takeReply();
    this.socket.destroy();
    this.settle();
  }

  private settle(): void {
    const drain = this.drainWaiter;
    const blocked = drain === undefined ? undefined : this.blocked();
    if (drain !== undefined && blocked !== undefined) {
      this.drainWaiter = undefined;
      drain.reject(blocked);
    }
    const waiter = this.replyWaiter;
    if (waiter === undefined) return;
    if (this.reply !== undefined) {
      this.replyWaiter = undefined;
      waiter.resolve(this.reply);
      return;
    }
    const failure = this.blocked();
    if (failure !== undefined) {
      this.replyWaiter = undefined;
      waiter.reject(failure);
    }
  }
}

function parseScanReply(reply: string): ClamdVerdict {
  if (reply === 'stream: OK') return { signature: null };
  const found = /^stream: (.+) FOUND$/.exec(reply);
  if (found?.[1] !== undefined) return { signature: found[1] };
  throw errorFromReply(reply);
}

function parseVersion(reply: string): ClamdVersion {
  // `ClamAV 1.4.6/27000/Sun Nov 22 09:00:00 2026`, or just `ClamAV 1.4.6` without official databases.
  if (!reply.startsWith('ClamAV ')) throw errorFromReply(reply);
  const [engine = reply, database, ...date] = reply.split('/');
  const databaseVersion =
    database !== undefined && /^\d+$/.test(database) ? Number(database) : null;
  const databaseDate = date.length > 0 ? new Date(date.join('/')) : null;
  return {
    engine,
    databaseVersion,
    databaseDate:
      databaseDate !== null && !Number.isNaN(databaseDate.getTime()) ? databaseDate : null,
  };
}

export class ClamdClient {
  private readonly target: ClamdAddress;
  private readonly connectTimeoutMs: number;
  private readonly idleTimeoutMs: number;
  /** How long a scan's verdict is awaited after the stream ends (above clamd's MaxScanTime). */
  readonly verdictTimeoutMs: number;

  constructor(address: ClamdAddress, options: ClamdClientOptions = {}) {
    this.target = address;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 30_000;
    this.verdictTimeoutMs = options.verdictTimeoutMs ?? CLAMD_MAX_SCAN_TIME_MS + VERDICT_MARGIN_MS;
  }

  get address(): ClamdAddress {
    return this.target;
  }

  async ping(): Promise<void> {
    const reply = await this.command('PING');
    if (reply !== 'PONG') throw errorFromReply(reply);
  }

  async version(): Promise<ClamdVersion> {
    return parseVersion(await this.command('VERSION'));
  }

  /** Connects at once, so the connection is ready by the time the first bytes arrive. */
  instream(): InstreamScan {
    const connection = this.open('INSTREAM');
    return {
      write: (chunk) => connection.write(chunk),
      finish: async () => {
        try {
          const blocked = connection.end();
          if (blocked !== undefined) throw blocked;
          return parseScanReply(await connection.readReply());
        } finally {
          connection.destroy();
        }
      },
      abort: () => connection.destroy(),
    };
  }

  private open(command: Command): ClamdConnection {
    return new ClamdConnection(
      this.target,
      COMMANDS[command],
      this.connectTimeoutMs,
      this.idleTimeoutMs,
      this.verdictTimeoutMs,
    );
  }

  private async command(command: Command): Promise<string> {
    const connection = this.open(command);
    try {
      return await connection.readReply();
    } finally {
      connection.destroy();
    }
  }
}
