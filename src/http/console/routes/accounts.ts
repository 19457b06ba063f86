import type { FastifyInstance } from 'fastify';
import type { AccountDetails } from '../../../accounts/account-service.js';
import type { ConsoleSession } from '../../../accounts/console-access.js';
import type { AccountSummary } from '../../../domain/operations.js';
import { HttpError } from '../../http-error.js';
import { balanceText, queryText, utc } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, notice, page, scrollingTable } from '../layout.js';
import { checkedForm, operatorSessionOf } from '../session.js';
import { stackedTable } from '../stacked-table.js';

const PAGE_SIZE = 50;
const MAX_SEARCH = 100;
/** Account ids are 32 hex digits; ones given at creation are at most 32 characters too. */
const ACCOUNT_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Within what every store and JavaScript number holds exactly. */
const MAX_BALANCE = 1_000_000_000_000;

function balanceOf(form: URLSearchParams): { balance: number; enforceBalance: boolean } {
  const raw = (form.get('balance') ?? '').trim();
  const balance = /^\d{1,13}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(balance >= 0 && balance <= MAX_BALANCE)) {
    throw new HttpError(400, `the balance is a whole number from 0 to ${MAX_BALANCE}`);
  }
  return { balance, enforceBalance: form.get('enforce') === 'on' };
}

function accountIdOf(id: string): string {
  if (!ACCOUNT_ID.test(id)) throw new HttpError(404, 'There is no such account.');
  return id;
}

const ACCOUNT_COLUMNS = [
  { title: 'Account' },
  { title: 'State' },
  { title: 'Balance', numeric: true },
  { title: 'Keys', numeric: true },
  { title: 'Created' },
];

function accountCells(account: AccountSummary): SafeHtml[] {
  return [
    html`<a href="/console/accounts/${account.id}">${account.name === '' ? '(no name)' : account.name}</a><br><span class="mono id">${account.id}</span>`,
    account.active ? html`active` : html`<span class="flagged">disabled</span>`,
    html`${account.balance}<br><span class="muted small">${account.enforceBalance ? 'enforced' : 'not enforced'}</span>`,
    html`${account.keyCount}`,
    html`${account.creationDate.slice(0, 10)}`,
  ];
}

function listPage(
  session: ConsoleSession,
  search: string,
  after: string | null,
  accounts: readonly AccountSummary[],
  nextAfter: string | null,
): string {
  const withSearch = (cursor: string | null) => {
    const query = new URLSearchParams();
    if (search !== '') query.set('q', search);
    if (cursor !== null) query.set('after', cursor);
    const text = query.toString();
    return `/console/accounts${text === '' ? '' : `?${text}`}`;
  };
  const body = html`<form method="get" action="/console/accounts" class="search" role="search">
<div><label for="q">Name, or the start of an id</label>
<input type="text" id="q" name="q" maxlength="${MAX_SEARCH}" value="${search}"></div>
<button type="submit">Search</button>${search === '' ? '' : html`<a href="/console/accounts">Show all</a>`}
</form>
${
  accounts.length === 0
    ? html`<p>${search === '' ? 'No accounts.' : 'No account matches.'}</p>`
    : stackedTable('Accounts', ACCOUNT_COLUMNS, accounts.map(accountCells))
}
${
  after === null && nextAfter === null
    ? ''
    : html`<nav class="pager" aria-label="Pages of accounts">${after === null ? '' : html`<a href="${withSearch(null)}">First page</a>`}${nextAfter === null ? '' : html`<a href="${withSearch(nextAfter)}" rel="next">Next page</a>`}</nav>`
}`;
  return page({ title: 'Accounts', session, current: '/console/accounts', body });
}

function detailPage(session: ConsoleSession, details: AccountDetails, top: SafeHtml): string {
  const { account, users, keys } = details;
  const own = account.id === session.user.accountId;
  const state = account.active ? 'disable' : 'enable';
  const body = html`${top}
<dl>
<dt>Name</dt><dd>${account.name}</dd>
<dt>Id</dt><dd class="mono">${account.id}</dd>
<dt>State</dt><dd>${account.active ? 'active' : html`<span class="flagged">disabled: the API refuses its keys and tokens</span>`}</dd>
<dt>Balance</dt><dd>${balanceText(account)}</dd>
<dt>Subscription</dt><dd>${account.subscription === '' ? 'none' : account.subscription}</dd>
<dt>Billing e-mail</dt><dd>${account.billingEmail === '' ? 'none' : account.billingEmail}</dd>
<dt>API keys</dt><dd>${keys.filter((k) => k.active).length} active of ${keys.length}</dd>
<dt>Created</dt><dd>${utc(account.creationDate)}</dd>
<dt>Changed</dt><dd>${utc(account.modificationDate)}</dd>
</dl>
<h2>Balance</h2>
<form method="post" action="/console/accounts/${account.id}/balance">${csrfField(session)}
<label for="balance">Balance (items)</label>
<input type="number" id="balance" name="balance" min="0" max="${MAX_BALANCE}" step="1" required value="${Math.max(0, account.balance)}">
<label class="check" for="enforce"><input type="checkbox" id="enforce" name="enforce"${account.enforceBalance ? html` checked` : ''}> Enforce it: refuse items once it reaches 0</label>
<p><button type="submit">Set the balance</button></p>
</form>
<h2>${account.active ? 'Disable' : 'Enable'}</h2>
${
  own && account.active
    ? html`<p class="muted">This is the account you are signed in with: another operator can disable it.</p>`
    : html`<form method="post" action="/console/accounts/${account.id}/${state}">${csrfField(session)}
<p>${account.active ? 'The API refuses its keys and tokens at once, and its users cannot sign in; its data is kept.' : 'Its keys, tokens and users work again.'}</p>
<p><button type="submit" class="${account.active ? 'danger' : 'secondary'}">${account.active ? 'Disable the account' : 'Enable the account'}</button></p>
</form>`
}
<h2>Users</h2>
${
  users.length === 0
    ? html`<p class="muted">No users.</p>`
    : scrollingTable(
        'Users',
        html`<table><thead><tr><th scope="col">E-mail</th><th scope="col">Last sign-in</th></tr></thead>
<tbody>${users.map((user) => html`<tr><td>${user.email}</td><td>${user.lastLoginDate === null ? 'never' : utc(user.lastLoginDate)}</td></tr>`)}</tbody></table>`,
      )
}
<p><a href="/console/accounts">Back to the accounts</a></p>`;
  return page({
    title: `Account ${account.name === '' ? account.id : account.name}`,
    session,
    current: '/console/accounts',
    body,
  });
}

/** Operators only (404 for others): every account, and disabling, enabling and its balance. */
export default async function accounts(app: FastifyInstance) {
  const service = app.services.accounts;
  const done: Record<string, string> = {
    disabled: 'The account is disabled: the API refuses its keys and tokens.',
    enabled: 'The account is enabled.',
    balance: 'The balance is set.',
  };

  app.get<{ Querystring: Record<string, unknown> }>('/accounts', async (request, reply) => {
    const session = operatorSessionOf(request);
    const search = queryText(request.query.q, MAX_SEARCH);
    const after = queryText(request.query.after, 64);
    if (search === null) throw new HttpError(400, `search for at most ${MAX_SEARCH} characters`);
    if (after === null || (after !== '' && !ACCOUNT_ID.test(after))) {
      throw new HttpError(400, 'not a page of this list');
    }
    const cursor = after === '' ? null : after;
    const found = await service.accountPage({
      search: search.trim(),
      afterId: cursor,
      limit: PAGE_SIZE,
    });
    return reply
      .type('text/html')
      .send(listPage(session, search.trim(), cursor, found.accounts, found.nextAfter));
  });

  app.get<{ Params: { id: string }; Querystring: { done?: string } }>(
    '/accounts/:id',
    async (request, reply) => {
      const session = operatorSessionOf(request);
      const details = await service.details(accountIdOf(request.params.id));
      if (details === null) throw new HttpError(404, 'There is no such account.');
      const shown = String(request.query.done);
      // Own keys only: `constructor` is no message.
      const top = notice(Object.hasOwn(done, shown) ? (done[shown] ?? null) : null);
      return reply.type('text/html').send(detailPage(session, details, top));
    },
  );

  for (const [action, active] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    app.post<{ Params: { id: string } }>(`/accounts/:id/${action}`, async (request, reply) => {
      const operator = operatorSessionOf(request);
      checkedForm(request);
      const id = accountIdOf(request.params.id);
      // Disabling one's own account would end this very session and lock the operator out.
      if (!active && id === operator.user.accountId) {
        throw new HttpError(400, 'You cannot disable the account you are signed in with.');
      }
      if (!(await service.setAccountActive(id, active))) {
        throw new HttpError(404, 'There is no such account.');
      }
      return reply.redirect(`/console/accounts/${id}?done=${active ? 'enabled' : 'disabled'}`, 303);
    });
  }

  app.post<{ Params: { id: string } }>('/accounts/:id/balance', async (request, reply) => {
    operatorSessionOf(request);
    const { form } = checkedForm(request);
    const id = accountIdOf(request.params.id);
    if (!(await service.updateAccount(id, balanceOf(form)))) {
      throw new HttpError(404, 'There is no such account.');
    }
    return reply.redirect(`/console/accounts/${id}?done=balance`, 303);
  });
}
