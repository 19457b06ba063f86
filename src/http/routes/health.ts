import type { FastifyInstance } from 'fastify';
import type { ClamdVersion } from '../../engines/clamav/clamd-client.js';
import { ownSignaturesVersion } from '../../engines/clamav/signatures.js';

function describeClamav(version: ClamdVersion, ownVersion: string) {
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
  };
}

/** Liveness (the process answers) and readiness (the store and the malware engine answer). */
export default async function health(app: FastifyInstance) {
  const { store, clamd } = app.services;
  const ownVersion = ownSignaturesVersion();

  app.get('/health/live', async () => ({ status: 'live' }));

  app.get('/health/ready', async (request, reply) => {
    const [storeCheck, clamdCheck] = await Promise.allSettled([store.ping(), clamd.version()]);
    const problems: string[] = [];
    if (storeCheck.status === 'rejected') problems.push(`store: ${String(storeCheck.reason)}`);
    if (clamdCheck.status === 'rejected') problems.push(`clamav: ${String(clamdCheck.reason)}`);
    if (problems.length > 0) request.log.warn({ problems }, 'not ready');
    return reply.code(problems.length === 0 ? 200 : 503).send({
      status: problems.length === 0 ? 'ready' : 'not ready',
      engines:
        clamdCheck.status === 'fulfilled' ? [describeClamav(clamdCheck.value, ownVersion)] : [],
      problems,
    });
  });
}
