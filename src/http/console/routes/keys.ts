import type { FastifyInstance } from 'fastify';
import type { ConsoleSession } from '../../../accounts/console-access.js';
import { accountRateLimit, appliedRateLimit } from '../../../accounts/rate-limiter.js';
import {
  parseTokenCursor,
  type ShownToken,
  type TokenPage,
  tokenCursorText,
} from '../../../accounts/token-list.js';
import {
  type ApiKey,
  DETECTION_CATEGORIES,
  type DetectionCategory,
  type KeyRateLimit,
} from '../../../domain/records.js';
import { HttpError } from '../../http-error.js';
import { linkTo, pager, queryFields, utc } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, notice, page } from '../layout.js';
import { checkedForm, sessionOf } from '../session.js';
import { type Cell, stackedTable } from '../stacked-table.js';

const MAX_TAGS = 20;
const MAX_TAG_LENGTH = 64;

/** Comma-separated tags: trimmed, empty ones dropped, bounded. */
function tagsOf(form: URLSearchParams): string[] {
  const tags = (form.get('tags') ?? '')
    .split(',')
    .map((tag) => tag.trim())
    .filter((tag) => tag !== '');
  if (tags.length > MAX_TAGS || tags.some((tag) => tag.length > MAX_TAG_LENGTH)) {
    throw new HttpError(400, `at most ${MAX_TAGS} tags of at most ${MAX_TAG_LENGTH} characters`);
  }
  return tags;
}

function categoriesOf(form: URLSearchParams): DetectionCategory[] {
  const chosen = form.getAll('category');
  const categories = DETECTION_CATEGORIES.filter((category) => chosen.includes(category));
  if (categories.length === 0) throw new HttpError(400, 'choose at least one detection category');
  return categories;
}

/**
 * The account's own limit: empty, none (the ceiling applies); else requests per second, at most
 * the ceiling's (the operator's limit for the key, or the service's default).
 */
function rateLimitOf(form: URLSearchParams, ceiling: KeyRateLimit): KeyRateLimit | null {
  const raw = (form.get('rate') ?? '').trim();
  if (raw === '') return null;
  const rate = /^\d{1,7}(?:\.\d{1,3})?$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(rate >= 0 && rate <= 1_000_000)) {
    throw new HttpError(400, 'the rate limit is a number of requests per second');
  }
  const own = accountRateLimit(rate, ceiling);
  if (own === null) {
    throw new HttpError(
      400,
      `this key may make at most ${ceiling.rate} requests per second: that limit is set by the service's operator, and the console can only lower it`,
    );
  }
  return own;
}

function limitText(limit: KeyRateLimit): string {
  return limit.rate === 0 ? 'none' : `${limit.rate}/s`;
}

function categoryChoices(chosen: readonly DetectionCategory[], idPrefix: string): SafeHtml {
  return html`<fieldset class="choices"><legend>Detection categories</legend>${DETECTION_CATEGORIES.map(
    (category) =>
      html`<label for="${idPrefix}-${category}"><input type="checkbox" id="${idPrefix}-${category}" name="category" value="${category}"${chosen.includes(category) ? html` checked` : ''}> ${category}</label>`,
  )}</fieldset>`;
}

const KEY_COLUMNS = [
  { title: 'Key' },
  { title: 'State' },
  { title: 'Categories' },
  { title: 'Tags', wrap: true },
  { title: 'Rate limit' },
  { title: 'Last used' },
  { title: 'Action' },
];

/** Disabling asks first (a page of its own: no script needed); enabling is harmless. */
function keyCells(key: ApiKey, session: ConsoleSession, serviceLimit: KeyRateLimit): Cell[] {
  const limit = limitText(appliedRateLimit(key.rateLimit ?? serviceLimit, key.accountRateLimit));
  return [
    html`<a href="/console/keys/${key.id}" class="mono id">${key.id}</a>`,
    key.active ? html`active` : html`<span class="flagged">disabled</span>`,
    key.detectionCategories.join(', '),
    key.tags.join(', '),
    limit,
    key.lastSeenDate === null ? 'never' : utc(key.lastSeenDate),
    key.active
      ? html`<a href="/console/keys/${key.id}/disable" class="button danger" aria-label="Disable key ${key.id}">Disable</a>`
      : html`<form method="post" action="/console/keys/${key.id}/enable" class="inline">${csrfField(session)}<button type="submit" class="secondary" aria-label="Enable key ${key.id}">Enable</button></form>`,
  ];
}

const TOKEN_COLUMNS = [
  { title: 'Token' },
  { title: 'Key' },
  { title: 'Created' },
  { title: 'Expires' },
  { title: 'Action' },
];

/** A token by the start of its id only: the whole id is a credential. */
function tokenCells(token: ShownToken, session: ConsoleSession): Cell[] {
  return [
    html`<span class="mono">${token.prefix}…</span>`,
    html`<span class="mono id">${token.apiKeyId}</span>`,
    utc(token.creationDate),
    utc(token.expirationDate),
    html`<form method="post" action="/console/tokens/${token.prefix}/revoke" class="inline">${csrfField(session)}<button type="submit" class="danger" aria-label="Revoke token ${token.prefix}…">Revoke</button></form>`,
  ];
}

/** The unexpired tokens, newest first, a page at a time. */
function tokensSection(session: ConsoleSession, list: TokenPage, firstPage: boolean): SafeHtml {
  const links = pager([
    firstPage ? null : { href: '/console/keys#tokens', label: 'First page' },
    list.next === null
      ? null
      : {
          href: `${linkTo('/console/keys', { before: tokenCursorText(list.next) })}#tokens`,
          label: 'Next page',
          next: true,
        },
  ]);
  return html`<h2 id="tokens">Temporary tokens</h2>
${
  list.tokens.length === 0
    ? html`<p class="muted">No ${firstPage ? '' : 'more '}unexpired tokens.</p>`
    : stackedTable(
        'Temporary tokens',
        TOKEN_COLUMNS,
        list.tokens.map((token) => tokenCells(token, session)),
      )
}
${links}`;
}

/** The API keys page, with a notice or a new key's secret (shown this once) on top. */
function keysPage(
  session: ConsoleSession,
  serviceLimit: KeyRateLimit,
  keys: readonly ApiKey[],
  tokens: SafeHtml,
  top: SafeHtml,
): string {
  const body = html`${top}
${
  keys.length === 0
    ? html`<p>No API keys yet.</p>`
    : stackedTable(
        'API keys',
        KEY_COLUMNS,
        keys.map((key) => keyCells(key, session, serviceLimit)),
      )
}
<h2 id="create">Create a key</h2>
<form method="post" action="/console/keys">${csrfField(session)}
${categoryChoices(DETECTION_CATEGORIES, 'new')}
<label for="new-tags">Tags (comma-separated, optional)</label>
<input type="text" id="new-tags" name="tags" maxlength="1400">
<p><button type="submit">Create key</button></p>
</form>
${tokens}`;
  return page({ title: 'API keys', session, current: '/console/keys', body });
}

/** API keys (create, disable, enable, tags, categories, rate limit) and tokens (list, revoke). */
export default async function keys(app: FastifyInstance) {
  const { accounts, tokens } = app.services;
  const serviceLimit = app.services.config.rateLimit;

  const render = async (session: ConsoleSession, top: SafeHtml, tokensBefore = '') => {
    const { accountId } = session.user;
    const before = tokensBefore === '' ? null : parseTokenCursor(tokensBefore);
    if (tokensBefore !== '' && before === null) {
      throw new HttpError(400, 'The page link is not valid: start again from the first page.');
    }
    const [{ keys: list }, tokenPage] = await Promise.all([
      accounts.overview(accountId),
      tokens.page(accountId, before),
    ]);
    return keysPage(
      session,
      serviceLimit,
      list,
      tokensSection(session, tokenPage, before === null),
      top,
    );
  };
  const done: Record<string, string> = {
    disabled: 'The key is disabled: the API refuses it and its tokens are ended.',
    enabled: 'The key is enabled.',
    updated: 'The key is updated.',
    revoked: 'The token is revoked.',
  };

  app.get('/keys', async (request, reply) => {
    const session = sessionOf(request);
    const query = queryFields(request.query, ['done', 'before']);
    // Own keys only: `constructor` is no message.
    const message = Object.hasOwn(done, query.done) ? (done[query.done] ?? null) : null;
    return reply.type('text/html').send(await render(session, notice(message), query.before));
  });

  app.post('/keys', async (request, reply) => {
    const { session, form } = checkedForm(request);
    const created = await accounts.createKey(session.user.accountId, {
      tags: tagsOf(form),
      categories: categoriesOf(form),
    });
    // The secret exists only in this answer: shown once, never stored in the clear.
    const top = html`<div class="notice ok" role="status"><p>Key <code>${created.key.id}</code> created. Its secret is shown only now: copy it.</p>
<p class="secret"><span class="mono" id="new-secret">${created.secret}</span></p>
<p class="muted">Use it as HTTP Basic credentials: <code>${created.key.id}:&lt;secret&gt;</code>.</p></div>`;
    return reply
      .code(201)
      .type('text/html')
      .send(await render(session, top));
  });

  app.get<{ Params: { id: string } }>('/keys/:id', async (request, reply) => {
    const session = sessionOf(request);
    const key = await accounts.keyOf(session.user.accountId, request.params.id);
    if (key === null) throw new HttpError(404, 'This account has no such key.');
    const ceiling = key.rateLimit ?? serviceLimit;
    const applied = appliedRateLimit(ceiling, key.accountRateLimit);
    const body = html`<dl><dt>Key</dt><dd class="mono">${key.id}</dd><dt>State</dt><dd>${key.active ? 'active' : 'disabled'}</dd><dt>Created</dt><dd>${utc(key.creationDate)}</dd><dt>Last used</dt><dd>${key.lastSeenDate === null ? 'never' : utc(key.lastSeenDate)}</dd>
<dt>Rate limit</dt><dd>${applied.rate === 0 ? 'none' : `${applied.rate} requests per second, ${applied.burst} at once`}</dd>
<dt>Ceiling</dt><dd>${ceiling.rate === 0 ? 'none' : `${ceiling.rate} requests per second, ${ceiling.burst} at once`} (${key.rateLimit === null ? "the service's default" : "this key's"}, set by the service's operator: the console can lower it, not raise it)</dd></dl>
<h2>Change it</h2>
<form method="post" action="/console/keys/${key.id}/update">${csrfField(session)}
${categoryChoices(key.detectionCategories, 'edit')}
<label for="edit-tags">Tags (comma-separated)</label>
<input type="text" id="edit-tags" name="tags" maxlength="1400" value="${key.tags.join(', ')}">
<label for="edit-rate">Your own rate limit, requests per second (empty: the ceiling${ceiling.rate === 0 ? '; 0: none' : `; at most ${ceiling.rate}`})</label>
<input type="number" id="edit-rate" name="rate" min="${ceiling.rate === 0 ? '0' : '0.001'}"${ceiling.rate === 0 ? '' : html` max="${ceiling.rate}"`} step="any" value="${key.accountRateLimit?.rate ?? ''}">
<p><button type="submit">Save</button> <a href="/console/keys">Back to the keys</a></p>
</form>`;
    return reply
      .type('text/html')
      .send(page({ title: `API key ${key.id}`, session, current: '/console/keys', body }));
  });

  app.post<{ Params: { id: string } }>('/keys/:id/update', async (request, reply) => {
    const { session, form } = checkedForm(request);
    const key = await accounts.keyOf(session.user.accountId, request.params.id);
    if (key === null) throw new HttpError(404, 'This account has no such key.');
    const changes = {
      tags: tagsOf(form),
      detectionCategories: categoriesOf(form),
      accountRateLimit: rateLimitOf(form, key.rateLimit ?? serviceLimit),
    };
    if (!(await accounts.updateAccountKey(session.user.accountId, key.id, changes))) {
      throw new HttpError(404, 'This account has no such key.');
    }
    return reply.redirect('/console/keys?done=updated', 303);
  });

  // The confirmation: a page (not a script's dialog), so it works under the console's CSP.
  app.get<{ Params: { id: string } }>('/keys/:id/disable', async (request, reply) => {
    const session = sessionOf(request);
    const key = await accounts.keyOf(session.user.accountId, request.params.id);
    if (key === null) throw new HttpError(404, 'This account has no such key.');
    const body = key.active
      ? html`${key.tags.length === 0 ? '' : html`<p>Tags: ${key.tags.join(', ')}</p>`}
<p>The API refuses this key at once, and the temporary tokens made with it end; the results of what it sent are kept. You can enable the key again later; its tokens do not come back.</p>
<form method="post" action="/console/keys/${key.id}/disable">${csrfField(session)}
<p><button type="submit" class="danger">Disable the key</button> <a href="/console/keys">Cancel</a></p>
</form>`
      : html`<p>This key is disabled already.</p><p><a href="/console/keys">Back to the keys</a></p>`;
    return reply
      .type('text/html')
      .send(page({ title: `Disable key ${key.id}?`, session, current: '/console/keys', body }));
  });

  for (const [action, active] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    app.post<{ Params: { id: string } }>(`/keys/:id/${action}`, async (request, reply) => {
      const { session } = checkedForm(request);
      const changed = await accounts.setAccountKeyActive(
        session.user.accountId,
        request.params.id,
        active,
      );
      if (changed === null) throw new HttpError(404, 'This account has no such key.');
      return reply.redirect(`/console/keys?done=${active ? 'enabled' : 'disabled'}`, 303);
    });
  }

  app.post<{ Params: { prefix: string } }>('/tokens/:prefix/revoke', async (request, reply) => {
    const { session } = checkedForm(request);
    const outcome = await tokens.revoke(session.user.accountId, request.params.prefix);
    if (outcome === 'missing') throw new HttpError(404, 'This account has no such token.');
    if (outcome === 'ambiguous') {
      throw new HttpError(
        409,
        'More than one token starts so: revoke it with `assay admin token revoke` and its whole id.',
      );
    }
    return reply.redirect('/console/keys?done=revoked', 303);
  });
}
