/**
 * Outbound HTTP(S) for URLs that users hand us: every hop is checked against the AddressPolicy
 * before a packet leaves, and the socket is opened here, to the vetted IP, so a second DNS answer
 * (rebinding) can never change where a request goes.
 */
import { Buffer } from 'node:buffer';
import dns from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { type AddressPolicy, canonicalIp } from './address-policy.js';

/** Network failure, timeout, bad status, too large, bad URL; the message is user-facing and names the URL without userinfo or query. */
export class OutboundError extends Error {
  override name = 'OutboundError';
}

/** Refused by the policy (SSRF); the message says why. */
export class OutboundRefusedError extends OutboundError {
  override name = 'OutboundRefusedError';
}

/** An address a host name resolves to. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

export interface OutboundOptions {
  policy: AddressPolicy;
  /** Per connection attempt (TCP connect, and the TLS handshake for https). */
  connectTimeoutMs: number;
  /** Whole exchange including body, redirects. */
  totalTimeoutMs: number;
  userAgent: string;
  /** Resolves host names; default dns.lookup with all: true. Tests use it to play DNS without a resolver. */
  resolve?: (hostname: string) => Promise<readonly ResolvedAddress[]>;
}

export interface FetchedContent {
  body: AsyncIterable<Buffer>;
  contentLength: number | null;
  /** Where the content came from after redirects; without userinfo and fragment, but with the query. */
  finalUrl: string;
  abort(): void;
}

const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const MAX_ANSWER_BYTES = 64 * 1024;

function noop(): void {}

/** One URL to contact, with the parts the messages and the connection need. */
interface Target {
  url: URL;
  /** scheme://host[:port]/path: no userinfo, query or fragment, which may hold credentials. */
  display: string;
  /** The URL's host without IPv6 brackets. */
  hostname: string;
  port: number;
  /** ' (redirected from ...)' for a redirect hop, '' otherwise. */
  via: string;
}

/** Best-effort redaction of a string that is not a URL, for the "invalid URL" message. */
function redactUnparsed(raw: string): string {
  const shortened = raw.replace(/\/\/[^/?#]*@/, '//').replace(/[?#].*$/s, '');
  return JSON.stringify(shortened.length > 200 ? `${shortened.slice(0, 200)}…` : shortened);
}

function parseTarget(raw: string, from?: Target): Target {
  let url: URL;
  try {
    url = from === undefined ? new URL(raw) : new URL(raw, from.url);
  } catch {
    throw new OutboundError(
      from === undefined
        ? `invalid URL ${redactUnparsed(raw)}`
        : `invalid redirect location from ${from.display}`,
    );
  }
  const via = from === undefined ? '' : ` (redirected from ${from.display})`;
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    // Only the scheme: a data: URL's "path" is its content.
    throw new OutboundError(
      `unsupported URL scheme ${url.protocol}${via}; only http: and https: URLs can be fetched`,
    );
  }
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return {
    url,
    display: `${url.protocol}//${url.host}${url.pathname}`,
    hostname,
    port: url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port),
    via,
  };
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}

const NETWORK_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ECONNABORTED: 'connection aborted',
  EPIPE: 'connection closed',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EADDRNOTAVAIL: 'address not available',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'temporary DNS failure',
  ENODATA: 'no address for this name',
};

/** A short, user-facing description of a socket, DNS or parser error. */
function describe(err: unknown): string {
  const code = errorCode(err);
  if (code !== undefined && NETWORK_ERRORS[code] !== undefined) return NETWORK_ERRORS[code];
  if (code?.startsWith('HPE_')) return `invalid HTTP response (${code})`;
  return err instanceof Error ? err.message : String(err);
}

/**
 * One fetch or post: its total deadline, its abort signal, and the sockets to destroy when it
 * fails or ends (so nothing outlives it, and no timer keeps the process alive).
 */
class Operation {
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

  /** The error to report for `err`: ours as is, the abort reason once aborted, else a wrapped one. */
  explain(err: unknown, wrap: (detail: string) => string): OutboundError {
    if (err instanceof OutboundError) return err;
    if (this.aborted) return this.reason;
    return new OutboundError(wrap(describe(err)));
  }
}

function defaultResolve(hostname: string): Promise<readonly ResolvedAddress[]> {
  // Through the module object, not a named import, so the lookup is the one installed at call time.
  return dns.promises.lookup(hostname, { all: true, verbatim: true });
}

/** The addresses the target may be contacted on; refuses if any of them is refused. */
async function vettedAddresses(
  target: Target,
  options: OutboundOptions,
  op: Operation,
): Promise<ResolvedAddress[]> {
  const refused = (reason: string) =>
    new OutboundRefusedError(`refused ${target.display}${target.via}: ${reason}`);
  const literal = net.isIP(target.hostname);
  if (literal !== 0) {
    const reason = options.policy.refusal(target.hostname, target.hostname);
    if (reason !== null) throw refused(reason);
    return [{ address: target.hostname, family: literal }];
  }
  let answers: readonly ResolvedAddress[];
  try {
    answers = await op.race((options.resolve ?? defaultResolve)(target.hostname));
  } catch (err) {
    throw op.explain(
      err,
      (detail) =>
        `could not resolve ${target.hostname} for ${target.display}${target.via}: ${detail}`,
    );
  }
  if (answers.length === 0) {
    throw new OutboundError(
      `could not resolve ${target.hostname} for ${target.display}${target.via}: no addresses`,
    );
  }
  const vetted: ResolvedAddress[] = [];
  for (const answer of answers) {
    // One refused address refuses the name: which one a connection would get is up to DNS.
    const reason = options.policy.refusal(answer.address, target.hostname);
    if (reason !== null) throw refused(`${target.hostname} has a refused address (${reason})`);
    const family = net.isIP(answer.address);
    if (!vetted.some((known) => known.address === answer.address)) {
      vetted.push({ address: answer.address, family });
    }
  }
  return vetted;
}

/** A TCP connection to exactly `address`, within the per-attempt connect timeout. */
function connectTcp(
  address: ResolvedAddress,
  port: number,
  timeoutMs: number,
  op: Operation,
): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    if (op.aborted) {
      reject(op.reason);
      return;
    }
    // An IP host skips DNS inside net, so the connection goes where the policy said it may.
    const socket = net.connect({ host: address.address, port, family: address.family });
    op.track(socket);
    const settle = () => {
      clearTimeout(timer);
      op.signal.removeEventListener('abort', onAbort);
      socket.off('connect', onConnect);
      socket.off('error', onError);
    };
    const onConnect = () => {
      settle();
      resolve(socket);
    };
    const onError = (err: Error) => {
      settle();
      socket.destroy();
      reject(err);
    };
    const onAbort = () => {
      settle();
      socket.destroy();
      reject(op.reason);
    };
    const timer = setTimeout(() => {
      settle();
      socket.destroy();
      reject(new OutboundError(`connect timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', onConnect);
    socket.once('error', onError);
    op.signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** TLS over a vetted socket; SNI and the certificate check use the URL's host name. */
function startTls(
  socket: net.Socket,
  target: Target,
  timeoutMs: number,
  op: Operation,
): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const secure = tls.connect({
      socket,
      // RFC 6066 forbids IP addresses in SNI; the certificate is then checked against the IP.
      servername: net.isIP(target.hostname) === 0 ? target.hostname : undefined,
      host: target.hostname,
      ALPNProtocols: ['http/1.1'],
    });
    op.track(secure);
    const settle = () => {
      clearTimeout(timer);
      op.signal.removeEventListener('abort', onAbort);
      secure.off('secureConnect', onSecure);
      secure.off('error', onError);
    };
    const onSecure = () => {
      settle();
      resolve(secure);
    };
    const onError = (err: Error) => {
      settle();
      secure.destroy();
      reject(
        new OutboundError(
          `TLS handshake with ${target.display}${target.via} failed: ${err.message}`,
        ),
      );
    };
    const onAbort = () => {
      settle();
      secure.destroy();
      reject(op.reason);
    };
    const timer = setTimeout(() => {
      onError(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    secure.once('secureConnect', onSecure);
    secure.once('error', onError);
    op.signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** A connected (and for https, handshaken) socket to one of the target's vetted addresses. */
async function openConnection(
  target: Target,
  options: OutboundOptions,
  op: Operation,
): Promise<net.Socket> {
  const addresses = await vettedAddresses(target, options, op);
  let lastError: unknown;
  for (const address of addresses) {
    let socket: net.Socket;
    try {
      socket = await connectTcp(address, target.port, options.connectTimeoutMs, op);
    } catch (err) {
      if (op.aborted) throw op.reason;
      lastError = err;
      continue;
    }
    // Belt and braces: the peer must be the address we vetted, and still pass the policy.
    const remote = socket.remoteAddress ?? '';
    const reason =
      canonicalIp(remote) === canonicalIp(address.address)
        ? options.policy.refusal(remote, target.hostname)
        : `connected to ${remote || 'an unknown address'} instead of ${address.address}`;
    if (reason !== null) {
      socket.destroy();
      throw new OutboundRefusedError(`refused ${target.display}${target.via}: ${reason}`);
    }
    if (target.url.protocol !== 'https:') return socket;
    return startTls(socket, target, options.connectTimeoutMs, op);
  }
  throw new OutboundError(
    `could not connect to ${target.display}${target.via}: ${describe(lastError)}`,
  );
}

/** Basic credentials from the URL's userinfo, which WHATWG URL keeps percent-encoded. */
function userinfo(url: URL): string | undefined {
  if (url.username === '' && url.password === '') return undefined;
  const decode = (part: string) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return part;
    }
  };
  return `${decode(url.username)}:${decode(url.password)}`;
}

/** Sends one request on `socket` and resolves with the response head. */
function exchange(
  target: Target,
  socket: net.Socket,
  method: 'GET' | 'POST',
  headers: Record<string, string>,
  body: Buffer | null,
  op: Operation,
): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    let request: http.ClientRequest;
    try {
      // No agent: the socket is ours, used once, and http sends Connection: close.
      request = http.request({
        createConnection: () => socket,
        method,
        path: `${target.url.pathname}${target.url.search}`,
        headers,
        auth: userinfo(target.url),
        setHost: false,
      });
    } catch (err) {
      // Invalid header names or values are refused synchronously.
      socket.destroy();
      reject(
        op.explain(err, (detail) => `could not send a request to ${target.display}: ${detail}`),
      );
      return;
    }
    const onAbort = () => request.destroy(op.reason);
    op.signal.addEventListener('abort', onAbort, { once: true });
    // Stays attached: the request may still report a socket error after the response head.
    request.on('error', (err) => {
      op.signal.removeEventListener('abort', onAbort);
      reject(
        op.explain(err, (detail) => `request to ${target.display}${target.via} failed: ${detail}`),
      );
    });
    request.on('response', (response) => {
      op.signal.removeEventListener('abort', onAbort);
      response.on('error', noop);
      resolve(response);
    });
    request.end(body ?? undefined);
  });
}

function parseContentLength(response: http.IncomingMessage): number | null {
  const value = response.headers['content-length'];
  if (value === undefined || response.headers['transfer-encoding'] !== undefined) return null;
  return /^\d+$/.test(value) ? Number(value) : null;
}

/** The response body, pulled by the consumer (so TCP backpressure holds the server back). */
async function* streamBody(
  response: http.IncomingMessage,
  target: Target,
  maxBytes: number,
  op: Operation,
): AsyncGenerator<Buffer> {
  let received = 0;
  try {
    for await (const chunk of response as AsyncIterable<Buffer | string>) {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      received += buffer.length;
      if (received > maxBytes) {
        throw new OutboundError(`${target.display} sent more than the limit of ${maxBytes} bytes`);
      }
      yield buffer;
    }
    // The response may have been complete when the deadline or abort() hit.
    if (op.aborted) throw op.reason;
  } catch (err) {
    const error = op.explain(
      err,
      (detail) => `connection to ${target.display} failed while reading the body: ${detail}`,
    );
    op.fail(error);
    throw error;
  } finally {
    op.finish();
  }
}

/** GET with up to 5 redirects (301/302/303/307/308; each hop re-checked by the policy; http(s) only); rejects non-2xx final status with OutboundError(`HTTP 404 from ...`); enforces maxBytes from Content-Length up front and while streaming (OutboundError saying the limit). The body is a stream of Buffers that errors with OutboundError on timeout/limit/reset. */
export async function fetchContent(
  url: string,
  options: OutboundOptions & { maxBytes: number },
): Promise<FetchedContent> {
  let target = parseTarget(url);
  const start = target;
  const op = new Operation(options.totalTimeoutMs, () => `fetching ${target.display}`);
  try {
    for (let redirects = 0; ; redirects++) {
      const socket = await openConnection(target, options, op);
      const headers = {
        Host: target.url.host,
        'User-Agent': options.userAgent,
        Accept: '*/*',
        // We scan the bytes as served, and do not decode content codings.
        'Accept-Encoding': 'identity',
      };
      const response = await exchange(target, socket, 'GET', headers, null, op);
      const status = response.statusCode ?? 0;
      if (REDIRECT_STATUSES.has(status)) {
        const location = response.headers.location;
        socket.destroy();
        if (location === undefined) {
          throw new OutboundError(
            `HTTP ${status} without a Location header from ${target.display}`,
          );
        }
        if (redirects === MAX_REDIRECTS) {
          throw new OutboundError(
            `too many redirects (more than ${MAX_REDIRECTS}) fetching ${start.display}`,
          );
        }
        target = parseTarget(location, target);
        continue;
      }
      if (status < 200 || status > 299) {
        socket.destroy();
        throw new OutboundError(`HTTP ${status} from ${target.display}${target.via}`);
      }
      const contentLength = parseContentLength(response);
      if (contentLength !== null && contentLength > options.maxBytes) {
        socket.destroy();
        throw new OutboundError(
          `${target.display} is ${contentLength} bytes, over the limit of ${options.maxBytes} bytes`,
        );
      }
      const final = new URL(target.url.href);
      final.username = '';
      final.password = '';
      final.hash = '';
      const display = target.display;
      return {
        body: streamBody(response, target, options.maxBytes, op),
        contentLength,
        finalUrl: final.href,
        abort: () => op.fail(new OutboundError(`download of ${display} aborted`)),
      };
    }
  } catch (err) {
    const error = op.explain(err, (detail) => `fetching ${target.display} failed: ${detail}`);
    op.fail(error);
    throw error;
  }
}

/** Reads and discards up to `limit` bytes of an answer; never rejects (the status is what counts). */
async function discardAnswer(response: http.IncomingMessage, limit: number): Promise<void> {
  let received = 0;
  try {
    for await (const chunk of response as AsyncIterable<Buffer | string>) {
      received += chunk.length;
      if (received >= limit) break;
    }
  } catch {
    // The head with the status arrived: a broken answer body does not change the outcome.
  }
}

/** POST a body (no redirects followed; a 3xx counts as a failed delivery), read at most 64 KB of the answer, resolve with the status (any status; the caller decides), reject with OutboundError/OutboundRefusedError on network failure/timeout/refusal. */
export async function postBody(
  url: string,
  body: Buffer,
  headers: Record<string, string>,
  options: OutboundOptions,
): Promise<{ status: number }> {
  const target = parseTarget(url);
  const op = new Operation(options.totalTimeoutMs, () => `posting to ${target.display}`);
  // The caller's headers win, except the ones that frame the message, which must match the body.
  const framing = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);
  const merged: Record<string, string> = {
    Host: target.url.host,
    'User-Agent': options.userAgent,
    'Content-Length': String(body.length),
  };
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (framing.has(lower)) continue;
    for (const existing of Object.keys(merged)) {
      if (existing.toLowerCase() === lower) delete merged[existing];
    }
    merged[name] = value;
  }
  try {
    const socket = await openConnection(target, options, op);
    const response = await exchange(target, socket, 'POST', merged, body, op);
    await discardAnswer(response, MAX_ANSWER_BYTES);
    return { status: response.statusCode ?? 0 };
  } catch (err) {
    const error = op.explain(err, (detail) => `posting to ${target.display} failed: ${detail}`);
    op.fail(error);
    throw error;
  } finally {
    op.finish();
  }
}
