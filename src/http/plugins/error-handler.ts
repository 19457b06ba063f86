import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import {
  isDiskFull,
  isStoreUnavailable,
  isUnstorableText,
  SpoolUnavailableError,
} from '../../domain/failures.js';
import {
  BalanceSpentError,
  ContentNotExaminedError,
  ContentTooLargeError,
  EmptyContentError,
  EngineUnavailableError,
  SpoolQuotaExceededError,
} from '../../processing/errors.js';
import { HttpError } from '../http-error.js';
import { isLegacyPath, legacyPrefix, originPath } from '../legacy-path.js';
import { MAX_FORM_BYTES } from '../request-body.js';

export interface ClientError {
  statusCode: number;
  message: string;
  headers?: Record<string, string>;
}

/** Async work held in the spool takes a while to finish: retrying sooner would only be refused. */
const SPOOL_FULL_RETRY_SECONDS = 30;

/** A database restart usually takes seconds. */
const STORE_RETRY_SECONDS = 5;

/** A spool directory remounted or a bucket's server restarted: seconds too, usually. */
const SPOOL_RETRY_SECONDS = 5;

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
  // The spool cannot be written (its cause, with the path or bucket, is only logged): nothing was
  // kept. Before the store's check, which would take S3's ECONNREFUSED for the database's.
  if (error instanceof SpoolUnavailableError) {
    return {
      statusCode: 503,
      message: 'the service cannot store content right now: retry later',
      headers: { 'retry-after': String(SPOOL_RETRY_SECONDS) },
    };
  }
  // A NUL in some text of the request, which PostgreSQL cannot store or even compare: the
  // client's, a 400 on either store rather than a 500 on one.
  if (isUnstorableText(error)) {
    return {
      statusCode: 400,
      message: 'the request holds a character that cannot be stored (NUL)',
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
  if (code === 'FST_INVALID_MULTIPART_CONTENT_TYPE') {
    return { statusCode: 400, message: 'the request must be multipart/form-data' };
  }
  // Every route takes a body of any media type (and says which it needs): only a Content-Type
  // that is no media type at all is refused before it, a bad request like any other.
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return { statusCode: 400, message: 'the Content-Type header is not a valid media type' };
  }
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return { statusCode: 413, message: `a form may take at most ${MAX_FORM_BYTES} bytes` };
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

/**
 * The methods each route path answers, to tell a wrong method (405) from an unknown path (404).
 * A path matches with or without one trailing slash, as the router does (`ignoreTrailingSlash`).
 */
function routeTable(app: FastifyInstance): (path: string) => string[] | null {
  const table = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    if (route.url === '*' || route.url.endsWith('/*') || route.config?.refusesMethod) return;
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
  // Every route the path matches: `/files/async` is POSTed as itself and read as `/files/:id`.
  return (path) => {
    const allowed = new Set<string>();
    for (const route of compiled) {
      if (route.pattern.test(path)) for (const method of route.methods) allowed.add(method);
    }
    return allowed.size === 0 ? null : [...allowed].sort();
  };
}

/** A body this small is read and dropped after a refusal (below), not cut off. */
const DRAINED_BODY_MAX_BYTES = 64 * 1024;
/**
 * After a refusal to come back later (503, 507, 429: a part is down, the spool is full, a quota),
 * a body of up to this many bytes is read and dropped too: the client is one to answer clearly, and
 * an outage refuses every upload it sends, large ones included.
 */
const DRAINED_RETRYABLE_BODY_MAX_BYTES = 32 * 1024 * 1024;
/** A body being dropped that has not ended after this long has its connection closed. */
const DRAIN_DEADLINE_MS = 10_000;
const RETRYABLE = new Set([429, 503, 507]);

/**
 * Whether the rest of a refused request's body is read and dropped, keeping the connection,
 * rather than the connection closed. A connection closed with unread bytes in its receive buffer
 * is reset, and a client still writing its body then sees the reset (EPIPE), not the answer: 5
 * of about 70 refusals during a database outage (`npm run bench:faults`). Only a body of known length whose client sends it without waiting
 * for 100 Continue: up to 64 KiB, or 32 MiB for a refusal to come back later; the connection
 * closes if it has not ended within 10 s.
 */
function drainsRest(request: FastifyRequest, statusCode: number): boolean {
  const raw = request.raw;
  if (raw.headers.expect !== undefined) return false;
  const declared = raw.headers['content-length'];
  if (declared === undefined || !/^\d{1,9}$/.test(declared)) return false;
  const limit = RETRYABLE.has(statusCode)
    ? DRAINED_RETRYABLE_BODY_MAX_BYTES
    : DRAINED_BODY_MAX_BYTES;
  if (Number(declared) > limit) return false;
  // Also when a parser had begun on it (a multipart upload refused mid-way): it is let go of, and
  // the rest read and dropped, so the client is never reset while it still sends.
  raw.unpipe();
  raw.resume();
  const deadline = setTimeout(() => raw.socket.destroy(), DRAIN_DEADLINE_MS);
  deadline.unref();
  raw.once('end', () => clearTimeout(deadline));
  raw.once('close', () => clearTimeout(deadline));
  return true;
}

/**
 * What a failed request answers, whatever the API's error format: the status, message and headers
 * for the client (a bare 500 for the unexpected, which is logged). It also stops reading an upload
 * given up on instead of draining the rest of it (but for a small body nothing read yet).
 */
export function clientErrorOf(
  error: FastifyError | Error,
  request: FastifyRequest,
  reply: FastifyReply,
): Required<ClientError> {
  const known = classify(error);
  // Readiness reports the full disk until space returns.
  if (isDiskFull(error)) request.server.services.readiness.noteDiskFull();
  if (known === null) {
    request.log.error({ err: error }, 'request failed');
  } else if (known.statusCode >= 500) {
    request.log.warn({ err: error }, known.message);
  }
  const statusCode = known?.statusCode ?? 500;
  if (!request.raw.complete && !drainsRest(request, statusCode)) {
    reply.header('connection', 'close');
  }
  return {
    statusCode,
    message: known?.message ?? 'internal error',
    headers: known?.headers ?? {},
  };
}

/**
 * What a request no route took answers: 405 with `Allow` when its path is served with other
 * methods, else 404 (v1.0 renders both in its own format, and maps 405 to its 400).
 */
function unrouted(app: FastifyInstance): (request: FastifyRequest) => HttpError {
  const allowedMethods = routeTable(app);
  const legacy = legacyPrefix(app.services.config.legacyBaseUrl);
  return (request) => {
    const path = originPath(request.url.split('?')[0] ?? '');
    const allowed = allowedMethods(path);
    if (allowed !== null) {
      const list = allowed.join(', ');
      return new HttpError(405, `method ${request.method} is not allowed here; use ${list}`, {
        allow: list,
      });
    }
    if (isLegacyPath(path, legacy)) return new HttpError(404, 'no such v1.0 resource');
    // The path is the client's: echoed only in part, so an answer never grows with it.
    const shown = path.length > MAX_ECHOED_PATH ? `${path.slice(0, MAX_ECHOED_PATH)}…` : path;
    return new HttpError(404, `no resource at ${shown}`);
  };
}

export const errorHandler = fp(async (app: FastifyInstance) => {
  app.decorate('unroutedError', unrouted(app));

  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const { statusCode, message, headers } = clientErrorOf(error, request, reply);
    return reply.code(statusCode).headers(headers).send({ error: message });
  });

  // Decided before any body handling, so an unrouted request's body is never parsed or checked
  // (a Content-Type that is no media type, a QUERY without one): its answer is 404 or 405.
  app.addHook('onRequest', (request, _reply, done) => {
    done(request.is404 ? app.unroutedError(request) : undefined);
  });
  // Reached only if the hook above did not answer; v1.0 sets its own, for its error format.
  app.setNotFoundHandler((request) => {
    throw app.unroutedError(request);
  });
});

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route only refuses its method (v1.0's POST required): left out of `Allow`. */
    refusesMethod?: boolean;
  }
  interface FastifyInstance {
    /** The 404, or 405 with `Allow`, of a request no route took. */
    unroutedError(request: FastifyRequest): HttpError;
  }
}
