/**
 * The soak's end checks, on what the clients saw and what Assay answers afterwards: every accepted
 * item has its result, with the verdict it must have (malware flagged, clean content clean, content
 * that could not be scanned an error, never `[]`), and every callback came with one delivery id
 * and was delivered, or is still being retried.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { traceOf } from '../test/helpers/client.js';
import type { Accepted, LoadState } from './load.js';
import type { Receiver } from './servers.js';

export interface CheckOutcome {
  accepted: number;
  results: number;
  lost: string[];
  wrongVerdicts: string[];
  silentCleans: string[];
  duplicatedDeliveries: string[];
  undelivered: string[];
  unexpected: string[];
  wrongAnswers: string[];
}

interface FileResult {
  findings?: string[];
  error?: string | null;
}

/** The item's trace, one line: what a wrong verdict needs to be understood. */
async function traceLine(url: string, item: Accepted): Promise<string> {
  const messages = await traceOf(url, item.auth, item.id).catch((error: unknown) => [
    `(no trace: ${String(error)})`,
  ]);
  return messages.join(' | ');
}

async function resultOf(url: string, item: Accepted): Promise<FileResult | null> {
  const response = await fetch(`${url}/v2.2/files/${item.id}`, {
    headers: { authorization: item.auth },
  }).catch(() => null);
  if (response?.status !== 200) {
    await response?.arrayBuffer();
    return null;
  }
  return (await response.json()) as FileResult;
}

/**
 * Waits up to `drainMs` for every accepted item's result (polling the API at `url`), then for
 * their callbacks, and checks them.
 */
export async function checkOutcome(
  url: string,
  state: LoadState,
  receiver: Receiver,
  drainMs: number,
  callbacksPending: () => Promise<number>,
): Promise<CheckOutcome> {
  const outcome: CheckOutcome = {
    accepted: state.accepted.length,
    results: 0,
    lost: [],
    wrongVerdicts: [],
    silentCleans: [],
    duplicatedDeliveries: [],
    undelivered: [],
    unexpected: state.unexpected,
    wrongAnswers: state.wrongAnswers,
  };
  const deadline = Date.now() + drainMs;
  const results = new Map<string, FileResult>();
  for (const item of state.accepted) {
    for (;;) {
      const result = await resultOf(url, item);
      if (result !== null && (result.findings !== undefined || result.error)) {
        results.set(item.id, result);
        break;
      }
      if (Date.now() > deadline) break;
      await sleep(200);
    }
  }
  for (const item of state.accepted) {
    const result = results.get(item.id);
    if (result === undefined) {
      outcome.lost.push(`${item.kind} ${item.id}`);
      continue;
    }
    outcome.results += 1;
    const findings = result.findings ?? [];
    const failed = Boolean(result.error);
    if (item.expected === 'error' && !failed && findings.length === 0) {
      outcome.silentCleans.push(`${item.kind} ${item.id}: []`);
    } else if (item.expected === 'flagged' && findings.length === 0) {
      outcome.wrongVerdicts.push(
        `${item.kind} ${item.id}: not flagged (${result.error ?? '[]'}); sent ${item.sent ?? '?'}; trace ${await traceLine(url, item)}`,
      );
    } else if (item.expected === 'clean' && (findings.length > 0 || failed)) {
      outcome.wrongVerdicts.push(
        `${item.kind} ${item.id}: ${findings.join(',')} ${result.error ?? ''}; sent ${item.sent ?? '?'}; trace ${await traceLine(url, item)}`,
      );
    }
  }
  // Callbacks: one delivery id per item; delivered, unless Assay still retries some.
  while (Date.now() < deadline) {
    const missing = state.accepted.filter((i) => i.callback && !receiver.delivered.has(i.id));
    if (missing.length === 0) break;
    await sleep(500);
  }
  const pending = await callbacksPending().catch(() => -1);
  for (const item of state.accepted.filter((i) => i.callback)) {
    const ids = receiver.deliveries.get(item.id)?.size ?? 0;
    if (ids > 1) outcome.duplicatedDeliveries.push(`${item.id}: ${ids} delivery ids`);
    if (!receiver.delivered.has(item.id) && pending <= 0) outcome.undelivered.push(item.id);
  }
  return outcome;
}

export function passed(outcome: CheckOutcome): boolean {
  return (
    outcome.lost.length === 0 &&
    outcome.wrongVerdicts.length === 0 &&
    outcome.silentCleans.length === 0 &&
    outcome.duplicatedDeliveries.length === 0 &&
    outcome.undelivered.length === 0 &&
    outcome.unexpected.length === 0 &&
    outcome.wrongAnswers.length === 0
  );
}
