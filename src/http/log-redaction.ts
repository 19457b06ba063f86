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

/**
 * pino's error serializer, with token paths out of the message and stack, and without the raw
 * bytes of a request Node could not parse (they hold its request line and headers).
 */
export function errorForLog(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const { rawPacket: _raw, ...serialized } = stdSerializers.err(error) as ReturnType<
    typeof stdSerializers.err
  > & { rawPacket?: unknown };
  const redacted = (text: unknown) => (typeof text === 'string' ? redactText(text) : text);
  return {
    ...serialized,
    message: redacted(serialized.message),
    stack: redacted(serialized.stack),
  };
}
