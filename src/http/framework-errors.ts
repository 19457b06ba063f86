import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config.js';
import { HttpError } from './http-error.js';
import { isLegacyPath, legacyPrefix } from './legacy-path.js';
import { clientErrorOf } from './plugins/error-handler.js';
import { serviceHeaders } from './plugins/response-headers.js';
import { legacyArgumentsOf, legacyError, legacyErrorHandler } from './routes/v1/legacy-reply.js';

/** What an answer written outside a route needs: where v1.0 lives, and the service's headers. */
export interface RawErrorContext {
  legacyPrefix: string;
  headersFor: (requestId: string) => Record<string, string>;
}

export function rawErrorContext(
  config: Pick<Config, 'legacyBaseUrl' | 'headerBrand' | 'hostId'>,
): RawErrorContext {
  return { legacyPrefix: legacyPrefix(config.legacyBaseUrl), headersFor: serviceHeaders(config) };
}

/** The path and query of a request target, split at the first `?`. */
function splitTarget(target: string): { path: string; query: string } {
  const at = target.indexOf('?');
  return at === -1
    ? { path: target, query: '' }
    : { path: target.slice(0, at), query: target.slice(at + 1) };
}

/**
 * An error answer written on the socket, outside any reply (a request cut for its timeout, a head
 * the parser refused): v2 `{"error"}`, or v1.0 in the format its query asks for when `target` is
 * under v1.0, with the service's headers. The connection is closed after it.
 */
export function rawErrorAnswer(
  context: RawErrorContext,
  target: string | null,
  answer: { requestId: string; statusCode: number; message: string; runtimeMs: number },
): string {
  const { path, query } = splitTarget(target ?? '');
  const legacy =
    target !== null && isLegacyPath(path, context.legacyPrefix)
      ? legacyError(
          answer.statusCode,
          answer.message,
          answer.requestId,
          legacyArgumentsOf(new URLSearchParams(query)),
        )
      : null;
  const statusCode = legacy?.statusCode ?? answer.statusCode;
  const body = legacy?.body ?? JSON.stringify({ error: answer.message });
  const headers: Record<string, string> = {
    ...context.headersFor(answer.requestId),
    'x-runtime': `${Math.round(answer.runtimeMs)}ms`,
    'content-type': legacy?.contentType ?? 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    // v1.0's 502 (here: a request cut for its timeout) says when to retry, as on every route.
    ...(statusCode === 502 ? { 'retry-after': '1' } : {}),
    connection: 'close',
  };
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\n${head}\r\n${body}`;
}

/**
 * Errors Fastify's router raises before any route (a URL it cannot decode, a path segment too
 * long), answered in the API's own shape: v2 `{"error"}` with the service's headers, v1.0 in the
 * requested format. The URL is never echoed: it is the client's, unbounded and possibly hostile.
 */
export function frameworkErrors(context: RawErrorContext) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    // The hooks that add these to every answer do not run before routing.
    reply.headers({ ...context.headersFor(request.id), 'x-runtime': '0ms' });
    const problem =
      error.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? new HttpError(414, 'a segment of the URL is too long')
        : error.code === 'FST_ERR_BAD_URL'
          ? new HttpError(400, 'the URL is not valid: a malformed percent-encoding')
          : new HttpError(error.statusCode ?? 500, 'the request could not be routed');
    const { path, query } = splitTarget(request.raw.url ?? '');
    if (isLegacyPath(path, context.legacyPrefix)) {
      // Unrouted, the query is not parsed yet: v1.0 reads its format and suppress_response_codes.
      (request as { query: unknown }).query = Object.fromEntries(new URLSearchParams(query));
      return legacyErrorHandler(problem, request, reply);
    }
    const { statusCode, message, headers } = clientErrorOf(problem, request, reply);
    return reply
      .code(statusCode)
      .headers(headers)
      .header('content-type', 'application/json')
      .send(Buffer.from(JSON.stringify({ error: message }))); // a Buffer: no charset is added
  };
}

/** The most of a refused packet searched for its request line. */
const MAX_SCANNED_BYTES = 64 * 1024;

/**
 * The target of the request line at the start of the bytes the parser refused, when they hold
 * one (a head sent at once; its method in any case, its target in origin or absolute form): only
 * to pick the API's format. Bounded and linear.
 */
function refusedTarget(error: Error & { rawPacket?: unknown }): string | null {
  if (!Buffer.isBuffer(error.rawPacket)) return null;
  const text = error.rawPacket.subarray(0, MAX_SCANNED_BYTES).toString('latin1');
  return /^[A-Z]{1,20} ((?:https?:\/\/[^/\s]*)?\/[^\s]*)/i.exec(text)?.[1] ?? null;
}

/** The latest request on each connection, and its response: what a parser error may be about. */
const exchanges = new WeakMap<Socket, { request: IncomingMessage; response: ServerResponse }>();

/** Notes every request on its connection, for clientErrorHandler. */
export function watchExchanges(server: Server): void {
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    exchanges.set(request.socket, { request, response });
  });
}

/**
 * Errors Node's HTTP parser raises (headers or URL too large, bytes that are not HTTP, the head's
 * timeout, a body cut short by the client's end): answered on the socket with the service's
 * headers and a request id of its own, then the connection is closed. v2 `{"error"}`, or v1.0 in
 * the requested format when the refused bytes start with a request line for v1.0, or the error is
 * about the body of a v1.0 request not answered yet.
 */
export function clientErrorHandler(context: RawErrorContext) {
  return (error: Error & { code?: string }, socket: Socket): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const exchange = exchanges.get(socket);
    // An answer is being written (another would cut into it), or the error is about the rest of
    // the body of a request already answered (a client that ends its side while a refused body
    // is drained): a second answer would be one the client never asked for.
    if (
      exchange?.response.headersSent === true &&
      (!exchange.response.writableFinished || !exchange.request.complete)
    ) {
      socket.destroy();
      return;
    }
    const unanswered =
      exchange !== undefined && !exchange.request.complete ? (exchange.request.url ?? null) : null;
    const statusCode =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? 431
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 408
          : 400;
    const message =
      statusCode === 431
        ? 'the request head (its URL or headers) is too large'
        : statusCode === 408
          ? 'the request head did not arrive in time'
          : 'the request is not valid HTTP';
    if (socket.writable) {
      socket.write(
        rawErrorAnswer(context, refusedTarget(error) ?? unanswered, {
          requestId: randomUUID(),
          statusCode,
          message,
          runtimeMs: 0,
        }),
      );
    }
    socket.destroy();
  };
}

/**
 * What Fastify or Node would otherwise answer in their own shape: an `Expect` other than
 * `100-continue` (Node's bare 417), an HTTP/1.1 request without `Host` (Node's bare 400, with no
 * body: its check is turned off in app.ts) and a request arriving while the service shuts down
 * (Fastify's 503). Each goes through the error handlers, so each API answers in its format.
 */
export const frameworkRefusals = fp(async (app: FastifyInstance) => {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', (request, _reply, done) => done(refusalOf(request)));
  const refusalOf = (request: FastifyRequest): HttpError | undefined => {
    if (closing) {
      // Fastify has set `Connection: close`; another instance, or this one restarted, will answer.
      return new HttpError(503, 'the service is shutting down: retry shortly', {
        'retry-after': '1',
      });
    }
    const expect = request.headers.expect;
    if (expect !== undefined && !/^\s*100-continue\s*$/i.test(expect)) {
      return new HttpError(417, 'Expect: only 100-continue is supported');
    }
    // RFC 9112 (3.2): an HTTP/1.1 request without Host is a 400.
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      return new HttpError(400, 'an HTTP/1.1 request needs a Host header');
    }
    return undefined;
  };
});
