/** The path v1.0 lives under: /api/scan, below the path of ASSAY_LEGACY_BASE_URL if set. */
export function legacyPrefix(legacyBaseUrl: string | null): string {
  const base = legacyBaseUrl === null ? '' : new URL(legacyBaseUrl).pathname.replace(/\/+$/, '');
  return `${base}/api/scan`;
}

/** Whether a request path is v1.0's, whose answers (errors included) are v1.0 documents. */
export function isLegacyPath(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix}/`);
}
