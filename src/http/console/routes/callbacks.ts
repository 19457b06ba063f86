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
import { dateTime, linkTo, queryFields } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, notice, page, scrollingTable } from '../layout.js';
import { checkedForm, sessionOf } from '../session.js';

/** The state in words (never by colour alone), and what happens next. */
function stateCell(delivery: DeliverySummary): SafeHtml {
  if (delivery.state === 'failed') {
    return html`<span class="flagged">Failed</span><br><span class="muted">given up ${dateTime(delivery.finishedDate ?? '')}</span>`;
  }
  if (delivery.state === 'delivered') {
    return html`<span class="clean">Delivered</span><br><span class="muted">${dateTime(delivery.finishedDate ?? '')}</span>`;
  }
  return html`Pending<br><span class="muted">next attempt ${dateTime(delivery.nextAttemptAt)}</span>`;
}

function deliveryRow(delivery: DeliverySummary, session: ConsoleSession): SafeHtml {
  const retry =
    delivery.state === 'delivered'
      ? ''
      : html`<form method="post" action="/console/callbacks/${delivery.id}/retry" class="inline">${csrfField(session)}<button type="submit" class="secondary" aria-label="Retry now: delivery ${delivery.id}">Retry now</button></form>`;
  return html`<tr>
<td>${stateCell(delivery)}</td>
<td><a href="/console/files/${delivery.fileId}" class="mono">${delivery.fileId}</a></td>
<td class="url"><span class="mono">${delivery.method} ${delivery.url}</span></td>
<td class="num">${delivery.attempts}</td>
<td>${delivery.lastError ?? ''}</td>
<td class="nowrap">${dateTime(delivery.creationDate)}</td>
<td>${retry}</td>
</tr>`;
}

function deliveriesTable(list: CallbackPage, session: ConsoleSession): SafeHtml {
  if (list.deliveries.length === 0) return html`<p>No callback deliveries yet.</p>`;
  return scrollingTable(
    'Callback deliveries',
    html`<table><thead><tr><th scope="col">State</th><th scope="col">File</th><th scope="col">Destination</th><th scope="col" class="num">Attempts</th><th scope="col">Last error</th><th scope="col">Created (UTC)</th><th scope="col">Action</th></tr></thead>
<tbody>${list.deliveries.map((delivery) => deliveryRow(delivery, session))}</tbody></table>`,
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
    const pager = html`<nav class="pager" aria-label="Pages">${
      before === null ? '' : html`<a href="/console/callbacks">First page</a>`
    }${
      list.next === null
        ? ''
        : html`<a href="${linkTo('/console/callbacks', { before: callbackCursorText(list.next) })}" rel="next">Next page</a>`
    }</nav>`;
    const body = html`${notice(done === 'retried' ? 'The delivery is due now: it is attempted within a few seconds.' : null)}
<p class="muted">Failed deliveries first, then pending, then delivered; newest first within each. Retry now makes a delivery due at once (a failed one is tried once more).</p>
${deliveriesTable(list, session)}
${pager}`;
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
