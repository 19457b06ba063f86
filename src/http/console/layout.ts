import type { ConsoleSession } from '../../accounts/console-access.js';
import { html, type SafeHtml } from './html.js';

export interface PageOptions {
  title: string;
  /** The signed-in user; null on the sign-in page. */
  session: ConsoleSession | null;
  /** The navigation entry to mark as the current page. */
  current?: string;
  body: SafeHtml;
}

const NAV = [
  { href: '/console', label: 'Overview' },
  { href: '/console/keys', label: 'API keys' },
  { href: '/console/files', label: 'Files' },
  { href: '/console/callbacks', label: 'Callbacks' },
  { href: '/console/upload', label: 'Test upload' },
] as const;

const OPERATOR_NAV = [
  { href: '/console/operations', label: 'Operations' },
  { href: '/console/accounts', label: 'Accounts' },
] as const;

/** A form field carrying the session's CSRF token: every state change sends one. */
export function csrfField(session: ConsoleSession): SafeHtml {
  return html`<input type="hidden" name="csrf" value="${session.csrfToken}">`;
}

/** A whole page: skip link, header with navigation, the main content. */
export function page(options: PageOptions): string {
  const { session } = options;
  const entries = session === null ? [] : [...NAV, ...(session.user.operator ? OPERATOR_NAV : [])];
  const nav =
    session === null
      ? html``
      : html`<nav aria-label="Console">
  <ul>${entries.map(
    (entry) =>
      html`<li><a href="${entry.href}"${options.current === entry.href ? html` aria-current="page"` : ''}>${entry.label}</a></li>`,
  )}</ul>
  <form method="post" action="/console/sign-out" class="sign-out">${csrfField(session)}<span>${session.user.email}</span> <button type="submit">Sign out</button></form>
</nav>`;
  return `<!doctype html>
${html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · Assay console</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/console/assets/console.css">
<script src="/console/assets/console.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header><p class="brand"><a href="/console">Assay</a></p>${nav}</header>
<main id="main" tabindex="-1">
<h1>${options.title}</h1>
${options.body}
</main>
</body>
</html>`}`;
}

/** A table that scrolls sideways on a narrow screen (focusable, so a keyboard can scroll it). */
export function scrollingTable(label: string, table: SafeHtml): SafeHtml {
  return html`<div class="table" role="region" aria-label="${label}" tabindex="0">${table}</div>`;
}

/** A notice at the top of a page (after an action), announced to screen readers. */
export function notice(text: string | null, kind: 'ok' | 'error' = 'ok'): SafeHtml {
  return text === null ? html`` : html`<p class="notice ${kind}" role="status">${text}</p>`;
}
