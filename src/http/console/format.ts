import { html, type SafeHtml } from './html.js';

/** An ISO time as `YYYY-MM-DD HH:MM:SS` (UTC), machine-readable in `datetime`. */
export function dateTime(iso: string): SafeHtml {
  const readable = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/.test(iso)
    ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}`
    : iso;
  return html`<time datetime="${iso}">${readable}</time>`;
}

/** A count of bytes with thousands separated. */
export function byteCount(bytes: number | null): string {
  return bytes === null ? '' : bytes.toLocaleString('en-US');
}

/**
 * The query of a link to `path` with these fields (empty ones left out): how a page's filter
 * travels to its next page.
 */
export function linkTo(path: string, fields: Record<string, string | null>): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) {
    if (value !== null && value !== '') query.set(name, value);
  }
  const text = query.toString();
  return text === '' ? path : `${path}?${text}`;
}

/** The first value of each named query field, as a string ('' when absent or not text). */
export function queryFields<Name extends string>(
  query: unknown,
  names: readonly Name[],
): Record<Name, string> {
  const source = typeof query === 'object' && query !== null ? query : {};
  const fields = {} as Record<Name, string>;
  for (const name of names) {
    const value: unknown = Reflect.get(source, name);
    const first: unknown = Array.isArray(value) ? value[0] : value;
    fields[name] = typeof first === 'string' ? first : '';
  }
  return fields;
}
