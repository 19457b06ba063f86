import type { FastifyInstance } from 'fastify';
import type { DayActivity } from '../../../processing/account-activity.js';
import { balanceText } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { page, scrollingTable } from '../layout.js';
import { sessionOf } from '../session.js';

const WIDTH = 600;
const HEIGHT = 160;

/** Items and flagged items per day as bars, with the numbers in a table beside it for all. */
function activityChart(days: readonly DayActivity[]): SafeHtml {
  const most = Math.max(1, ...days.map((d) => d.items));
  const slot = WIDTH / days.length;
  const bar = (value: number) => (value / most) * (HEIGHT - 20);
  const total = days.reduce((sum, d) => sum + d.items, 0);
  const flagged = days.reduce((sum, d) => sum + d.flagged, 0);
  if (total === 0) return html``;
  return html`<figure class="chart">
<svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="chart-title">
<title id="chart-title">Items per day for the last ${days.length} days: ${total} in all, ${flagged} with findings</title>
<text class="axis" x="2" y="12">${most} a day</text>
${days.map((d, i) => {
  if (d.items === 0) return html``;
  const x = (i * slot + 1).toFixed(1);
  const w = Math.max(1, slot - 2).toFixed(1);
  return html`<rect class="items" x="${x}" y="${(HEIGHT - bar(d.items)).toFixed(1)}" width="${w}" height="${bar(d.items).toFixed(1)}"></rect><rect class="findings" x="${x}" y="${(HEIGHT - bar(d.flagged)).toFixed(1)}" width="${w}" height="${bar(d.flagged).toFixed(1)}"></rect>`;
})}
</svg>
<figcaption>Blue: items; red: items with findings. ${days[0]?.day} to ${days.at(-1)?.day} (UTC).</figcaption>
</figure>`;
}

/** GET /console: the account's balance and its items per day. */
export default async function overview(app: FastifyInstance) {
  const { accounts, activity } = app.services;

  app.get('/', async (request, reply) => {
    const session = sessionOf(request);
    const { accountId } = session.user;
    const [{ account, keys }, days] = await Promise.all([
      accounts.overview(accountId),
      activity.daily(accountId),
    ]);
    const rows = days.filter((d) => d.items > 0).reverse();
    const body = html`<dl>
<dt>Account</dt><dd>${account.name} <span class="mono muted">${account.id}</span></dd>
<dt>Balance</dt><dd>${balanceText(account)}</dd>
<dt>API keys</dt><dd>${keys.filter((k) => k.active).length} active of ${keys.length} (<a href="/console/keys">manage</a>)</dd>
</dl>
<h2>Items in the last 30 days</h2>
${activityChart(days)}
${
  rows.length === 0
    ? html`<p class="muted">No items in the last 30 days. Try a <a href="/console/upload">test upload</a>.</p>`
    : scrollingTable(
        'Items per day',
        html`<table><thead><tr><th scope="col">Day</th><th scope="col" class="num">Items</th><th scope="col" class="num">With findings</th></tr></thead>
<tbody>${rows.map((d) => html`<tr><td>${d.day}</td><td class="num">${d.items}</td><td class="num">${d.flagged}</td></tr>`)}</tbody></table>`,
      )
}`;
    return reply
      .type('text/html')
      .send(page({ title: 'Overview', session, current: '/console', body }));
  });
}
