/** The path v1.0 lives under: /api/scan, below the path of ASSAY_LEGACY_BASE_URL if set. */
export function legacyPrefix(legacyBaseUrl: string | null): string {
  const base = legacyBaseUrl === null ? '' : new URL(legacyBaseUrl).pathname.replace(/\/+$/, '');
  return `${base}/api/scan`;
}

/**
 * A request target's path as the router reads it: a target in absolute form
 * (`http://host/api/scan/`, which a server must accept: RFC 9112, 3.2.2) without its scheme and
 * authority, so that errors raised outside the routes take the API the router would have chosen.
 */
export function originPath(target: string): string {
  const origin = /^https?:\/\/[^/?#]*/i.exec(target)?.[0];
  return origin === undefined ? target : target.slice(origin.length) || '/';
}

/** Whether a request path is v1.0's, whose answers (errors included) are v1.0 documents. */
export function isLegacyPath(path: string, prefix: string): boolean {
  const local = originPath(path);
  return local === prefix || local.startsWith(`${prefix}/`);
}
