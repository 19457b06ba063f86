import type { FastifyInstance } from 'fastify';
import type { CallbackFailure, ResultError } from '../../../domain/operations.js';
import { HEARTBEAT_INTERVAL_MS } from '../../../processing/node-heartbeat.js';
import {
  NODE_STALE_MS,
  type NodeStatus,
  type OperationsSnapshot,
  type WatchedBucket,
} from '../../../processing/operations-report.js';
import { duration, ERROR_CHARACTERS, shortened, utc } from '../format.js';
import { html, type SafeHtml } from '../html.js';
import { page } from '../layout.js';
import { operatorSessionOf } from '../session.js';
import { stackedTable } from '../stacked-table.js';

const NODE_COLUMNS = [
  { title: 'Node', wrap: true },
  { title: 'State' },
  { title: 'clamd' },
  { title: 'Signatures' },
  { title: 'Jobs running', numeric: true },
];

function nodeCells(node: NodeStatus, at: number): SafeHtml[] {
  const seen = Math.round((at - node.lastSeenAt) / 1000);
  const official =
    node.signaturesVersion === null
      ? html`<span class="muted">no official databases</span>`
      : html`daily ${node.signaturesVersion}${node.signaturesAgeSeconds === null ? '' : html`, ${duration(node.signaturesAgeSeconds)} old`}`;
  return [
    html`<span class="mono">${node.host}</span> · pid ${node.pid}${node.self ? html` <span class="badge">this page</span>` : ''}<br><span class="small">${node.role} · Assay ${node.version}</span>`,
    html`${node.stale ? html`<span class="flagged">stale</span>` : html`<span class="clean">live</span>`}<br><span class="small nowrap">seen ${duration(seen)} ago</span><br><span class="small nowrap">up ${duration((at - node.startedAt) / 1000)}</span>`,
    html`${node.clamdVersion ?? html`<span class="flagged">not answering</span>`}<br><span class="small">${official}</span>`,
    html`loaded <span class="mono">${node.databasesVersion ?? 'loading'}</span>${node.databasesDiffer ? html` <span class="flagged">differs</span>` : ''}<br><span class="small">own <span class="mono">${node.ownSignaturesVersion}</span></span>`,
    node.runningJobs === null
      ? html`<span class="muted">none (api)</span>`
      : html`${node.runningJobs}`,
  ];
}

const RESULT_ERROR_COLUMNS = [
  { title: 'Received' },
  { title: 'Result' },
  { title: 'Error', wrap: true },
];

function resultErrorCells(error: ResultError): SafeHtml[] {
  return [
    html`<span class="nowrap">${utc(error.creationDate)}</span>`,
    html`<a class="mono id" href="/console/accounts/${error.accountId}/files/${error.id}">${error.id}</a><br><span class="small">account <a class="mono" href="/console/accounts/${error.accountId}">${error.accountId}</a></span>`,
    html`${shortened(error.error, ERROR_CHARACTERS)}`,
  ];
}

const CALLBACK_FAILURE_COLUMNS = [
  { title: 'Created' },
  { title: 'Result' },
  { title: 'Destination', wrap: true },
  { title: 'State' },
  { title: 'Last error', wrap: true },
];

function callbackFailureCells(failure: CallbackFailure): SafeHtml[] {
  const state =
    failure.state === 'pending'
      ? `retrying, next at ${utc(failure.nextAttemptAt)}`
      : failure.state === 'failed'
        ? 'given up'
        : failure.state;
  return [
    html`<span class="nowrap">${utc(failure.creationDate)}</span>`,
    html`<a class="mono id" href="/console/accounts/${failure.accountId}/files/${failure.fileId}">${failure.fileId}</a><br><span class="small">account <a class="mono" href="/console/accounts/${failure.accountId}">${failure.accountId}</a></span>`,
    html`${failure.destination}`,
    html`${state}<br><span class="small">${failure.attempts} attempts</span>`,
    html`${shortened(failure.lastError, ERROR_CHARACTERS)}`,
  ];
}

const BUCKET_COLUMNS = [
  { title: 'Source', wrap: true },
  { title: 'Events' },
  { title: 'Listing' },
  { title: 'Objects', wrap: true },
];

function bucketCells({ source, objects }: WatchedBucket): SafeHtml[] {
  const feeds = [
    ...(source.queueUrl === null ? [] : ['SQS']),
    ...(source.webhookTokenHash === null ? [] : ['webhook']),
  ];
  const counts = Object.entries(objects).map(([status, count]) => `${status} ${count}`);
  const { listing } = source;
  return [
    html`<strong>${source.name}</strong><br><span class="mono small">s3://${source.bucket}/${source.prefix}</span>${source.endpoint === '' ? '' : html`<br><span class="small">at ${source.endpoint}</span>`}<br><span class="small">on threat: ${source.onThreat}${source.quarantine === null ? '' : ` to ${source.quarantine}`}</span>`,
    html`${feeds.length === 0 ? html`<span class="muted">listing only</span>` : feeds.join(', ')}`,
    html`${listing.state}<br><span class="small">${listing.count} objects${listing.finished === null ? '' : html`, finished ${utc(listing.finished)}`}</span>`,
    html`${counts.length === 0 ? html`<span class="muted">none yet</span>` : counts.join(', ')}`,
  ];
}

function operationsBody(report: OperationsSnapshot): SafeHtml {
  const live = report.nodes.filter((node) => !node.stale);
  const stale = report.nodes.length - live.length;
  const differ = live.some((node) => node.databasesDiffer);
  const { queue, callbacks } = report;
  return html`<p class="muted">As of ${utc(report.at)} · <a href="/console/operations">Refresh</a></p>
<dl>
<dt>Queue</dt><dd>${queue.due} due${queue.due > 0 ? `, the oldest waiting ${duration(queue.oldestDueSeconds)}` : ''}; ${queue.running} running</dd>
<dt>Callbacks</dt><dd>${callbacks.pending} pending${callbacks.pending > 0 && callbacks.oldestDueSeconds > 0 ? `, the oldest due ${duration(callbacks.oldestDueSeconds)} ago` : ''}</dd>
<dt>Nodes</dt><dd>${live.length} live${stale > 0 ? html`, <span class="flagged">${stale} stale</span>` : ''}</dd>
</dl>
<h2>Nodes</h2>
${differ ? html`<p class="notice error" role="status">Live nodes have loaded different signature databases: their verdicts may differ.</p>` : ''}
${
  report.nodes.length === 0
    ? html`<p class="muted">No node has written a heartbeat yet.</p>`
    : stackedTable(
        'Nodes',
        NODE_COLUMNS,
        report.nodes.map((node) => nodeCells(node, report.at)),
        { rowClass: (index) => (report.nodes[index]?.stale ? 'stale' : '') },
      )
}
<p class="muted">Each process writes a heartbeat every ${HEARTBEAT_INTERVAL_MS / 1000} s; one not seen for ${NODE_STALE_MS / 1000} s is stale (stopped without saying so, or cut off from the database).</p>
<h2>Watched buckets</h2>
${
  report.buckets.length === 0
    ? html`<p class="muted">No bucket is watched (<span class="mono">assay admin bucket add</span>).</p>`
    : stackedTable('Watched buckets', BUCKET_COLUMNS, report.buckets.map(bucketCells))
}
${report.moreBuckets ? html`<p class="muted">More sources than shown: <span class="mono">assay admin bucket list</span> has them all.</p>` : ''}
<h2>Recent result errors</h2>
${
  report.resultErrors.length === 0
    ? html`<p class="muted">No result ended in an error.</p>`
    : stackedTable(
        'Recent result errors',
        RESULT_ERROR_COLUMNS,
        report.resultErrors.map(resultErrorCells),
      )
}
<h2>Recent callback failures</h2>
${
  report.callbackFailures.length === 0
    ? html`<p class="muted">No callback attempt failed.</p>`
    : stackedTable(
        'Recent callback failures',
        CALLBACK_FAILURE_COLUMNS,
        report.callbackFailures.map(callbackFailureCells),
      )
}`;
}

/** Operators only (404 for others): every node's engines and signatures, the queue, errors. */
export default async function operations(app: FastifyInstance) {
  const report = app.services.operations;

  app.get('/operations', async (request, reply) => {
    const session = operatorSessionOf(request);
    const body = operationsBody(await report.snapshot());
    return reply
      .type('text/html')
      .send(page({ title: 'Operations', session, current: '/console/operations', body }));
  });
}
