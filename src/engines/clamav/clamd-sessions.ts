import type { Socket } from 'node:net';
import type { ClamdAddress } from './clamd-client.js';
import {
  type ClamdTimeouts,
  ClamdUnavailableError,
  connectTo,
  describeSocketError,
  publicClamdAddress,
  writeAll,
} from './clamd-connection.js';
import type { DescriptorPassing } from './descriptor-passing.js';

const IDSESSION = Buffer.from('zIDSESSION\0');
const END = Buffer.from('zEND\0');
/** What clamd writes, unnumbered and newline-terminated, when a session was silent past its ReadTimeout. */
const READ_TIMED_OUT = 'COMMAND READ TIMED OUT';
const NUL = 0;
const NEWLINE = 10;
const DIGIT_0 = 48;
const DIGIT_9 = 57;

/**
 * A command on a session failed. `retryable`: no reply to it was read (the session was closed,
 * reset, or timed out by clamd before answering), so the item may be sent once more on a plain
 * connection; never after any numbered reply, nor after the client's own timeouts or an abort.
 */
export class ClamdSessionError extends ClamdUnavailableError {
  constructor(
    message: string,
    readonly retryable: boolean,
    /** The server answered IDSESSION's first command unnumbered: it does not speak sessions. */
    readonly unsupported = false,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

interface InFlight {
  id: number;
  resolve(reply: string): void;
  reject(error: ClamdSessionError): void;
  /** The whole command is handed to the kernel: clamd is scanning, up to its MaxScanTime. */
  sent: boolean;
  bytes: number;
}

function startsWithDigit(data: Buffer | undefined): boolean {
  const first = data?.[0];
  return first !== undefined && first >= DIGIT_0 && first <= DIGIT_9;
}

/**
 * One clamd connection in IDSESSION mode (clamd(8)): `z` commands, one at a time, each answered
 * `<n>: <reply>\0`, where n counts the session's commands from 1. Anything else (an unnumbered
 * line, another number, bytes while no command is out) ends the session: it is never reused.
 */
export class ClamdSession {
  private readonly socket: Socket;
  private readonly where: string;
  private commands = 0;
  private inFlight: InFlight | undefined;
  private received: Buffer | undefined;
  private ended = false;
  /** When the last command started out: clamd's ReadTimeout counts from its last byte. */
  lastSentAt = 0;
  replies = 0;
  /** Rearmed on every return to the pool; closes the session if it stays unused. */
  retireTimer: NodeJS.Timeout | undefined;

  constructor(
    address: ClamdAddress,
    private readonly timeouts: ClamdTimeouts,
    onGone: (session: ClamdSession) => void,
  ) {
    this.where = publicClamdAddress(address);
    const socket = connectTo(address);
    this.socket = socket;
    socket.setTimeout(timeouts.connectTimeoutMs);
    socket.once('connect', () => this.setTimer());
    socket.on('timeout', () => this.onTimeout());
    socket.on('data', (data: Buffer) => this.onData(data));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      const sent = this.inFlight?.bytes ?? 0;
      this.fail(describeSocketError(error, this.where, sent), this.mayRetry(), { cause: error });
    });
    socket.on('end', () => this.onClose());
    socket.on('close', () => {
      this.onClose();
      clearTimeout(this.retireTimer);
      onGone(this);
    });
    socket.write(IDSESSION);
  }

  get commandCount(): number {
    return this.commands;
  }

  /** Neither closing nor closed, and no command out. */
  get idle(): boolean {
    return !this.ended && this.inFlight === undefined;
  }

  /** Sends one whole `z` command (an INSTREAM with its terminator); resolves with clamd's reply. */
  command(request: readonly Buffer[]): Promise<string> {
    if (!this.idle) {
      return Promise.reject(new ClamdSessionError('clamd session is not idle', false));
    }
    this.commands += 1;
    this.lastSentAt = performance.now();
    let bytes = 0;
    for (const buffer of request) bytes += buffer.length;
    const promise = new Promise<string>((resolve, reject) => {
      this.inFlight = { id: this.commands, resolve, reject, sent: false, bytes };
    });
    const inFlight = this.inFlight;
    this.socket.ref();
    this.setTimer();
    writeAll(this.socket, request, (error) => {
      if (error || this.inFlight !== inFlight || inFlight === undefined) return;
      inFlight.sent = true;
      this.setTimer();
    });
    return promise;
  }

  /**
   * clamd's FILDES: clamd scans the file `fd` refers to (it receives a duplicate: the caller may
   * close its own once this settles). Resolves with clamd's reply. The descriptor goes out by the
   * socket's own descriptor, past Node's write queue, so the queue must be empty first.
   */
  async commandWithDescriptor(fd: number, passing: DescriptorPassing): Promise<string> {
    if (!(await this.writable()) || !this.idle) {
      throw new ClamdSessionError('clamd session closed before a command went out', true);
    }
    // Node keeps a socket's descriptor on its handle and has no public way to read it.
    const handle = (this.socket as unknown as { _handle?: { fd?: unknown } })._handle;
    const socketFd = typeof handle?.fd === 'number' ? handle.fd : -1;
    if (socketFd < 0) throw new ClamdSessionError('clamd session has no descriptor', true);
    this.commands += 1;
    this.lastSentAt = performance.now();
    const promise = new Promise<string>((resolve, reject) => {
      this.inFlight = { id: this.commands, resolve, reject, sent: true, bytes: 0 };
    });
    this.socket.ref();
    const result = passing.sendFildes(socketFd, fd);
    if (result < 0) {
      // Nothing or part of the command went out: the session cannot be trusted again.
      this.fail(`could not hand the file to clamd over ${this.where} (errno ${-result})`, true);
    } else {
      this.setTimer();
    }
    return promise;
  }

  /** Connected, with nothing queued to write; false once the session has ended. */
  private writable(): Promise<boolean> {
    const ready = () => !this.socket.connecting && this.socket.writableLength === 0;
    if (this.ended || ready()) return Promise.resolve(!this.ended);
    return new Promise((resolve) => {
      const settle = () => {
        if (!this.ended && !ready()) return;
        this.socket.off('connect', settle);
        this.socket.off('drain', settle);
        this.socket.off('close', settle);
        resolve(!this.ended);
      };
      this.socket.on('connect', settle);
      this.socket.on('drain', settle);
      this.socket.on('close', settle);
    });
  }

  /** Abandons the command under way, if any, and the session with it. */
  cancel(): void {
    this.fail('scan aborted', false);
  }

  /** Ends an idle session politely (END), or drops a busy one. Never reused after. */
  close(): void {
    if (this.ended) return;
    if (this.inFlight !== undefined) {
      this.fail('clamd session closed', false);
      return;
    }
    this.ended = true;
    this.socket.unref();
    // clamd answers END by closing; the timer drops a session it never answers.
    this.socket.setTimeout(1_000);
    this.socket.end(END);
  }

  /** Idle in the pool: the socket does not keep the process alive, and no timer runs. */
  park(): void {
    this.socket.unref();
  }

  private setTimer(): void {
    if (this.socket.connecting || this.ended) return;
    const inFlight = this.inFlight;
    this.socket.setTimeout(
      inFlight === undefined
        ? 0
        : inFlight.sent
          ? this.timeouts.verdictTimeoutMs
          : this.timeouts.idleTimeoutMs,
    );
  }

  private onTimeout(): void {
    const inFlight = this.inFlight;
    if (this.socket.connecting) {
      this.fail(
        `could not connect to clamd over ${this.where} within ${this.timeouts.connectTimeoutMs} ms`,
        false,
      );
    } else if (inFlight === undefined) {
      this.socket.destroy();
    } else if (inFlight.sent) {
      this.fail(
        `clamd over ${this.where} gave no verdict within ${this.timeouts.verdictTimeoutMs} ms of the end of the stream`,
        false,
      );
    } else {
      this.fail(`clamd over ${this.where} was idle for ${this.timeouts.idleTimeoutMs} ms`, false);
    }
  }

  /** Whether the item may go once more on a plain connection: nothing numbered was read for it. */
  private mayRetry(): boolean {
    return !startsWithDigit(this.received);
  }

  private onData(data: Buffer): void {
    const inFlight = this.inFlight;
    if (inFlight === undefined) {
      // Unasked: clamd is ending the session (its ReadTimeout passed, or it is shutting down).
      this.ended = true;
      this.socket.destroy();
      return;
    }
    const received = this.received === undefined ? data : Buffer.concat([this.received, data]);
    this.received = received;
    const end = received.indexOf(NUL);
    if (end === -1) {
      // A numbered reply ends with a NUL; clamd's unnumbered timeout line with a newline.
      if (!startsWithDigit(received) && received.includes(NEWLINE)) this.unnumbered(received);
      return;
    }
    const line = received.toString('utf8', 0, end);
    const prefix = /^(\d+): /.exec(line);
    if (prefix === null) {
      this.unnumbered(received);
      return;
    }
    if (Number(prefix[1]) !== inFlight.id) {
      this.fail(
        `clamd session answered command ${prefix[1]} while command ${inFlight.id} was out: ${JSON.stringify(line)}`,
        false,
      );
      return;
    }
    this.received = undefined;
    this.inFlight = undefined;
    this.replies += 1;
    this.setTimer();
    // Anything after the reply was not asked for: the session is ending.
    if (received.length > end + 1) {
      this.ended = true;
      this.socket.destroy();
    }
    inFlight.resolve(line.slice(prefix[0].length).trim());
  }

  private unnumbered(received: Buffer): void {
    const text = received.toString('utf8').replace(/[\0\n][\s\S]*$/, '');
    const unsupported = this.replies === 0 && !text.startsWith(READ_TIMED_OUT);
    this.fail(`clamd session ended without answering: ${JSON.stringify(text)}`, true, {
      unsupported,
    });
  }

  private onClose(): void {
    if (this.inFlight !== undefined) {
      this.fail(`clamd over ${this.where} closed the session without a reply`, this.mayRetry());
    }
    this.ended = true;
  }

  private fail(
    message: string,
    retryable: boolean,
    { unsupported = false, cause }: { unsupported?: boolean; cause?: unknown } = {},
  ): void {
    this.ended = true;
    this.socket.destroy();
    const inFlight = this.inFlight;
    if (inFlight === undefined) return;
    this.inFlight = undefined;
    inFlight.reject(
      new ClamdSessionError(message, retryable, unsupported, cause === undefined ? {} : { cause }),
    );
  }
}
