import type { FastifyInstance } from 'fastify';
import type { ConsoleSession } from '../../../accounts/console-access.js';
import {
  type CallbackPage,
  callbackCursorText,
  type DeliverySummary,
  isDeliveryId,
  parseCallbackCursor,
} from '../../../processing/callback-browser.js';
import { HttpError } from '../../http-error.js';
import {
  deliveryState,
  ERROR_CHARACTERS,
  linkTo,
  pager,
  queryFields,
  shortened,
} from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, notice, page } from '../layout.js';
import { checkedForm, sessionOf } from '../session.js';
import { breakableUrl, type Cell, stackedTable } from '../stacked-table.js';

const COLUMNS = [
  { title: 'State' },
  { title: 'File' },
  { title: 'Destination' },
  { title: 'Attempts', numeric: true },
  { title: 'Last error', wrap: true },
  { title: 'Action' },
] as const;

function deliveryCells(delivery: DeliverySummary, session: ConsoleSession): Cell[] {
  const retry =
    delivery.state === 'delivered'
      ? ''
      : html`<form method="post" action="/console/callbacks/${delivery.id}/retry" class="inline">${csrfField(session)}<button type="submit" class="secondary" aria-label="Retry now: the callback of file ${delivery.fileId}">Retry now</button></form>`;
  return [
    deliveryState(delivery),
    html`<a href="/console/files/${delivery.fileId}" class="mono id">${delivery.fileId}</a>`,
    html`<span class="url"><span class="mono">${delivery.method} ${breakableUrl(delivery.url)}</span></span>`,
    String(delivery.attempts),
    delivery.lastError === null ? '' : shortened(delivery.lastError, ERROR_CHARACTERS),
    retry,
  ];
}

function deliveriesTable(list: CallbackPage, session: ConsoleSession): SafeHtml {
  if (list.deliveries.length === 0) return html`<p>No callback deliveries yet.</p>`;
  return stackedTable(
    'Callback deliveries',
    COLUMNS,
    list.deliveries.map((delivery) => deliveryCells(delivery, session)),
  );
}

/** GET /console/callbacks (failed first, a page at a time) and POST …/:id/retry (retry now). */
export default async function callbacks(app: FastifyInstance) {
  const browser = app.services.callbacks;

  app.get('/callbacks', async (request, reply) => {
    const session = sessionOf(request);
    const { before: cursor, done } = queryFields(request.query, ['before', 'done']);
    const before = cursor === '' ? null : parseCallbackCursor(cursor);
    if (cursor !== '' && before === null) {
      throw new HttpError(400, 'The page link is not valid: start again from the first page.');
    }
    const list = await browser.page(session.user.accountId, before);
    const links = pager([
      before === null ? null : { href: '/console/callbacks', label: 'First page' },
      list.next === null
        ? null
        : {
            href: linkTo('/console/callbacks', { before: callbackCursorText(list.next) }),
            label: 'Next page',
            next: true,
          },
    ]);
    const body = html`${notice(done === 'retried' ? 'The delivery is due now: it is attempted within a few seconds.' : null)}
<p class="muted">Failed deliveries first, then pending, then delivered; newest first within each. Retry now makes a delivery due at once (a failed one is tried once more).</p>
${deliveriesTable(list, session)}
${links}`;
    return reply
      .type('text/html')
      .send(page({ title: 'Callbacks', session, current: '/console/callbacks', body }));
  });

  app.post<{ Params: { id: string } }>('/callbacks/:id/retry', async (request, reply) => {
    const { session } = checkedForm(request);
    const { id } = request.params;
    const outcome = isDeliveryId(id)
      ? await browser.retryNow(session.user.accountId, id)
      : 'missing';
    if (outcome === 'missing') throw new HttpError(404, 'This account has no such delivery.');
    if (outcome === 'delivered') throw new HttpError(409, 'This delivery was delivered already.');
    return reply.redirect('/console/callbacks?done=retried', 303);
  });
}
