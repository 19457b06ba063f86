import type { FastifyInstance } from 'fastify';
import type { ClamdVersion } from '../../engines/clamav/clamd-client.js';
import { ownSignaturesVersion } from '../../engines/clamav/signatures.js';
import { errorForLog } from '../log-redaction.js';

function describeClamav(
  version: ClamdVersion,
  ownVersion: string,
  databases: string | null,
  refused: string[],
) {
  const date = version.databaseDate;
  return {
    name: 'clamav',
    category: 'MALWARE',
    version: version.engine,
    // The official databases' version and age, when freshclam's files are loaded.
    signatures_version: version.databaseVersion,
    signatures_date: date?.toISOString() ?? null,
    signatures_age_seconds: date === null ? null : Math.round((Date.now() - date.getTime()) / 1000),
    own_signatures_version: ownVersion,
    // Every database clamd has loaded (official, third-party, Assay's own) as one digest; null
    // while it loads them, or while a changed file waits for its SelfCheck.
    databases_version: databases,
    // Database files clamd could not load, left out until they change (names only: the log has
    // their folders and clamd's reasons).
    refused_databases: refused,
  };
}

/** Why a dependency failed, for anyone to read: its system error code at most (ENOENT). */
function publicReason(reason: unknown): string {
  const codeOf = (error: unknown) => (error as { code?: unknown } | null)?.code;
  const code = codeOf(reason) ?? codeOf((reason as { cause?: unknown } | null)?.cause);
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]{1,40}$/.test(code)
    ? `not answering (${code})`
    : 'not answering';
}

/**
 * Liveness (the process answers) and readiness (the store and the malware engine answer, with the
 * engine's versions; a process that runs jobs adds its queue: due jobs, its own running ones and
 * how long the oldest due one has waited). Both are open without credentials, so they name no
 * path, socket or address (a refused database file by its name only).
 */
export default async function health(app: FastifyInstance) {
  const { readiness } = app.services;
  const ownVersion = ownSignaturesVersion();

  app.get('/health/live', async () => ({ status: 'live' }));

  app.get('/health/ready', async (request, reply) => {
    const [
      storeCheck,
      clamdCheck,
      diskCheck,
      queueCheck,
      spoolCheck,
      databasesCheck,
      refusedCheck,
    ] = await readiness.check();
    const failures: Array<[string, unknown]> = [];
    if (storeCheck.status === 'rejected') failures.push(['store', storeCheck.reason]);
    if (clamdCheck.status === 'rejected') failures.push(['clamav', clamdCheck.reason]);
    if (spoolCheck.status === 'rejected') failures.push(['spool', spoolCheck.reason]);
    // The log has the whole reason; the answer, open to anyone, names no path or address.
    const problems = failures.map(([what, reason]) => `${what}: ${publicReason(reason)}`);
    // New work was refused with 507 for want of space, and there is still too little.
    if (diskCheck.status === 'fulfilled' && diskCheck.value) problems.push('disk full');
    if (diskCheck.status === 'rejected') problems.push(`disk: ${publicReason(diskCheck.reason)}`);
    if (problems.length > 0) {
      request.log.warn(
        // Each with its causes (a spool's public error has its path in its cause), redacted.
        { problems: failures.map(([part, reason]) => ({ part, err: errorForLog(reason) })) },
        'not ready',
      );
    }
    return reply.code(problems.length === 0 ? 200 : 503).send({
      status: problems.length === 0 ? 'ready' : 'not ready',
      engines:
        clamdCheck.status === 'fulfilled'
          ? [
              describeClamav(
                clamdCheck.value,
                ownVersion,
                databasesCheck.status === 'fulfilled' ? databasesCheck.value : null,
                refusedCheck.status === 'fulfilled' ? refusedCheck.value : [],
              ),
            ]
          : [],
      problems,
      // A process that runs jobs says how far behind the queue is (null: the store did not answer).
      ...(readiness.runsJobs
        ? { queue: queueCheck.status === 'fulfilled' ? queueCheck.value : null }
        : {}),
    });
  });
}
