import type { FastifyRequest } from 'fastify';
import { stdSerializers } from 'pino';

/**
 * Token ids are live credentials (a token authenticates with its id alone) and they are part of
 * URLs: `/v2.x/auth/tokens/{id}`. Whatever follows `/auth/tokens/` in a path is replaced, and
 * the query of such a URL is dropped. Segments are compared decoded and in any case, so a
 * percent-encoded or differently cased spelling of the path (which may still be routed) is
 * caught too. Linear in the length of the URL.
 */
export function redactUrl(url: string): string {
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  const segments = path.split('/');
  let previous = '';
  for (let index = 0; index < segments.length; index++) {
    const segment = decoded(segments[index] ?? '');
    if (segment === '') continue;
    if (segment === 'tokens' && previous === 'auth') {
      if (segments.slice(index + 1).every((part) => part === '')) return url;
      return `${segments.slice(0, index + 1).join('/')}/[redacted]`;
    }
    previous = segment;
  }
  return url;
}

function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment).toLowerCase();
  } catch {
    return segment.toLowerCase();
  }
}

/** Replaces token paths in free text (error messages, stacks, Fastify's own warnings). */
export function redactText(text: string): string {
  if (!/tokens/i.test(text) && !/%/.test(text)) return text;
  // Only what looks like a path: runs of characters a URL path may hold.
  return text.replace(/\/[^\s"'`<>]*/g, (path) => redactUrl(path));
}

/** Fastify's request serializer, with the URL redacted. */
export function requestForLog(request: FastifyRequest) {
  return {
    method: request.method,
    url: redactUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

/** `scheme://user:password@`: the password of a URL (a database's, a bucket's) never reaches a log. */
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]{0,30}:\/\/[^\s:/@]*:)[^\s/@]*@/gi;

/** Token paths and URL passwords out of free text. */
function redactLogText(text: string): string {
  return redactText(text).replace(URL_PASSWORD, '$1[redacted]@');
}

/** How deep causes are followed. */
const MAX_CAUSE_DEPTH = 5;

/**
 * An error's fields fit for a log: text (redacted), numbers, booleans and causes. Objects hung on an
 * error are left out: pg-pool hangs the whole client on a lost connection's error, and pg-boss
 * spreads errors into plain objects, and such objects can hold connection settings.
 */
function loggableFields(record: object, depth: number): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(record)) {
    if (name === 'rawPacket') continue; // the bytes of a request Node could not parse
    if (typeof value === 'string') fields[name] = redactLogText(value);
    else if (typeof value === 'number' || typeof value === 'boolean' || value === null) {
      fields[name] = value;
    } else if (depth < MAX_CAUSE_DEPTH && name === 'cause' && typeof value === 'object') {
      fields[name] = loggableFields(value, depth + 1);
    } else if (depth < MAX_CAUSE_DEPTH && name === 'aggregateErrors' && Array.isArray(value)) {
      fields[name] = value.map((item: unknown) =>
        typeof item === 'object' && item !== null ? loggableFields(item, depth + 1) : item,
      );
    }
  }
  return fields;
}

/**
 * pino's error serializer, keeping only what is safe to log: token paths and URL passwords out of
 * the text, without the raw bytes of a request Node could not parse (they hold its request line
 * and headers), and without objects hung on the error. Plain objects logged as errors (pg-boss
 * emits some) are treated alike.
 */
export function errorForLog(error: unknown): unknown {
  if (typeof error === 'string') return redactLogText(error);
  if (typeof error !== 'object' || error === null) return error;
  return loggableFields(error instanceof Error ? stdSerializers.err(error) : error, 0);
}
