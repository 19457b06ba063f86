/** The outbound requests: GET with redirects (fetchContent), a single POST (postBody) or GET ping. */
import { Buffer } from 'node:buffer';
import http from 'node:http';
import type net from 'node:net';
import { type OutboundOptions, openConnection } from './connection.js';
import { noop, Operation } from './operation.js';
import { OutboundError, parseTarget, type Target } from './target.js';

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
  idleTimeoutMs: number | undefined,
  op: Operation,
): AsyncGenerator<Buffer> {
  let received = 0;
  const chunks = (response as AsyncIterable<Buffer | string>)[Symbol.asyncIterator]();
  try {
    for (;;) {
      // Only the wait for the remote's next bytes counts as its silence, not the consumer's work.
      const next = await op.within(chunks.next(), idleTimeoutMs, () =>
        stalled(target, idleTimeoutMs, `after ${received} bytes of the body`),
      );
      if (next.done === true) break;
      const chunk = next.value;
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

/** What a remote that went silent did: named, so an error result blames it, not an engine. */
function stalled(target: Target, idleTimeoutMs: number | undefined, when: string): string {
  return `the remote server ${target.display}${target.via} stalled: nothing received for ${(idleTimeoutMs ?? 0) / 1000} s ${when} (ASSAY_FETCH_IDLE_TIMEOUT)`;
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
      const response = await op.within(
        exchange(target, socket, 'GET', headers, null, op),
        options.idleTimeoutMs,
        () => stalled(target, options.idleTimeoutMs, 'waiting for the response head'),
      );
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
        body: streamBody(response, target, options.maxBytes, options.idleTimeoutMs, op),
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
export function postBody(
  url: string,
  body: Buffer,
  headers: Record<string, string>,
  options: OutboundOptions,
): Promise<{ status: number }> {
  return sendOnce(url, 'POST', body, headers, options);
}

/** A bodiless GET (a v1.0 callback ping), with the same rules and outcome as postBody. */
export function pingUrl(
  url: string,
  headers: Record<string, string>,
  options: OutboundOptions,
): Promise<{ status: number }> {
  return sendOnce(url, 'GET', null, headers, options);
}

/** One request, no redirects: the status is the outcome, the answer is read and discarded. */
async function sendOnce(
  url: string,
  method: 'GET' | 'POST',
  body: Buffer | null,
  headers: Record<string, string>,
  options: OutboundOptions,
): Promise<{ status: number }> {
  const target = parseTarget(url);
  const verb = method === 'POST' ? 'posting to' : 'pinging';
  const op = new Operation(options.totalTimeoutMs, () => `${verb} ${target.display}`);
  // The caller's headers win, except the ones that frame the message, which must match the body.
  const framing = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);
  const merged: Record<string, string> = {
    Host: target.url.host,
    'User-Agent': options.userAgent,
    ...(body === null ? {} : { 'Content-Length': String(body.length) }),
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
    const response = await exchange(target, socket, method, merged, body, op);
    await discardAnswer(response, MAX_ANSWER_BYTES);
    return { status: response.statusCode ?? 0 };
  } catch (err) {
    const error = op.explain(err, (detail) => `${verb} ${target.display} failed: ${detail}`);
    op.fail(error);
    throw error;
  } finally {
    op.finish();
  }
}
