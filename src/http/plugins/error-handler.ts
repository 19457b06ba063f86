import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import {
  BalanceSpentError,
  ContentNotExaminedError,
  ContentTooLargeError,
  EmptyContentError,
  EngineUnavailableError,
  SpoolQuotaExceededError,
} from '../../processing/errors.js';
import { isDiskFull } from '../../store/spool.js';
import { isStoreUnavailable } from '../../store/store-errors.js';
import { HttpError } from '../http-error.js';

export interface ClientError {
  statusCode: number;
  message: string;
  headers?: Record<string, string>;
}

/** Async work held in the spool takes a while to finish: retrying sooner would only be refused. */
const SPOOL_FULL_RETRY_SECONDS = 30;

/** A database restart usually takes seconds. */
const STORE_RETRY_SECONDS = 5;

/** Maps every failure to a status code and a `{"error"}` body; unknown errors become a bare 500. */
function classify(error: FastifyError | Error): ClientError | null {
  if (error instanceof HttpError) {
    return { statusCode: error.statusCode, message: error.message, headers: error.headers };
  }
  if (error instanceof EmptyContentError) return { statusCode: 400, message: error.message };
  if (error instanceof BalanceSpentError) return { statusCode: 403, message: error.message };
  if (error instanceof ContentTooLargeError) return { statusCode: 413, message: error.message };
  // Understood but not examinable (a corrupt image, a document past the caps): never a result.
  if (error instanceof ContentNotExaminedError) return { statusCode: 422, message: error.message };
  if (error instanceof EngineUnavailableError) {
    return { statusCode: 503, message: error.message, headers: { 'retry-after': '5' } };
  }
  if (error instanceof SpoolQuotaExceededError) {
    return {
      statusCode: error.scope === 'total' ? 507 : 429,
      message: error.message,
      headers: { 'retry-after': String(SPOOL_FULL_RETRY_SECONDS) },
    };
  }
  // No room for the content or the job (ENOSPC, SQLITE_FULL): nothing was kept; retry later.
  if (isDiskFull(error)) {
    return {
      statusCode: 507,
      message: 'the service has no disk space left for new work: retry later',
      headers: { 'retry-after': String(SPOOL_FULL_RETRY_SECONDS) },
    };
  }
  // The database is restarting or out of reach: nothing was recorded; retry shortly.
  if (isStoreUnavailable(error)) {
    return {
      statusCode: 503,
      message: 'the service cannot reach its database: retry later',
      headers: { 'retry-after': String(STORE_RETRY_SECONDS) },
    };
  }
  const code = (error as FastifyError).code;
  if (code === 'FST_REQ_FILE_TOO_LARGE')
    return { statusCode: 413, message: 'the content is too large' };
  if (code === 'FST_INVALID_MULTIPART_CONTENT_TYPE' || code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return { statusCode: 400, message: 'the request must be multipart/form-data' };
  }
  // Fastify's and @fastify/multipart's client errors carry their status. A body that could not be
  // read is an HttpError already (see request-body.ts): messages are never matched, so a server
  // failure whose text says "malformed" (a corrupt database) stays a 500.
  const statusCode = (error as FastifyError).statusCode;
  if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
    return { statusCode, message: error.message };
  }
  return null;
}

/** The most of an unknown path a 404 repeats. */
const MAX_ECHOED_PATH = 200;

/** Path patterns of every route, to tell a wrong method (405) from an unknown path (404). */
function routeTable(app: FastifyInstance): Array<{ pattern: RegExp; methods: Set<string> }> {
  const table = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    if (route.url === '*' || route.url.endsWith('/*')) return;
    const methods = table.get(route.url) ?? new Set<string>();
    for (const method of [route.method].flat()) methods.add(method);
    table.set(route.url, methods);
  });
  const compiled: Array<{ pattern: RegExp; methods: Set<string> }> = [];
  app.addHook('onReady', async () => {
    for (const [url, methods] of table) {
      const source = url
        .split('/')
        .map((segment) =>
          segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
        )
        .join('/');
      compiled.push({ pattern: new RegExp(`^${source}/?$`), methods });
    }
  });
  return compiled;
}

/**
 * What a failed request answers, whatever the API's error format: the status, message and headers
 * for the client (a bare 500 for the unexpected, which is logged). It also stops reading an upload
 * given up on instead of draining the rest of it.
 */
export function clientErrorOf(
  error: FastifyError | Error,
  request: FastifyRequest,
  reply: FastifyReply,
): Required<ClientError> {
  const known = classify(error);
  // Readiness reports the full disk until space returns.
  if (isDiskFull(error)) request.server.services.spool.noteDiskFull();
  if (known === null) {
    request.log.error({ err: error }, 'request failed');
  } else if (known.statusCode >= 500) {
    request.log.warn({ err: error }, known.message);
  }
  if (!request.raw.complete) reply.header('connection', 'close');
  return {
    statusCode: known?.statusCode ?? 500,
    message: known?.message ?? 'internal error',
    headers: known?.headers ?? {},
  };
}

export const errorHandler = fp(async (app: FastifyInstance) => {
  const routes = routeTable(app);

  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const { statusCode, message, headers } = clientErrorOf(error, request, reply);
    return reply.code(statusCode).headers(headers).send({ error: message });
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    const match = routes.find((route) => route.pattern.test(path));
    if (match !== undefined) {
      const allowed = [...match.methods].sort().join(', ');
      return reply
        .code(405)
        .header('allow', allowed)
        .send({ error: `method ${request.method} is not allowed here; use ${allowed}` });
    }
    // The path is the client's: echoed only in part, so an answer never grows with it.
    const shown = path.length > MAX_ECHOED_PATH ? `${path.slice(0, MAX_ECHOED_PATH)}…` : path;
    return reply.code(404).send({ error: `no resource at ${shown}` });
  });
});
