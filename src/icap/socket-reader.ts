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
/** Chunks held at most before they are merged: the bound of the objects a client can make us keep. */
const MAX_CHUNKS = 256;
const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

/**
 * Pulls bytes from a socket with bounds: the socket is paused once HIGH_WATER bytes wait
 * (backpressure reaches the client), and each read says how far it may look. The socket's own
 * chunks are kept as they came and body data is handed on as views of them, never copied (a copy
 * per piece doubled the allocations that drive garbage collection). A search for a delimiter
 * resumes where the last one stopped, across chunks, so a client trickling a byte at a time costs
 * linear time.
 */
export class SocketReader {
  /** Unread data: `chunks[head]` from `offset` on, then the others whole. */
  private chunks: Buffer[] = [];
  private head = 0;
  private offset = 0;
  private size = 0;
  /** A delimiter search under way: bytes looked at from the front, and how much of it matched. */
  private search: {
    delimiter: Buffer;
    scanned: number;
    matched: number;
    chunk: number;
    at: number;
  } | null = null;
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
    return this.size;
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
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    // A client trickling bytes would make many tiny chunks: past MAX_CHUNKS they become one.
    if (this.chunks.length - this.head > MAX_CHUNKS) this.merge();
    if (this.size >= HIGH_WATER) this.socket.pause();
    this.notify();
  }

  /** The unread chunks as one (a search under way keeps its place: it counts from the front). */
  private merge(): void {
    const unread = this.chunks.slice(this.head);
    unread[0] = (unread[0] as Buffer).subarray(this.offset);
    this.chunks = [Buffer.concat(unread, this.size)];
    this.head = 0;
    this.offset = 0;
    if (this.search !== null) {
      this.search.chunk = 0;
      this.search.at = this.search.scanned;
    }
  }

  /**
   * Waits for more bytes; false when the client has ended. Throws the socket's error, or
   * IcapIdleError after `idleMs` without a byte.
   */
  private async more(idleMs: number): Promise<boolean> {
    if (this.failure !== null) throw this.failure;
    if (this.ended) return false;
    const before = this.size;
    this.socket.resume();
    this.waitingSince = Date.now();
    if (this.idle === null || this.idle.ms !== idleMs) {
      if (this.idle !== null) clearTimeout(this.idle.timer);
      const timer = setTimeout(() => this.idleFired(idleMs), idleMs);
      timer.unref();
      this.idle = { timer, ms: idleMs };
    } else this.idle.timer.refresh();
    while (this.size === before && !this.ended && this.failure === null) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
    this.waitingSince = 0;
    if (this.failure !== null) throw this.failure;
    return this.size > before;
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

  /** Takes `length` buffered bytes from the front: a view when one chunk holds them, else a copy. */
  private take(length: number): Buffer {
    const first = this.chunks[this.head] as Buffer;
    if (first.length - this.offset >= length) {
      const taken = first.subarray(this.offset, this.offset + length);
      this.offset += length;
      if (this.offset === first.length) this.dropFirst();
      this.size -= length;
      return taken;
    }
    const taken = Buffer.allocUnsafe(length);
    let filled = 0;
    while (filled < length) {
      const chunk = this.chunks[this.head] as Buffer;
      const count = Math.min(length - filled, chunk.length - this.offset);
      chunk.copy(taken, filled, this.offset, this.offset + count);
      filled += count;
      this.offset += count;
      if (this.offset === chunk.length) this.dropFirst();
    }
    this.size -= length;
    return taken;
  }

  /** The front chunk is used up: the next one is the front (the array is compacted now and then). */
  private dropFirst(): void {
    this.head += 1;
    this.offset = 0;
    if (this.head === this.chunks.length) {
      this.chunks = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.chunks.length) {
      this.chunks = this.chunks.slice(this.head);
      this.head = 0;
    }
  }

  /**
   * Looks for `delimiter` in what is buffered, from where the last look stopped: the position just
   * past it (from the front), or -1. A byte-wise match that falls back to the delimiter's first
   * byte is exact for CRLF and CRLFCRLF, the only delimiters read.
   */
  private find(delimiter: Buffer, limit: number): number {
    let search = this.search;
    if (search === null || search.delimiter !== delimiter) {
      search = { delimiter, scanned: 0, matched: 0, chunk: this.head, at: this.offset };
      this.search = search;
    }
    while (search.scanned < Math.min(this.size, limit)) {
      const chunk = this.chunks[search.chunk] as Buffer;
      if (search.at >= chunk.length) {
        search.chunk += 1;
        search.at = 0;
        continue;
      }
      const byte = chunk[search.at] as number;
      search.at += 1;
      search.scanned += 1;
      if (byte === delimiter[search.matched]) search.matched += 1;
      else search.matched = byte === delimiter[0] ? 1 : 0;
      if (search.matched === delimiter.length) {
        this.search = null;
        return search.scanned;
      }
    }
    return -1;
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
    this.search = null;
    for (;;) {
      const end = this.find(delimiter, max);
      if (end !== -1) return this.take(end);
      if (this.size >= max) throw new IcapProtocolError(tooLong);
      if (!(await this.more(idleMs))) {
        if (this.size === 0) return null;
        throw new IcapClosedError();
      }
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
    while (this.size < length) {
      if (!(await this.more(idleMs))) throw new IcapClosedError();
    }
    return this.take(length);
  }

  /**
   * Up to `max` bytes, at least one, as soon as any are there: a body's data as it arrives, a view
   * of the socket's chunk (valid for good: the socket never reuses it).
   */
  async readSome(max: number, idleMs: number): Promise<Buffer> {
    while (this.size === 0) {
      if (!(await this.more(idleMs))) throw new IcapClosedError();
    }
    const first = this.chunks[this.head] as Buffer;
    return this.take(Math.min(max, first.length - this.offset));
  }
}
