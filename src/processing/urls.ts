/** A URL as it may appear in traces and logs: no credentials, no query string. */
export function redactUrl(value: string): string {
  try {
    const url = new URL(value);
    return `${url.protocol}//${url.host}${url.pathname}${url.search === '' ? '' : '?…'}`;
  } catch {
    return '(invalid URL)';
  }
}
