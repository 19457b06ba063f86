import type { Duplex } from 'node:stream';

/** A client broke the protocol: answered with `status` (400 by default), then the connection closes. */
export class IcapProtocolError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 408 = 400,
  ) {
    super(message);
  }
}

/** The client sent nothing for the idle time allowed. */
export class IcapIdleError extends IcapProtocolError {
  constructor(seconds: number) {
    super(`the client sent nothing for ${seconds} s`, 408);
  }
}

/** The client closed its side (or the connection dropped) in the middle of a request. */
export class IcapClosedError extends Error {
  constructor() {
    super('the client closed the connection in the middle of a request');
  }
}

/** Bytes buffered from the socket before it is paused: the bound of what a client can make us hold. */
const HIGH_WATER = 64 * 1024;
const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

/**
 * Pulls bytes from a socket into one buffer with bounds: the socket is paused once HIGH_WATER
 * bytes wait (backpressure reaches the client), and each read says how far it may look. A search
 * for a delimiter resumes where the last one stopped, so a client trickling a byte at a time costs
 * linear time.
 */
export class SocketReader {
  private buffer = Buffer.allocUnsafe(16 * 1024);
  private start = 0;
  private end = 0;
  private ended = false;
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  private idle: { timer: NodeJS.Timeout; ms: number } | null = null;
  private waitingSince = 0;

  constructor(private readonly socket: Duplex) {
    socket.on('data', (chunk: Buffer) => this.push(chunk));
    socket.on('end', () => this.finish());
    socket.on('close', () => this.finish());
    socket.on('error', (error: Error) => {
      this.failure ??= error;
      this.notify();
    });
  }

  /** Bytes read from the socket and not taken yet. */
  get buffered(): number {
    return this.end - this.start;
  }

  /**
   * Stops reading for good: the timers stop, and whatever the client still sends is dropped as it
   * comes (not held), so a client still sending when the connection closes can finish and see it.
   */
  close(): void {
    if (this.idle !== null) clearTimeout(this.idle.timer);
    this.idle = null;
    this.socket.removeAllListeners('data');
    this.socket.on('data', () => undefined);
    this.socket.resume();
  }

  private finish(): void {
    this.ended = true;
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  private push(chunk: Buffer): void {
    const size = this.end - this.start;
    if (this.end + chunk.length > this.buffer.length) {
      if (size + chunk.length <= this.buffer.length) {
        this.buffer.copy(this.buffer, 0, this.start, this.end);
      } else {
        // Bounded: the socket is paused at HIGH_WATER, so this holds at most that plus one chunk.
        const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, size + chunk.length));
        this.buffer.copy(grown, 0, this.start, this.end);
        this.buffer = grown;
      }
      this.start = 0;
      this.end = size;
    }
    chunk.copy(this.buffer, this.end);
    this.end += chunk.length;
    if (this.end - this.start >= HIGH_WATER) this.socket.pause();
    this.notify();
  }

  /**
   * Waits for more bytes; false when the client has ended. Throws the socket's error, or
   * IcapIdleError after `idleMs` without a byte.
   */
  private async more(idleMs: number): Promise<boolean> {
    if (this.failure !== null) throw this.failure;
    if (this.ended) return false;
    const before = this.buffered;
    this.socket.resume();
    this.waitingSince = Date.now();
    if (this.idle === null || this.idle.ms !== idleMs) {
      if (this.idle !== null) clearTimeout(this.idle.timer);
      const timer = setTimeout(() => this.idleFired(idleMs), idleMs);
      timer.unref();
      this.idle = { timer, ms: idleMs };
    } else this.idle.timer.refresh();
    while (this.buffered === before && !this.ended && this.failure === null) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
    this.waitingSince = 0;
    if (this.failure !== null) throw this.failure;
    return this.buffered > before;
  }

  private idleFired(idleMs: number): void {
    if (this.waitingSince === 0) return;
    const waited = Date.now() - this.waitingSince;
    if (waited + 5 < idleMs) {
      this.idle?.timer.refresh();
      return;
    }
    this.failure ??= new IcapIdleError(Math.round(idleMs / 1000));
    this.notify();
  }

  /**
   * Everything up to and including `delimiter`, which must come within `max` bytes (else
   * IcapProtocolError, `tooLong`). Null when the client ended cleanly before sending a byte;
   * IcapClosedError when it ended after some.
   */
  async readUntil(
    delimiter: Buffer,
    max: number,
    idleMs: number,
    tooLong: string,
  ): Promise<Buffer | null> {
    let searchedTo = this.start;
    for (;;) {
      const from = Math.max(this.start, searchedTo - delimiter.length + 1);
      const found = this.buffer.subarray(0, this.end).indexOf(delimiter, from);
      if (found !== -1 && found + delimiter.length - this.start <= max) {
        const stop = found + delimiter.length;
        const taken = Buffer.from(this.buffer.subarray(this.start, stop));
        this.start = stop;
        return taken;
      }
      if (this.buffered >= max) throw new IcapProtocolError(tooLong);
      searchedTo = this.end;
      const start = this.start;
      if (!(await this.more(idleMs))) {
        if (this.buffered === 0) return null;
        throw new IcapClosedError();
      }
      // push() may have moved the bytes to the front of the buffer.
      searchedTo += this.start - start;
    }
  }

  /** One CRLF-terminated line (without its CRLF), at most `max` bytes. */
  async readLine(max: number, idleMs: number, tooLong: string): Promise<string> {
    const line = await this.readUntil(CRLF, max, idleMs, tooLong);
    if (line === null) throw new IcapClosedError();
    return line.subarray(0, line.length - 2).toString('latin1');
  }

  /** A head ending with an empty line, at most `max` bytes; null at a clean end before it. */
  readHead(max: number, idleMs: number, tooLong: string): Promise<Buffer | null> {
    return this.readUntil(HEAD_END, max, idleMs, tooLong);
  }

  /** Exactly `length` bytes (at most what the caller bounded). */
  async readExactly(length: number, idleMs: number): Promise<Buffer> {
    while (this.buffered < length) {
      if (!(await this.more(idleMs))) throw new IcapClosedError();
    }
    const taken = Buffer.from(this.buffer.subarray(this.start, this.start + length));
    this.start += length;
    return taken;
  }

  /** Up to `max` bytes, at least one, as soon as any are there: a body's data as it arrives. */
  async readSome(max: number, idleMs: number): Promise<Buffer> {
    while (this.buffered === 0) {
      if (!(await this.more(idleMs))) throw new IcapClosedError();
    }
    const length = Math.min(max, this.buffered);
    const taken = Buffer.from(this.buffer.subarray(this.start, this.start + length));
    this.start += length;
    if (this.start === this.end) {
      this.start = 0;
      this.end = 0;
    }
    return taken;
  }
}
