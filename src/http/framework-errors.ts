import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { HttpError } from './http-error.js';
import { clientErrorOf } from './plugins/error-handler.js';
import { legacyErrorHandler } from './routes/v1/legacy-reply.js';

/**
 * Errors Fastify's router raises before any route (a URL it cannot decode, a path segment too
 * long), answered in the API's own shape: v2 `{"error"}` with the service's headers, v1.0 in the
 * requested format. The URL is never echoed: it is the client's, unbounded and possibly hostile.
 */
export function frameworkErrors(
  legacyPrefix: string,
  headersFor: (requestId: string) => Record<string, string>,
) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    // The hooks that add these to every answer do not run before routing.
    reply.headers({ ...headersFor(request.id), 'x-runtime': '0ms' });
    const problem =
      error.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? new HttpError(414, 'a segment of the URL is too long')
        : error.code === 'FST_ERR_BAD_URL'
          ? new HttpError(400, 'the URL is not valid: a malformed percent-encoding')
          : new HttpError(error.statusCode ?? 500, 'the request could not be routed');
    const [path = '', query = ''] = (request.raw.url ?? '').split('?', 2);
    if (path === legacyPrefix || path.startsWith(`${legacyPrefix}/`)) {
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

/**
 * Errors Node's HTTP parser raises before there is a request (headers or URL too large, bytes that
 * are not HTTP, the head's timeout): answered on the socket as v2 `{"error"}` with the service's
 * headers and a request id of its own, then the connection is closed. Which API the client meant
 * cannot be known without a parsed request line.
 */
export function clientErrorHandler(headersFor: (requestId: string) => Record<string, string>) {
  return (error: Error & { code?: string }, socket: Socket): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const status =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? 431
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 408
          : 400;
    const message =
      status === 431
        ? 'the request head (its URL or headers) is too large'
        : status === 408
          ? 'the request head did not arrive in time'
          : 'the request is not valid HTTP';
    const body = JSON.stringify({ error: message });
    const headers: Record<string, string> = {
      ...headersFor(randomUUID()),
      'x-runtime': '0ms',
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      connection: 'close',
    };
    if (socket.writable) {
      const head = Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('');
      socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${head}\r\n${body}`);
    }
    socket.destroy();
  };
}
