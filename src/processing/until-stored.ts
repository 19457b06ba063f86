import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';

/** The first pause after a write the store refused; each further one is twice as long. */
export const FIRST_STORE_RETRY_MS = 250;
/** The longest pause between two tries of one write. */
export const MAX_STORE_RETRY_MS = 5_000;

/**
 * Runs `write` until the store takes it (PostgreSQL restarting, a full disk, a locked database),
 * pausing 0.25 s, doubling up to 5 s, between tries. A write that only releases or records work
 * must not be dropped on the first refusal: what it holds (a callback's share of its lane, a
 * delivered callback's outcome) would otherwise wait for a lease of minutes. Gives up, returning
 * `{ stored: false }`, only once `stopping` aborts; the caller's lease then brings the work back.
 * The first refusal is logged as an error, the later ones not (an outage is one event), and the
 * write that succeeds after refusals is logged.
 */
export async function untilStored<T>(
  write: () => Promise<T>,
  what: string,
  context: { logger: Logger; stopping: AbortSignal; fields?: Record<string, unknown> },
): Promise<{ stored: true; value: T } | { stored: false }> {
  const { logger, stopping, fields } = context;
  for (let delay = FIRST_STORE_RETRY_MS, tries = 1; ; tries += 1) {
    try {
      const value = await write();
      if (tries > 1) logger.info({ ...fields, tries }, `${what}: done once the store took it`);
      return { stored: true, value };
    } catch (error) {
      if (tries === 1) {
        logger.error({ ...fields, err: error }, `could not ${what}; trying again until it is done`);
      }
      if (stopping.aborted) return { stored: false };
      await sleep(delay, undefined, { signal: stopping }).catch(() => undefined);
      if (stopping.aborted) return { stored: false };
      delay = Math.min(2 * delay, MAX_STORE_RETRY_MS);
    }
  }
}
