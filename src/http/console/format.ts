import type { DeliverySummary } from '../../processing/callback-browser.js';
import { html, type SafeHtml } from './html.js';

/** A duration for people: "45 s", "12 min", "5 h", "3 d" (rounded down). */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 120) return `${s} s`;
  if (s < 7_200) return `${Math.floor(s / 60)} min`;
  if (s < 172_800) return `${Math.floor(s / 3_600)} h`;
  return `${Math.floor(s / 86_400)} d`;
}

/** A date in ISO 8601 as UTC to the second: "2024-05-01 12:00:00 UTC". */
export function utc(date: string | number): string {
  const parsed = new Date(date);
  return Number.isNaN(parsed.getTime())
    ? String(date)
    : `${parsed.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** Errors in a list are shown this long at most (the whole text is on the file's page). */
export const ERROR_CHARACTERS = 240;

/** Text cut to `most` characters, with an ellipsis when cut (errors can be long). */
export function shortened(text: string, most: number): string {
  return text.length <= most ? text : `${text.slice(0, most - 1)}…`;
}

/** A query string parameter as one bounded string: '' when absent, repeated or too long. */
export function queryText(value: unknown, most: number): string | null {
  if (value === undefined) return '';
  if (typeof value !== 'string' || value.length > most) return null;
  return value;
}

/** An ISO time as `YYYY-MM-DD HH:MM:SS` (UTC), machine-readable in `datetime`. */
export function dateTime(iso: string): SafeHtml {
  const readable = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/.test(iso)
    ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}`
    : iso;
  return html`<time datetime="${iso}" class="nowrap">${readable}</time>`;
}

/** A delivery's state in words (never by colour alone), when it was made, and when it ended or is tried next. */
export function deliveryState(delivery: DeliverySummary): SafeHtml {
  const created = html`<br><span class="muted">created ${dateTime(delivery.creationDate)}</span>`;
  if (delivery.state === 'failed') {
    return html`<span class="flagged">Failed</span>${created}<br><span class="muted">given up ${dateTime(delivery.finishedDate ?? '')}</span>`;
  }
  if (delivery.state === 'delivered') {
    return html`<span class="clean">Delivered</span>${created}<br><span class="muted">delivered ${dateTime(delivery.finishedDate ?? '')}</span>`;
  }
  return html`Pending${created}<br><span class="muted">next attempt ${dateTime(delivery.nextAttemptAt)}</span>`;
}

export interface PageLink {
  href: string;
  label: string;
  /** The next page in the list's order (`rel="next"`). */
  next?: boolean;
}

/** Links to a list's other pages; nothing at all when the list fits on one. */
export function pager(links: ReadonlyArray<PageLink | null>): SafeHtml {
  const shown = links.filter((link) => link !== null);
  if (shown.length === 0) return html``;
  return html`<nav class="pager" aria-label="Pages">${shown.map(
    (link) =>
      html`<a href="${link.href}"${link.next === true ? html` rel="next"` : ''}>${link.label}</a>`,
  )}</nav>`;
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

/** A size for people: whole MiB or KiB when it is one, else bytes with thousands separated. */
export function sizeText(bytes: number): string {
  const MiB = 1024 * 1024;
  if (bytes >= MiB && bytes % MiB === 0) return `${(bytes / MiB).toLocaleString('en-US')} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes.toLocaleString('en-US')} bytes`;
}

/**
 * An account's balance in words. The balance counts down one per item and is negative once more
 * were used than it held; only an enforced one refuses items. Its starting value is kept from the
 * account's creation, so "used" is told only where nothing was ever set (starting at 0).
 */
export function balanceText(account: {
  balance: number;
  startingBalance: number;
  enforceBalance: boolean;
}): string {
  const { balance } = account;
  const items = (count: number) =>
    `${count.toLocaleString('en-US')} ${count === 1 ? 'item' : 'items'}`;
  if (account.enforceBalance) {
    return balance > 0
      ? `${items(balance)} left; items are refused once none are left`
      : 'None left: items are refused until the balance is raised';
  }
  if (account.startingBalance === 0 && balance <= 0) {
    return `Used ${items(-balance)} (no balance set: items are not limited)`;
  }
  return balance >= 0
    ? `${items(balance)} left (not enforced: items are still accepted once none are left)`
    : `${items(-balance)} used beyond the balance (not enforced: items are still accepted)`;
}
