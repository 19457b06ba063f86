/** The lifetime of one outbound fetch or post: deadline, abort signal and sockets. */
import type net from 'node:net';
import { describe, OutboundError } from './target.js';

export function noop(): void {}

/**
 * One fetch or post: its total deadline, its abort signal, and the sockets to destroy when it
 * fails or ends (so nothing outlives it, and no timer keeps the process alive).
 */
export class Operation {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private readonly sockets = new Set<net.Socket>();

  constructor(totalTimeoutMs: number, doing: () => string) {
    this.timer = setTimeout(() => {
      this.fail(new OutboundError(`timed out after ${totalTimeoutMs} ms ${doing()}`));
    }, totalTimeoutMs);
    // Not unref'd: it is cleared when the operation ends, and until then it is what ends an
    // operation waiting on something that holds no handle (a resolver that never answers).
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.controller.signal.aborted;
  }

  /** Why the operation was aborted. */
  get reason(): OutboundError {
    const reason: unknown = this.controller.signal.reason;
    return reason instanceof OutboundError ? reason : new OutboundError('aborted');
  }

  track(socket: net.Socket): void {
    // A socket error after we stopped listening must not become an uncaught exception.
    socket.on('error', noop);
    this.sockets.add(socket);
  }

  fail(error: OutboundError): void {
    if (!this.aborted) this.controller.abort(error);
    this.finish();
  }

  finish(): void {
    clearTimeout(this.timer);
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  /** `promise`, or the abort reason if the operation is aborted first. */
  race<T>(promise: Promise<T>): Promise<T> {
    if (this.aborted) {
      promise.catch(noop);
      return Promise.reject(this.reason);
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(this.reason);
      this.signal.addEventListener('abort', onAbort, { once: true });
      promise.then(
        (value) => {
          this.signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (err: unknown) => {
          this.signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      );
    });
  }

  /**
   * `promise`, or the operation fails if it does not settle within `idleMs` (the remote went
   * silent: `silence` says so, naming it). Undefined `idleMs`: no limit but the total deadline.
   */
  within<T>(promise: Promise<T>, idleMs: number | undefined, silence: () => string): Promise<T> {
    if (idleMs === undefined) return this.race(promise);
    const timer = setTimeout(() => this.fail(new OutboundError(silence())), idleMs);
    return this.race(promise).finally(() => clearTimeout(timer));
  }

  /** The error to report for `err`: ours as is, the abort reason once aborted, else a wrapped one. */
  explain(err: unknown, wrap: (detail: string) => string): OutboundError {
    if (err instanceof OutboundError) return err;
    if (this.aborted) return this.reason;
    return new OutboundError(wrap(describe(err)));
  }
}
