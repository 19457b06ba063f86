/** Outbound errors, and the URL of a request with its redacted form for messages. */

/** Network failure, timeout, bad status, too large, bad URL; the message is user-facing and names the URL without userinfo or query. */
export class OutboundError extends Error {
  override name = 'OutboundError';
}

/** Refused by the policy (SSRF); the message says why. */
export class OutboundRefusedError extends OutboundError {
  override name = 'OutboundRefusedError';
}

/** One URL to contact, with the parts the messages and the connection need. */
export interface Target {
  url: URL;
  /** scheme://host[:port]/path: no userinfo, query or fragment, which may hold credentials. */
  display: string;
  /** The URL's host without IPv6 brackets. */
  hostname: string;
  port: number;
  /** ' (redirected from ...)' for a redirect hop, '' otherwise. */
  via: string;
}

/** scheme://host[:port]/path: a URL as messages, traces and logs may show it. */
export function displayUrl(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}

/** A URL string for traces and logs: no credentials, no query (marked `?…` when there was one). */
export function redactUrl(value: string): string {
  try {
    const url = new URL(value);
    return `${displayUrl(url)}${url.search === '' ? '' : '?…'}`;
  } catch {
    return '(invalid URL)';
  }
}

/** Best-effort redaction of a string that is not a URL, for the "invalid URL" message. */
function redactUnparsed(raw: string): string {
  const shortened = raw.replace(/\/\/[^/?#]*@/, '//').replace(/[?#].*$/s, '');
  return JSON.stringify(shortened.length > 200 ? `${shortened.slice(0, 200)}…` : shortened);
}

export function parseTarget(raw: string, from?: Target): Target {
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
    display: displayUrl(url),
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
  ETIMEOUT: 'DNS lookup timed out',
  ESERVFAIL: 'DNS server failure',
  EREFUSED: 'DNS query refused',
  ECANCELLED: 'DNS lookup cancelled',
};

/** A short, user-facing description of a socket, DNS or parser error. */
export function describe(err: unknown): string {
  const code = errorCode(err);
  if (code !== undefined && NETWORK_ERRORS[code] !== undefined) return NETWORK_ERRORS[code];
  if (code?.startsWith('HPE_')) return `invalid HTTP response (${code})`;
  return err instanceof Error ? err.message : String(err);
}
