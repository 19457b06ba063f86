import { connect, type Socket } from 'node:net';
import type { ClamdAddress } from './clamd-client.js';

/** clamd could not scan: unreachable, timed out, closed early, or answered with an error. */
export class ClamdUnavailableError extends Error {
  override readonly name = 'ClamdUnavailableError';

  /**
   * @param notReached no connection to clamd was made (no socket, refused, or not within the
   * connect timeout): the content never reached it, so it cannot be the content's doing.
   */
  constructor(
    message: string,
    options?: ErrorOptions,
    readonly notReached = false,
  ) {
    super(message, options);
  }
}

/** A scan's state that abort() reaches: the connection or session command under way. */
export interface ScanControl {
  aborted: boolean;
  cancel: (() => void) | undefined;
}

export function abortedError(): ClamdUnavailableError {
  return new ClamdUnavailableError('scan aborted');
}

/** How long the client waits on clamd, per phase of a command. */
export interface ClamdTimeouts {
  connectTimeoutMs: number;
  /** No bytes either way for this long while a command or stream is sent: clamd has stalled. */
  idleTimeoutMs: number;
  /** How long to wait for the verdict once a stream has ended: above clamd's MaxScanTime. */
  verdictTimeoutMs: number;
}

/**
 * How errors name clamd's address: by its kind only. Their messages reach clients (503 bodies,
 * traces, results), which must not learn the service's paths or internal hosts; the operator knows
 * the address from ASSAY_CLAMD.
 */
export function publicClamdAddress(address: ClamdAddress): string {
  return address.kind === 'unix' ? 'its unix socket' : 'TCP';
}

export function connectTo(address: ClamdAddress): Socket {
  const socket =
    address.kind === 'unix' ? connect(address.path) : connect(address.port, address.host);
  // Without this, Nagle plus delayed ACKs can hold a small terminator or command back on TCP.
  socket.setNoDelay(true);
  return socket;
}

// The `z` forms: NUL-terminated commands and replies.
export const COMMANDS = {
  PING: Buffer.from('zPING\0'),
  VERSION: Buffer.from('zVERSION\0'),
  INSTREAM: Buffer.from('zINSTREAM\0'),
};
export type Command = keyof typeof COMMANDS;
const TERMINATOR = Buffer.alloc(4);
const RESOLVED = Promise.resolve();
// Small chunks are copied behind their header (one write); large ones go out as a corked writev.
const COALESCE_MAX = 16 * 1024;

/**
 * A whole INSTREAM (the command, the content as one chunk, the terminator) as buffers to write in
 * order: small content copied into one buffer, larger content's own buffers behind a header (one
 * writev, no copy).
 */
export function instreamRequest(chunks: readonly Buffer[], length: number): Buffer[] {
  const command = COMMANDS.INSTREAM;
  if (length > COALESCE_MAX) {
    const head = Buffer.allocUnsafe(command.length + 4);
    command.copy(head, 0);
    head.writeUInt32BE(length, command.length);
    return [head, ...chunks, TERMINATOR];
  }
  const request = Buffer.allocUnsafe(command.length + (length > 0 ? 4 + length : 0) + 4);
  command.copy(request, 0);
  let at = command.length;
  if (length > 0) {
    request.writeUInt32BE(length, at);
    at += 4;
    for (const chunk of chunks) at += chunk.copy(request, at);
  }
  request.writeUInt32BE(0, at);
  return [request];
}

/** Writes `buffers` in order, as one writev when there are several; `done` once all are sent. */
export function writeAll(
  socket: Socket,
  buffers: readonly Buffer[],
  done?: (error?: Error | null) => void,
): void {
  if (buffers.length === 1 && buffers[0] !== undefined) {
    socket.write(buffers[0], done);
    return;
  }
  socket.cork();
  buffers.forEach((buffer, index) => {
    socket.write(buffer, index === buffers.length - 1 ? done : undefined);
  });
  socket.uncork();
}

export function noop(): void {}

/** A rejected promise that never counts as unhandled: the failure is sticky and surfaces again. */
export function rejection(error: Error): Promise<never> {
  const promise = Promise.reject(error);
  promise.catch(noop);
  return promise;
}

export function errorFromReply(reply: string): ClamdUnavailableError {
  if (reply.endsWith('ERROR')) return new ClamdUnavailableError(`clamd: ${reply}`);
  return new ClamdUnavailableError(`unexpected clamd reply: ${JSON.stringify(reply)}`);
}

export function describeSocketError(
  error: NodeJS.ErrnoException,
  where: string,
  sent: number,
): string {
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
export class ClamdConnection {
  private readonly socket: Socket;
  private readonly where: string;
  private readonly received: Buffer[] = [];
  private reply: string | undefined;
  private failure: ClamdUnavailableError | undefined;
  private aborted = false;
  private closed = false;
  /** The stream's terminator is sent: clamd is scanning, which may take up to its MaxScanTime. */
  private ended: boolean;
  private sent = 0;
  private drainWaiter: Waiter<void> | undefined;
  private replyWaiter: Waiter<string> | undefined;
  private readonly verdictTimeoutMs: number;

  /**
   * Sends `request` at once; `complete` says it is the whole request (an INSTREAM with its
   * terminator), so clamd's answer is awaited as a verdict from the start.
   */
  constructor(
    address: ClamdAddress,
    request: Buffer | readonly Buffer[],
    timeouts: ClamdTimeouts,
    complete = false,
  ) {
    const { connectTimeoutMs, idleTimeoutMs, verdictTimeoutMs } = timeouts;
    this.verdictTimeoutMs = verdictTimeoutMs;
    this.ended = complete;
    this.where = publicClamdAddress(address);
    const socket = connectTo(address);
    this.socket = socket;
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
          undefined,
          socket.connecting,
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
        new ClamdUnavailableError(
          describeSocketError(error, this.where, this.sent),
          { cause: error },
          // A connection never made (clamd stopped or starting): nothing of the item reached it.
          socket.connecting || error.code === 'ENOENT' || error.code === 'ECONNREFUSED',
        ),
      );
    });
    socket.on('end', () => this.onClose());
    socket.on('close', () => this.onClose());
    writeAll(socket, Buffer.isBuffer(request) ? [request] : request);
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
    return this.writeChunk([chunk], chunk.length);
  }

  /** Sends `parts` (of `length` bytes in all) as one INSTREAM chunk. */
  writeChunk(parts: readonly Buffer[], length: number): Promise<void> {
    const blocked = this.blocked();
    if (blocked !== undefined) return rejection(blocked);
    // A zero length would end the stream early.
    if (length === 0) return RESOLVED;
    this.sent += length;
    let room: boolean;
    const only = parts.length === 1 ? parts[0] : undefined;
    if (only !== undefined && length <= COALESCE_MAX) {
      const framed = Buffer.allocUnsafe(length + 4);
      framed.writeUInt32BE(length, 0);
      only.copy(framed, 4);
      room = this.socket.write(framed);
    } else {
      const header = Buffer.allocUnsafe(4);
      header.writeUInt32BE(length, 0);
      this.socket.cork();
      room = this.socket.write(header);
      for (const part of parts) room = this.socket.write(part);
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
