import type { FastifyInstance } from 'fastify';
import type { ConsoleSession } from '../../../accounts/console-access.js';
import {
  type ApiKey,
  DETECTION_CATEGORIES,
  type DetectionCategory,
  type KeyRateLimit,
  type Token,
} from '../../../domain/records.js';
import { HttpError } from '../../http-error.js';
import { utc } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, notice, page, scrollingTable } from '../layout.js';
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

/** Empty: the service's default; else requests per second (burst twice that, at least 1). */
function rateLimitOf(form: URLSearchParams): KeyRateLimit | null {
  const raw = (form.get('rate') ?? '').trim();
  if (raw === '') return null;
  const rate = /^\d{1,7}(?:\.\d{1,3})?$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(rate >= 0 && rate <= 1_000_000)) {
    throw new HttpError(400, 'the rate limit is a number of requests per second (0: none)');
  }
  return { rate, burst: Math.max(1, Math.ceil(rate * 2)) };
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
function keyCells(key: ApiKey, session: ConsoleSession): Cell[] {
  const limit =
    key.rateLimit === null
      ? 'default'
      : key.rateLimit.rate === 0
        ? 'none'
        : `${key.rateLimit.rate}/s`;
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

function tokenRow(token: Token, session: ConsoleSession): SafeHtml {
  return html`<tr><td class="mono">${token.id}</td><td class="mono">${token.apiKeyId}</td><td>${token.expirationDate}</td>
<td><form method="post" action="/console/tokens/${token.id}/revoke" class="inline">${csrfField(session)}<button type="submit" class="danger" aria-label="Revoke token ${token.id}">Revoke</button></form></td></tr>`;
}

/** The API keys page, with a notice or a new key's secret (shown this once) on top. */
function keysPage(
  session: ConsoleSession,
  keys: readonly ApiKey[],
  tokens: readonly Token[],
  top: SafeHtml,
): string {
  const body = html`${top}
${
  keys.length === 0
    ? html`<p>No API keys yet.</p>`
    : stackedTable(
        'API keys',
        KEY_COLUMNS,
        keys.map((key) => keyCells(key, session)),
      )
}
<h2 id="create">Create a key</h2>
<form method="post" action="/console/keys">${csrfField(session)}
${categoryChoices(DETECTION_CATEGORIES, 'new')}
<label for="new-tags">Tags (comma-separated, optional)</label>
<input type="text" id="new-tags" name="tags" maxlength="1400">
<p><button type="submit">Create key</button></p>
</form>
<h2>Temporary tokens</h2>
${
  tokens.length === 0
    ? html`<p class="muted">No unexpired tokens.</p>`
    : scrollingTable(
        'Temporary tokens',
        html`<table><thead><tr><th scope="col">Token</th><th scope="col">Key</th><th scope="col">Expires</th><th scope="col">Action</th></tr></thead>
<tbody>${tokens.map((token) => tokenRow(token, session))}</tbody></table>`,
      )
}`;
  return page({ title: 'API keys', session, current: '/console/keys', body });
}

/** API keys (create, disable, enable, tags, categories, rate limit) and tokens (list, revoke). */
export default async function keys(app: FastifyInstance) {
  const { accounts } = app.services;

  const render = async (session: ConsoleSession, top: SafeHtml) => {
    const { accountId } = session.user;
    const [{ keys: list }, tokens] = await Promise.all([
      accounts.overview(accountId),
      accounts.tokensOf(accountId),
    ]);
    return keysPage(session, list, tokens, top);
  };
  const done: Record<string, string> = {
    disabled: 'The key is disabled: the API refuses it and its tokens are ended.',
    enabled: 'The key is enabled.',
    updated: 'The key is updated.',
    revoked: 'The token is revoked.',
  };

  app.get<{ Querystring: { done?: string } }>('/keys', async (request, reply) => {
    const session = sessionOf(request);
    const message = done[request.query.done ?? ''] ?? null;
    return reply.type('text/html').send(await render(session, notice(message)));
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
    const body = html`<dl><dt>Key</dt><dd class="mono">${key.id}</dd><dt>State</dt><dd>${key.active ? 'active' : 'disabled'}</dd><dt>Created</dt><dd>${utc(key.creationDate)}</dd><dt>Last used</dt><dd>${key.lastSeenDate === null ? 'never' : utc(key.lastSeenDate)}</dd></dl>
<h2>Change it</h2>
<form method="post" action="/console/keys/${key.id}/update">${csrfField(session)}
${categoryChoices(key.detectionCategories, 'edit')}
<label for="edit-tags">Tags (comma-separated)</label>
<input type="text" id="edit-tags" name="tags" maxlength="1400" value="${key.tags.join(', ')}">
<label for="edit-rate">Rate limit, requests per second (empty: the service's default; 0: none)</label>
<input type="number" id="edit-rate" name="rate" min="0" step="any" value="${key.rateLimit?.rate ?? ''}">
<p><button type="submit">Save</button> <a href="/console/keys">Back to the keys</a></p>
</form>`;
    return reply
      .type('text/html')
      .send(page({ title: `API key ${key.id}`, session, current: '/console/keys', body }));
  });

  app.post<{ Params: { id: string } }>('/keys/:id/update', async (request, reply) => {
    const { session, form } = checkedForm(request);
    const changes = {
      tags: tagsOf(form),
      detectionCategories: categoriesOf(form),
      rateLimit: rateLimitOf(form),
    };
    if (!(await accounts.updateAccountKey(session.user.accountId, request.params.id, changes))) {
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

  app.post<{ Params: { id: string } }>('/tokens/:id/revoke', async (request, reply) => {
    const { session } = checkedForm(request);
    if (!(await accounts.revokeToken(session.user.accountId, request.params.id))) {
      throw new HttpError(404, 'This account has no such token.');
    }
    return reply.redirect('/console/keys?done=revoked', 303);
  });
}
