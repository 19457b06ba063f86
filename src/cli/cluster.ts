import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { AccountService } from '../accounts/account-service.js';
import type { Config, Role } from '../config.js';
import { startClamd } from '../engine-setup.js';
import { aggregateChildMetrics } from '../metrics/cluster-scrape.js';
import { openStore } from '../store/open-store.js';
import { announceServing } from './start-banner.js';

/** What a child tells its primary once it listens. */
export interface ChildListening {
  type: 'assay:listening';
  url: string;
  /** The ICAP listener's URL, where it is on. */
  icap?: string | null;
}

function isListening(message: unknown): message is ChildListening {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === 'assay:listening' &&
    typeof (message as { url?: unknown }).url === 'string'
  );
}

/** A dead child is started again after this, doubling while it keeps dying, up to the most. */
const RESTART_DELAY_MIN_MS = 1_000;
const RESTART_DELAY_MAX_MS = 30_000;
/** A child that lived this long died of something new: its restart delay starts over. */
const HEALTHY_LIFETIME_MS = 60_000;
/** Beyond the children's own shutdown grace, the primary waits this long before killing them. */
const STOP_MARGIN_MS = 30_000;

interface Slot {
  index: number;
  role: Role;
  worker: Worker | null;
  startedAt: number;
  listening: boolean;
  restartDelayMs: number;
  restartTimer: NodeJS.Timeout | undefined;
}

/**
 * With role `all`, one child runs jobs and callbacks too and the others only the API: the job
 * concurrency (ASSAY_JOB_CONCURRENCY) is one process's, not multiplied by the processes.
 */
export function childRole(role: Role, index: number): Role {
  return role === 'all' && index > 0 ? 'api' : role;
}

/**
 * `serve --processes N`: the primary migrates the store once, starts the managed clamd once and
 * hands its socket to N children (node:cluster, one port), restarts a child that dies (with a
 * backoff), and on SIGTERM/SIGINT stops the children (each drains as a single process does), then
 * clamd, and exits. It serves no request itself: a child's GET /metrics asks it for every child's.
 */
export async function runCluster(config: Config, logger: Logger): Promise<void> {
  // Migrations and the bootstrap key are done here, once, not by N children racing for them.
  const store = await openStore(config);
  try {
    if (config.bootstrapCredentials !== null) {
      const { keyId, secret } = config.bootstrapCredentials;
      const outcome = await new AccountService(store).ensureBootstrapKey(keyId, secret);
      logger.info({ key: keyId, outcome }, 'bootstrap credentials');
    }
  } finally {
    await store.close();
  }
  const managedClamd = await startClamd(config, logger);
  aggregateChildMetrics(logger);
  const env: Record<string, string> = {
    ASSAY_PROCESSES: String(config.processes),
    ASSAY_BOOTSTRAP_CREDENTIALS: '',
  };
  if (managedClamd !== null && managedClamd.address.kind === 'unix') {
    env.ASSAY_CLAMD = managedClamd.address.path;
  }

  let stopping = false;
  let serving = false;
  let failedStart: ((error: Error) => void) | null = null;
  let allListening: (() => void) | null = null;
  const slots: Slot[] = Array.from({ length: config.processes }, (_, index) => ({
    index,
    role: childRole(config.role, index),
    worker: null,
    startedAt: 0,
    listening: false,
    restartDelayMs: RESTART_DELAY_MIN_MS,
    restartTimer: undefined,
  }));

  const fork = (slot: Slot) => {
    slot.restartTimer = undefined;
    slot.listening = false;
    slot.startedAt = Date.now();
    const worker = cluster.fork({ ...env, ASSAY_ROLE: slot.role });
    slot.worker = worker;
    worker.on('message', (message: unknown) => {
      if (!isListening(message)) return;
      slot.listening = true;
      if (!serving && slots.every((s) => s.listening)) {
        serving = true;
        void announceServing(logger, config, message.url, {
          processes: config.processes,
          roles: slots.map((s) => s.role),
          ...(typeof message.icap === 'string' ? { icap: message.icap } : {}),
        });
        allListening?.();
      }
    });
    worker.on('exit', (code, signal) => {
      slot.worker = null;
      if (stopping) return;
      if (!serving) {
        // A child that cannot start (a bad setting, the port taken) would only fail again.
        failedStart?.(
          new Error(
            `process ${slot.index} (${slot.role}) ended while starting (exit code ${code ?? signal})`,
          ),
        );
        return;
      }
      if (Date.now() - slot.startedAt >= HEALTHY_LIFETIME_MS) {
        slot.restartDelayMs = RESTART_DELAY_MIN_MS;
      }
      const delayMs = slot.restartDelayMs;
      slot.restartDelayMs = Math.min(2 * delayMs, RESTART_DELAY_MAX_MS);
      logger.error(
        {
          process: slot.index,
          role: slot.role,
          pid: worker.process.pid,
          code,
          signal,
          restartInMs: delayMs,
        },
        'a process died; starting another',
      );
      slot.restartTimer = setTimeout(() => fork(slot), delayMs);
    });
  };

  const stopChildren = async (): Promise<number> => {
    stopping = true;
    let failures = 0;
    const exits = slots.map((slot) => {
      clearTimeout(slot.restartTimer);
      const worker = slot.worker;
      if (worker === null) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const killTimer = setTimeout(
          () => worker.process.kill('SIGKILL'),
          config.shutdownGraceMs + STOP_MARGIN_MS,
        );
        worker.once('exit', (code) => {
          clearTimeout(killTimer);
          if (code !== 0) failures += 1;
          resolve();
        });
        worker.process.kill('SIGTERM');
      });
    });
    await Promise.all(exits);
    await managedClamd?.stop();
    return failures;
  };

  const shutdown = (signal: string) => {
    if (stopping) return;
    logger.info({ signal }, 'shutting down');
    stopChildren().then(
      (failures) => {
        if (failures > 0) logger.error({ failures }, 'processes failed to stop cleanly');
        process.exit(failures === 0 ? 0 : 1);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // From the start: a signal while the children start stops them too.
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  try {
    await new Promise<void>((resolve, reject) => {
      allListening = resolve;
      failedStart = reject;
      for (const slot of slots) fork(slot);
    });
  } catch (error) {
    await stopChildren();
    throw error;
  }
}
