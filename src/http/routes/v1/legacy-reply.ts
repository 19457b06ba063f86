import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { LegacyFormat } from '../../../domain/records.js';
import {
  LEGACY_FORMATS,
  type LegacyResult,
  renderLegacy,
} from '../../../processing/legacy-result.js';
import { HttpError } from '../../http-error.js';
import { clientErrorOf } from '../../plugins/error-handler.js';

/** The arguments every v1.0 resource takes: `format` and `suppress_response_codes`. */
export interface LegacyArguments {
  format: LegacyFormat;
  /** Present: every answer is HTTP 200, errors included (the error stays in the body). */
  suppressResponseCodes: boolean;
}

/** A v1.0 argument from the query string or, on fetch, the form body. */
function argument(request: FastifyRequest, name: string): string | undefined {
  if (request.body instanceof URLSearchParams && request.body.has(name)) {
    return request.body.get(name) ?? undefined;
  }
  const value = (request.query as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value[0] : value;
}

function parseFormat(value: string | undefined): LegacyFormat | null {
  const raw = (value ?? 'json').trim().toLowerCase();
  return LEGACY_FORMATS.find((format) => format === (raw === '' ? 'json' : raw)) ?? null;
}

function formatOf(request: FastifyRequest): LegacyFormat | null {
  return parseFormat(argument(request, 'format'));
}

/**
 * The arguments in a query string, for an error answered outside any route (a timeout, a head too
 * large): an unknown format falls back to JSON there, as on every error.
 */
export function legacyArgumentsOf(query: URLSearchParams): LegacyArguments {
  return {
    format: parseFormat(query.get('format') ?? undefined) ?? 'json',
    suppressResponseCodes: query.has('suppress_response_codes'),
  };
}

/** A route's arguments: an unknown format is a bad request (answered in JSON). */
export function legacyArguments(request: FastifyRequest): LegacyArguments {
  const format = formatOf(request);
  if (format === null) {
    throw new HttpError(400, `format must be one of ${LEGACY_FORMATS.join(', ')}`);
  }
  return {
    format,
    suppressResponseCodes: argument(request, 'suppress_response_codes') !== undefined,
  };
}

export function sendLegacy(
  reply: FastifyReply,
  statusCode: number,
  result: LegacyResult,
  args: LegacyArguments,
): FastifyReply {
  const { body, contentType } = renderLegacy(result, args.format);
  return reply
    .code(args.suppressResponseCodes ? 200 : statusCode)
    .header('content-type', contentType)
    .send(body);
}

/**
 * v1.0 knows fewer codes than v2.x: each v2.x error maps to the v1.0 code that means it. What a
 * client should retry later (an engine down, a limit reached, a full disk) is 502, the one
 * retryable code v1.0 has, with the `Retry-After` of the v2.x answer: a 400 would say the request
 * itself is wrong, and clients give up on it.
 */
function legacyStatus(statusCode: number): number {
  if ([400, 401, 404, 406, 413, 500, 502].includes(statusCode)) return statusCode;
  if (statusCode === 403) return 406; // understood, not allowed: a spent balance, a token
  // Retry later: the engine is down, a limit is reached, no room for the content now, or the
  // request was too slow to arrive (408: a slow link, not a wrong request).
  if ([408, 429, 503, 507].includes(statusCode)) return 502;
  return statusCode >= 500 ? 500 : 400;
}

/** An error as v1.0 answers it: `oops` with the reason, its v1.0 status, in the asked format. */
export function legacyError(
  statusCode: number,
  message: string,
  requestId: string,
  args: LegacyArguments,
): { statusCode: number; contentType: string; body: string } {
  const { body, contentType } = renderLegacy(
    { status: 'oops', reason: message, request_id: requestId },
    args.format,
  );
  return {
    statusCode: args.suppressResponseCodes ? 200 : legacyStatus(statusCode),
    contentType,
    body,
  };
}

/**
 * The v1.0 rendering of the one error path: `clientErrorOf` classifies and logs any failure as
 * for v2.x; this only maps the code and writes `oops` with the reason in the requested format.
 */
export function legacyErrorHandler(
  error: FastifyError | Error,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  const { statusCode, message, headers } = clientErrorOf(error, request, reply);
  const args: LegacyArguments = {
    format: formatOf(request) ?? 'json',
    suppressResponseCodes: argument(request, 'suppress_response_codes') !== undefined,
  };
  const answer = legacyError(statusCode, message, request.id, args);
  return reply
    .code(answer.statusCode)
    .headers(headers)
    .header('content-type', answer.contentType)
    .send(answer.body);
}
